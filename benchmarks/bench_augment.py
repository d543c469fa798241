"""Augmentation speed: the columnar engine against per-row Python and against the I/O floor.

On one generated input of canonical trajectories shaped like livestream's (the oracle's
trajectories of every task, copied with fresh ids, user texts, tool results and argument
values), this measures, each in its own subprocess so peak RSS is honest:

(a) engine -- ``hsa.pipelines.augment.augment``: read the input shards, pick each trajectory's
    variants, render every row with the columnar engine, split, write the shards, the
    variants file, the card and the manifest;
(b) naive  -- what a competent user writes by hand: read each shard with PyArrow, and per row
    ``Trajectory.from_row`` + ``map_events`` + ``render`` under the same variants, rows built
    as dicts, written with ``pa.Table.from_pylist`` and the same Parquet options;
(c) floor  -- PyArrow reading the input shards and writing the engine's output tables (read
    back beforehand, untimed, in the engine's in-memory layout) with the same options.

Variants are planned once, before any measurement (the time is printed), and handed to (a) and
(b) alike. Output: rows/s of each, engine/naive speed-up, engine time / floor time, and peak
RSS of each subprocess.

    python benchmarks/bench_augment.py                 # 200,000 trajectories -> 1,000,000 rows
    python benchmarks/bench_augment.py --rows 2000000  # the memory check
    python benchmarks/bench_augment.py --rows 20000 --skip-naive
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SHARD = 16384  # input trajectories per shard, and per engine batch
VARIANTS_PER_HARNESS = 16
PER_TRAJECTORY = 4
ARG_COPIES = 16
SEED = 0


# --- input ------------------------------------------------------------------------------


def _base(work: Path) -> pa.Table:
    """The livestream oracle's trajectories of every task, with task splits (cached)."""
    path = work / "base.parquet"
    if path.exists():
        return pq.read_table(path)
    from hsa.datasets.source import INPUT_SCHEMA
    from hsa.envs import get_env

    env = get_env("livestream")
    rows = []
    for task in env.tasks():
        episode = env.solve(task)
        row = episode.trajectory.to_row()
        row.update(task_id=task.id, split=task.split, teacher="oracle/hsa-oracle")
        row.update(verified=True, reason="solved")
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    pq.write_table(table, path)
    return table


def _perturb(value, rng: random.Random, keep: set):
    if isinstance(value, dict):
        return {k: _perturb(v, rng, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_perturb(v, rng, keep) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return rng.randint(1, 5 * max(abs(value), 10))
    if isinstance(value, float):
        return round(rng.uniform(1, 500), 2)
    if value in keep:  # enum values stay valid
        return value
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    if value[:1] == "P" and value[1:].isdigit():
        return "P" + "".join(rng.choice("0123456789") for _ in value[1:])
    return "".join(rng.choice(letters + "  ") for _ in range(max(3, len(value))))


def _enum_values(harness) -> set:
    out: set = set()

    def walk(node):
        if isinstance(node, dict):
            for v in node.get("enum") or ():
                out.add(v)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for tool in harness.tools:
        walk(tool.parameters)
    return out


def make_input(work: Path, rows: int) -> Path:
    """``rows`` trajectories in shards of ``SHARD`` under ``work/input-<rows>`` (cached)."""
    target = work / f"input-{rows}"
    if (target / "done").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    from hsa.envs import get_env
    from hsa.harness.events import dumps_json

    base = _base(work)
    keep = _enum_values(get_env("livestream").harness())
    events = base.column("events").combine_chunks()
    flat = events.flatten()
    fields = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
    kinds = np.array(fields["kind"].to_pylist(), dtype=object)
    args = fields["args"].to_pylist()
    rng = random.Random(SEED)
    pool = []  # ARG_COPIES perturbed copies of every event's args (None for non-calls)
    for i in range(len(args)):
        value = json.loads(args[i]) if kinds[i] == "tool_call" else None
        for _ in range(ARG_COPIES):
            pool.append(None if value is None else dumps_json(_perturb(value, rng, keep)))
    pool_array = pa.array(pool, pa.string())
    starts = events.offsets.to_numpy().astype(np.int64)
    n_base = base.num_rows
    order = np.random.default_rng(SEED).permutation(n_base)
    for shard in range(-(-rows // SHARD)):
        index = np.arange(shard * SHARD, min(rows, (shard + 1) * SHARD))
        b = order[index % n_base]
        copy = index // n_base
        table = base.take(pa.array(b))
        counts = np.diff(starts)[b]
        ev = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in b])
        ev_row = np.repeat(np.arange(len(b)), counts)
        tag = pa.array([f" #{i}" for i in index], pa.string()).take(pa.array(ev_row))
        kind = fields["kind"].take(pa.array(ev))
        text = fields["text"].take(pa.array(ev))
        text = pc.if_else(pc.equal(kind, "user"), pc.binary_join_element_wise(text, tag, ""), text)
        content = fields["content"].take(pa.array(ev))
        content = pc.if_else(
            pc.equal(kind, "tool_result"), pc.binary_join_element_wise(content, tag, ""), content
        )
        new_args = pool_array.take(pa.array(ev * ARG_COPIES + copy[ev_row] % ARG_COPIES))
        children = [fields[name].take(pa.array(ev)) for name in [f.name for f in flat.type]]
        names = [f.name for f in flat.type]
        children[names.index("text")] = text
        children[names.index("content")] = content
        children[names.index("args")] = new_args
        struct = pa.StructArray.from_arrays(children, fields=list(flat.type))
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
        new_events = pa.ListArray.from_arrays(pa.array(offsets), struct).cast(events.type)
        suffix = pa.array([f"#{i}" for i in index], pa.string())
        copies = pa.array([f"#{c}" for c in copy], pa.string())
        columns = {name: table.column(name) for name in table.column_names}
        columns["id"] = pc.binary_join_element_wise(table.column("id"), suffix, "")
        columns["task_id"] = pc.binary_join_element_wise(table.column("task_id"), copies, "")
        columns["events"] = new_events
        out = pa.table(columns, schema=base.schema)
        pq.write_table(out, target / f"part-{shard:05d}.parquet", compression="zstd")
    (target / "done").write_text("ok")
    return target


def plan_variants(work: Path) -> tuple[Path, float]:
    """Variants of the livestream harness under the default families (drawn once)."""
    path = work / "variants.pkl"
    started = time.perf_counter()
    from hsa.augment import Recipe, default_recipe, plan
    from hsa.envs import get_env

    recipe = _recipe()
    harness = get_env("livestream").harness()
    variants = plan(harness, recipe, seed=SEED)
    path.write_bytes(pickle.dumps(variants))
    del default_recipe, Recipe
    return path, time.perf_counter() - started


def _recipe():
    from hsa.augment import Recipe, default_recipe, get_rule

    data = default_recipe().to_dict()
    # trajectory-dependent rules are planned per trajectory context: leave them out of the
    # draw so that variants are planned once per harness, as the benchmark measures
    data["rules"] = [r for r in data["rules"] if not get_rule(r["rule"]).needs]
    data["variants_per_harness"] = VARIANTS_PER_HARNESS
    data["variants_per_trajectory"] = PER_TRAJECTORY
    return Recipe.from_dict(data)


# --- the three measurements (each runs in a subprocess) -----------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_engine(work: Path, inputs: Path, variants: Path, batch_size: int) -> dict:
    from hsa.datasets.source import open_source
    from hsa.pipelines.augment import AugmentConfig, augment

    chosen = pickle.loads(variants.read_bytes())
    out = work / "out-engine"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    report = augment(
        open_source(inputs),
        out,
        AugmentConfig(recipe=_recipe(), seed=SEED, batch_size=batch_size),
        variants=chosen,
    )
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": report.rows, "engine": report.engine}


def measure_naive(work: Path, inputs: Path, variants: Path, limit: int | None) -> dict:
    from hsa.augment import canonical_variant, map_events
    from hsa.augment.planner import LazyPlan, pick_order, walk
    from hsa.datasets.schema import ROW_SCHEMA
    from hsa.datasets.shards import WRITE_OPTIONS
    from hsa.envs import get_env
    from hsa.harness.events import Trajectory
    from hsa.harness.render import render
    from hsa.pipelines.assign import assign_splits

    chosen = [v for v in pickle.loads(variants.read_bytes()) if not v.is_canonical]
    harness = get_env("livestream").harness()
    canonical = canonical_variant(harness)
    # the candidates as the job sees them (rewrites that change nothing and repeats passed over)
    contents = LazyPlan(harness, _recipe(), seed=SEED, given=chosen)
    rule_params = {
        v.variant_id: json.dumps(
            [{"name": n, "version": ver, "params": dict(p)} for n, ver, p in v.rules],
            sort_keys=True,
            separators=(",", ":"),
        )
        for v in [canonical, *chosen]
    }
    out = work / "out-naive"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    rows_done = 0
    for shard, path in enumerate(sorted(inputs.glob("part-*.parquet"))):
        table = pq.read_table(path)
        if limit is not None and rows_done >= limit:
            break
        orders = pick_order(
            table.column("id").combine_chunks(), np.full(table.num_rows, len(chosen)), SEED
        )
        drawn = assign_splits(
            table.column("task_id").combine_chunks(),
            {"train": 0.9, "dev": 0.05, "test": 0.05},
            SEED,
        )
        by_split: dict[str, list] = {}
        for i, row in enumerate(table.to_pylist()):
            trajectory = Trajectory.from_row(row)
            split = row["split"] or drawn[i]
            slots = walk(orders[i], contents.content, PER_TRAJECTORY)
            for variant in [canonical, *(chosen[s] for s in slots)]:
                conv = render(map_events(trajectory.events, variant.mapping), variant.harness)
                by_split.setdefault(split, []).append(
                    {
                        "id": f"{row['id']}/{variant.variant_id}",
                        "source_id": row["id"],
                        "task_id": row["task_id"],
                        "harness_id": variant.harness_id,
                        "variant_id": variant.variant_id,
                        "canonical": variant.is_canonical,
                        "rules": [n for n, _, _ in variant.rules],
                        "rule_params": rule_params[variant.variant_id],
                        "protocol": variant.harness.protocol.label,
                        "messages": conv.messages,
                        "tools": (
                            json.dumps(conv.tools, ensure_ascii=False, separators=(",", ":"))
                            if conv.tools
                            else None  # as hsa writes a row that sends no tools
                        ),
                        "split": split,
                        "source": row["source"],
                        "teacher": row["teacher"],
                        "verified": row["verified"],
                        "verification": row["reason"],
                        "metadata": row["metadata"],
                    }
                )
                rows_done += 1
        for split, rows in sorted(by_split.items()):
            target = out / "data" / split / f"part-{shard:05d}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=ROW_SCHEMA), target, **WRITE_OPTIONS)
    return {"seconds": time.perf_counter() - started, "rows": rows_done}


DICTIONARY_COLUMNS = [
    "messages.list.element.content",
    "harness_id",
    "variant_id",
    "rule_params",
    "protocol",
    "tools",
    "split",
]


def measure_floor(work: Path, inputs: Path) -> dict:
    from hsa.datasets.shards import WRITE_OPTIONS

    scratch = Path(tempfile.mkdtemp(dir=work))
    seconds = 0.0
    for path in sorted(inputs.glob("part-*.parquet")):
        started = time.perf_counter()
        pq.read_table(path)
        seconds += time.perf_counter() - started
    rows = 0
    for i, path in enumerate(sorted((work / "out-engine" / "data").rglob("part-*.parquet"))):
        table = pq.read_table(path, read_dictionary=DICTIONARY_COLUMNS)  # untimed
        started = time.perf_counter()
        pq.write_table(table, scratch / f"{i}.parquet", **WRITE_OPTIONS)
        seconds += time.perf_counter() - started
        rows += table.num_rows
        (scratch / f"{i}.parquet").unlink()
        del table
    shutil.rmtree(scratch, ignore_errors=True)
    return {"seconds": seconds, "rows": rows}


# --- driver ---------------------------------------------------------------------------------


def _run(mode: str, args: argparse.Namespace, *extra: str) -> dict:
    command = [
        sys.executable,
        __file__,
        "--measure",
        mode,
        "--rows",
        str(args.rows),
        "--workdir",
        str(args.workdir),
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{mode} measurement failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="input trajectories")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "hsa-bench")
    parser.add_argument("--skip-naive", action="store_true", help="measure (a) and (c) only")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of (a) and (c), best taken  [default: 3]"
    )
    parser.add_argument(
        "--batch-size", type=int, default=SHARD, help="the engine's trajectories per batch"
    )
    parser.add_argument(
        "--naive-rows", type=int, help="stop the naive run after about this many output rows"
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    inputs = args.workdir / f"input-{args.rows}"
    variants = args.workdir / "variants.pkl"
    if args.measure:
        if args.measure == "engine":
            result = measure_engine(args.workdir, inputs, variants, args.batch_size)
        elif args.measure == "naive":
            result = measure_naive(args.workdir, inputs, variants, args.naive_rows)
        else:
            result = measure_floor(args.workdir, inputs)
        result["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(result))
        return

    started = time.perf_counter()
    make_input(args.workdir, args.rows)
    setup = time.perf_counter() - started
    _, planning = plan_variants(args.workdir)
    size = sum(p.stat().st_size for p in inputs.glob("*.parquet")) / 1e6
    print(f"input: {args.rows:,} trajectories, {size:,.0f} MB in {inputs} (made in {setup:.1f} s)")
    print(
        f"variants: {VARIANTS_PER_HARNESS} planned in {planning:.1f} s (shared, not timed); "
        f"{PER_TRAJECTORY} per trajectory + the canonical one"
    )
    # engine and floor alternate, best of --repeat each, so a busy moment on a shared machine
    # does not decide the ratio
    engines, floors = [], []
    for _ in range(args.repeat):
        engines.append(_run("engine", args))
        floors.append(_run("floor", args))
    engine = min(engines, key=lambda r: r["seconds"])
    floor = min(floors, key=lambda r: r["seconds"])
    engine["peak_rss_mb"] = max(r["peak_rss_mb"] for r in engines)
    floor["peak_rss_mb"] = max(r["peak_rss_mb"] for r in floors)
    naive = (
        None
        if args.skip_naive
        else _run(
            "naive", args, *(["--naive-rows", str(args.naive_rows)] if args.naive_rows else [])
        )
    )
    results = {"engine": engine, "floor": floor, **({"naive": naive} if naive else {})}
    print()
    print(
        f"{'':<8} {'rows':>12} {'seconds':>9} {'rows/s':>12} {'peak RSS':>10}"
        f"   (engine, floor: best of {args.repeat})"
    )
    for name, r in results.items():
        print(
            f"{name:<8} {r['rows']:>12,} {r['seconds']:>9.2f} {r['rows'] / r['seconds']:>12,.0f}"
            f" {r['peak_rss_mb']:>8,.0f} MB"
        )
    print()
    engine_rate = engine["rows"] / engine["seconds"]
    if naive:
        speedup = engine_rate / (naive["rows"] / naive["seconds"])
        print(f"engine / naive speed:  {speedup:6.1f}x   (target >= 10x)")
    ratio = engine["seconds"] / floor["seconds"]
    print(f"engine / floor time:   {ratio:6.2f}x   (target <= 3x)")
    exact = engine["engine"]
    print(
        f"exact path: {exact.get('calls_exact', 0):,} of {exact.get('calls', 0):,} calls, "
        f"{exact.get('hooks_exact', 0):,} of {exact.get('hooks', 0):,} hooks, "
        f"{exact.get('rows_exact', 0):,} rows"
    )


if __name__ == "__main__":
    main()
