"""Episode rows to figures: success over tasks with bootstrap intervals, breakdowns, latency."""

from __future__ import annotations

import math
import statistics

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.eval.metrics import EPISODE_SCHEMA
from hsa.eval.summary import breakdown, success_rate, suite_summary, summarize
from hsa.teachers.backends.base import latency_percentiles

NULL = {"success": None, "low": None, "high": None, "n": 0, "tasks": 0}


def row(**fields) -> dict:
    """An episode row with every key of ``EPISODE_SCHEMA``; ``fields`` override."""
    task = fields.get("task_group", "t0")
    base = {
        "suite": "canonical",
        "config": "canonical",
        "task_id": task,
        "task_group": task,
        "task_kind": "lookup",
        "variant_id": "canonical",
        "rules": [],
        "families": [],
        "protocol": "openai-tools",
        "policy": "oracle/hsa-oracle",
        "success": True,
        "score": 1.0,
        "verified": True,
        "failure": None,
        "reason": "",
        "turns": 1,
        "steps": 2,
        "calls": 1,
        "tokens_in": 100,
        "tokens_out": 10,
        "latency_s": 0.5,
        "call_latencies_s": [0.25],
        "name_match": None,
        "keys_match": None,
        "offered": None,
        "target": None,
        "choices": None,
    }
    unknown = set(fields) - set(base)
    assert not unknown, f"not episode columns: {unknown}"
    return {**base, **fields}


def test_rows_built_here_fit_the_episode_schema():
    assert list(row()) == EPISODE_SCHEMA.names
    table = pa.Table.from_pylist([row(), row(failure="wrong_tool", success=False)], EPISODE_SCHEMA)
    assert table.num_rows == 2


# success_rate


def test_success_is_the_mean_of_per_task_means():
    rows = [row(task_group="a", success=s) for s in (True, False, False, False)]
    rows.append(row(task_group="b", success=True))
    found = success_rate(rows, resamples=500, seed=0)
    # (1/4 + 1) / 2, not 2/5: four episodes of one task weigh as one task
    assert found["success"] == 0.625
    assert found["n"] == 5 and found["tasks"] == 2


def test_rows_are_grouped_by_task_group_not_task_id():
    same_group = [row(task_id=f"id{i}", task_group="g", success=i == 0) for i in range(4)]
    found = success_rate(same_group, resamples=200, seed=0)
    assert found["tasks"] == 1 and found["success"] == 0.25
    same_id = [row(task_id="id", task_group=f"g{i}", success=i == 0) for i in range(4)]
    assert success_rate(same_id, resamples=200, seed=0)["tasks"] == 4


def test_interval_brackets_the_estimate_inside_zero_one():
    rows = [row(task_group=f"t{i % 7}", success=i % 3 != 0) for i in range(30)]
    found = success_rate(rows, resamples=1000, seed=4)
    assert 0.0 <= found["low"] <= found["success"] <= found["high"] <= 1.0
    assert found["low"] < found["high"]


@pytest.mark.parametrize(("success", "bound"), [(True, 1.0), (False, 0.0)])
def test_unanimous_rows_give_a_point_interval(success, bound):
    rows = [row(task_group=f"t{i}", success=success) for i in range(12)]
    found = success_rate(rows, resamples=300, seed=1)
    assert (found["success"], found["low"], found["high"]) == (bound, bound, bound)


def test_same_rows_and_seed_give_the_same_interval():
    rows = [row(task_group=f"t{i % 9}", success=i % 4 == 0) for i in range(40)]
    first = success_rate(rows, resamples=400, seed=7)
    assert success_rate(list(rows), resamples=400, seed=7) == first
    others = [success_rate(rows, resamples=400, seed=s) for s in range(8, 14)]
    assert any(o != first for o in others)
    assert all(o["success"] == first["success"] for o in others)


def test_no_rows_give_nulls():
    assert success_rate([], resamples=100, seed=0) == NULL


@settings(max_examples=80, deadline=None)
@given(
    episodes=st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_bootstrap_interval_always_brackets_the_estimate(episodes, seed):
    rows = [row(task_group=f"t{task}", success=ok) for task, ok in episodes]
    found = success_rate(rows, resamples=200, seed=seed)
    assert 0.0 <= found["low"] <= found["success"] <= found["high"] <= 1.0
    assert found["n"] == len(episodes)
    assert found["tasks"] == len({task for task, _ in episodes})


# breakdown


def test_an_episode_counts_toward_each_of_its_families():
    rows = [
        row(task_group="a", families=["tools", "prompt"], success=False),
        row(task_group="b", families=["tools"], success=True),
        row(task_group="c", families=[], success=True),
    ]
    found = breakdown(rows, lambda r: r["families"], resamples=200, seed=0)
    assert list(found) == ["prompt", "tools"]
    assert found["tools"]["n"] == 2 and found["tools"]["success"] == 0.5
    assert found["prompt"]["n"] == 1 and found["prompt"]["success"] == 0.0


# suite_summary


def _variant_rows() -> list[dict]:
    return [
        row(
            suite="variants",
            task_group="a",
            rules=["tools.rename", "prompt.placement"],
            families=["tools", "prompt"],
            success=False,
            verified=False,
            failure="unknown_tool",
        ),
        row(suite="variants", task_group="a", rules=["tools.rename"], families=["tools"]),
        row(
            suite="variants",
            task_group="b",
            rules=["hooks.wrapper"],
            families=["hooks"],
            success=False,
            verified=False,
            failure="unknown_tool",
        ),
        row(
            suite="variants",
            task_group="b",
            rules=["tools.distractors"],
            families=["tools"],
            success=False,
            failure="wrong_tool",
        ),
    ]


def test_variants_suite_breaks_down_by_family_and_rule():
    found = suite_summary("variants", _variant_rows(), resamples=200, seed=0)
    assert found["success"] == 0.25 and found["tasks"] == 2 and found["n"] == 4
    assert found["verified"] == 0.5
    assert found["failures"] == {"unknown_tool": 2, "wrong_tool": 1}
    assert list(found["by_family"]) == ["hooks", "prompt", "tools"]
    # tools: task a (1 of 2) and task b (0 of 1) -> (0.5 + 0) / 2
    assert found["by_family"]["tools"]["success"] == 0.25
    assert found["by_family"]["tools"]["n"] == 3
    assert list(found["by_rule"]) == [
        "hooks.wrapper",
        "prompt.placement",
        "tools.distractors",
        "tools.rename",
    ]
    assert found["by_rule"]["tools.rename"]["success"] == 0.5
    assert found["tokens"] == {"in": 400, "out": 40}
    assert "by_config" not in found and "format_sensitivity" not in found


def test_firstcall_gives_each_step_of_the_match_per_harness_family_and_rule():
    def first(task, config, rules, name, keys, exact):
        families = sorted({r.split(".")[0] for r in rules})
        return row(
            suite="firstcall",
            task_group=task,
            config=config,
            rules=rules,
            families=families,
            name_match=name,
            keys_match=keys,
            success=exact,
        )

    rows = [
        first("a", "canonical", [], True, True, True),
        first("a", "v1", ["tools.rename"], True, False, False),
        first("b", "canonical", [], True, True, False),
        first("b", "v1", ["tools.rename", "prompt.placement"], False, False, False),
    ]
    found = suite_summary("firstcall", rows, resamples=200, seed=0)
    assert (found["name"]["success"], found["keys"]["success"]) == (0.75, 0.5)
    assert found["exact"]["success"] == 0.25
    canonical, variants = found["by_harness"]["canonical"], found["by_harness"]["variants"]
    assert (canonical["name"]["success"], canonical["success"]) == (1.0, 0.5)
    assert (variants["name"]["success"], variants["keys"]["success"]) == (0.5, 0.0)
    tools = found["by_family"]["tools"]
    assert (tools["name"]["success"], tools["keys"]["success"], tools["success"]) == (0.5, 0, 0)
    assert found["by_rule"]["prompt.placement"]["name"]["success"] == 0.0


def test_canonical_suite_has_no_family_or_config_breakdown():
    rows = [row(task_kind="lookup"), row(task_group="t1", task_kind="refund", success=False)]
    found = suite_summary("canonical", rows, resamples=200, seed=0)
    assert set(found["by_kind"]) == {"lookup", "refund"}
    assert set(found["by_protocol"]) == {"openai-tools"}
    assert not {"by_family", "by_rule", "by_config", "format_sensitivity"} & set(found)


def test_bfcl_suite_reports_format_sensitivity():
    # four configurations over the same four tasks, solving 3, 2, 2 and 1 of them
    solved = {"plain": 3, "json": 2, "xml": 2, "yaml": 1}
    rows = [
        row(suite="bfcl", config=config, task_group=f"t{task}", success=task < count)
        for config, count in solved.items()
        for task in range(4)
    ]
    found = suite_summary("bfcl", rows, resamples=200, seed=0)
    assert list(found["by_config"]) == ["json", "plain", "xml", "yaml"]
    assert found["by_config"]["plain"]["success"] == 0.75
    rates = [0.75, 0.5, 0.5, 0.25]
    assert found["format_sensitivity"] == {
        "configurations": 4,
        "mean": 0.5,
        # the sample's sqrt(0.125 / 3), as BFCL's checker takes it, not the population's
        # sqrt((0.0625 + 0 + 0 + 0.0625) / 4)
        "std": 0.204124,
        "max_delta": 0.5,
    }
    assert found["format_sensitivity"]["std"] == round(statistics.stdev(rates), 6)
    assert not math.isclose(found["format_sensitivity"]["std"], statistics.pstdev(rates))
    assert "by_family" not in found


def test_format_sensitivity_of_one_configuration_has_no_spread():
    """BFCL's checker gives 0 where one configuration leaves no sample deviation."""
    rows = [row(suite="bfcl", config="plain", task_group=f"t{t}", success=t < 1) for t in range(2)]
    found = suite_summary("bfcl", rows, resamples=200, seed=0)
    assert found["format_sensitivity"] == {
        "configurations": 1,
        "mean": 0.5,
        "std": 0.0,
        "max_delta": 0.0,
    }


def test_failures_are_counted_per_class_and_sorted():
    classes = ["wrong_tool", None, "step_limit", "wrong_tool", "unparseable_call", "wrong_tool"]
    rows = [
        row(task_group=f"t{i}", success=failure is None, failure=failure)
        for i, failure in enumerate(classes)
    ]
    found = suite_summary("canonical", rows, resamples=200, seed=0)
    assert found["failures"] == {"step_limit": 1, "unparseable_call": 1, "wrong_tool": 3}
    assert list(found["failures"]) == sorted(found["failures"])


def test_latency_percentiles_are_nearest_rank_in_ms():
    # seven episodes (0.01 .. 0.07 s), shuffled; the calls 0.1 .. 2.0 s in twenty steps
    episodes = [0.05, 0.01, 0.07, 0.03, 0.02, 0.06, 0.04]
    calls = [[round(0.1 * (i + 1), 1) for i in range(j, 20, 7)] for j in range(7)]
    rows = [
        row(task_group=f"t{i}", latency_s=e, call_latencies_s=c)
        for i, (e, c) in enumerate(zip(episodes, calls, strict=True))
    ]
    found = suite_summary("canonical", rows, resamples=200, seed=0)["latency"]
    # rank 4 of 7 and rank 7 of 7: every figure is a latency some episode had
    assert found["per_episode"]["p50_ms"] == 40.0
    assert found["per_episode"]["p95_ms"] == 70.0
    flat = [x for c in calls for x in c]
    teachers = latency_percentiles(flat)
    assert found["per_call"]["p50_ms"] == teachers["p50_ms"] == 1100.0
    assert found["per_call"]["p95_ms"] == 2000.0
    assert found["per_call"]["p99_ms"] == teachers["p99_ms"]


def test_an_empty_suite_reports_nulls():
    found = suite_summary("variants", [], resamples=200, seed=0)
    assert {k: found[k] for k in NULL} == NULL
    assert found["verified"] is None and found["failures"] == {}
    assert found["by_family"] == {} and found["latency"] == {"per_call": {}, "per_episode": {}}


# summarize


def _run_rows() -> list[dict]:
    canonical = [row(task_group=f"t{i}", success=i != 3) for i in range(4)]
    variants = [
        row(suite="variants", task_group=f"t{i}", families=["tools"], success=i < 2)
        for i in range(4)
    ]
    return variants + canonical


def test_summarize_gives_the_drop_from_canonical_to_variants():
    found = summarize(_run_rows(), ["canonical", "variants"], resamples=200, seed=0)
    assert list(found["suites"]) == ["canonical", "variants"]
    assert found["suites"]["canonical"]["success"] == 0.75
    assert found["suites"]["variants"]["success"] == 0.5
    assert found["drop"] == 0.25
    assert found["episodes"] == 8
    assert found["latency"]["per_episode"] == {"p50_ms": 500.0, "p95_ms": 500.0, "p99_ms": 500.0}


def test_summarize_keeps_the_order_of_suites_and_drops_the_drop_without_both():
    rows = _run_rows()
    found = summarize(rows, ["variants", "canonical"], resamples=200, seed=0)
    assert list(found["suites"]) == ["variants", "canonical"] and found["drop"] == 0.25
    alone = summarize(rows, ["canonical"], resamples=200, seed=0)
    assert "drop" not in alone and list(alone["suites"]) == ["canonical"]
    # variants asked for but never run: its figures are null, and there is no drop
    canonical_only = [r for r in rows if r["suite"] == "canonical"]
    missing = summarize(canonical_only, ["canonical", "variants"], resamples=200, seed=0)
    assert missing["suites"]["variants"]["success"] is None and "drop" not in missing
