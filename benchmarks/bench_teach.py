"""Teacher throughput and fault tolerance against the local oracle endpoint.

Starts ``hsa serve oracle --latency-ms 200`` on 127.0.0.1 and runs ``hsa.pipelines.teach``
with the ``openai`` backend (aiohttp over loopback) at concurrency 64 and 256.
Each request takes at least the server's latency, so the most a job can achieve is

    ideal rollouts/s = concurrency / (latency x requests per rollout)

with requests per rollout measured in the same run. Two ratios to it are printed: over the
whole run (ramp-up and the last, partly idle round included) and steady, over the 10th to 90th
percent of completed rollouts.
A second server (same latency) then injects 5% HTTP 429/500 answers and 2% malformed tool
calls, and the job's shards are checked for lost rollouts (planned but absent) and duplicated
ones.

    python benchmarks/bench_teach.py            # the full run (about two minutes)
    python benchmarks/bench_teach.py --quick    # fewer rollouts
    python benchmarks/bench_teach.py --pin --tune-gc   # the fastest setup

Why a figure is what it is: each throughput line is followed by the CPU each side spent per
request (process CPU time over requests sent: the client's, this process and its workers,
and the server's, read from ``/proc``), the share of a core the client would need at the
ideal rate, the share of the run each process spent runnable but waiting for a core
(``/proc/PID/task/*/schedstat``), and the load average. The client is one event loop serving
every rollout, so whenever it waits for a core or pauses (a garbage collection), every request
in flight waits too. A request costs the client 1.0-1.5 ms of CPU (rendering, parsing,
caching, verification and the HTTP client; through the official ``openai`` client it cost about
2 ms, most of it that client's) and the server about 0.6 ms: at concurrency 64 (320
requests/s) the client needs about half a core, which a two-core machine running other work (a
load average of 2 to 5) does not always give it; at 256 it would need more than a core and is
CPU-bound at about two thirds of ideal whatever the server does (66% measured; about 40%
through the official client, in earlier sessions).
``--pin`` puts the client and the server on separate cores (``os.sched_setaffinity``);
``--tune-gc`` collects garbage in the client as ``hsa teach --tune-gc`` does; ``--workers``
runs the client in more processes. On two cores, concurrency 64 measured 86% of ideal as it
is and 91% with ``--pin --tune-gc`` at a load average of 1 to 2, and 73-79% as it is, 87%
with ``--tune-gc`` and 92% with both at 2.3 to 4.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from hsa.cli.collector import gc_tuned
from hsa.pipelines.teach import TeachConfig, teach


@contextmanager
def oracle_server(*args: str, cpus: set[int] | None = None):
    """``hsa serve oracle`` on a free port (on ``cpus`` only, when given); yields its base URL
    and its process id."""
    command = [sys.executable, "-c", "from hsa.cli import main; main()", "serve", "oracle"]
    process = subprocess.Popen(
        [*command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if cpus is not None:
            os.sched_setaffinity(process.pid, cpus)
        line = process.stdout.readline()
        if "http://" not in line:
            raise RuntimeError(f"the server did not start: {line}{process.stderr.read()}")
        yield line.strip().split(" on ")[-1], process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def client_cpu_s() -> float:
    """CPU seconds of this process and of its children reaped so far (the job's workers; the
    server is reaped only after the measurements)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from ``/proc/PID/stat``."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def waited_s(pid: int | str = "self") -> float:
    """Seconds the threads of a process spent runnable but waiting for a core (the second
    field of ``/proc/PID/task/TID/schedstat``): what the other work on the machine cost it."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError):  # a thread that ended in between
            total += int(stat.read_text().split()[1])
    return total / 1e9


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


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
    server: tuple[str, int],
    root: Path,
    concurrency: int,
    workers: int,
    latency_s: float,
    waves: int,
) -> None:
    base_url, server_pid = server
    # Enough rollouts for ``waves`` rounds at full concurrency, so that the first and last
    # round (ramp-up and stragglers) weigh little.
    variants = 2
    tasks = max(1, concurrency * waves // variants)
    out = root / f"c{concurrency}-w{workers}"
    times: list[float] = []
    load_before = load()
    client_before, server_before = client_cpu_s(), process_cpu_s(server_pid)
    client_waited, server_waited = waited_s(), waited_s(server_pid)
    report = run_job(
        base_url,
        out,
        tasks=tasks,
        variants=variants,
        concurrency=concurrency,
        workers=workers,
        times=times,
    )
    client_s = client_cpu_s() - client_before
    server_s = process_cpu_s(server_pid) - server_before
    client_waited = waited_s() - client_waited
    server_waited = waited_s(server_pid) - server_waited
    ran = report.total - report.skipped
    sent = report.requests + report.retries
    per_rollout = sent / ran
    ideal = concurrency / (latency_s * per_rollout)
    achieved = report.rollouts_per_s
    steady = steady_rate(times)
    print(
        f"concurrency {concurrency:>3}, {workers} worker{'s' if workers > 1 else ' '}: "
        f"{ran} rollouts in {report.run_s:.1f} s, {per_rollout:.2f} requests/rollout, "
        f"ideal {ideal:.1f} rollouts/s; whole run {achieved:.1f} rollouts/s "
        f"({achieved / ideal:.1%}), steady (10-90% of rollouts) {steady:.1f} rollouts/s "
        f"({steady / ideal:.1%}); latency {report.latency}\n"
        f"    CPU per request: client {client_s / sent * 1000:.2f} ms, server "
        f"{server_s / sent * 1000:.2f} ms ({client_s / report.wall_s:.0%} and "
        f"{server_s / report.wall_s:.0%} of a core; at the ideal rate the client would need "
        f"{client_s / sent * ideal * per_rollout:.0%}); waiting for a core: client "
        f"{client_waited / report.wall_s:.0%} of the job, server "
        f"{server_waited / report.wall_s:.0%}; {load_before} before",
        flush=True,
    )


def faults(server: tuple[str, int], root: Path, rollouts: int) -> None:
    base_url, _ = server
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
    parser.add_argument(
        "--tune-gc", action="store_true", help="tune the client's GC as hsa teach --tune-gc"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run the server on the last core and the client (and its workers) on the others",
    )
    args = parser.parse_args()
    waves = args.waves or (6 if args.quick else 16)
    latency_ms = 200
    server_cpus = None
    if args.pin:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            parser.error("--pin needs at least two cores")
        server_cpus = {cores[-1]}
        os.sched_setaffinity(0, set(cores[:-1]))  # workers started later inherit it
    setup = [name for name, on in (("--pin", args.pin), ("--tune-gc", args.tune_gc)) if on]
    print(f"{load()} at the start; {' '.join(setup) or 'no --pin, no --tune-gc'}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, gc_tuned(args.tune_gc):
        root = Path(tmp)
        started = time.monotonic()
        with oracle_server("--latency-ms", str(latency_ms), cpus=server_cpus) as server:
            for concurrency in (64, 256):
                for workers in args.workers:
                    throughput(server, root, concurrency, workers, latency_ms / 1000, waves)
        fault_args = (
            "--latency-ms",
            str(latency_ms),
            "--fail-rate",
            "0.05",
            "--malformed-rate",
            "0.02",
        )
        with oracle_server(*fault_args, cpus=server_cpus) as server:
            faults(server, root, 400 if args.quick else 1000)
        print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
