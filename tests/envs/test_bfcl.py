"""BFCL: the AST checker's rules, and the full single-turn corpus scored against itself."""

from __future__ import annotations

import copy

import pytest

from hsa.envs.bfcl import BfclEnvironment, answer_defects, reference_calls
from hsa.envs.bfcl_check import check_calls, check_param, standardize
from hsa.harness.events import ToolCall

SINGLE_TURN = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
)
# Entries whose possible answers contradict their own function docs: no call can pass BFCL's
# checker (a required parameter with no acceptable value, or a value demanded for a parameter
# the function does not declare).
DEFECTIVE = {
    "live_simple_106-63-0",
    "live_simple_112-68-0",
    "live_multiple_862-181-3",
    "live_multiple_964-207-0",
}

TOOL = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "scale": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object"},
        "unit": {"type": "string"},
    },
    "required": ["city"],
}


def test_standardize():
    assert standardize("New York, NY") == "newyorkny"
    assert standardize("April 1, 2024") == standardize("april 1,2024")
    assert standardize("it's") == 'it"s'


def test_param_rules():
    assert check_param("city", "New-York", TOOL["properties"]["city"], ["new york"]) is None
    assert check_param("scale", 2, TOOL["properties"]["scale"], [2.0]) is None  # int for float
    assert "expected type integer" in check_param("days", 2.0, TOOL["properties"]["days"], [2])
    assert check_param("days", "two", TOOL["properties"]["days"], ["two"]) is None  # variable
    assert check_param("tags", ["A b", "c"], TOOL["properties"]["tags"], [["ab", "C"]]) is None
    assert "not one of" in check_param(
        "tags", ["c", "ab"], TOOL["properties"]["tags"], [["ab", "c"]]
    )
    opts = TOOL["properties"]["opts"]
    assert check_param("opts", {"k": "V"}, opts, [{"k": ["v"], "z": [""]}]) is None
    assert check_param("opts", {"k": "v", "q": 1}, opts, [{"k": ["v"]}]) is not None
    assert check_param("opts", {}, opts, [{"k": ["v"]}]) is not None


def test_call_rules():
    answer = {"weather": {"city": ["Paris"], "unit": ["", "celsius"]}}
    tools = {"weather": TOOL}
    ok = check_calls("simple_python", tools, [{"weather": {"city": "paris"}}], [answer])
    assert ok is None
    assert "missing required" in check_calls("simple", tools, [{"weather": {}}], [answer])
    assert "unexpected parameter 'days'" in check_calls(
        "simple", tools, [{"weather": {"city": "Paris", "days": 3}}], [answer]
    )
    assert "is missing and not optional" in check_calls(
        "simple",
        tools,
        [{"weather": {"city": "Paris"}}],
        [{"weather": {"city": ["Paris"], "days": [3]}}],
    )
    assert "wrong number of calls" in check_calls("simple", tools, [], [answer])
    assert check_calls("irrelevance", tools, [], []) is None
    assert check_calls("irrelevance", tools, [{"weather": {"city": "x"}}], []) is not None


def test_parallel_calls_match_in_any_order():
    tools = {"weather": TOOL}
    answers = [{"weather": {"city": ["Paris"]}}, {"weather": {"city": ["Rome"]}}]
    calls = [{"weather": {"city": "Rome"}}, {"weather": {"city": "Paris"}}]
    assert check_calls("parallel", tools, calls, answers) is None
    assert check_calls("simple", tools, calls[:1], answers[:1]) is not None
    twice = [{"weather": {"city": "Paris"}}, {"weather": {"city": "Paris"}}]
    assert "no call matches expected call 2" in check_calls("parallel", tools, twice, answers)


def _perturb_value(value, candidates):
    if isinstance(value, bool):
        return None if (not value) in candidates else (not value)
    if isinstance(value, int | float):
        return value + 7919
    if isinstance(value, str):
        return value + " perturbed zq"
    if isinstance(value, list):
        return [*value, "perturbed zq"]
    if isinstance(value, dict):
        return {**value, "perturbed_zq": 1}
    return None


def perturb(task, calls):
    """The reference calls with one value made unacceptable (or, failing that, a call
    renamed); irrelevance entries get a call they must not make."""
    if not calls:
        return [ToolCall("call_0", "unrequested_call", {})]
    calls = copy.deepcopy(calls)
    for i, call in enumerate(calls):
        ((_name, possible),) = task.ground_truth["calls"][i].items()
        for param, value in call.args.items():
            changed = _perturb_value(value, possible.get(param, []))
            if changed is not None:
                calls[i] = ToolCall(call.call_id, call.tool, {**call.args, param: changed})
                return calls
    calls[0] = ToolCall(calls[0].call_id, calls[0].tool + "_renamed", calls[0].args)
    return calls


@pytest.fixture(scope="module")
def corpus(external):
    return {
        name: BfclEnvironment.from_corpus(external / "bfcl" / f"BFCL_v4_{name}.json")
        for name in SINGLE_TURN
    }


def test_every_reference_answer_is_solved(corpus):
    failing, total = set(), 0
    for env in corpus.values():
        for task in env.tasks():
            total += 1
            episode = env.solve(task)
            outcome = env.score(task, episode.state, episode.events)
            if not outcome.success:
                failing.add(task.id)
                assert any("possible answer cannot be met" in r for r in outcome.reasons)
            assert bool(answer_defects(task, env.tools(task))) == (not outcome.success)
    assert total > 2500
    assert failing == DEFECTIVE


def test_every_perturbed_answer_fails(corpus):
    for env in corpus.values():
        for task in env.tasks():
            calls = perturb(task, reference_calls(task, env.tools(task)))
            state = env.reset(task)
            outcome = env.score(task, state, calls)
            assert not outcome.success, task.id


def test_tools_do_not_run_but_fail_cleanly(corpus):
    env = corpus["simple_python"]
    task = env.tasks()[0]
    (call,) = reference_calls(task, env.tools(task))
    out = env.execute(env.reset(task), call.tool, call.args)
    assert out.is_error and "no recorded output" in out.content
    bad = env.execute(env.reset(task), call.tool, {"base": "ten"})
    assert bad.is_error and "invalid arguments" in bad.content
