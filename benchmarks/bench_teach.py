"""Teacher throughput and fault tolerance against the local oracle endpoint.

Starts ``hsa serve oracle --latency-ms 200`` on 127.0.0.1 and runs ``hsa.teachers.teach`` with
the ``openai`` backend (the official client over loopback) at concurrency 64 and 256. Each
request takes at least the server's latency, so the most a job can achieve is

    ideal rollouts/s = concurrency / (latency x requests per rollout)

with requests per rollout measured in the same run. Two ratios to it are printed: over the
whole run (ramp-up and the last, partly idle round included) and steady, over the 10th to 90th
percent of completed rollouts.
A second server (same latency) then injects 5% HTTP 429/500 answers and 2% malformed tool
calls, and the job's shards are checked for lost rollouts (planned but absent) and duplicated
ones.

    python benchmarks/bench_teach.py            # the full run (about a minute and a half)
    python benchmarks/bench_teach.py --quick    # fewer rollouts

Each throughput figure is for one client process (``--workers 1 2`` adds two). The client
spends about 2 ms of CPU per request (the openai client, most of it, then rendering, parsing,
caching, verification): at concurrency 64 against a 200 ms endpoint one process needs about
two thirds of a core, at 256 it is CPU-bound, and the server process needs CPU of its own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from hsa.teachers.job import TeachConfig, teach


@contextmanager
def oracle_server(*args: str):
    """``hsa serve oracle`` on a free port; yields its base URL."""
    command = [sys.executable, "-c", "from hsa.cli import main; main()", "serve", "oracle"]
    process = subprocess.Popen(
        [*command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        if "http://" not in line:
            raise RuntimeError(f"the server did not start: {line}{process.stderr.read()}")
        yield line.strip().split(" on ")[-1]
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_job(
    base_url: str, out: Path, *, tasks: int, variants: int, concurrency: int, workers=1, times=None
):
    config = TeachConfig(
        backend="openai",
        base_url=base_url,
        model="hsa-oracle",
        tasks=tasks,
        variants_per_task=variants,
        concurrency=concurrency,
        workers=workers,
        backoff_s=0.05,
        shard_size=512,
    )
    progress = None if times is None else (lambda done, total, verified: times.append(now()))
    return teach(config, out, progress=progress)


def now() -> float:
    return time.monotonic()


def steady_rate(times: list[float]) -> float:
    """Rollouts per second between the 10th and the 90th percent of completions: the rate
    once every lane is busy and before the last lanes run dry."""
    done = times[1:]  # the first call reports the rollouts skipped, before any ran
    low, high = len(done) // 10, (len(done) * 9) // 10
    return (high - low) / (done[high] - done[low])


def throughput(
    base_url: str, root: Path, concurrency: int, workers: int, latency_s: float, waves: int
) -> None:
    # Enough rollouts for ``waves`` rounds at full concurrency, so that the first and last
    # round (ramp-up and stragglers) weigh little.
    variants = 2
    tasks = max(1, concurrency * waves // variants)
    out = root / f"c{concurrency}-w{workers}"
    times: list[float] = []
    report = run_job(
        base_url,
        out,
        tasks=tasks,
        variants=variants,
        concurrency=concurrency,
        workers=workers,
        times=times,
    )
    ran = report.total - report.skipped
    per_rollout = (report.requests + report.retries) / ran
    ideal = concurrency / (latency_s * per_rollout)
    achieved = report.rollouts_per_s
    steady = steady_rate(times)
    print(
        f"concurrency {concurrency:>3}, {workers} worker{'s' if workers > 1 else ' '}: "
        f"{ran} rollouts in {report.run_s:.1f} s, {per_rollout:.2f} requests/rollout, "
        f"ideal {ideal:.1f} rollouts/s; whole run {achieved:.1f} rollouts/s "
        f"({achieved / ideal:.1%}), steady (10-90% of rollouts) {steady:.1f} rollouts/s "
        f"({steady / ideal:.1%}); latency {report.latency}",
        flush=True,
    )


def faults(base_url: str, root: Path, rollouts: int) -> None:
    out = root / "faults"
    variants = 2
    report = run_job(base_url, out, tasks=rollouts // variants, variants=variants, concurrency=64)
    ids: Counter = Counter()
    reasons: Counter = Counter()
    for shard in sorted((out / "data").rglob("*.parquet")):
        table = pq.read_table(shard, columns=["id", "verified", "reason"])
        ids.update(table.column("id").to_pylist())
        reasons.update(r.split(":", 1)[0] for r in table.column("reason").to_pylist())
    lost = report.total - len(ids)
    duplicated = sum(n - 1 for n in ids.values() if n > 1)
    print(
        f"faults (5% 429/500, 2% malformed): {report.total} rollouts planned, {len(ids)} "
        f"written, lost {lost}, duplicated {duplicated}; rows by reason {dict(reasons)}; "
        f"retries {report.retries} {dict(report.failures)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rollouts")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1],
        help="client processes to measure with, e.g. --workers 1 2 (default: 1)",
    )
    parser.add_argument(
        "--waves",
        type=int,
        default=None,
        help="rollouts per concurrency slot (default 16, 6 with --quick); more waves "
        "amortise the ramp-up and drain that the whole-run figure includes",
    )
    args = parser.parse_args()
    waves = args.waves or (6 if args.quick else 16)
    latency_ms = 200
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.monotonic()
        with oracle_server("--latency-ms", str(latency_ms)) as url:
            for concurrency in (64, 256):
                for workers in args.workers:
                    throughput(url, root, concurrency, workers, latency_ms / 1000, waves)
        fault_args = (
            "--latency-ms",
            str(latency_ms),
            "--fail-rate",
            "0.05",
            "--malformed-rate",
            "0.02",
        )
        with oracle_server(*fault_args) as url:
            faults(url, root, 400 if args.quick else 1000)
        print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
