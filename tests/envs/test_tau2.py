"""tau2: the action criterion, and every retail and airline task's reference actions."""

from __future__ import annotations

import json

import pytest

from hsa.envs.tau2 import Tau2Environment, action_matches
from hsa.harness.events import AssistantMessage, ToolCall


def test_action_criterion():
    action = {"name": "get_order", "arguments": {"order_id": "#W1", "verbose": True}}
    assert action_matches(action, "get_order", {"order_id": "#W1", "verbose": True})
    # compare_args absent: the call's own arguments are compared.
    assert action_matches(action, "get_order", {"order_id": "#W1"})
    assert not action_matches(action, "get_order", {"order_id": "#W2"})
    assert not action_matches(action, "get_orders", {"order_id": "#W1"})
    assert action_matches({**action, "compare_args": []}, "get_order", {"order_id": "zzz"})
    subset = {**action, "compare_args": ["order_id"]}
    assert action_matches(subset, "get_order", {"order_id": "#W1", "verbose": False})
    assert not action_matches(subset, "get_order", {"verbose": True})
    # compared as they are, as tau2's Action.compare_with_tool_call does: an array sent as a
    # JSON string is not the array (tau2's tool would refuse it), nor a respaced string the same
    items = {"name": "f", "arguments": {"item_ids": ["1", "2"]}}
    assert action_matches(items, "f", {"item_ids": ["1", "2"]})
    assert not action_matches(items, "f", {"item_ids": '["1", "2"]'})
    as_json = {"name": "f", "arguments": {"payload": '{"a": 1, "b": [1, 2]}'}}
    assert action_matches(as_json, "f", {"payload": '{"a": 1, "b": [1, 2]}'})
    assert not action_matches(as_json, "f", {"payload": '{"b":[1,2],"a":1}'})


def perturb(env, task):
    """The reference calls with one compared argument changed (or one call renamed)."""
    actions = env.actions(task)
    calls = [ToolCall(f"call_{i}", a["name"], dict(a["arguments"])) for i, a in enumerate(actions)]
    for i, action in enumerate(actions):
        compared = action.get("compare_args")
        keys = list(action["arguments"]) if compared is None else list(compared)
        if keys:
            key = keys[0]
            args = {**calls[i].args, key: f"{calls[i].args.get(key)}-perturbed"}
            calls[i] = ToolCall(calls[i].call_id, calls[i].tool, args)
            same = [c for c in calls if action_matches(action, c.tool, c.args)]
            if not same:
                return calls
            calls[i] = ToolCall(calls[i].call_id, actions[i]["name"], dict(actions[i]["arguments"]))
    name = actions[0]["name"]
    return [c for c in calls if c.tool != name]


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_reference_actions_solve_and_perturbed_ones_fail(external, domain):
    env = Tau2Environment.from_corpus(external / "tau2" / domain)
    with_actions = [t for t in env.tasks() if t.ground_truth.get("actions")]
    assert len(with_actions) >= 40
    for task in with_actions:
        episode = env.solve(task)
        outcome = env.score(task, episode.state, episode.events)
        assert outcome.success, (task.id, outcome.reasons)
        assert episode.events[0].text  # an opening from the user scenario
        broken = env.score(task, env.reset(task), perturb(env, task))
        assert not broken.success and broken.score < 1.0, task.id
        assert "was not performed" in broken.reasons[0]


def test_tasks_without_actions_pass_any_episode(external):
    env = Tau2Environment.from_corpus(external / "tau2" / "airline")
    empty = [t for t in env.tasks() if not t.ground_truth.get("actions")]
    assert empty
    assert env.score(empty[0], env.reset(empty[0]), []).success


def test_what_the_user_must_be_told_is_scored_as_tau2_scores_it(external):
    # airline's reward is DB x COMMUNICATE: task 7 must tell the user "1628"
    env = Tau2Environment.from_corpus(external / "tau2" / "airline")
    task = next(t for t in env.tasks() if t.id == "tau2-airline-7")
    assert env.communicate(task) == ["1628"]
    solved = env.solve(task)
    assert env.score(task, solved.state, solved.events).success
    calls = [e for e in solved.events if isinstance(e, ToolCall)]
    silent = env.score(task, env.reset(task), calls)
    assert not silent.success and silent.reasons == ("the user was not told '1628'",)
    # as tau2 reads it: case aside, commas removed from the assistant's text
    told = [*calls, AssistantMessage("That is $1,628 in total.")]
    assert env.score(task, env.reset(task), told).success
    # retail's basis holds no COMMUNICATE: its communicate_info does not gate
    retail = Tau2Environment.from_corpus(external / "tau2" / "retail")
    assert not any(retail.communicate(t) for t in retail.tasks())


def test_criteria_without_a_reward_basis_take_tau2s_default(external, tmp_path):
    # EvaluationCriteria.reward_basis defaults to [DB, COMMUNICATE]: the user must be told
    import shutil

    domain = tmp_path / "airline"
    shutil.copytree(external / "tau2" / "airline", domain)
    tasks = json.loads((domain / "tasks.json").read_text("utf-8"))
    for task in tasks:
        task["evaluation_criteria"].pop("reward_basis", None)
    (domain / "tasks.json").write_text(json.dumps(tasks), "utf-8")
    env = Tau2Environment.from_corpus(domain)
    task = next(t for t in env.tasks() if t.id == "tau2-airline-7")
    assert env.communicate(task) == ["1628"]
    calls = [e for e in env.solve(task).events if isinstance(e, ToolCall)]
    assert not env.score(task, env.reset(task), calls).success


def test_the_environment_says_what_it_left_out_of_its_tasks_not_of_its_tools(external):
    # the import's note about the dropped `self` parameters is the import's to say
    from hsa.harness.importers import import_source

    path = external / "tau2" / "retail"
    assert any("'self'" in n for n in import_source(path, format="tau2").notes)
    assert not any("'self'" in n for n in Tau2Environment.from_corpus(path).left_out())
