"""Tasks: 2,000+ distinct, every kind, deterministic, split by task."""

from __future__ import annotations

from collections import Counter

from hsa.envs.base import SPLITS, Task
from hsa.envs.livestream import LivestreamEnvironment
from hsa.envs.livestream.task_templates import TEMPLATES
from hsa.envs.livestream.tasks import KINDS, split_of


def test_at_least_2000_distinct_tasks_of_every_kind(env):
    tasks = env.tasks()
    assert len(tasks) >= 2000
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({(t.metadata["now"], t.turns) for t in tasks}) == len(tasks)
    kinds = Counter(t.kind for t in tasks)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 100
    assert any(len(t.turns) == 3 for t in tasks)  # multi-turn follow-ups


def test_ground_truth_shape(env):
    for task in env.tasks():
        truth = task.ground_truth
        assert set(truth) == {
            "facts",
            "required_calls",
            "forbidden_calls",
            "required_skills",
            "product_ids",
            "final_state",
        }
        assert truth["facts"], task.id
        assert truth["required_calls"], task.id
        assert len(task.metadata["plan"]) == len(task.turns)
    kinds = {t.kind: t for t in env.tasks()}
    assert kinds["skill_first"].ground_truth["required_skills"]
    assert kinds["compliance_trap"].ground_truth["required_skills"] == ["ad-compliance"]
    oos = [t for t in env.tasks() if t.metadata["template"] == "pin_or_alternative"]
    assert any(t.ground_truth["forbidden_calls"] for t in oos)


def test_deterministic_and_splits_by_task(env):
    again = LivestreamEnvironment()
    assert [t.to_dict() for t in again.tasks()] == [t.to_dict() for t in env.tasks()]
    counts = Counter(t.split for t in env.tasks())
    assert set(counts) == set(SPLITS)
    assert 0.7 < counts["train"] / len(env.tasks()) < 0.9
    assert all(t.split == split_of(t.id) for t in env.tasks())
    assert sum(len(env.tasks(s)) for s in SPLITS) == len(env.tasks())


def test_tasks_round_trip_as_rows(env):
    for task in env.tasks()[::50]:
        assert Task.from_dict(task.to_dict()) == task


def test_n_tasks_keeps_every_kind():
    small = LivestreamEnvironment(n_tasks=40)
    assert len(small.tasks()) == 40
    assert {t.kind for t in small.tasks()} == set(KINDS)


def test_n_tasks_spreads_over_every_template(env):
    full = {t.id: t for t in env.tasks()}
    for n in (40, 50):  # 5 of each kind: every template of the largest kinds
        small = LivestreamEnvironment(n_tasks=n).tasks()
        assert len(small) == n
        assert {t.metadata["template"] for t in small} == {t.__name__ for t in TEMPLATES}
        # the same tasks, ids and splits as in the full set, in its order
        assert all(full[t.id] == t for t in small)
        order = list(full)
        assert [t.id for t in small] == sorted((t.id for t in small), key=order.index)
    assert LivestreamEnvironment(n_tasks=50).tasks() == LivestreamEnvironment(n_tasks=50).tasks()


def test_another_seed_gives_other_tasks(env):
    other = LivestreamEnvironment(seed=7, n_tasks=100)
    assert {t.turns for t in other.tasks()} != {t.turns for t in env.tasks()[:100]}
