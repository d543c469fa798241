"""tau2: the action criterion, and every retail and airline task's reference actions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hsa.envs.episode import run_episode
from hsa.envs.tau2 import Tau2Environment, action_matches
from hsa.harness.events import AssistantMessage, ToolCall, ToolResult


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
    # DB's approximation: the same write, every argument either side gives equal; a call
    # that leaves one out, or adds one, is another write
    assert action_matches(
        action, "get_order", {"order_id": "#W1", "verbose": True}, same_write=True
    )
    assert not action_matches(action, "get_order", {"order_id": "#W1"}, same_write=True)
    assert not action_matches(action, "get_order", {}, same_write=True)
    extra = {"order_id": "#W1", "verbose": True, "note": "x"}
    assert not action_matches(action, "get_order", extra, same_write=True)
    # compare_args still say which arguments count
    assert action_matches(subset, "get_order", {"order_id": "#W1"}, same_write=True)
    # an argument left out is its schema's default, which tau2's tool writes (Python fills it)
    quiet = {"name": "get_order", "arguments": {"order_id": "#W1", "verbose": False}}
    default = {"verbose": False}
    assert action_matches(
        quiet, "get_order", {"order_id": "#W1"}, same_write=True, defaults=default
    )
    bare = {"name": "get_order", "arguments": {"order_id": "#W1"}}
    called = {"order_id": "#W1", "verbose": False}
    assert action_matches(bare, "get_order", called, same_write=True, defaults=default)
    loud = {"order_id": "#W1", "verbose": True}
    assert not action_matches(bare, "get_order", loud, same_write=True, defaults=default)


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
        assert not broken.success and broken.score == 0.0, task.id
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


def reference_with(env, task, change):
    """The reference calls, each call's arguments changed by ``change``."""
    return [
        ToolCall(f"call_{i}", a["name"], change(dict(a["arguments"])))
        for i, a in enumerate(env.actions(task))
    ]


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_calls_the_environment_refuses_perform_no_action(external, domain):
    # each reference tool called with no arguments, or one required argument left out, is
    # refused by the environment and did nothing: it solved every task before
    env = Tau2Environment.from_corpus(external / "tau2" / domain)
    with_actions = [t for t in env.tasks() if env.actions(t)]
    for task in with_actions:
        told = [AssistantMessage(" ".join(env.communicate(task)))]
        empty = reference_with(env, task, lambda args: {})
        assert not env.score(task, env.reset(task), [*empty, *told]).success, task.id
        short = reference_with(env, task, lambda args: dict(list(args.items())[1:]))
        assert not env.score(task, env.reset(task), [*short, *told]).success, task.id


def test_a_refused_call_in_a_played_episode_counts_for_nothing(external):
    env = Tau2Environment.from_corpus(external / "tau2" / "retail")
    task = next(t for t in env.tasks() if len(env.actions(t)) == 1)
    (action,) = env.actions(task)
    steps = iter([[ToolCall("call_0", action["name"], {})], [AssistantMessage("Done.")]])
    episode = run_episode(env, replace(task, turns=env.turns(task)), lambda *_: next(steps, []))
    result = next(e for e in episode.events if isinstance(e, ToolResult))
    assert result.is_error and "invalid arguments" in result.content
    outcome = env.score(task, episode.state, episode.events)
    assert not outcome.success and "was not performed" in outcome.reasons[0]
    # an argument the tool does not take: another write than the reference's under DB
    extra = reference_with(env, task, lambda args: {**args, "note": "x"})
    assert not env.score(task, env.reset(task), extra).success


def domain_of(tmp_path, tasks, *, name="lookup", verbose=None):
    """A tau2 domain folder: one tool, ``lookup(id, verbose)`` (``name``, and ``verbose``'s
    schema), and ``tasks``."""
    tool = {
        "type": "function",
        "function": {
            "name": name,
            "description": "Look a record up.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "verbose": verbose or {"type": "boolean"}},
                "required": ["id"],
            },
        },
    }
    domain = tmp_path / "shop"
    domain.mkdir()
    (domain / "tools.json").write_text(json.dumps([tool]), "utf-8")
    (domain / "tasks.json").write_text(json.dumps(tasks), "utf-8")
    return Tau2Environment.from_corpus(domain)


def test_the_reward_basis_says_what_is_scored(tmp_path):
    action = {"action_id": "a", "name": "lookup", "arguments": {"id": "1", "verbose": True}}

    def task(task_id, basis):
        criteria = {"actions": [action], "communicate_info": ["42"], "reward_basis": basis}
        return {"id": task_id, "evaluation_criteria": criteria}

    env = domain_of(
        tmp_path, [task("db", ["DB"]), task("action", ["ACTION"]), task("told", ["COMMUNICATE"])]
    )
    db, action_only, told_only = env.tasks()
    short = [ToolCall("call_0", "lookup", {"id": "1"})]  # verbose left out
    # DB: the reference write, every argument; ACTION: tau2's rule, the call's own arguments
    assert not env.score(db, env.reset(db), short).success
    assert env.score(action_only, env.reset(action_only), short).success
    # though not a call the environment refused (the required id left out): it did nothing
    refused = [ToolCall("call_0", "lookup", {"verbose": True})]
    assert not env.score(action_only, env.reset(action_only), refused).success
    # COMMUNICATE alone: tau2 gives reward 1 when the user was told, whatever the calls
    assert env.score(told_only, env.reset(told_only), [AssistantMessage("It is 42.")]).success
    assert env.score(told_only, env.reset(told_only), [AssistantMessage("I can't.")]).reasons == (
        "the user was not told '42'",
    )


def test_an_episode_scores_as_tau2_rewards_it_all_or_nothing(tmp_path):
    actions = [
        {"action_id": str(i), "name": "lookup", "arguments": {"id": str(i)}} for i in range(4)
    ]
    criteria = {"actions": actions, "communicate_info": ["42"]}  # DB and COMMUNICATE
    env = domain_of(tmp_path, [{"id": "t", "evaluation_criteria": criteria}])
    (task,) = env.tasks()
    calls = [ToolCall(f"call_{i}", "lookup", a["arguments"]) for i, a in enumerate(actions)]
    told = AssistantMessage("It is 42.")
    assert env.score(task, env.reset(task), [*calls, told]).score == 1.0
    # tau2's reward is the product of its basis's 0/1 components: four writes of five checks
    # made is reward 0, not 0.8, and so is every write made with the user not told
    for events in ([*calls[:3], told], calls):
        outcome = env.score(task, env.reset(task), events)
        assert (outcome.success, outcome.score, len(outcome.reasons)) == (False, 0.0, 1)


@pytest.mark.parametrize("name", ["lookup", "look.up"])
def test_under_db_an_argument_left_out_writes_its_schema_default(tmp_path, name):
    def task(task_id, arguments):
        action = {"action_id": "a", "name": name, "arguments": arguments}
        return {"id": task_id, "evaluation_criteria": {"actions": [action], "reward_basis": ["DB"]}}

    verbose = {"type": "boolean", "default": False}
    tasks = [task("given", {"id": "1", "verbose": False}), task("left", {"id": "1"})]
    env = domain_of(tmp_path, tasks, name=name, verbose=verbose)
    given, left = env.tasks()
    tool = env.harness_for(given).tools[0].name
    assert tool == name.replace(".", "_")  # "look.up" is renamed to a legal name
    bare, at_default = {"id": "1"}, {"id": "1", "verbose": False}
    # tau2's tool makes the same write either way: Python fills the default
    assert env.score(given, env.reset(given), [ToolCall("c", tool, bare)]).success
    assert env.score(left, env.reset(left), [ToolCall("c", tool, at_default)]).success
    loud = [ToolCall("c", tool, {"id": "1", "verbose": True})]
    assert not env.score(left, env.reset(left), loud).success


def test_tasks_whose_reward_hsa_cannot_check_are_left_out_and_said(tmp_path):
    asserted = {
        "id": "asserted",
        "evaluation_criteria": {
            "env_assertions": [{"env_type": "assistant", "func_name": "assert_x", "arguments": {}}],
            "reward_basis": ["ENV_ASSERTION"],
        },
    }
    set_up = {
        "id": "set-up",
        "initial_state": {
            "initialization_actions": [
                {"env_type": "assistant", "func_name": "lookup", "arguments": {"id": "1"}}
            ]
        },
        "evaluation_criteria": {"communicate_info": ["42"], "reward_basis": ["COMMUNICATE"]},
    }
    # an empty initial_state, or ENV_ASSERTION with no assertion to run, needs nothing
    plain = {"id": "plain", "initial_state": {"initialization_actions": None}}
    trivial = {"id": "trivial", "evaluation_criteria": {"reward_basis": ["ENV_ASSERTION"]}}
    env = domain_of(tmp_path, [asserted, set_up, plain, trivial])
    assert [t.id for t in env.tasks()] == ["tau2-shop-plain", "tau2-shop-trivial"]
    env_assertion, initial_state = env.left_out()
    assert env_assertion.startswith("1 task(s) imported unscored (asserted): ")
    assert "ENV_ASSERTION" in env_assertion
    assert initial_state.startswith("1 task(s) imported unscored (set-up): ")
    assert "initial_state" in initial_state
