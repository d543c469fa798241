"""parse(render(events, harness), harness) == events, for the api protocol and every text protocol.

Each protocol gets 500 derandomized examples. Harnesses vary everything else (doc format,
heading style, prompt placement, custom prompt templates, skills and skill tools, hooks at every
injection position with and without wrappers); events mix user and assistant text (with
reasoning), parallel calls, skill loads, results in any order and hook firings, with texts and
argument values that look like JSON, like calls in every format and like tags.

Some event lists cannot round-trip because another event list renders to exactly the same
conversation (an assistant text that is itself a call message, a user text that is a hook's
message, ...). ``ambiguity`` in ``strategies.py`` names each such case; the property ``assume``s
it away and nothing else. ``test_ambiguous_cases_are_rare`` keeps that exclusion honest.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hsa.errors import HarnessValidationError, ProtocolError, TemplateError
from hsa.harness import (
    AssistantMessage,
    Harness,
    Hook,
    HookFired,
    Matcher,
    Prompt,
    Protocol,
    Section,
    Skill,
    SkillLoad,
    Tool,
    ToolCall,
    ToolResult,
    UserMessage,
    loads_harness,
    normalize_call_ids,
    parse,
    render,
)
from hsa.harness.model import CALL_FORMATS
from hsa.harness.render import as_shown, shown_order, wrap
from hsa.harness.validate import harness_problems
from tests.apart import runs_apart
from tests.harness.strategies import (
    ambiguity,
    events,
    harness_and_events,
    harnesses,
    protocols,
    same_events,
)
from tests.harness.strategies import hooks as hook_lists

# Hermes has its own <tool_call> tag and ignores call_tag (test_protocols checks that), so it
# runs once; every BFCL format runs with and without <TOOLCALL>.
PROTOCOLS = [("api", None), ("hermes", None)] + [
    (fmt, tag) for fmt in CALL_FORMATS if fmt != "hermes" for tag in (False, True)
]


def _label(fmt: str, tag: bool | None) -> str:
    return fmt if tag is None else f"{fmt}{'+tag' if tag else '-notag'}"


def _protocol_strategy(fmt: str, tag: bool | None) -> st.SearchStrategy[Protocol]:
    if fmt == "api":
        return protocols(name="api")
    return protocols(name="text", call_format=fmt, call_tag=tag)  # doc format varies


@pytest.mark.parametrize(
    ("fmt", "tag"),
    PROTOCOLS,
    ids=[f"{f}{'' if t is None else '+tag' if t else '-tag'}" for f, t in PROTOCOLS],
)
@settings(
    # 300 fixed examples a protocol, 3,600 in all (500 took 73 s of the suite's two workers)
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_parse_inverts_render(fmt: str, tag: bool | None, data: st.DataObject) -> None:
    # Under api, call ids travel in the conversation, so any distinct ids must survive.
    harness, evs = data.draw(
        harness_and_events(_protocol_strategy(fmt, tag), normalized=fmt != "api")
    )
    assume(ambiguity(evs, harness) is None)
    conversation = render(evs, harness)
    # hook notes fired among the results of one message's calls are shown after the last
    shown = as_shown(evs, harness)
    assert same_events(parse(conversation, harness), shown)
    # The conversation is plain JSON and parses the same from its stored form.
    stored = json.loads(json.dumps(conversation.to_dict(), ensure_ascii=False))
    assert same_events(parse(stored, harness), shown)
    assert render(evs, harness) == conversation  # deterministic
    assert render(shown, harness) == conversation


@settings(max_examples=200, derandomize=True, deadline=None)
@given(data=st.data())
def test_parse_inverts_render_with_random_harness_parts(data: st.DataObject) -> None:
    """Random tools, hook messages, wrappers, prompts and skill tools instead of the pools."""
    harness = data.draw(harnesses(rich=True))
    evs = data.draw(events(harness, normalized=not harness.protocol.is_api))
    assume(ambiguity(evs, harness) is None)
    assert same_events(parse(render(evs, harness), harness), as_shown(evs, harness))


@settings(max_examples=25, derandomize=True, deadline=None)
@given(data=st.data())
def test_ambiguous_cases_are_rare(data: st.DataObject) -> None:
    """The exclusion must not swallow the property: most drawn trajectories are unambiguous."""
    clear = 0
    for i in range(10):
        harness, evs = data.draw(harness_and_events(), label=f"case {i}")
        clear += ambiguity(evs, harness) is None
    assert clear >= 7


@settings(max_examples=200, derandomize=True, deadline=None)
@given(data=st.data())
def test_text_protocols_number_calls(data: st.DataObject) -> None:
    """Text protocols regenerate ids in normal form: parsing equals normalising the input."""
    harness = data.draw(harnesses(protocol=protocols(name="text")))
    evs = data.draw(events(harness, normalized=False))
    assume(ambiguity(evs, harness) is None)
    # Results keep the ids they were rendered with, so only the call side is normalised here.
    parsed = parse(render(evs, harness), harness)
    calls = [e for e in parsed if isinstance(e, ToolCall)]
    skill_and_calls = [e for e in parsed if isinstance(e, ToolCall | SkillLoad)]
    assert [c.call_id for c in calls] == [
        f"call_{i}" for i, e in enumerate(skill_and_calls) if isinstance(e, ToolCall)
    ]
    shown = as_shown(evs, harness)  # (a note among parallel results shows after the last)
    assert same_events(
        normalize_call_ids([e for e in parsed if not isinstance(e, ToolResult)]),
        normalize_call_ids([e for e in shown if not isinstance(e, ToolResult)]),
    )


# --- examples that pin the surface form -------------------------------------------------------

WEATHER = Tool(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
LOADER = Tool(
    "load_skill",
    "Load a skill.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
REMINDER = Hook(
    id="remind",
    event="post_tool_use",
    effect="add_context",
    message="Checked {{ tool }}.",
    inject="tool_result",
    wrapper="system-reminder",
)


def _harness(protocol: Protocol, **changes) -> Harness:
    base = Harness(
        id="demo",
        protocol=protocol,
        prompt=Prompt(sections=(Section("persona", "Persona", "You help."),)),
        tools=(WEATHER,),
        skills=(Skill("travel", "travel", "Trips.", "Pack light."),),
        hooks=(REMINDER,),
        skill_tool=LOADER,
    )
    return base.replace(**changes)


TURN = [
    UserMessage("Weather in Paris?"),
    AssistantMessage("Checking.", reasoning="need weather"),
    SkillLoad("travel"),
    ToolCall("call_1", "get_weather", {"city": "Paris"}),
    ToolResult("call_1", "sunny"),
    HookFired("remind", "post_tool_use", {"tool": "get_weather"}),
    AssistantMessage("Sunny."),
]


def test_api_surface() -> None:
    conversation = render(TURN, _harness(Protocol("api")))
    assert conversation.messages[1:] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "need weather",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "load_skill", "arguments": '{"name": "travel"}'},
                },
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "Pack light."},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "sunny\n<system-reminder>\nChecked get_weather.\n</system-reminder>",
        },
        {"role": "assistant", "content": "Sunny."},
    ]
    assert [t["function"]["name"] for t in conversation.tools] == ["get_weather", "load_skill"]
    assert parse(conversation, _harness(Protocol("api"))) == TURN


def test_untagged_format_puts_text_in_its_own_message() -> None:
    harness = _harness(Protocol("text", "python", call_tag=False))
    messages = render(TURN, harness).messages
    assert messages[2] == {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "need weather",
    }
    assert messages[3] == {
        "role": "assistant",
        "content": "[load_skill(name='travel'), get_weather(city='Paris')]",
    }
    assert parse(render(TURN, harness), harness) == TURN


def test_tagged_format_keeps_text_and_calls_together() -> None:
    harness = _harness(Protocol("text", "json", call_tag=True))
    messages = render(TURN, harness).messages
    assert messages[2]["content"] == (
        "Checking.\n<TOOLCALL>```json\n"
        '[{"function":"load_skill","parameters":{"name":"travel"}},'
        '{"function":"get_weather","parameters":{"city":"Paris"}}]\n```</TOOLCALL>'
    )
    assert parse(render(TURN, harness), harness) == TURN


@pytest.mark.parametrize(
    ("fmt", "tag"), [("python", False), ("json", True), ("hermes", None), ("xml_concise", False)]
)
def test_empty_text_before_calls_is_no_message_of_its_own(fmt: str, tag: bool | None) -> None:
    # reasoning with no text before calls (an OpenAI log's content: null, a reasoning model's
    # reply): the calls and the reasoning are one assistant message under every text format,
    # never an empty message and then the calls (a first-call view would cut the calls off)
    events = [
        UserMessage("Weather in Paris?"),
        AssistantMessage("", "need weather"),
        ToolCall("call_0", "get_weather", {"city": "Paris"}),
        ToolResult("call_0", "sunny"),
    ]
    harness = _harness(Protocol("text", fmt, call_tag=tag))
    messages = render(events, harness).messages
    turns = [m for m in messages if m["role"] == "assistant"]
    assert len(turns) == 1 and turns[0]["reasoning_content"] == "need weather"
    assert "get_weather" in turns[0]["content"] and not turns[0]["content"].startswith("\n")
    assert parse(render(events, harness), harness) == events


def test_hook_after_skill_load_attaches_to_the_skill_result() -> None:
    events = [
        UserMessage("hi"),
        SkillLoad("travel"),
        HookFired("remind", "post_tool_use", {"tool": "load_skill"}),
    ]
    for protocol in (Protocol("api"), Protocol("text", "hermes")):
        harness = _harness(protocol)
        conversation = render(events, harness)
        assert conversation.messages[-1]["content"].startswith("Pack light.\n<system-reminder>")
        assert parse(conversation, harness) == events


NOTE = Hook(
    id="note",
    event="post_tool_use",
    effect="add_context",
    message="Ran {{ tool }}.",
    inject="system",
    wrapper="note",
)


def _parallel(*hooks: HookFired) -> list:
    """Two parallel calls, ``hooks`` fired after the first result."""
    return [
        UserMessage("Weather in Paris and Rome?"),
        ToolCall("call_0", "get_weather", {"city": "Paris"}),
        ToolCall("call_1", "get_weather", {"city": "Rome"}),
        ToolResult("call_0", "sunny"),
        *hooks,
        ToolResult("call_1", "rainy"),
        AssistantMessage("Sunny, then rainy."),
    ]


@pytest.mark.parametrize("inject", ["system", "user"])
@pytest.mark.parametrize("protocol", [Protocol("api"), Protocol("text", "hermes")])
def test_a_note_among_parallel_results_comes_after_the_last(inject, protocol) -> None:
    # OpenAI's API refuses a system or user message between the tool messages answering one
    # assistant message's calls (HTTP 400), and chat templates that group results split
    harness = _harness(protocol, hooks=(dataclasses.replace(NOTE, inject=inject),))
    fired = HookFired("note", "post_tool_use", {"tool": "get_weather"})
    messages = render(_parallel(fired), harness).messages
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", inject, "assistant"]
    assert messages[4]["content"] == "rainy" and messages[5]["content"].startswith("<note>")
    # read back, the note follows the last result: the events as shown
    shown = [*_parallel(), fired]
    shown.insert(-1, shown.pop())
    assert parse(messages, harness) == shown == as_shown(_parallel(fired), harness)
    assert render(shown, harness).messages == messages


def test_notes_wait_in_firing_order_and_tool_result_hooks_still_join() -> None:
    harness = _harness(
        Protocol("api"),
        hooks=(REMINDER, NOTE, dataclasses.replace(NOTE, id="n2", message="Also {{ tool }}.")),
    )
    note = HookFired("note", "post_tool_use", {"tool": "a"})
    note2 = HookFired("n2", "post_tool_use", {"tool": "b"})
    joins = HookFired("remind", "post_tool_use", {"tool": "get_weather"})
    # the reminder joins the first result; the notes wait for the last result and the
    # reminder joining it, in the order they fired; a note after the last result stays
    events = _parallel(joins, note, note2)
    events[-1:-1] = [joins, HookFired("note", "post_tool_use", {"tool": "get_weather"})]
    messages = render(events, harness).messages
    assert [m["role"] for m in messages[3:]] == [
        "tool",
        "tool",
        "system",
        "system",
        "system",
        "assistant",
    ]
    assert messages[3]["content"].startswith("sunny\n<system-reminder>")
    assert messages[4]["content"].startswith("rainy\n<system-reminder>")
    assert [m["content"].split("\n")[1] for m in messages[5:8]] == [
        "Ran a.",
        "Also b.",
        "Ran get_weather.",
    ]
    assert shown_order(events, harness) == [0, 1, 2, 3, 4, 7, 8, 5, 6, 9, 10]
    assert parse(messages, harness) == as_shown(events, harness)


def test_a_note_after_the_last_result_or_between_turns_stays() -> None:
    harness = _harness(Protocol("api"), hooks=(NOTE,))
    note = HookFired("note", "post_tool_use", {"tool": "get_weather"})
    after = [*_parallel(), note]
    after.insert(-1, after.pop())  # after the last result
    alone = [*TURN[:4], ToolResult("call_1", "sunny"), note, UserMessage("more"), note]
    for evs in (after, alone, [note, UserMessage("x"), note]):
        assert shown_order(evs, harness) == list(range(len(evs)))


def test_tool_hooks_sharing_a_wrapper_split_in_order() -> None:
    other = Hook(
        id="other",
        event="post_tool_use",
        effect="add_context",
        message="A: {{ detail }}",
        inject="tool_result",
        wrapper="system-reminder",
    )
    harness = _harness(Protocol("api"), hooks=(other, REMINDER))
    events = [
        ToolCall("call_0", "get_weather", {"city": "Oslo"}),
        ToolResult("call_0", "rain"),
        HookFired("remind", "post_tool_use", {"tool": "get_weather"}),
        HookFired("other", "post_tool_use", {"detail": "x"}),
    ]
    assert parse(render(events, harness), harness) == events


def test_api_skill_call_ids_never_capture_a_tool_result() -> None:
    harness = _harness(Protocol("api"))
    events = [
        ToolCall("call_1", "get_weather", {"city": "Rome"}),
        SkillLoad("travel"),
        ToolResult("call_1", "hot"),
    ]
    conversation = render(events, harness)
    ids = [c["id"] for c in conversation.messages[1]["tool_calls"]]
    assert ids[0] == "call_1" and ids[1] != "call_1"
    assert parse(conversation, harness) == events


def test_a_skill_tool_call_without_a_skill_id_is_a_call_its_schema_refuses() -> None:
    from hsa.harness.arguments import checker_of

    harness = _harness(Protocol("api"))
    call = {"id": "c", "type": "function", "function": {"name": "load_skill", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "## Persona\n\nYou help."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    events = parse(messages, harness)
    assert events == [ToolCall("c", "load_skill", {})]  # not a misread reply
    problem = checker_of(harness).problem("load_skill", {})
    assert problem is not None and problem.startswith("invalid arguments for load_skill")


@pytest.mark.parametrize("protocol", [Protocol("api"), Protocol("text", "hermes")])
def test_a_skill_tool_call_with_an_argument_its_schema_refuses_is_a_call_not_a_load(
    protocol,
) -> None:
    strict = {**LOADER.parameters, "additionalProperties": False}
    harness = _harness(protocol, skill_tool=Tool("load_skill", "Load a skill.", strict))
    refused = [
        ToolCall("call_0", "load_skill", {"name": "travel", "extra": 1}),
        ToolResult("call_0", '{"error": "invalid arguments"}', is_error=True),
    ]
    assert parse(render(refused, harness), harness) == refused  # its error result kept
    # the schema allows the extra argument: a load, as before
    loose = [ToolCall("call_0", "load_skill", {"name": "travel", "extra": 1})]
    assert parse(render(loose, _harness(protocol)), _harness(protocol)) == [SkillLoad("travel")]


def test_a_skill_load_parses_back_as_a_load_whatever_its_tools_schema_says() -> None:
    # render writes the skill argument alone, which this schema refuses (it requires two):
    # a recorded load still parses back as itself
    two = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "why": {"type": "string"}},
        "required": ["name", "why"],
        "additionalProperties": False,
    }
    harness = _harness(Protocol("api"), skill_tool=Tool("load_skill", "Load a skill.", two))
    events = [UserMessage("Trip?"), SkillLoad("travel"), AssistantMessage("Pack light.")]
    assert parse(render(events, harness), harness) == events


def test_python_format_refuses_tool_names_it_cannot_write() -> None:
    # Validation refuses such a harness where it is made, naming the tool, before anything
    # renders; render, which does not validate, refuses the call it cannot write.
    harness = _harness(Protocol("text", "python"), tools=(Tool("get-weather"),))
    with pytest.raises(HarnessValidationError, match="cannot be written in the python") as err:
        loads_harness(harness.to_json())
    assert err.value.where == "$.tools[0].name"
    with pytest.raises(ProtocolError, match="not a Python identifier") as err:
        render([ToolCall("call_0", "get-weather", {})], harness)
    assert err.value.where == "events[0]"


def _hook(hook_id: str, message: str, inject: str = "system", wrapper: str | None = None) -> Hook:
    return Hook(hook_id, "stop", "add_context", message, inject=inject, wrapper=wrapper)


WELCOME = _hook("welcome", "Note: {{ text }}")
GOODBYE = _hook("goodbye", "Note: {{ text }}")


def test_a_message_two_hooks_read_is_refused_naming_both() -> None:
    # built in code (validation refuses them): parse must not guess the first hook
    harness = _harness(Protocol("api"), hooks=(WELCOME, GOODBYE))
    events = [
        UserMessage("hi"),
        AssistantMessage("Hello!"),
        HookFired("goodbye", "stop", {"text": "bye"}),
    ]
    with pytest.raises(ProtocolError, match="hook 'welcome' and as one of hook 'goodbye'") as err:
        parse(render(events, harness), harness)
    assert err.value.where == "messages[3]"
    # appended to a tool result: the note's tool message is named
    tool = [_hook(h.id, h.message, "tool_result", "note") for h in (WELCOME, GOODBYE)]
    harness = _harness(Protocol("api"), hooks=tuple(tool))
    events = [*TURN[3:5], HookFired("goodbye", "stop", {"text": "bye"})]
    with pytest.raises(ProtocolError, match="'welcome' and as one of hook 'goodbye'") as err:
        parse(render(events, harness), harness)
    assert err.value.where == "messages[2]"


def test_hooks_whose_messages_differ_parse_back_whatever_their_order() -> None:
    # a payload may make one hook's message read as another's ("Error: rm denied" reads as
    # both); the messages each shows otherwise parse back as its own
    deny, error = _hook("deny", "{{ tool }} denied"), _hook("error", "Error: {{ what }}")
    for hooks in ((deny, error), (error, deny)):
        harness = _harness(Protocol("api"), hooks=hooks)
        events = [UserMessage("x"), HookFired("deny", "stop", {"tool": "rm"})]
        events.append(HookFired("error", "stop", {"what": "disk full"}))
        assert parse(render(events, harness), harness) == events
        both = [UserMessage("x"), HookFired("error", "stop", {"what": "rm denied"})]
        with pytest.raises(ProtocolError, match="which fired cannot be told"):
            parse(render(both, harness), harness)


@pytest.mark.parametrize(
    ("hooks", "alike"),
    [
        ((WELCOME, GOODBYE), (0, 1)),  # the same message in the same place
        ((_hook("a", "{{ x }}"), _hook("b", "Stop now.")), (0, 1)),  # a bare placeholder
        ((_hook("a", "Stop {{ x }}."), _hook("b", "Stop {{ y }} and {{ y }}.")), (0, 1)),
        ((_hook("b", "Note: {{ x }} (final)"), WELCOME), (1, 0)),  # one inside the other
        # a tool_result note joins its tool message, which no user or system hook's reads as
        # (with no tool message to join it is a system message: match_hook refuses that one)
        (
            (_hook("a", "{{ x }}", "user", "note"), _hook("b", "{{ y }}", "tool_result", "note")),
            None,
        ),
        # ... but every system message reads as a tool_result hook's too
        ((_hook("a", "{{ x }}", wrapper="w"), _hook("b", "{{ x }}", "tool_result", "w")), (1, 0)),
        (
            (_hook("a", "{{ x }}", "tool_result", "w"), _hook("b", "{{ y }}", "tool_result", "w")),
            (0, 1),
        ),
        # a repeated field's messages are some of two fields' (not the other way round)
        (
            (_hook("a", "Stop {{ x }} and {{ y }}."), _hook("b", "Stop {{ x }} and {{ x }}.")),
            (0, 1),
        ),
        ((WELCOME, _hook("b", "Note: {{ text }}!")), (0, 1)),  # "Note: x!" reads as both
        # parse reads a system message as a user hook's too
        ((_hook("a", "{{ x }}", "system", "note"), _hook("b", "{{ y }}", "user", "note")), (1, 0)),
        # told apart: by wrapper, by place (a system hook's message is no user message), by
        # wording, or only by a payload of their own
        ((WELCOME, _hook("goodbye", "Note: {{ text }}", wrapper="note")), None),
        ((_hook("a", "Note: {{ text }}."), _hook("b", "Note: {{ text }}!")), None),
        ((_hook("a", "{{ x }}", "user", "note"), _hook("b", "{{ y }}")), None),
        ((_hook("a", "{{ tool }} denied"), _hook("b", "Error: {{ what }}")), None),
        # a character no message holds stands for each field (this one's a literal here)
        ((_hook("a", "Note: \ue000"), _hook("b", "Note: {{ x }}")), (1, 0)),
    ],
)
def test_alike_hooks(hooks, alike) -> None:
    from hsa.harness.parse import alike_hooks

    assert alike_hooks(hooks) == alike


def _alike_pairwise(hooks: list[Hook]) -> tuple[int, int] | None:
    """``alike_hooks`` as it was: every pair of messages matched, the later hook first."""
    from hsa.harness.parse import _SHOWN_AS, READ_AS, _unwrap
    from hsa.harness.sandbox import message_fields, parse_message, render_message

    used = {c for hook in hooks for c in hook.message}
    shown = []
    for j, hook in enumerate(hooks):
        try:
            fields = message_fields(hook.message)
        except TemplateError:
            continue
        marks = (chr(k) for k in itertools.count(0xE000) if chr(k) not in used)
        payload = dict(zip(fields, marks, strict=False))
        shown.append((j, hook, wrap(hook, render_message(hook.message, payload))))
    for j, hook, text in reversed(shown):
        kinds = _SHOWN_AS.get(hook.inject, ())
        for i, other, _ in shown:
            if i == j or not kinds or not all(other.inject in READ_AS[k] for k in kinds):
                continue
            inner = _unwrap(other, text)
            if inner is not None and parse_message(other.message, inner) is not None:
                return i, j
    return None


@settings(max_examples=300, derandomize=True, deadline=None)
@given(drawn=hook_lists())
def test_alike_hooks_finds_what_comparing_every_pair_finds(drawn: list[Hook]) -> None:
    from hsa.harness.parse import alike_hooks

    assert alike_hooks(drawn) == _alike_pairwise(drawn)


def test_alike_hooks_parses_each_message_once() -> None:
    # with more distinct messages than the sandbox's caches of 512 hold, each pair parsed two
    # messages again: 600 hooks took past 300 s. Run apart, so that a regression fails at the
    # time limit rather than holding the suite
    probe = (
        "from hsa.harness.model import Hook\n"
        "from hsa.harness.parse import alike_hooks\n"
        "hooks = [Hook(f'h{i}', 'session_start', 'add_context',\n"
        "              f'note {i} {{{{ a }}}} x {{{{ b }}}} y') for i in range(600)]\n"
        "assert alike_hooks(hooks) is None\n"
    )
    runs_apart(probe, timeout=120)


def _claude_code(first: Hook) -> Harness:
    """Claude Code's shape: ``first`` and a PostToolUse hook adding context to the tool
    result, both "{{ context }}" in one system-reminder wrapper."""
    post = Hook(
        "post-tool-context",
        "post_tool_use",
        "add_context",
        "{{ context }}",
        matcher=Matcher(tool="get_weather"),
        inject="tool_result",
        wrapper="system-reminder",
    )
    return _harness(Protocol("api"), hooks=(first, post))


def test_a_user_hook_and_a_tool_result_hook_in_one_wrapper_are_told_apart() -> None:
    # UserPromptSubmit + PostToolUse: the tool hook's note joins its tool message, which no
    # user hook's reads as, so the harness is valid and its conversations round-trip
    prompt = Hook(
        "prompt-context",
        "user_prompt_submit",
        "add_context",
        "{{ context }}",
        inject="user",
        wrapper="system-reminder",
    )
    harness = _claude_code(prompt)
    assert harness_problems(harness) == []
    events = [
        UserMessage("weather?"),
        HookFired("prompt-context", "user_prompt_submit", {"context": "cwd is /repo"}),
        ToolCall("call_0", "get_weather", {"city": "Oslo"}),
        ToolResult("call_0", "rain"),
        HookFired("post-tool-context", "post_tool_use", {"context": "cached"}),
        AssistantMessage("Rain."),
    ]
    assert parse(render(events, harness), harness) == events


def test_a_system_hook_and_a_tool_result_hook_in_one_wrapper_are_alike() -> None:
    # SessionStart + PostToolUse: every system message reads as a tool_result hook's too
    session = Hook(
        "session-context",
        "session_start",
        "add_context",
        "{{ context }}",
        wrapper="system-reminder",
    )
    problems = [str(p) for p in harness_problems(_claude_code(session))]
    assert problems == [
        "$.hooks[0]: every message hook 'session-context' shows reads as a message of hook "
        "'post-tool-context' ($.hooks[1]) too, so a conversation cannot tell which of them "
        "fired; give one a wording, wrapper or position of its own"
    ]


def test_unknown_hook_names_the_event() -> None:
    with pytest.raises(ProtocolError, match="hook 'nope' is not in harness") as err:
        render([UserMessage("x"), HookFired("nope", "stop", {})], _harness(Protocol("api")))
    assert err.value.where == "events[1]"


@pytest.mark.parametrize(
    ("messages", "where", "message"),
    [
        ([{"role": "user", "content": "x"}], "messages[0]", "does not start with"),
        (
            [
                {"role": "system", "content": "## Persona\n\nYou help."},
                {"role": "robot", "content": "x"},
            ],
            "messages[1]",
            "unknown message role",
        ),
        (
            [
                {"role": "system", "content": "## Persona\n\nYou help."},
                {"role": "system", "content": "not a hook"},
            ],
            "messages[1]",
            "not a hook",
        ),
        (
            [
                {"role": "system", "content": "## Persona\n\nYou help."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}],
                },
            ],
            "messages[1].tool_calls[0]",
            "not JSON",
        ),
        (
            [
                {"role": "system", "content": "## Persona\n\nYou help."},
                {"role": "assistant", "tool_calls": [{"id": "a"}]},
            ],
            "messages[1].tool_calls[0]",
            "function.name",
        ),
    ],
)
def test_parse_errors_name_the_message(messages, where, message) -> None:
    with pytest.raises(ProtocolError, match=message) as err:
        parse(messages, _harness(Protocol("api")))
    assert err.value.where == where


@pytest.mark.parametrize(
    ("part", "got"),
    [
        ({"type": "text", "text": None}, "got null"),
        ({"type": "text", "text": 5}, "got a number"),
        ({"type": "text", "text": ["a"]}, "got a list"),
        ({"type": "text"}, "got none"),
    ],
)
def test_a_content_part_whose_text_is_no_string_is_refused_naming_the_part(part, got) -> None:
    # (it failed inside the join, a TypeError the server answered with a 500)
    harness = _harness(Protocol("api"))
    prompt = render([], harness).messages[0]
    user = {"role": "user", "content": [{"type": "text", "text": "Hi"}, part]}
    with pytest.raises(ProtocolError, match=f"text must be a string, {got}") as err:
        parse([prompt, user], harness)
    assert err.value.where == "messages[1].content[1].text"


@pytest.mark.parametrize("events", [None, 5, {"role": "user"}, (e for e in [])])
def test_events_that_are_no_list_are_refused(events) -> None:
    # (a TypeError or KeyError from inside render)
    with pytest.raises(ProtocolError, match=r"events must be a Sequence, got \w+; pass a list"):
        render(events, _harness(Protocol("api")))


@pytest.mark.parametrize("conversation", [None, 5])
def test_a_conversation_that_is_no_list_is_refused(conversation) -> None:
    with pytest.raises(ProtocolError, match=r"conversation must be a Sequence, got \w+; pass"):
        parse(conversation, _harness(Protocol("api")))


def test_content_parts_read_as_their_texts_one_per_line() -> None:
    harness = _harness(Protocol("api"))
    prompt = render([], harness).messages[0]
    parts = [
        {"type": "text", "text": "Weather"},
        {"type": "image_url", "image_url": {"url": "x"}},  # no text of its own: an empty line
        {"text": "in Paris?"},
    ]
    events = parse([prompt, {"role": "user", "content": parts}], harness)
    assert events == [UserMessage("Weather\n\nin Paris?")]


def test_text_protocol_refuses_api_tool_calls() -> None:
    harness = _harness(Protocol("text", "hermes"))
    prompt = render([], harness).messages[0]
    bad = [prompt, {"role": "assistant", "content": "", "tool_calls": [{"id": "x"}]}]
    with pytest.raises(ProtocolError, match="calls must be written in the message text"):
        parse(bad, harness)


def test_prompt_in_user_message_round_trips_without_user_text() -> None:
    sections = (Section("persona", "Persona", "You help."),)
    harness = _harness(Protocol("text", "xml_concise"), prompt=Prompt(sections, placement="user"))
    events = [AssistantMessage("hello")]
    conversation = render(events, harness)
    assert conversation.messages[0] == {"role": "user", "content": "## Persona\n\nYou help."}
    assert parse(conversation, harness) == events


def test_assistant_text_reads_as_calls_only_where_its_format_would_read_it() -> None:
    from hsa.harness.model import Protocol
    from hsa.harness.parse import reads_as_calls
    from hsa.harness.protocols import CALL_FORMATS

    call = [("get_order", {"order_id": "#W9"})]
    for name, fmt in CALL_FORMATS.items():
        for tag in (False, True):
            protocol = Protocol("text", name, tag, "json")
            block = fmt.format_calls(call, tag)
            assert reads_as_calls(block, protocol), (name, tag)
            assert not reads_as_calls("It shipped (on Monday).", protocol)
            assert not reads_as_calls(block, Protocol("api"))
    hermes = Protocol("text", "hermes", True, "json")
    # a Hermes block anywhere in the text is a call, and so is the text around it
    assert reads_as_calls('See: <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', hermes)
    assert not reads_as_calls("See: <tool_call> not json </tool_call>", hermes)  # text


@pytest.mark.parametrize(("fmt", "tag"), PROTOCOLS, ids=[_label(f, t) for f, t in PROTOCOLS])
@pytest.mark.parametrize(
    ("value", "path", "why"),
    [
        (10**5000, "$.city", "an integer beyond 64 bits"),  # past Python's digit limit too
        (2**64, "$.city", "an integer beyond 64 bits"),
        ({"n": [-(2**63) - 1]}, "$.city.n[0]", "an integer beyond 64 bits"),
        (float("inf"), "$.city", "NaN or Infinity"),
        ([float("nan")], "$.city[0]", "NaN or Infinity"),
        ("Berlin \ud83d", "$.city", "a lone surrogate"),
    ],
    ids=["digits", "wide", "wide-nested", "inf", "nan", "surrogate"],
)
def test_render_refuses_the_values_parse_refuses(fmt, tag, value, path, why) -> None:
    # render wrote them ("Infinity" as api arguments, which is not JSON; the digits of 2**64),
    # and parse then refused what render had written
    protocol = Protocol("api") if fmt == "api" else Protocol("text", fmt, bool(tag))
    events = [UserMessage("x"), ToolCall("call_0", "get_weather", {"city": value})]
    with pytest.raises(ProtocolError, match=f"'get_weather' .*: {re.escape(path)}: {why}") as err:
        render(events, _harness(protocol))
    assert err.value.where == "events[1]"
    # the values at the edges round-trip
    edges = {"city": [2**64 - 1, -(2**63), 1.7976931348623157e308, 5e-324, "\U0001f600"]}
    # and what only looks like a refused value in JSON text (render looks at the text first)
    edges["looks"] = ["NaN", "-Infinity", "\\ud800", "1e400", "\u0661" * 19, 1e300, 2**63 - 1]
    events = [UserMessage("x"), ToolCall("call_0", "get_weather", edges)]
    assert parse(render(events, _harness(protocol)), _harness(protocol)) == events


def test_api_arguments_that_give_a_key_twice_are_refused() -> None:
    # json.loads kept the last value silently; the text formats refuse an argument given twice
    api = _harness(Protocol("api"))
    prompt = render([], api).messages[0]

    def reply(arguments: str) -> list[dict]:
        call = {"id": "a", "function": {"name": "get_weather", "arguments": arguments}}
        return [prompt, {"role": "assistant", "content": None, "tool_calls": [call]}]

    with pytest.raises(ProtocolError, match="arguments give 'city' twice") as err:
        parse(reply('{"city": "Oslo", "days": 2, "city": "Rome"}'), api)
    assert err.value.where == "messages[1].tool_calls[0]"
    # a key repeated inside a value keeps its last value, as in every format
    [call] = parse(reply('{"city": {"k": 1, "k": 2}}'), api)
    assert call == ToolCall("a", "get_weather", {"city": {"k": 2}})


def test_an_integer_past_pythons_digit_limit_is_refused_or_text_when_parsed() -> None:
    from hsa.harness.parse import reads_as_calls

    digits = "9" * 4301
    api = _harness(Protocol("api"))
    prompt = render([], api).messages[0]
    call = {"id": "a", "function": {"name": "get_weather", "arguments": '{"city": ' + digits}}
    call["function"]["arguments"] += "}"
    with pytest.raises(ProtocolError, match="cannot be read: an integer of more than") as err:
        parse([prompt, {"role": "assistant", "content": None, "tool_calls": [call]}], api)
    assert err.value.where == "messages[1].tool_calls[0]"
    # under a text protocol the block is no call, as any block of unreadable JSON
    hermes = _harness(Protocol("text", "hermes"))
    text = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": ' + digits + "}}\n</tool_call>"
    )
    messages = [render([], hermes).messages[0], {"role": "assistant", "content": text}]
    assert parse(messages, hermes) == [AssistantMessage(text)]
    assert not reads_as_calls(text, hermes.protocol)
