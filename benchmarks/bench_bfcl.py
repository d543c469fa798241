"""The whole BFCL v4 set augmented: every category hsa can replay, each entry its own harness.

Reads BFCL v4 (``--path``, default ``$HSA_EXTERNAL/bfcl`` or ``../shared/external/bfcl``) as
the ``bfcl`` environment does, records every entry's reference trajectory (``solve``: the
question and the calls of its possible answer, which BFCL never runs, or for an irrelevance
entry a reply that no function fits), writes them as canonical Parquet,
then times ``hsa augment`` on them (each trajectory under 4 variants of the default recipe,
plus the canonical one) with the entries' harnesses: the many-harness shape of issue 11 on a
real corpus. Prints the entries per category, rows written, wall time with the job's own split
(planning, rendering, writing), the planner's counts, and peak RSS.

    python benchmarks/bench_bfcl.py
    python benchmarks/bench_bfcl.py --workers 1
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from hsa.datasets.source import open_source
from hsa.envs import get_env
from hsa.harness.events import trajectories_to_table
from hsa.pipelines.augment import AugmentConfig, augment

ROOT = Path(__file__).resolve().parents[1]


def default_path() -> Path:
    external = os.environ.get("HSA_EXTERNAL")
    base = Path(external) if external else ROOT.parent / "shared" / "external"
    return base / "bfcl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=default_path())
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    args = parser.parse_args()

    started = time.perf_counter()
    env = get_env("bfcl", path=str(args.path))
    tasks = env.tasks(None)
    trajectories = [env.solve(task).trajectory for task in tasks]
    harnesses = {h.id: h for h in (env.harness_for(task) for task in tasks)}
    categories = Counter(task.kind for task in tasks)
    print(
        f"BFCL v4 at {args.path}: {len(tasks):,} entries, {len(harnesses):,} harnesses, "
        f"recorded in {time.perf_counter() - started:.1f} s"
    )
    print("  " + ", ".join(f"{kind} {n}" for kind, n in sorted(categories.items())))

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "bfcl.parquet"
        pq.write_table(trajectories_to_table(trajectories), source)
        config = AugmentConfig(variants_per_trajectory=args.variants, workers=args.workers)
        started = time.perf_counter()
        report = augment(
            open_source(source), Path(tmp) / "out", config, harnesses=list(harnesses.values())
        )
        wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
    print(
        f"hsa augment: {report.trajectories:,} trajectories -> {report.rows:,} rows in "
        f"{wall:.1f} s ({report.rows / wall:,.0f} rows/s; {timings}); planner {report.planner}; "
        f"{report.short} trajectories under fewer than {args.variants} variants; "
        f"peak RSS {rss:.0f} MB ({os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
