"""Every rule passes every check on real data: livestream oracle trajectories (replayed through
the environment), tau2 retail and airline reference actions, and BFCL simple, multiple,
parallel and parallel_multiple ground truth (replayed against the recording). Samples keep it
fast; ``hsa rules check --source ...`` runs the full corpora."""

from __future__ import annotations

import pytest

from hsa.augment import all_rules
from hsa.augment.checks import SKIP, Replay
from hsa.augment.suite import (
    Job,
    Subject,
    describe,
    reference_events,
    run,
    subjects_from_env,
    subjects_from_import,
)
from hsa.harness import Harness, Tool, ToolCall

BFCL = ["simple_python", "multiple", "parallel", "parallel_multiple"]


def _spread(items, n):
    step = max(1, len(items) // n)
    return items[::step][:n]


def _assert_all_pass(subjects, seeds=(0,)):
    jobs = [Job(r) for r in all_rules()]
    reports = list(run(jobs, subjects, seeds=seeds))
    assert len(reports) == len(jobs) * len(subjects) * len(seeds)
    failed = [describe(r) for r in reports if not r.ok]
    assert not failed, "\n".join(failed[:10])
    return reports


def test_every_rule_passes_on_livestream_oracle_trajectories():
    from hsa.envs import get
    from hsa.envs.livestream import solve

    env = get("livestream")
    tasks = _spread(env.tasks(), 4)
    subjects = [
        Subject(env.harness(), solve(env, t).trajectory, Replay(env, t), "livestream")
        for t in tasks
    ]
    reports = _assert_all_pass(subjects)
    assert all(r.outcomes["replay"] == "pass" for r in reports)


def test_subjects_from_env_records_oracle_trajectories():
    from hsa.envs import get
    from hsa.envs.livestream import solve

    env = get("livestream")
    subjects = subjects_from_env(env, lambda e, t: solve(e, t).trajectory, limit=2)
    assert len(subjects) == 2
    assert all(s.replay.env is env and s.replay.task is not None for s in subjects)


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_every_rule_passes_on_tau2_reference_actions(external, domain):
    from hsa.harness.importers import import_source

    subjects = subjects_from_import(import_source(external / "tau2" / domain))
    assert len(subjects) > 30
    _assert_all_pass(_spread(subjects, 4))


@pytest.mark.parametrize("category", BFCL)
def test_every_rule_passes_on_bfcl_ground_truth(external, category):
    from hsa.harness.importers import import_source

    subjects = subjects_from_import(import_source(external / "bfcl" / f"BFCL_v4_{category}.json"))
    assert len(subjects) >= 200
    reports = _assert_all_pass(_spread(subjects, 4))
    # Only reference calls that break their own schema (a few BFCL answers do) are skipped.
    assert sum(r.outcomes["schema"] == SKIP for r in reports) <= len(reports) // 4


def test_bfcl_reference_takes_the_first_acceptable_value_at_every_level():
    harness = Harness("h", tools=(Tool("f"),))
    task = {
        "id": "x",
        "turns": ["go"],
        "ground_truth": {
            "calls": [
                {
                    "f": {
                        "a": [1, 2],
                        "b": ["", 3],
                        "c": [{"k": ["v", "w"], "o": [""]}],
                        "d": [[{"k": [5]}]],
                        "e": [[3, 5]],
                    }
                }
            ]
        },
    }
    events = reference_events(task, harness)
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.args == {"a": 1, "c": {"k": "v"}, "d": [{"k": 5}], "e": [3, 5]}


def test_tau2_reference_keeps_action_order_and_arguments(external):
    from hsa.harness.importers import import_source

    result = import_source(external / "tau2" / "retail")
    task = next(t for t in result.tasks if t["ground_truth"]["actions"])
    events = reference_events(task, result.harnesses[0])
    calls = [(e.tool, dict(e.args)) for e in events if isinstance(e, ToolCall)]
    assert calls == [(a["name"], a["arguments"]) for a in task["ground_truth"]["actions"]]
