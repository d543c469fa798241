"""Evaluation overhead: how much of an evaluation's wall time is hsa's, not the model's.

Starts ``hsa serve oracle --latency-ms 200`` (the model, answering 200 ms after a request
arrives, its own work inside that time, with the held-out recipe so it knows the variants)
and runs ``hsa.eval.runner.evaluate`` with the ``openai`` policy (aiohttp over loopback) at
concurrency 64 on the canonical and variants suites. Every model call takes at least the
server's latency, so

- **per episode** (the target): each episode's own wall time, from its first request to its
  score, against its model time (calls x latency); the rest is hsa's: rendering, parsing,
  hooks, environment steps, scoring, the client, and waiting for the event loop or a core.
  Target: at most 5% at concurrency 64.
- **whole run**: the run's wall time against the least it could take if hsa took no time at
  all -- the same episodes, taken in order by 64 lanes, every call exactly the latency -- so
  what a run pays once (loading the environment and planning, opening the client, the
  summary's bootstrap, writing the episodes and report) counts too; and against
  calls x latency / concurrency, which no run reaches (the last episodes run on fewer lanes).

Then, to say where the harness time goes, the same episodes run with the in-process oracle
(no network, no latency): that run's wall time per episode is the CPU an episode costs outside
any model (the oracle's own answer included, so an upper bound), printed as a share of the
model time an episode spends at 200 ms a call; and the writing of the results is timed alone.

    python benchmarks/bench_eval.py                 # test split: 1,270 episodes (about 30 s)
    python benchmarks/bench_eval.py --split train   # 11,580 episodes (about 3 minutes)
    python benchmarks/bench_eval.py --quick         # fewer episodes

Measured on two idle cores: per episode, 2.8-3.5% on the test split and 3.3% on the train split,
the target met. Whole run: 4.9% over the no-time harness on the train split (131.0 s against
124.6 s); 8.6-10.4% on the test split (14.4-14.7 s against 13.2 s), of which 0.72-0.92 s is
paid once per run (planning 0.26 s, writing 0.27 s). The client spends about 1.4 ms of CPU a
call and the server 0.7-0.9 ms; a call comes back 2.4 ms after its 200 ms alone, about 5.6 ms
after at concurrency 64. An episode costs 1.8 ms of CPU outside any model, 0.27% of its
657 ms of model time. docs/eval.md has the figures.
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_teach import client_cpu_s, load, oracle_server, process_cpu_s

from hsa.cli.collector import gc_tuned
from hsa.envs.registry import get
from hsa.eval.config import EvalConfig
from hsa.eval.runner import evaluate, write_run

LATENCY_MS = 200.0
ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "examples" / "eval-heldout.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a third of the episodes")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--tasks", type=int, default=None, help="tasks (default: all of the split)")
    parser.add_argument(
        "--split",
        default="test",
        choices=("train", "dev", "test"),
        help="livestream split to evaluate: test (254 tasks, 1,270 episodes) or train (2,316 "
        "tasks, 11,580 episodes, about 2 minutes)",
    )
    parser.add_argument(
        "--tune-gc", action="store_true", help="tune the client's GC as hsa eval run --tune-gc"
    )
    args = parser.parse_args()
    tasks = 40 if args.quick else args.tasks
    env = get("livestream")
    settings = {
        "tasks": tasks,
        "split": args.split,
        "variants": 4,
        "recipe": str(HELDOUT),
        "seed": 0,
    }

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with oracle_server("--latency-ms", str(LATENCY_MS), "--recipe", str(HELDOUT)) as (url, pid):
            config = EvalConfig(
                policy="openai",
                base_url=url,
                model="hsa-oracle",
                concurrency=args.concurrency,
                **settings,
            )
            cpu_before, server_before = client_cpu_s(), process_cpu_s(pid)
            started = time.perf_counter()
            with gc_tuned(args.tune_gc):
                report = evaluate(config, root / "served", env=env)
            wall = time.perf_counter() - started
            client_cpu = client_cpu_s() - cpu_before
            server_cpu = process_cpu_s(pid) - server_before
        episodes = report.episodes
        model_s = report.requests * LATENCY_MS / 1000
        per_episode = 1 - model_s / report.episodes_s
        print(
            f"served model, {LATENCY_MS:.0f} ms a call, concurrency {args.concurrency}"
            f"{', --tune-gc' if args.tune_gc else ''}: "
            f"{episodes} episodes, {report.requests} calls in {wall:.2f} s"
        )
        print(
            f"  per episode: {report.episodes_s / episodes:.3f} s of wall, "
            f"{model_s / episodes:.3f} s of model time -> harness-side overhead "
            f"{100 * per_episode:.1f}% of an episode's wall time (target: <= 5%)"
        )
        calls = [len(row["call_latencies_s"]) for row in read_rows(root / "served")]
        floor = schedule_s(calls, args.concurrency, LATENCY_MS / 1000)
        bound = model_s / args.concurrency
        fixed = wall - report.run_s
        print(
            f"  whole run: {wall:.2f} s against {floor:.2f} s for a harness that took no time "
            f"at all (the same episodes on {args.concurrency} lanes) -> "
            f"{100 * (1 - floor / wall):.1f}% of wall; against calls x latency / concurrency "
            f"({bound:.2f} s, not reachable: the last lanes run alone) "
            f"{100 * (1 - bound / wall):.1f}%"
        )
        print(
            f"  phases: plan {report.plan_s:.2f} s, run {report.run_s:.2f} s "
            f"({100 * (1 - floor / report.run_s):.1f}% over the no-time harness), write "
            f"{report.write_s:.2f} s; once per run: {fixed:.2f} s "
            f"({100 * fixed / wall:.1f}% of this run's wall)"
        )
        print(
            f"  CPU per call: client {1000 * client_cpu / report.requests:.2f} ms, server "
            f"{1000 * server_cpu / report.requests:.2f} ms; load average {load()}"
        )
        success = report.summary["suites"]["variants"]["success"]
        print(f"  success: variants {success:.3f} (the oracle: every episode must succeed)")

        local = EvalConfig(policy="oracle", concurrency=args.concurrency, **settings)
        started = time.perf_counter()
        in_process = evaluate(local, root / "local", env=env)
        local_wall = time.perf_counter() - started
        per_episode = local_wall / episodes
        model_per_episode = report.requests / episodes * LATENCY_MS / 1000
        print(
            f"in-process oracle, same {in_process.episodes} episodes: {local_wall:.2f} s, "
            f"{1000 * per_episode:.2f} ms an episode outside any model = "
            f"{100 * per_episode / model_per_episode:.2f}% of an episode's model time "
            f"({1000 * model_per_episode:.0f} ms at {LATENCY_MS:.0f} ms a call)"
        )

        rows = read_rows(root / "local")
        started = time.perf_counter()
        write_run(root / "rewrite", rows, in_process.summary)
        print(
            f"writing episodes, summary and report: {time.perf_counter() - started:.2f} s "
            f"({os.cpu_count()} cores)"
        )


def read_rows(out: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(out / "episodes.parquet").to_pylist()


def schedule_s(calls: list[int], lanes: int, latency_s: float) -> float:
    """The wall time of episodes of ``calls`` model calls each, taken in order by ``lanes``
    lanes as ``hsa.eval.runner`` takes them, when every call takes ``latency_s`` and
    nothing else takes any time: the least a run of these episodes can take."""
    free = [(0.0, lane) for lane in range(lanes)]
    heapq.heapify(free)
    end = 0.0
    for count in calls:
        start, lane = heapq.heappop(free)
        done = start + count * latency_s
        end = max(end, done)
        heapq.heappush(free, (done, lane))
    return end


if __name__ == "__main__":
    main()
