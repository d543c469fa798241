"""Many-harness corpora: every conversation carries its own tool list (xLAM, ToolACE, BFCL).

Generates an xLAM-shaped corpus -- each conversation 3-6 tools drawn from a pool of APIs with
nested, array, enum and optional parameters, Unicode and escaped string values, one to three
(parallel) calls, tool results and a final answer -- written as OpenAI chat JSONL. Then, each
in its own process so peak RSS is honest:

(a) hsa     -- ``hsa augment --input corpus.jsonl --variants-per-trajectory 4`` end to end
    (every conversation under 4 variants of the default recipe, plus the canonical one), with
    the job's own split of its time (planning, rendering, writing);
(b) script  -- what a competent user writes in an afternoon: per row, ``json`` and dict
    renames of tools and parameters (``required`` kept consistent), shuffled tool order and
    property order, 4 variants plus the original, ``pa.Table.from_pylist`` and the same
    Parquet options. It does less than hsa: no validation, no task-preservation check, one
    protocol;
(c) floor   -- PyArrow reading the input and writing hsa's output tables (read back
    beforehand, untimed) with the same options.

Prints rows/s of each, hsa against the script (speed-up) and against the floor, peak RSS, and
the planner's path counts.

    python benchmarks/bench_corpus.py                         # 100,000 conversations
    python benchmarks/bench_corpus.py --conversations 2000    # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

POOL = 3000
SEED = 0
VARIANTS = 4
DOMAINS = [
    "weather",
    "finance",
    "travel",
    "music",
    "sports",
    "news",
    "maps",
    "shop",
    "health",
    "movies",
    "crypto",
    "jobs",
    "recipes",
    "books",
    "flights",
    "hotels",
]
VERBS = ["get", "search", "list", "find", "fetch", "lookup", "create", "update", "check", "convert"]
NOUNS = [
    "forecast",
    "quote",
    "price",
    "route",
    "track",
    "headline",
    "place",
    "order",
    "symptom",
    "title",
    "rate",
    "listing",
    "recipe",
    "author",
    "fare",
    "room",
    "score",
    "team",
]
WORDS = [
    "city",
    "date",
    "limit",
    "query",
    "country",
    "currency",
    "amount",
    "unit",
    "lang",
    "category",
    "sort",
    "page",
    "radius",
    "start",
    "end",
    "code",
    "id",
    "format",
    "region",
]
TEXTS = [
    "Paris",
    "São Paulo",
    "東京",
    "Zürich",
    'say "hi"',
    "line\nbreak",
    "tab\there",
    "back\\slash",
    "naïve café",
    "emoji 🙂",
    "50% off",
    "a/b",
    "<tag>",
    "ümlaut",
]


def make_pool(size: int, rng: random.Random) -> list[dict[str, Any]]:
    """``size`` distinct OpenAI function tools with varied parameter schemas."""
    names: set[str] = set()
    pool = []
    while len(pool) < size:
        name = f"{rng.choice(DOMAINS)}_{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        if name in names:
            name = f"{name}_v{len(pool)}"
        names.add(name)
        properties: dict[str, Any] = {}
        for word in rng.sample(WORDS, rng.randint(1, 5)):
            properties[word] = _schema(rng, depth=0)
        required = sorted(rng.sample(sorted(properties), rng.randint(1, len(properties))))
        pool.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name.replace('_', ' ').capitalize()} — {rng.choice(TEXTS)}.",
                    "parameters": {
                        "type": "object",
                        "properties": properties,
                        "required": required,
                    },
                },
            }
        )
    return pool


def _schema(rng: random.Random, depth: int) -> dict[str, Any]:
    kind = rng.choice(
        ["string", "string", "integer", "number", "boolean", "enum", "array", "object"]
        if depth == 0
        else ["string", "integer", "boolean", "enum"]
    )
    described = {"description": f"The {rng.choice(WORDS)} ({rng.choice(TEXTS)})."}
    if kind == "enum":
        return {
            "type": "string",
            "enum": rng.sample(
                ["asc", "desc", "metric", "imperial", "daily", "hourly", "en", "fr"], 3
            ),
            **described,
        }
    if kind == "array":
        return {"type": "array", "items": _schema(rng, depth + 1), **described}
    if kind == "object":
        inner = {w: _schema(rng, depth + 1) for w in rng.sample(WORDS, rng.randint(1, 3))}
        return {"type": "object", "properties": inner, "required": sorted(inner)[:1], **described}
    return {"type": kind, **described}


def _value(schema: dict[str, Any], rng: random.Random) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return rng.choice(TEXTS)
    if kind == "integer":
        return rng.randint(0, 500)
    if kind == "number":
        return round(rng.uniform(-50, 50), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_value(schema["items"], rng) for _ in range(rng.randint(1, 3))]
    return _arguments(schema, rng)


def _arguments(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    required = set(schema.get("required", []))
    return {
        key: _value(sub, rng)
        for key, sub in schema["properties"].items()
        if key in required or rng.random() < 0.5
    }


def make_corpus(path: Path, conversations: int, seed: int = SEED) -> None:
    rng = random.Random(seed)
    pool = make_pool(POOL, rng)
    with path.open("w", encoding="utf-8") as handle:
        for number in range(conversations):
            tools = rng.sample(pool, rng.randint(3, 6))
            called = [rng.choice(tools) for _ in range(rng.choice([1, 1, 2, 3]))]
            calls = [
                {
                    "id": f"call_{number}_{i}",
                    "type": "function",
                    "function": {
                        "name": tool["function"]["name"],
                        "arguments": json.dumps(
                            _arguments(tool["function"]["parameters"], rng), ensure_ascii=False
                        ),
                    },
                }
                for i, tool in enumerate(called)
            ]
            messages: list[dict[str, Any]] = [
                {"role": "user", "content": f"Request {number}: {rng.choice(TEXTS)}?"},
                {"role": "assistant", "content": None, "tool_calls": calls},
            ]
            for call in calls:
                result = {"status": "ok", "value": rng.choice(TEXTS), "n": rng.randint(0, 99)}
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": json.dumps(result, ensure_ascii=False),
                    }
                )
            messages.append({"role": "assistant", "content": f"Done: {rng.choice(TEXTS)}."})
            row = {"id": f"conv-{number:07d}", "messages": messages, "tools": tools}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- (b) the hand-written script -------------------------------------------------------------

STYLES = ("snake", "camel", "prefix")


def _restyle(name: str, style: str, rng: random.Random) -> str:
    parts = name.replace("-", "_").split("_")
    if style == "camel":
        return parts[0] + "".join(p.title() for p in parts[1:])
    if style == "prefix":
        return f"{rng.choice(['api', 'svc', 'tool'])}_{name}"
    return "_".join(reversed(parts))


def _rename_schema(schema: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    out = dict(schema)
    if "properties" in schema:
        items = list(schema["properties"].items())
        out["properties"] = {rename.get(k, k): _rename_schema(v, rename) for k, v in items}
        out["required"] = [rename.get(k, k) for k in schema.get("required", [])]
    if "items" in schema:
        out["items"] = _rename_schema(schema["items"], rename)
    return out


def _rename_args(value: Any, rename: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {rename.get(k, k): _rename_args(v, rename) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename_args(v, rename) for v in value]
    return value


def script(corpus: Path, out: Path) -> int:
    """Per-row renames and shuffles, 4 variants plus the original, written with PyArrow."""
    rng = random.Random(SEED)
    rows: list[dict[str, Any]] = []
    written = 0
    out.mkdir(parents=True, exist_ok=True)
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            rows.append(
                {
                    "id": row["id"],
                    "variant": 0,
                    "messages": json.dumps(row["messages"]),
                    "tools": json.dumps(row["tools"]),
                }
            )
            for variant in range(1, VARIANTS + 1):
                style = rng.choice(STYLES)
                names = {
                    t["function"]["name"]: _restyle(t["function"]["name"], style, rng)
                    for t in row["tools"]
                }
                params = {
                    p: _restyle(p, style, rng)
                    for t in row["tools"]
                    for p in t["function"]["parameters"].get("properties", {})
                }
                tools = []
                for tool in row["tools"]:
                    fn = tool["function"]
                    tools.append(
                        {
                            "type": "function",
                            "function": {
                                "name": names[fn["name"]],
                                "description": fn.get("description", ""),
                                "parameters": _rename_schema(fn["parameters"], params),
                            },
                        }
                    )
                rng.shuffle(tools)
                messages = []
                for message in row["messages"]:
                    if message.get("tool_calls"):
                        message = {
                            **message,
                            "tool_calls": [
                                {
                                    **c,
                                    "function": {
                                        "name": names[c["function"]["name"]],
                                        "arguments": json.dumps(
                                            _rename_args(
                                                json.loads(c["function"]["arguments"]), params
                                            ),
                                            ensure_ascii=False,
                                        ),
                                    },
                                }
                                for c in message["tool_calls"]
                            ],
                        }
                    messages.append(message)
                rows.append(
                    {
                        "id": row["id"],
                        "variant": variant,
                        "messages": json.dumps(messages, ensure_ascii=False),
                        "tools": json.dumps(tools, ensure_ascii=False),
                    }
                )
            if len(rows) >= 20_000:
                written += _flush(rows, out, written)
    written += _flush(rows, out, written)
    return written


def _flush(rows: list[dict[str, Any]], out: Path, written: int) -> int:
    if not rows:
        return 0
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, out / f"part-{written:09d}.parquet", **WRITE_OPTIONS)
    count = len(rows)
    rows.clear()
    return count


WRITE_OPTIONS: dict[str, Any] = {}


def _write_options() -> dict[str, Any]:
    from hsa.datasets.shards import WRITE_OPTIONS as options

    return dict(options)


# -- (c) the floor ---------------------------------------------------------------------------


def floor(corpus: Path, tables: Path, out: Path) -> int:
    """Read the input, write hsa's output tables (already in memory) with the same options."""
    with corpus.open("rb") as handle:
        size = len(handle.read())
    loaded = [(p, pq.read_table(p)) for p in sorted(tables.rglob("part-*.parquet"))]
    started = time.perf_counter()
    with corpus.open("rb") as handle:
        data = handle.read()
    assert len(data) == size
    import pyarrow.json as pajson

    pajson.read_json(corpus)
    rows = 0
    for index, (_, table) in enumerate(loaded):
        pq.write_table(table, out / f"part-{index:05d}.parquet", **WRITE_OPTIONS)
        rows += table.num_rows
    print(json.dumps({"floor_s": time.perf_counter() - started}))
    return rows


# -- the measurements ------------------------------------------------------------------------


def child(kind: str, corpus: Path, out: Path, extra: Path | None) -> None:
    """One measurement in this process; prints its figures as one JSON line."""
    WRITE_OPTIONS.update(_write_options())
    started = time.perf_counter()
    detail: dict[str, Any] = {}
    if kind == "hsa":
        from hsa.datasets.source import open_source
        from hsa.pipelines.augment import AugmentConfig, augment

        report = augment(open_source(corpus), out, AugmentConfig(variants_per_trajectory=VARIANTS))
        rows = report.rows
        detail = {"timings": report.timings, "planner": report.planner}
    elif kind == "script":
        rows = script(corpus, out)
    else:
        assert extra is not None
        rows = floor(corpus, extra, out)
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # hsa's planning workers are processes of their own: the largest of them, beside the job
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "kind": kind,
                "rows": rows,
                "seconds": seconds,
                "rss_mb": rss,
                "worker_rss_mb": workers,
            }
            | detail
        )
    )


def measure(kind: str, corpus: Path, out: Path, extra: Path | None = None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, str(corpus), str(out)]
    if extra is not None:
        command.append(str(extra))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-4000:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result = lines[-1]
    for line in lines[:-1]:
        result.update(line)
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, corpus, out = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
        child(kind, corpus, out, Path(sys.argv[5]) if len(sys.argv) > 5 else None)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--skip-script", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus.jsonl"
        started = time.perf_counter()
        make_corpus(corpus, args.conversations)
        size = corpus.stat().st_size / 1e6
        print(
            f"corpus: {args.conversations:,} conversations, {size:.1f} MB of JSONL, "
            f"tools from a pool of {POOL:,} APIs (generated in "
            f"{time.perf_counter() - started:.1f} s)",
            flush=True,
        )
        ours = measure("hsa", corpus, root / "hsa")
        print(
            f"(a) hsa augment : {ours['rows']:,} rows in {ours['seconds']:.1f} s "
            f"({ours['rows'] / ours['seconds']:,.0f} rows/s), peak RSS {ours['rss_mb']:.0f} MB "
            f"(largest worker {ours['worker_rss_mb']:.0f} MB); "
            f"time {json.dumps(ours['timings'])}; planner {json.dumps(ours['planner'])}",
            flush=True,
        )
        if not args.skip_script:
            theirs = measure("script", corpus, root / "script")
            shutil.rmtree(root / "script", ignore_errors=True)
            print(
                f"(b) script      : {theirs['rows']:,} rows in {theirs['seconds']:.1f} s "
                f"({theirs['rows'] / theirs['seconds']:,.0f} rows/s), peak RSS "
                f"{theirs['rss_mb']:.0f} MB",
                flush=True,
            )
        (root / "floor").mkdir()
        base = measure("floor", corpus, root / "floor", root / "hsa" / "data")
        print(
            f"(c) floor       : {base['rows']:,} rows in {base['floor_s']:.1f} s, peak RSS "
            f"{base['rss_mb']:.0f} MB",
            flush=True,
        )
        line = f"hsa / floor {ours['seconds'] / base['floor_s']:.1f}x (target <= 5x)"
        if not args.skip_script:
            speedup = theirs["seconds"] / ours["seconds"]
            line = f"hsa vs script: {speedup:.2f}x as fast (target >= 3x); " + line
        print(line)


if __name__ == "__main__":
    main()
