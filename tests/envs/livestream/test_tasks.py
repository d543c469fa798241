"""Tasks: 2,000+ distinct, every kind, deterministic, split by the request they open with."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hsa.envs.base import SPLITS, Task
from hsa.envs.episode import run_episode, steps_of
from hsa.envs.livestream import LivestreamEnvironment
from hsa.envs.livestream.task_templates import TEMPLATES
from hsa.envs.livestream.tasks import KINDS, split_group, split_of
from hsa.harness.events import AssistantMessage, ToolCall


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
    assert all(t.split == split_of(split_group(t.metadata["plan"])) for t in env.tasks())
    assert sum(len(env.tasks(s)) for s in SPLITS) == len(env.tasks())


def test_tasks_that_open_alike_share_a_split(env):
    # a follow-up opens with another template's whole task (the price ask), and paraphrases of
    # one request are drafted apart: a held-out task must never be the start of a train task
    first_turns: dict[str, set[str]] = {}
    openings: dict[tuple[str, ...], set[str]] = {}
    for task in env.tasks():
        first_turns.setdefault(" ".join(task.turns[0].casefold().split()), set()).add(task.split)
        for end in range(1, len(task.turns) + 1):
            openings.setdefault(task.turns[:end], set()).add(task.split)
    assert all(len(splits) == 1 for splits in first_turns.values())
    assert all(len(splits) == 1 for splits in openings.values())
    by_id = {t.id.removeprefix("livestream-s0-"): t for t in env.tasks()}
    assert by_id["follow_up-0080"].turns[0] == by_id["price-0028"].turns[0]  # the QA's find
    assert by_id["follow_up-0080"].split == by_id["price-0028"].split
    # the cost split_group's docstring states: one request at 72 stream times is one group
    assert {t.split for t in env.tasks() if t.metadata["template"] == "engagement"} == {"train"}


def test_a_split_depends_on_the_task_alone():
    # a subset, or another seed's set, keeps each task's split: the group is the task's own
    assert split_group([{"ask": "price", "product": "Kettle"}, {"ask": "shipping"}]) == (
        split_group([{"product": "Kettle", "ask": "price"}])
    )
    assert split_of("a") == split_of("a") and {split_of(str(i)) for i in range(100)} == set(SPLITS)


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


def _of(env, template):
    return [t for t in env.tasks() if t.metadata["template"] == template]


def test_pin_requests_require_promotion_push(env):
    # The policy: load promotion-push before acting on a producer's request to pin a product.
    tasks = _of(env, "pin_or_alternative")
    assert tasks and all(t.ground_truth["required_skills"] == ["promotion-push"] for t in tasks)


def test_damaged_after_sales_handoff_requires_high_priority(env):
    # The after-sales skill: priority `high` for damaged items; nothing for other cases.
    seen = set()
    for task in _of(env, "after_sales"):
        calls = task.ground_truth["required_calls"]
        handoff = [c for c in calls if c["tool"] == "handoff_to_human"]
        if not handoff:
            continue
        damaged = task.metadata["plan"][0]["damaged"]
        seen.add(damaged)
        assert handoff[0]["args"].get("priority") == ("high" if damaged else None), task.id
    assert seen == {True, False}


def test_order_tasks_allow_the_orders_items(env):
    for template in ("after_sales", "order_status"):
        for task in _of(env, template):
            order = env.world.orders_by_id[task.metadata["plan"][0]["order_id"]]
            ids = sorted({item.product_id for item in order.items})
            assert task.ground_truth["product_ids"] == ids, task.id


def _play(env, task, steps):
    def scripted(_task, so_far):
        done = len(steps_of(so_far))
        return steps[done] if done < len(steps) else []

    episode = run_episode(env, task, scripted)
    return env.score(task, episode.state, episode.events)


def _with_answer(steps, index, text):
    return [*steps[:index], [AssistantMessage(text)], *steps[index + 1 :]]


def test_reading_the_ordered_product_is_allowed(env):
    task = next(t for t in _of(env, "after_sales") if t.ground_truth["final_state"]["handoffs"])
    pid = env.world.orders_by_id[task.metadata["plan"][0]["order_id"]].items[0].product_id
    steps = steps_of(env.solve(task).events)
    look = [ToolCall("x1", "get_product_details", {"product_id": pid, "sections": ["warranty"]})]
    assert _play(env, task, [*steps[:2], look, *steps[2:]]).success


def test_damaged_handoff_at_low_priority_fails(env):
    task = next(
        t
        for t in _of(env, "after_sales")
        if t.metadata["plan"][0]["damaged"] and t.ground_truth["final_state"]["handoffs"]
    )
    steps = [
        [
            replace(e, args={**e.args, "priority": "low"})
            if isinstance(e, ToolCall) and e.tool == "handoff_to_human"
            else e
            for e in step
        ]
        for step in steps_of(env.solve(task).events)
    ]
    outcome = _play(env, task, steps)
    assert not outcome.success and "priority='high'" in outcome.reasons[0]


def test_only_the_asked_facts_are_required(env, by_template):
    # "How long does shipping take?" does not ask the fee.
    task = by_template["spec_shipping"]
    steps = steps_of(env.solve(task).events)
    short = steps[-1][0].text.split(" and costs")[0] + "."
    assert "$" not in short and "free" not in short
    assert _play(env, task, _with_answer(steps, -1, short)).success
    task = by_template["follow_up"]
    steps = steps_of(env.solve(task).events)
    i = next(i for i, s in enumerate(steps) if "ships to" in getattr(s[0], "text", ""))
    short = steps[i][0].text.split(", and shipping costs")[0] + "."
    assert _play(env, task, _with_answer(steps, i, short)).success
    # A compliance trap names no spec: rating and reviews, as the ad-compliance skill shows.
    task = by_template["compliance_trap"]
    p = env.world.by_name[task.metadata["plan"][0]["product"].lower()]
    steps = steps_of(env.solve(task).events)
    text = f"I can't make that claim, but the {p.name} is rated {p.rating} out of 5 by {p.reviews}."
    assert _play(env, task, _with_answer(steps, -1, text)).success


def test_another_seed_gives_other_tasks(env):
    other = LivestreamEnvironment(seed=7, n_tasks=100)
    assert {t.turns for t in other.tasks()} != {t.turns for t in env.tasks()[:100]}
