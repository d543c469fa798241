"""Evaluation overhead: how much of an evaluation's wall time is hsa's, not the model's.

Starts ``hsa serve oracle --latency-ms 200`` (the model, answering 200 ms after a request
arrives, its own work inside that time, with the held-out recipe so it knows the variants)
and runs ``hsa.eval.runner.evaluate`` with the
``openai`` policy (aiohttp over loopback) at concurrency 64 on the canonical and
variants suites. Every model call takes at least the server's latency, so the least wall time
the run can take is

    model time = requests x latency / concurrency

and the harness-side overhead is the rest of the wall time: ``1 - model time / wall``
(rendering, parsing, hooks, environment steps, scoring, the client, writing the episodes,
summary and report, and waiting for a core). Target: at most 5% at concurrency 64.

Then, to say where the harness time goes, the same episodes run with the in-process oracle
(no network, no latency): that run's wall time per episode is the CPU an episode costs outside
any model (the oracle's own answer included, so an upper bound), printed as a share of the
model time an episode spends at 200 ms a call; and the writing of the results is timed alone.

    python benchmarks/bench_eval.py            # 1,270 episodes at 200 ms (about 30 s)
    python benchmarks/bench_eval.py --quick    # fewer episodes

Measured on two idle cores (one commit's figures move by 3-4 points from run to run):
the train split (11,580 episodes, 39,835 calls) 4.3-4.4% overhead, the target met (10.0% in
the last session, through the official ``openai`` client); the test split (1,270 episodes,
4,175 calls) 9.4-10.4% (14.7-18.7% before). A short run pays fixed costs that a long one
spreads out: planning 0.3 s, opening the client 0.1 s, writing the results 0.2-0.3 s, and the
0.25 s over which the first requests are spread (``ramp_s``); the running phase alone takes
2.8% more than its model time on the train split, 4.8-5.7% on the test split. The client
spends 1.1-1.5 ms of CPU a call (2.2-2.5 ms through the official client, which also took half
a second to import) and the server 0.6 ms; at 320 calls a second on two cores a call still
waits for a core now and then. An episode
costs 1.7 ms of CPU outside any model, 0.26% of its 657 ms of model time. docs/eval.md has
the figures.
"""

from __future__ import annotations

import argparse
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
        model_s = report.requests * LATENCY_MS / 1000 / args.concurrency
        overhead = 1 - model_s / wall
        print(
            f"served model, {LATENCY_MS:.0f} ms a call, concurrency {args.concurrency}"
            f"{', --tune-gc' if args.tune_gc else ''}: "
            f"{episodes} episodes, {report.requests} calls in {wall:.2f} s; model time "
            f"{model_s:.2f} s -> harness-side overhead {100 * overhead:.1f}% of wall "
            f"({100 * model_s / wall:.1f}% of ideal; target: overhead <= 5%)"
        )
        print(
            f"  CPU per call: client {1000 * client_cpu / report.requests:.2f} ms, server "
            f"{1000 * server_cpu / report.requests:.2f} ms; load average {load()}"
        )
        print(
            f"  phases: plan {report.plan_s:.2f} s, run {report.run_s:.2f} s (model time "
            f"{100 * model_s / report.run_s:.1f}% of it), write {report.write_s:.2f} s"
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

        import pyarrow.parquet as pq

        rows = pq.read_table(root / "local" / "episodes.parquet").to_pylist()
        started = time.perf_counter()
        write_run(root / "rewrite", rows, in_process.summary)
        print(
            f"writing episodes, summary and report: {time.perf_counter() - started:.2f} s "
            f"({os.cpu_count()} cores)"
        )


if __name__ == "__main__":
    main()
