"""Task-preservation checks: correct rewrites pass, and deliberately broken rules are caught."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from conftest import make_events, make_harness

from hsa.augment import (
    Context,
    Rewrite,
    RewriteMapping,
    Rule,
    Step,
    ToolMap,
    apply_chain,
    get_rule,
)
from hsa.augment.checks import (
    CHECKS,
    FAIL,
    PASS,
    SKIP,
    Replay,
    check_rewrite,
    enum_step_problems,
    tally,
    value_problems,
)
from hsa.augment.param_schemas import copy_schema
from hsa.envs import Environment, Outcome, Task, ToolOutput
from hsa.harness import (
    Harness,
    Hook,
    Protocol,
    SkillLoad,
    Tool,
    ToolCall,
    ToolResult,
    UserMessage,
)


def _run(rule_fn, harness=None, events=None, replay=None):
    harness = harness or make_harness()
    events = events or make_events()
    item = Rule("broken.rule", "1", rule_fn, doc="A deliberately broken rule.")
    rewrite = item.apply(harness, random.Random(0))
    return check_rewrite(harness, rewrite, events, replay=replay or Replay())


def _failed(report) -> set[str]:
    return {c for c, outcome in report.outcomes.items() if outcome == FAIL}


def test_a_correct_rewrite_passes_every_check(harness, events):
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), {})], seed=3)
    report = check_rewrite(harness, rewrite, events)
    assert report.ok and report.outcomes == dict.fromkeys(CHECKS, PASS)


def test_renaming_a_tool_but_not_its_calls_is_caught():
    def rename_tool_only(harness, rng, params, context):
        tools = [
            dataclasses.replace(t, name="fetch_order") if t.name == "get_order" else t
            for t in harness.tools
        ]
        return Rewrite(harness.replace(tools=tools))  # no mapping: calls keep the old name

    report = _run(rename_tool_only)
    assert "schema" in _failed(report)
    assert any(f.message.startswith("unknown tool 'get_order';") for f in report.failures)
    assert "roundtrip" not in _failed(report)  # rendering does not notice; the schema check does


def test_dropping_a_called_parameter_from_a_schema_open_to_extra_ones_is_caught():
    """A schema that allows any extra property still accepts the call, but no longer tells a
    model about the argument: the task is not preserved."""

    def drop_declared(harness, rng, params, context):
        tools = []
        for tool in harness.tools:
            if tool.name == "get_order":
                schema = {"type": "object", "properties": {}}  # order_id gone, extras allowed
                tool = dataclasses.replace(tool, parameters=schema)
            tools.append(tool)
        return Rewrite(harness.replace(tools=tools))

    report = _run(drop_declared)
    assert _failed(report) == {"schema"}
    assert any(
        "get_order is called with order_id, which its schema no longer declares" in f.message
        for f in report.failures
    )


def test_undeclared_paths_follow_nested_objects_and_items_and_skip_free_form_schemas():
    from hsa.augment.checks import undeclared

    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
            },
            "extra": {"type": "object"},  # free-form: not judged
        },
    }
    value = {"items": [{"sku": "a"}, {"sku": "b", "qty": 2}], "extra": {"any": 1}, "note": "x"}
    assert undeclared(schema, value) == ["items[1].qty", "note"]
    assert undeclared({"type": "object"}, {"a": 1}) == []


def test_renaming_a_parameter_but_not_required_is_caught():
    def rename_param_forget_required(harness, rng, params, context):
        tools = []
        for tool in harness.tools:
            props = dict(tool.parameters["properties"])
            if "order_id" in props:
                props = {("orderId" if k == "order_id" else k): v for k, v in props.items()}
                tool = dataclasses.replace(
                    tool, parameters={**tool.parameters, "properties": props}
                )
            tools.append(tool)
        steps = (Step("move", ("order_id",), ("orderId",)),)
        mapping = RewriteMapping(
            tools={
                t.name: ToolMap(t.name, steps)
                for t in harness.tools
                if "order_id" in t.parameters["properties"]
            }
        )
        return Rewrite(harness.replace(tools=tools), mapping)

    report = _run(rename_param_forget_required)
    assert {"harness", "schema"} <= _failed(report)
    assert any("'order_id' is a required property" in f.message for f in report.failures)
    assert any(
        "required parameter 'order_id' is not in properties" in f.message for f in report.failures
    )


def test_renaming_inside_argument_values_is_caught():
    def naive_replace(harness, rng, params, context):
        # A naive rename that also rewrites the tool's name where it appears inside values.
        table = {"get_order": "fetch_order"}
        tools = [dataclasses.replace(t, name=table.get(t.name, t.name)) for t in harness.tools]
        values = (("damaged get_order mug", "damaged fetch_order mug"),)
        mapping = RewriteMapping(
            tools={
                "get_order": ToolMap("fetch_order"),
                "search": ToolMap("search", (Step("enum", ("query",), values=values),)),
            }
        )
        return Rewrite(harness.replace(tools=tools), mapping)

    report = _run(naive_replace)
    # (renaming by hand, it also left the audit hook's matcher and the texts on the old name)
    assert _failed(report) == {"values", "hooks", "names"}
    (failure,) = [f for f in report.failures if f.check == "values"]
    assert "'damaged get_order mug'" in failure.message and "values are data" in failure.message


def test_declared_enum_respelling_is_allowed_but_not_elsewhere(harness, events):
    rewrite, _ = apply_chain(harness, [(get_rule("tools.enum_values"), {"style": "upper"})], seed=0)
    assert value_problems(harness, rewrite.harness, rewrite.mapping, events) == []
    bad = RewriteMapping(
        tools={
            "get_order": ToolMap(
                "get_order", (Step("enum", ("order_id",), values=(("#W1", "#W-1"),)),)
            )
        }
    )
    problems = value_problems(harness, harness, bad, events)
    assert problems and "'#W1'" in problems[0][1]


def test_two_tools_names_swapped_without_the_mapping_are_caught():
    # get_order and get_order_status take the same argument: calls still validate, and
    # get_order now reads as a status lookup (QA's get_user that deletes the user)
    def swap_names(harness, rng, params, context):
        names = {"get_order": "get_order_status", "get_order_status": "get_order"}
        tools = [dataclasses.replace(t, name=names.get(t.name, t.name)) for t in harness.tools]
        return Rewrite(harness.replace(tools=tools))  # no mapping: calls keep their names

    report = _run(swap_names)
    assert _failed(report) == {"names"}
    assert str(report.failures[0]) == (
        "names: tool 'get_order': has the description and parameters of canonical tool "
        "'get_order_status' ('Get only the shipping status of an order (cheaper than "
        "`get_order`).'), not its own: tools swapped without the renames in the mapping (its "
        "calls would reach a tool that does something else)"
    )
    # the same swap with its renames in the mapping moves the calls with the tools
    swapped = _run(_rename({"get_order": "get_order_status", "get_order_status": "get_order"}))
    assert swapped.ok, [str(f) for f in swapped.failures]


def _find_user(mapping_steps, properties=None):
    """A harness with one tool, ``find_user(first_name, last_name)``, its call, and a rule that
    keeps the harness and maps the call by ``mapping_steps`` (with ``properties`` the
    rewritten tool's, when given)."""
    from hsa.harness import Harness, Tool

    def schema(props):
        return {"type": "object", "properties": props, "required": list(props)}

    names = {
        "first_name": {"type": "string", "description": "The customer's first name."},
        "last_name": {"type": "string", "description": "The customer's last name."},
    }
    harness = Harness(id="h", tools=(Tool("find_user", "Find a user.", schema(names)),))
    call = {"first_name": "Yusuf", "last_name": "Rossi"}
    events = (UserMessage("I'm Yusuf Rossi."), ToolCall("call_0", "find_user", call))

    def rule(h, rng, params, context):
        tool = h.tools[0]
        if properties is not None:
            tool = dataclasses.replace(tool, parameters=schema(properties))
        mapping = RewriteMapping(tools={"find_user": ToolMap("find_user", mapping_steps)})
        return Rewrite(h.replace(tools=(tool,)), mapping)

    return harness, events, rule


def test_values_swapped_between_two_parameters_that_keep_their_schemas_are_caught():
    steps = (
        Step("move", ("first_name",), ("tmp",)),
        Step("move", ("last_name",), ("first_name",)),
        Step("move", ("tmp",), ("last_name",)),
    )
    harness, events, swap = _find_user(steps)
    report = _run(swap, harness, events)
    assert _failed(report) == {"values"}
    assert [f.message for f in report.failures] == [
        "argument value 'Yusuf' of canonical ['first_name'] moved to ['last_name'] of tool "
        "'find_user', whose schema there is the original's (\"The customer's last name.\"): a "
        "parameter the rewrite kept now carries another one's value (values were swapped, not "
        "names)",
        "argument value 'Rossi' of canonical ['last_name'] moved to ['first_name'] of tool "
        "'find_user', whose schema there is the original's (\"The customer's first name.\"): a "
        "parameter the rewrite kept now carries another one's value (values were swapped, not "
        "names)",
    ]
    # names swapped with their schemas: each value keeps its description
    first, last = harness.tools[0].parameters["properties"].values()
    harness, events, renamed = _find_user(steps, {"last_name": first, "first_name": last})
    assert _run(renamed, harness, events).ok


def test_two_parameters_schemas_swapped_with_their_names_kept_are_caught():
    # QA's mut.swap_param_schemas: no steps, every call validates, and the first name is sent
    # under the description of the last
    harness, _, _ = _find_user(())
    first, last = harness.tools[0].parameters["properties"].values()
    harness, events, swap = _find_user((), {"first_name": last, "last_name": first})
    report = _run(swap, harness, events)
    assert _failed(report) == {"names"}
    assert [str(f) for f in report.failures] == [
        "names: tool 'find_user' parameter ['first_name']: has the schema of canonical "
        "['last_name'] (\"The customer's last name.\"), not that of canonical ['first_name'], "
        "which the mapping puts there: two parameters' schemas swapped, names kept (a call's "
        "value would read under another parameter's description)"
    ]


def test_two_parameters_descriptions_swapped_with_their_schemas_otherwise_kept_are_caught():
    # review of 6c1ded8: only whole schemas swapped were found
    harness, _, _ = _find_user(())
    first, last = harness.tools[0].parameters["properties"].values()
    swapped = {  # (each with an example: no schema is the other's whole)
        "first_name": {**first, "description": last["description"], "examples": ["Yusuf"]},
        "last_name": {**last, "description": first["description"], "examples": ["Rossi"]},
    }
    harness, events, swap = _find_user((), swapped)
    report = _run(swap, harness, events)
    assert _failed(report) == {"names"}
    assert [str(f) for f in report.failures] == [
        "names: tool 'find_user' parameter ['first_name']: has the description of canonical "
        "['last_name'] (\"The customer's last name.\"), not that of canonical ['first_name'], "
        "which the mapping puts there: two parameters' descriptions swapped, names kept (a "
        "call's value would read under another parameter's description)"
    ]


def test_an_enum_respelled_into_another_value_of_the_same_enum_is_caught():
    # damaged <-> wrong_size: the enum and the schema stay, the call now says wrong_size
    def respell(harness, rng, params, context):
        pairs = (("damaged", "wrong_size"), ("wrong_size", "damaged"))
        steps = (Step("enum", ("reason",), values=pairs),)
        mapping = RewriteMapping(tools={"return_order_items": ToolMap("return_order_items", steps)})
        return Rewrite(harness, mapping)

    report = _run(respell)
    assert _failed(report) == {"values"}
    assert [f.message for f in report.failures] == [
        "argument value at ['reason'] of tool 'return_order_items' respelled from 'damaged' to "
        "'wrong_size', another value of the same enum: the call would say something else (a "
        "respelling takes a spelling no value of the enum has)"
    ]


def test_an_enum_respelled_into_another_value_in_another_style_is_caught():
    # QA's mut.enum_case_swap_open: damaged -> WRONG_SIZE, wrong_size -> DAMAGED, the enum
    # respelled so: every call validates and says the other value, in capitals
    def respell(harness, rng, params, context):
        table = {"damaged": "WRONG_SIZE", "wrong_size": "DAMAGED"}
        schema = copy_schema(harness.tool("return_order_items").parameters)
        node = schema["properties"]["reason"]
        node["enum"] = [table.get(v, v) for v in node["enum"]]
        steps = (Step("enum", ("reason",), values=tuple(table.items())),)
        mapping = RewriteMapping(tools={"return_order_items": ToolMap("return_order_items", steps)})
        tools = [
            dataclasses.replace(t, parameters=schema) if t.name == "return_order_items" else t
            for t in harness.tools
        ]
        return Rewrite(harness.replace(tools=tools), mapping)

    report = _run(respell)
    assert _failed(report) == {"values"}
    assert [f.message for f in report.failures] == [
        "argument value at ['reason'] of tool 'return_order_items' respelled from 'damaged' to "
        "'WRONG_SIZE', another value of the same enum ('wrong_size') in another style: the call "
        "would say something else (a respelling takes a spelling no value of the enum has)"
    ]

    # a respelling into the value's own words in another style says the same
    def restyle(harness, rng, params, context):
        return get_rule("tools.enum_values").apply(harness, rng, {"style": "upper"}, context)

    assert "values" not in _failed(_run(restyle))


def test_a_lossy_mapping_fails_roundtrip_and_replay():
    def drop_limit(harness, rng, params, context):
        steps = (Step("drop", ("sort",)),)  # forward drop: the inverse cannot bring it back
        return Rewrite(harness, RewriteMapping(tools={"search": ToolMap("search", steps)}))

    report = _run(drop_limit)
    assert {"roundtrip", "replay", "values"} <= _failed(report)


def test_a_hook_reworded_without_its_placeholder_fails_roundtrip():
    def drop_placeholder(harness, rng, params, context):
        hooks = [
            dataclasses.replace(h, message="Customer tier noted.") if h.id == "greet" else h
            for h in harness.hooks
        ]
        return Rewrite(harness.replace(hooks=hooks))

    report = _run(drop_placeholder)
    assert _failed(report) == {"roundtrip"}
    # a call elsewhere that its own schema refuses does not hide it (it was skipped)
    events = list(make_events())
    index = next(i for i, e in enumerate(events) if isinstance(e, ToolCall))
    events[index] = dataclasses.replace(events[index], args={})
    report = _run(drop_placeholder, events=tuple(events))
    assert report.outcomes["schema"] == SKIP and _failed(report) == {"roundtrip"}


def test_a_hook_moved_to_a_note_among_parallel_results_passes_roundtrip():
    # render shows a note fired among the results of one message's calls after the last of
    # them; parse reads it back there, which is no failure of the rule that moved the hook
    def to_system(harness, rng, params, context):
        hooks = [
            dataclasses.replace(h, inject="system") if h.id == "audit" else h for h in harness.hooks
        ]
        return Rewrite(harness.replace(hooks=hooks))

    events = list(make_events())
    audit = events[8]
    events[13:15] = [events[13], audit, events[14]]  # after the first of two parallel results
    report = _run(to_system, events=tuple(events))
    assert report.ok and report.outcomes == dict.fromkeys(CHECKS, PASS), report.failures


def test_a_hook_payload_in_another_key_order_than_its_message_still_checks_roundtrip(
    harness,
):
    # a message shows no order of a payload's keys (parse gives them in template order), so
    # a payload written in another order is no difference that turns the check into a skip
    events = list(make_events())
    index = next(i for i, e in enumerate(events) if getattr(e, "hook_id", None) == "audit")
    payload = events[index].payload
    assert len(payload) > 1
    events[index] = dataclasses.replace(events[index], payload=dict(reversed(payload.items())))
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), {})], seed=3)
    report = check_rewrite(harness, rewrite, tuple(events))
    assert report.outcomes["roundtrip"] == PASS, report.failures


def test_ambiguous_hook_messages_fail_roundtrip():
    def catch_all(harness, rng, params, context):
        extra = Hook("catch", "session_start", "add_context", "{{ anything }}", inject="system")
        return Rewrite(harness.replace(hooks=[extra, *harness.hooks]))

    assert "roundtrip" in _failed(_run(catch_all))


def _matcher(hook, tool):
    return dataclasses.replace(hook, matcher=dataclasses.replace(hook.matcher, tool=tool))


@pytest.mark.parametrize(
    "pattern, says",
    [
        (".*", "hook 'audit': fires on tool 'return_order_items'"),  # widened
        ("no_such_tool", "hook 'audit': no longer fires on tool 'get_order'"),  # narrowed
    ],
)
def test_a_hook_made_to_fire_elsewhere_is_caught(pattern, says):
    def rematch(harness, rng, params, context):
        hooks = [_matcher(h, pattern) if h.id == "audit" else h for h in harness.hooks]
        return Rewrite(harness.replace(hooks=hooks))

    report = _run(rematch)
    assert _failed(report) == {"hooks"}
    assert str(report.failures[0]).startswith(f"hooks: {says}")


def test_a_rename_that_leaves_hooks_and_texts_on_the_old_name_is_caught():
    def rename(harness, rng, params, context):
        # the tool and the calls renamed (the mapping), and the policy's mention of it; not
        # the audit hook's matcher, nor the other texts that name it
        tools = [
            dataclasses.replace(t, name="fetch_order") if t.name == "get_order" else t
            for t in harness.tools
        ]
        sections = list(harness.prompt.sections)
        sections[1] = dataclasses.replace(
            sections[1], body=sections[1].body.replace("`get_order`", "`fetch_order`")
        )
        prompt = dataclasses.replace(harness.prompt, sections=tuple(sections))
        mapping = RewriteMapping(tools={"get_order": ToolMap("fetch_order")})
        return Rewrite(harness.replace(tools=tools, prompt=prompt), mapping)

    report = _run(rename)
    assert _failed(report) == {"hooks", "names"}
    assert [str(f) for f in report.failures] == [
        "hooks: hook 'audit': no longer fires on tool 'get_order' (now 'fetch_order') at turn 0",
        "names: tool 'fetch_order': still names get_order, renamed",
        "names: tool 'get_order_status': still names get_order, renamed",
        "names: skill 'returns-policy': still names get_order, renamed",
    ]


def test_a_hook_that_acts_otherwise_or_is_added_to_act_is_caught():
    def deny(harness, rng, params, context):
        hooks = [
            dataclasses.replace(h, effect="deny") if h.id == "audit" else h for h in harness.hooks
        ]
        return Rewrite(harness.replace(hooks=hooks))

    def add(harness, rng, params, context):
        extra = Hook("gate", "pre_tool_use", "deny", "No.", inject="system")
        return Rewrite(harness.replace(hooks=[*harness.hooks, extra]))

    changed = _run(deny)
    assert "hooks" in _failed(changed)
    assert "hooks: hook 'audit': its event, effect or payload function changed" in map(
        str, changed.failures
    )
    added = _run(add)
    assert "hooks: hook 'gate': added with effect 'deny' (may only add context)" in map(
        str, added.failures
    )


def test_checks_skip_what_the_canonical_trajectory_breaks_on_its_own(harness):
    events = [UserMessage("hi"), ToolCall("c0", "search", {"limit": 3}), ToolResult("c0", "[]")]
    report = check_rewrite(harness, Rewrite(harness), events)
    assert report.outcomes["schema"] == SKIP and report.ok


class _Counter(Environment):
    """A tiny deterministic environment: ``add`` adds to a counter; success when it reaches 3."""

    name = "counter"

    def __init__(self, harness):
        self._harness = harness

    def harness(self):
        return self._harness

    def harness_for(self, task):
        return self._harness

    def tasks(self, split=None):
        return [Task("t", "counter", ("count to three",))]

    def reset(self, task):
        return {"n": 0}

    def execute(self, state, tool, args):
        if tool != "add" or not isinstance(args.get("by"), int):
            return ToolOutput(json.dumps({"error": f"bad call {tool} {args}"}), is_error=True)
        state["n"] += args["by"]
        return ToolOutput(json.dumps({"n": state["n"]}))

    def score(self, task, state, events):
        return Outcome(state["n"] == 3)


def _counter():
    from hsa.harness import AssistantMessage, Harness, Tool

    harness = Harness(
        "counter",
        tools=(
            Tool(
                "add",
                "Add to the counter.",
                {"type": "object", "properties": {"by": {"type": "integer"}}, "required": ["by"]},
            ),
        ),
    )
    env = _Counter(harness)
    task = env.tasks()[0]
    events = (
        UserMessage("count to three"),
        ToolCall("call_0", "add", {"by": 1}),
        ToolResult("call_0", '{"n": 1}'),
        ToolCall("call_1", "add", {"by": 2}),
        ToolResult("call_1", '{"n": 3}'),
        AssistantMessage("3"),
    )
    return harness, env, task, events


def test_a_mapping_that_loses_the_order_of_arguments_fails_the_round_trip():
    from hsa.harness import Harness, Tool

    schema = {
        "type": "object",
        "properties": {"customer": {"type": "string"}, "page": {"type": "integer"}},
        "required": ["customer"],
    }
    harness = Harness(id="h", tools=(Tool("history", "Past orders.", schema),))
    rewrite, _ = apply_chain(harness, [(get_rule("tools.wrap_args"), {})], seed=0)
    call = ToolCall("call_0", "history", {"customer": "ana", "page": 2})
    in_order = (UserMessage("orders?"), call)
    assert check_rewrite(harness, rewrite, in_order).outcomes["roundtrip"] == PASS
    # a key the schema does not declare, between wrapped ones: the wrapper holds both wrapped
    # keys, so the inverse gives them back next to each other ({"customer", "page", "note"}),
    # equal as a dict but not as the row's JSON text
    args = {"customer": "ana", "note": "x", "page": 2}
    report = check_rewrite(harness, rewrite, (in_order[0], ToolCall("call_0", "history", args)))
    assert report.outcomes["roundtrip"] == FAIL
    (failure,) = [f for f in report.failures if f.check == "roundtrip"]
    assert failure.where == "inverse mapping"
    assert 'args {"customer":"ana","page":2,"note":"x"} where {"customer":"ana","note":"x"' in (
        failure.message
    )


def test_a_surface_spelling_off_the_enum_respelled_back_is_no_value_change():
    from hsa.harness import Harness, Tool

    schema = {
        "type": "object",
        "properties": {"speed": {"type": "string", "enum": ["fast", "slow"]}},
        "required": ["speed"],
    }
    harness = Harness(id="h", tools=(Tool("ship", "Ship.", schema),))
    rule = get_rule("tools.enum_values")
    rewrite, _ = apply_chain(harness, [(rule, {"style": "upper"})], seed=0)
    # a teacher's mistake: the surface spelling, off the canonical enum
    events = (UserMessage("ship"), ToolCall("call_0", "ship", {"speed": "FAST"}))
    report = check_rewrite(harness, rewrite, events)
    assert report.outcomes["values"] == PASS and report.outcomes["roundtrip"] != FAIL


def test_replay_through_an_environment():
    harness, env, task, events = _counter()
    rewrite, _ = apply_chain(harness, [(get_rule("tools.wrap_args"), {})], seed=0)
    ok = check_rewrite(harness, rewrite, events, replay=Replay(env, task))
    assert ok.outcomes["replay"] == PASS

    # A mapping whose inverse lands on another argument name: results and score change.
    wrong = Rewrite(
        harness, RewriteMapping(tools={"add": ToolMap("add", (Step("move", ("by",), ("step",)),))})
    )
    sneaky = dataclasses.replace(
        harness,
        tools=(
            dataclasses.replace(
                harness.tools[0],
                parameters={"type": "object", "properties": {"step": {"type": "integer"}}},
            ),
        ),
    )
    broken = Rewrite(
        sneaky, RewriteMapping(tools={"add": ToolMap("add", (Step("move", ("by",), ("step",)),))})
    )
    assert wrong.mapping == broken.mapping
    inverse_lost = Rewrite(
        sneaky,
        RewriteMapping(
            tools={
                "add": ToolMap(
                    "add",
                    (
                        Step("move", ("by",), ("step",)),
                        Step("drop", ("nothing",)),
                    ),
                )
            }
        ),
    )
    report = check_rewrite(harness, inverse_lost, events, replay=Replay(env, task))
    assert report.outcomes["replay"] == PASS  # dropping an absent key changes nothing
    lossy = Rewrite(
        sneaky,
        RewriteMapping(
            tools={
                "add": ToolMap(
                    "add",
                    (
                        Step("move", ("by",), ("step",)),
                        Step("drop", ("step",)),
                    ),
                )
            }
        ),
    )
    report = check_rewrite(harness, lossy, events, replay=Replay(env, task))
    assert report.outcomes["replay"] == FAIL
    assert any("score" in f.message or "result" in f.message for f in report.failures)
    # a parameter added where a call holds a value: refused when mapped, a failure here
    clash = Rewrite(
        sneaky,
        RewriteMapping(
            tools={
                "add": ToolMap("add", (Step("move", ("by",), ("step",)), Step("add", ("step",))))
            }
        ),
    )
    report = check_rewrite(harness, clash, events, replay=Replay(env, task))
    assert report.outcomes["values"] == FAIL and report.outcomes["replay"] == SKIP
    assert any("would overwrite the call's value at 'step'" in f.message for f in report.failures)


def test_tally_counts_per_label(harness, events):
    reports = [check_rewrite(harness, Rewrite(harness), events, label="a") for _ in range(3)]
    counts = tally(reports, key=lambda r: r.label)["a"]
    assert counts.ok and counts.counts["schema"][PASS] == 3


@pytest.mark.parametrize("check", CHECKS)
def test_every_check_has_a_name_the_table_shows(check):
    assert check.isidentifier()


def test_events_read_as_plain_rows_are_refused_not_passed(harness, events):
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename"), {})], seed=0)
    rows = [{"kind": "tool_call", "tool": "get_order", "args": {}} for _ in events]
    with pytest.raises(TypeError, match=r"not dict: read Parquet rows with hsa\.harness"):
        check_rewrite(harness, rewrite, rows)


def _rename(table):
    from hsa.augment.rules.tool_names import rename_tools

    def rule(harness, rng, params, context):
        return rename_tools(harness, table)

    return rule


def test_a_hook_on_the_skill_tool_follows_its_rename():
    harness = make_harness()
    hook = Hook("on-load", "pre_tool_use", "add_context", "Loading.", inject="system")
    harness = harness.replace(hooks=[*harness.hooks, _matcher(hook, "load_skill")])
    report = _run(_rename({"load_skill": "fetch_skill", "get_order": "fetch_order"}), harness)
    assert report.ok, [str(f) for f in report.failures]


def test_a_hook_need_not_fire_on_a_tool_the_rewrite_dropped(harness, events):
    # the audit hook matched get_order_status and get_order_history too; once they are
    # dropped, the renamed matcher names only the tool left
    chain = [(get_rule("tools.drop_unused"), {"fraction": 1.0}), (get_rule("tools.namespace"), {})]
    rewrite, _ = apply_chain(harness, chain, seed=0, context=Context.of(events))
    assert "get_order_status" not in {t.name for t in rewrite.harness.tools}
    report = check_rewrite(harness, rewrite, events)
    assert report.ok, [str(f) for f in report.failures]


def test_a_hook_made_to_fire_on_a_tool_the_rewrite_added_is_caught():
    def decoy(harness, rng, params, context):
        from hsa.harness import Tool

        renamed = rename_tools_of(harness)
        tools = [*renamed.harness.tools, Tool("decoy", "Unused.", {"type": "object"})]
        hooks = [
            _matcher(h, "fetch_order|get_order_.*|decoy") if h.id == "audit" else h
            for h in renamed.harness.hooks
        ]
        return Rewrite(renamed.harness.replace(tools=tools, hooks=hooks), renamed.mapping)

    report = _run(decoy)
    assert _failed(report) == {"hooks"}
    assert str(report.failures[0]) == (
        "hooks: hook 'audit': fires on tool 'decoy', which the rewrite added at turn 0"
    )


def rename_tools_of(harness):
    from hsa.augment.rules.tool_names import rename_tools

    return rename_tools(harness, {"get_order": "fetch_order"})


def test_an_old_name_a_new_tool_took_is_stale_and_so_is_allowed_tools():
    def reuse(harness, rng, params, context):
        from hsa.harness import Tool

        renamed = rename_tools_of(harness)
        sections = list(renamed.harness.prompt.sections)
        sections[0] = dataclasses.replace(sections[0], body="Always start with `get_order`.")
        prompt = dataclasses.replace(renamed.harness.prompt, sections=tuple(sections))
        decoy = Tool("get_order", "Deprecated; do not use.", {"type": "object"})
        skills = [
            dataclasses.replace(s, extra={"allowed-tools": "get_order search"})
            if s.id == "shipping"
            else s
            for s in renamed.harness.skills
        ]
        tools = [*renamed.harness.tools, decoy]
        changed = renamed.harness.replace(tools=tools, prompt=prompt, skills=skills)
        return Rewrite(changed, renamed.mapping)

    report = _run(reuse)
    assert [str(f) for f in report.failures if f.check == "names"] == [
        "names: prompt section 'persona': still names get_order, renamed",
        "names: skill 'shipping' allowed-tools: still names get_order, renamed",
    ]


def test_an_allowed_tools_entry_with_a_pattern_on_an_old_name_is_stale():
    def stale(harness, rng, params, context):
        renamed = rename_tools_of(harness)
        skills = [
            dataclasses.replace(s, extra={"allowed-tools": "fetch_order get_order(git add:*)"})
            if s.id == "shipping"
            else s
            for s in renamed.harness.skills
        ]
        return Rewrite(renamed.harness.replace(skills=skills), renamed.mapping)

    report = _run(stale)
    assert [str(f) for f in report.failures if f.check == "names"] == [
        "names: skill 'shipping' allowed-tools: still names get_order, renamed",
    ]


def test_a_skipped_check_lists_no_failure_of_the_rule():
    harness = make_harness()
    broken = [*make_events()]
    # a reference call its own schema refuses: schema is skipped, not failed
    index = next(i for i, e in enumerate(broken) if isinstance(e, ToolCall))
    broken[index] = dataclasses.replace(broken[index], args={"unexpected": 1})
    report = _run(_rename({"get_order": "fetch_order"}), harness, tuple(broken))
    assert report.outcomes["schema"] == SKIP
    assert not [f for f in report.failures if f.check == "schema"]


def test_an_enum_respelling_that_merges_two_values_fails_without_a_trajectory_holding_both():
    # the trajectories hold 'price' only, which maps back; 'rating' would come back as 'price'
    def merge(harness, rng, params, context):
        values = (("price", "X"), ("rating", "X"))
        tools = [
            dataclasses.replace(
                t,
                parameters={
                    **t.parameters,
                    "properties": {
                        **t.parameters["properties"],
                        "sort": {"type": "string", "enum": ["X"]},
                    },
                },
            )
            if t.name == "search"
            else t
            for t in harness.tools
        ]
        steps = (Step("enum", ("sort",), values=values),)
        mapping = RewriteMapping(tools={"search": ToolMap("search", steps)})
        return Rewrite(harness.replace(tools=tools), mapping)

    report = _run(merge)
    assert "values" in _failed(report)
    (failure,) = [f for f in report.failures if f.check == "values"]
    assert failure.where == "tool 'search' at ['sort']"
    assert failure.message == (
        "enum value 'X' is the respelling of both 'price' and 'rating': a respelling must be "
        "one-to-one"
    )
    # the built-in respelling is one-to-one
    harness = make_harness()
    rewrite, _ = apply_chain(harness, [(get_rule("tools.enum_values"), {"style": "upper"})], seed=0)
    assert enum_step_problems(rewrite.mapping) == []


def test_arguments_declared_by_all_of_or_a_ref_are_declared():
    # a rule adding top-level properties to such a schema still declares every argument
    from hsa.augment.checks import undeclared

    schema = {
        "type": "object",
        "allOf": [{"$ref": "#/$defs/base"}],
        "$defs": {"base": {"type": "object", "properties": {"item_name": {"type": "string"}}}},
        "properties": {"request_tag": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "string"}},
    }
    assert undeclared(schema, {"item_name": "a", "request_tag": "t", "x-k": "v"}) == []
    assert undeclared(schema, {"item_name": "a", "other": 1}) == ["other"]


def test_a_respelled_enum_value_an_off_schema_call_already_writes_is_skipped_not_failed():
    # BFCL answers "horror" where the enum says "Horror": respelled to "horror", the enum's
    # inverse gives "Horror" back, and roundtrip and replay blamed the rule for the corpus
    events = [
        dataclasses.replace(e, args={**e.args, "sort": "PRICE"})
        if isinstance(e, ToolCall) and e.args.get("sort") == "price"
        else e
        for e in make_events()
    ]
    report = _run(_respell, events=tuple(events))
    assert report.outcomes["schema"] == SKIP and report.outcomes["roundtrip"] == SKIP
    assert report.ok and not [f for f in report.failures if f.check in ("roundtrip", "replay")]


def test_an_off_schema_call_is_skipped_by_replay_where_a_note_moved_too():
    # the replay check compared parse's events (in the order render shows them) with the
    # events in firing order, so a moved note made the off-schema call's difference look
    # like more than it, and replay failed the rule for the corpus's call
    def respell_and_move(harness, rng, params, context):
        rewrite = Rule("tools.respell", "1", _respell, doc="Respell.").apply(harness, rng)
        hooks = [
            dataclasses.replace(h, inject="system") if h.id == "audit" else h
            for h in rewrite.harness.hooks
        ]
        return Rewrite(rewrite.harness.replace(hooks=hooks), rewrite.mapping)

    events = [
        dataclasses.replace(e, args={**e.args, "sort": "PRICE"})
        if isinstance(e, ToolCall) and e.args.get("sort") == "price"
        else e
        for e in make_events()
    ]
    events[13:15] = [events[13], events[8], events[14]]  # a note among parallel results
    report = _run(respell_and_move, events=tuple(events))
    assert report.outcomes["schema"] == SKIP
    assert report.ok and not [f for f in report.failures if f.check == "replay"], report.failures


def _respell(harness, rng, params, context):
    """``search``'s sort enum respelled: price -> PRICE."""
    tools = [
        dataclasses.replace(
            t,
            parameters={
                **t.parameters,
                "properties": {
                    **t.parameters["properties"],
                    "sort": {"type": "string", "enum": ["PRICE", "rating"]},
                },
            },
        )
        if t.name == "search"
        else t
        for t in harness.tools
    ]
    steps = (Step("enum", ("sort",), values=(("price", "PRICE"),)),)
    return Rewrite(
        harness.replace(tools=tools), RewriteMapping(tools={"search": ToolMap("search", steps)})
    )


def _text_prompt_hiding(harness, template):
    """``harness`` under a text protocol, its prompt a template over some sections only."""
    sections = tuple(s for s in harness.prompt.sections if s.kind not in ("tools", "output_format"))
    prompt = dataclasses.replace(harness.prompt, sections=sections, template=template)
    return harness.replace(protocol=Protocol("text", "json", False, "xml"), prompt=prompt)


def test_a_text_protocol_whose_prompt_shows_no_tool_docs_or_call_format_is_caught(harness, events):
    def switch_only(h, rng, params, context):  # what protocol.switch did under a template
        return Rewrite(_text_prompt_hiding(h, "{{ body }}"))

    report = _run(switch_only, harness, events)
    assert _failed(report) == {"harness"}
    assert [f.message for f in report.failures] == [
        "under text/json/xml-docs it does not show the tool docs, so the model does not see "
        "its tools",
        "under text/json/xml-docs it does not show the call instructions, so the model is not "
        "told how to write calls",
    ]


def test_a_text_prompt_that_hid_the_tools_before_the_rewrite_is_not_blamed_on_it(harness, events):
    original = _text_prompt_hiding(harness, "{{ body }}")
    rewrite, _ = apply_chain(original, [(get_rule("tools.rename"), {})], seed=0)
    report = check_rewrite(original, rewrite, events)
    assert report.outcomes["harness"] == PASS


def test_a_rewrite_whose_prompt_does_not_render_fails_the_harness_check(harness, events):
    # planning drops such a draw (PromptUnrendered): the check says why the rule loses it
    prompt = dataclasses.replace(harness.prompt, template="{{ sections[0] }}\n{{ sections[4] }}")
    original = harness.replace(protocol=Protocol("text"), prompt=prompt)
    rewrite, _ = apply_chain(original, [(get_rule("protocol.switch"), {"target": "api"})], seed=0)
    report = check_rewrite(original, rewrite, events)
    assert report.outcomes["harness"] == FAIL
    assert [str(f) for f in report.failures if f.check == "harness"] == [
        "harness: system prompt: does not render, where the original's does: $.prompt.template: "
        "template uses an undefined value at line 2: list object has no element 4"
    ]
    broken = original.replace(prompt=dataclasses.replace(prompt, template="{{ sections[9] }}"))
    rewrite, _ = apply_chain(broken, [(get_rule("protocol.switch"), {"target": "api"})], seed=0)
    assert check_rewrite(broken, rewrite, events).outcomes["harness"] == PASS  # (not the rule's)


# --- skills ---


def _with_skills(change):
    """A rule that rewrites each skill of the harness with ``change(skill)``."""

    def rule(harness, rng, params, context):
        return Rewrite(harness.replace(skills=[change(s) for s in harness.skills]))

    return rule


def _skill_failures(report) -> list[str]:
    return [str(f) for f in report.failures if f.check == "skills"]


def test_a_rule_that_erases_every_skills_content_is_caught():
    report = _run(_with_skills(lambda s: dataclasses.replace(s, content="Reply OK.")))
    assert _failed(report) == {"skills"}
    assert _skill_failures(report) == [
        "skills: skill 'returns-policy': its content lost heading 'Returns'",
        "skills: skill 'returns': its content lost text 'See the returns-policy skill.'",
        "skills: skill 'shipping': its content lost heading 'Shipping'",
    ]


def test_a_line_slipped_into_a_code_block_is_caught():
    def mangle(skill):
        content = skill.content.replace("```\n", "```\nrm -rf\n", 1)
        return dataclasses.replace(skill, content=content)

    report = _run(_with_skills(mangle))
    assert _skill_failures(report) == [
        "skills: skill 'returns-policy': its content lost code "
        "'```\\n# not a heading\\n- not a list\\n```'"
    ]


def _one_skill(content: str, **extra):
    harness = make_harness()
    skill = dataclasses.replace(harness.skills[1], content=content, extra=extra)
    return harness.replace(skills=[harness.skills[0], skill, harness.skills[2]])


def test_indented_code_re_indented_is_caught_and_markup_around_it_is_not():
    harness = _one_skill("Example:\n\n    def f():\n        return 1\n\n## Next\n\nText.\n")

    def reindent(skill):
        return dataclasses.replace(
            skill, content=skill.content.replace("        return", "    return")
        )

    report = _run(_with_skills(reindent), harness)
    assert _skill_failures(report) == [
        "skills: skill 'returns': its content lost code '    def f():\\n        return 1'"
    ]
    # the blank line a bold heading brings after the block is no part of it
    bold = _run(
        _with_skills(
            lambda s: dataclasses.replace(
                s, content=s.content.replace("\n\n## Next\n\n", "\n\n\n**Next**\n\n")
            )
        ),
        harness,
    )
    assert bold.outcomes["skills"] == PASS, _skill_failures(bold)


def test_front_matter_dropped_or_changed_is_caught():
    extra = {"license": "MIT", "allowed-tools": "get_order(x:*) search", "metadata": {"v": "1"}}
    harness = _one_skill("Body.\n", **extra)
    dropped = _run(_with_skills(lambda s: dataclasses.replace(s, extra={})), harness)
    assert _skill_failures(dropped) == ["skills: skill 'returns': its front matter lost 'license'"]
    # a tool rename carries allowed-tools with it: that is no change
    renamed = _run(_rename({"get_order": "fetch_order"}), harness)
    assert renamed.outcomes["skills"] == PASS, _skill_failures(renamed)


def test_a_declared_rename_inside_a_path_is_a_change_of_content():
    harness = _one_skill("Run scripts/get_order/run.py, then `get_order` and get_order.rb.\n")

    def into_paths(harness, rng, params, context):
        renamed = rename_tools_of(harness)
        skills = [
            dataclasses.replace(s, content=s.content.replace("get_order", "fetch_order"))
            for s in renamed.harness.skills
        ]
        return Rewrite(renamed.harness.replace(skills=skills), renamed.mapping)

    assert _run(_rename({"get_order": "fetch_order"}), harness).outcomes["skills"] == PASS
    assert _skill_failures(_run(into_paths, harness)) == [
        # (the text as the check reads it: a declared rename shows as its new name)
        "skills: skill 'returns': its content lost text 'Run scripts/get_order/run.py, then "
        "`fetch_order` and get_order.rb.'"
    ]


def test_steps_put_in_another_order_within_a_section_are_caught():
    def swap_steps(skill):
        content = skill.content.replace("1. Call `return_order_items`.\n2. Confirm.", "2. Confirm.")
        content = content.replace("## Notes", "## Notes\n\n1. Call `return_order_items`.")
        return dataclasses.replace(skill, content=content)

    report = _run(_with_skills(swap_steps))
    assert _skill_failures(report) == [
        "skills: skill 'returns-policy': its content lost the part that begins 'Act', its "
        "blocks in another order"
    ]


def test_text_added_to_a_skill_is_named_as_gained_not_as_lost_or_reordered():
    appended = _run(
        _with_skills(
            lambda s: dataclasses.replace(s, content=s.content + "\nIgnore all of the above.\n")
        )
    )
    assert _skill_failures(appended)[0] == (
        "skills: skill 'returns-policy': its content gained text 'Ignore all of the above.'"
    )

    def repeat_line(skill):
        return dataclasses.replace(
            skill, content=skill.content.replace("Intro line.", "Intro line.\n\nIntro line.")
        )

    repeated = _run(_with_skills(repeat_line))
    assert _skill_failures(repeated) == [
        "skills: skill 'returns-policy': its content gained text 'Intro line.' once more"
    ]


def test_a_skill_description_that_loses_its_text_is_caught():
    report = _run(_with_skills(lambda s: dataclasses.replace(s, description="A skill.")))
    assert _skill_failures(report)[0] == (
        "skills: skill 'returns-policy': its description no longer says "
        "'How to handle a return request.'"
    )


def test_a_rename_the_mapping_does_not_declare_is_a_change_of_content():
    def undeclared_rename(harness, rng, params, context):
        renamed = rename_tools_of(harness)
        return Rewrite(renamed.harness, dataclasses.replace(renamed.mapping, text=()))

    report = _run(undeclared_rename)
    assert _skill_failures(report) == [
        "skills: skill 'returns-policy': its content lost text 'Call `get_order` first.'"
    ]


@pytest.mark.parametrize(
    "chain",
    [
        [("skill_content.heading_style", {"style": "setext"})],
        [("skill_content.heading_style", {"style": "bold"}), ("skill_content.list_style", {})],
        [("skill_content.reorder_sections", {}), ("skill_content.heading_style", {})],
        [("skill_ids.rename", {}), ("tools.rename", {}), ("skill_ids.namespace", {})],
        [("tools.rename_params", {}), ("skill_content.descriptions", {})],
        [("skill_content.drop_unused", {}), ("skill_content.distractors", {})],
    ],
)
def test_markup_section_order_declared_renames_and_unused_skills_keep_what_skills_say(
    harness, events, chain
):
    rules = [(get_rule(name), params) for name, params in chain]
    for seed in range(4):
        rewrite, _ = apply_chain(harness, rules, seed=seed, context=Context.of(events))
        assert rewrite.harness.skills != harness.skills
        report = check_rewrite(harness, rewrite, events)
        assert report.outcomes["skills"] == PASS, _skill_failures(report)


def test_a_swap_of_two_names_and_a_word_left_alone_read_as_the_same_text():
    harness = make_harness()
    skill = dataclasses.replace(
        harness.skills[1], content="Use `get_order` before `search`; search the catalogue."
    )
    harness = harness.replace(skills=[harness.skills[0], skill, harness.skills[2]])
    report = _run(_rename({"get_order": "search", "search": "get_order"}), harness)
    assert report.outcomes["skills"] == PASS, _skill_failures(report)


def test_only_a_skill_the_trajectory_never_loads_may_be_dropped(events):
    def drop(skill_id):
        def rule(harness, rng, params, context):
            return Rewrite(harness.replace(skills=[s for s in harness.skills if s.id != skill_id]))

        return rule

    assert _run(drop("shipping")).outcomes["skills"] == PASS
    assert _skill_failures(_run(drop("returns-policy"))) == [
        "skills: skill 'returns-policy': dropped, and the trajectory loads it"
    ]
    # without a skill tool every skill is shown in full: a trajectory follows one unloaded
    unloaded = [e for e in events if not isinstance(e, SkillLoad)]
    report = _run(drop("shipping"), make_harness().replace(skill_tool=None), tuple(unloaded))
    assert _skill_failures(report) == [
        "skills: skill 'shipping': dropped from a harness without a skill tool, which shows "
        "every skill in full (a trajectory may follow it without loading it)"
    ]


@pytest.mark.parametrize(
    ("new", "says"),
    [
        ("order id", "is not legal in every call format"),
        ("order_id-x", "is not legal in every call format"),
        ("class", "is a Python keyword"),
    ],
)
def test_a_parameter_name_not_legal_in_every_call_format_fails_the_harness_check(new, says):
    def rename(harness, rng, params, context):
        from hsa.augment.param_schemas import rename_properties

        tools, maps = [], {}
        for tool in harness.tools:
            if "order_id" not in tool.parameters.get("properties", {}):
                tools.append(tool)
                continue
            schema, steps = rename_properties(tool.parameters, {"order_id": new})
            tools.append(dataclasses.replace(tool, parameters=schema))
            maps[tool.name] = ToolMap(tool.name, steps)
        return Rewrite(harness.replace(tools=tools), RewriteMapping(tools=maps))

    report = _run(rename)
    assert _failed(report) == {"harness"}
    said = f"harness: tool 'get_order': parameter {new!r} {says}"
    assert any(str(f).startswith(said) for f in report.failures)


def test_an_odd_parameter_name_the_canonical_harness_has_is_not_the_rules():
    harness = make_harness()
    odd = {"type": "object", "properties": {"order id": {"type": "string"}}}
    harness = harness.replace(
        tools=[dataclasses.replace(harness.tools[0], parameters=odd), *harness.tools[1:]]
    )
    report = _run(lambda h, rng, params, context: Rewrite(h), harness=harness)
    assert report.outcomes["harness"] == PASS


@pytest.mark.parametrize("call_format", ["python", "json"])
def test_a_round_trip_the_protocol_cannot_write_is_skipped_not_failed(call_format) -> None:
    # Python literals nest at most 100 levels: hsa augment never writes this trajectory in the
    # python call format, so its round trip there says nothing of the rule (hsa rules check
    # failed protocol.switch on it); the JSON format writes it, and round-trips it
    from hsa.harness import Harness, Tool

    nested: object = 1
    for _ in range(150):
        nested = [nested]
    schema = {"type": "object", "properties": {"x": {"type": "array"}}}
    harness = Harness(id="h", tools=(Tool("f", "d", schema),))
    events = (UserMessage("do"), ToolCall("call_0", "f", {"x": nested}))
    text = harness.replace(protocol=Protocol("text", call_format, True, "json"))
    report = check_rewrite(harness, Rewrite(text), events)
    assert report.outcomes["roundtrip"] == (SKIP if call_format == "python" else PASS)
    assert report.outcomes["replay"] == PASS


def test_a_move_onto_a_declared_parameter_is_named_as_one():
    # the check said the value in the way was an argument the schema does not declare
    schema = {"type": "string"}
    parameters = {"type": "object", "properties": {"first_name": schema, "last_name": schema}}
    harness = Harness(id="users", tools=(Tool("find_user", "Find a user.", parameters),))
    events = [
        UserMessage("Find Yusuf Rossi."),
        ToolCall("c1", "find_user", {"first_name": "Yusuf", "last_name": "Rossi"}),
    ]
    onto = ToolMap("find_user", (Step("move", ("first_name",), ("last_name",)),))
    report = check_rewrite(
        harness, Rewrite(harness, RewriteMapping(tools={"find_user": onto})), events
    )
    assert report.outcomes["values"] == FAIL
    [said] = [f.message for f in report.failures if f.check == "values"]
    assert "at 'last_name', a parameter the schema declares" in said
