"""The rollout loop: oracle rollouts verify under every protocol and variant; model mistakes
and backend outages end a rollout with a reason, never an exception."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

import pytest

from hsa.augment.mapping import map_events
from hsa.augment.planner import canonical_variant
from hsa.envs.livestream import next_actions, solve
from hsa.errors import TeacherError
from hsa.harness.events import AssistantMessage, HookFired, SkillLoad, ToolCall, ToolResult
from hsa.harness.model import HOOK_EVENTS, Hook, Protocol
from hsa.harness.parse import parse
from hsa.harness.render import as_shown, hook_text
from hsa.teachers.backends.base import Backend, BackendStats, ContextOverflow
from hsa.teachers.oracle import OracleBackend, OracleResponder
from hsa.teachers.request import ChatRequest, ChatResponse, assistant_message
from hsa.teachers.rollout import (
    REPAIR_PREFIX,
    RolloutConfig,
    RolloutSpec,
    StepError,
    protocol_view,
    read_step,
    rollout,
)
from hsa.teachers.server import malform
from tests.teachers.conftest import make_variant


def one_task_per_kind(env):
    tasks = {}
    for task in env.tasks():
        tasks.setdefault(task.kind, task)
    return list(tasks.values())


def run(spec, env, backend, **config):
    return asyncio.run(rollout(spec, env, backend, RolloutConfig(**config)))


def spec_of(task, variant) -> RolloutSpec:
    return RolloutSpec(f"{task.id}/{variant.variant_id}/0", task, variant, seed=7)


class Scripted(Backend):
    """Answers with the given messages in turn; records the requests."""

    name = "scripted"

    def __init__(self, replies: Sequence[dict]):
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []
        self.stats = BackendStats()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return ChatResponse(reply)


class Breaking(Backend):
    """The oracle, with the first ``broken`` answers' tool calls malformed."""

    name = "breaking"

    def __init__(self, responder, broken: int = 1):
        self.inner = OracleBackend(responder)
        self.broken = broken
        self.stats = BackendStats()
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        response = await self.inner.chat(request)
        if self.broken and malform(dict(response.message)) is not None:
            self.broken -= 1
            return ChatResponse(malform(dict(response.message)))
        return response


def test_oracle_rollouts_verify_and_match_the_canonical_solution(env, variants, responder):
    backend = OracleBackend(responder)
    for task in one_task_per_kind(env):
        expected = solve(env, task).events
        for variant in variants.values():
            result = run(spec_of(task, variant), env, backend)
            label = f"{task.id} under {variant.harness.protocol.label} {variant.variant_id}"
            assert result.verification.verified, (label, result.verification.reason)
            assert result.ended == "answered" and result.verification.reason == "ok"
            # The same solution, whatever the surface: mapping back gives canonical events.
            assert list(result.events) == list(expected), label
            surface = map_events(result.events, variant.mapping)
            assert parse(result.conversation, variant.harness) == surface, label
            assert result.requests > 0 and result.cache_hits == 0


def test_the_variant_reaches_the_backend_in_metadata_and_sampling_carries_the_seed(
    env, renamed, responder
):
    task = env.tasks()[0]
    backend = Breaking(responder, broken=0)
    run(spec_of(task, renamed), env, backend)
    request = backend.requests[0]
    assert request.metadata["hsa_variant"] == renamed.variant_id
    assert request.sampling.seed == 7
    names = {t["function"]["name"] for t in request.tools}
    assert names == {t.name for t in renamed.harness.tools} | {renamed.harness.skill_tool.name}


@pytest.mark.parametrize("protocol_index", [None, 0, 1, 2])
def test_a_malformed_call_ends_the_rollout_as_a_format_failure(
    env, canonical, text_variants, responder, protocol_index
):
    variant = canonical if protocol_index is None else text_variants[protocol_index]
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    result = run(spec_of(task, variant), env, Breaking(responder))
    assert result.ended == "format" and not result.verification.verified
    assert result.verification.reason.startswith("format: ")
    assert not result.verification.checks["format"]
    [failure] = result.format_failures
    assert failure.step == 1 and not failure.repaired


def test_one_repair_turn_recovers_a_malformed_call(env, text_variants, responder):
    variant = text_variants[1]
    task = next(t for t in env.tasks() if t.kind == "multi_tool")
    backend = Breaking(responder)
    result = run(spec_of(task, variant), env, backend, repair=True)
    assert result.verification.verified, result.verification.reason
    [failure] = result.format_failures
    assert failure.repaired
    repair = backend.requests[1].messages
    assert repair[-1]["role"] == "user" and repair[-1]["content"].startswith(REPAIR_PREFIX)
    assert list(result.events) == list(solve(env, task).events)  # the bad reply left no trace


def test_a_repair_request_shows_the_bad_calls_as_text_that_strict_servers_accept(
    env, canonical, responder
):
    # OpenAI's API refuses an assistant message whose tool calls no tool messages answer, and
    # vLLM refuses arguments that are not JSON: the unreadable reply goes back as its text.
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    backend = Breaking(responder)
    result = run(spec_of(task, canonical), env, backend, repair=True)
    assert result.verification.verified, result.verification.reason
    [failure] = result.format_failures
    assert failure.repaired
    repair = backend.requests[1].wire_messages()
    bad, ask_again = repair[-2:]
    assert ask_again["content"].startswith(REPAIR_PREFIX)
    assert bad["role"] == "assistant" and "tool_calls" not in bad
    [call] = failure.message["tool_calls"]
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    assert bad["content"] == f'{{"name": "{name}", "arguments": {arguments}}}'
    for i, message in enumerate(repair):
        ids = [c["id"] for c in message.get("tool_calls") or ()]
        answered = [m.get("tool_call_id") for m in repair[i + 1 : i + 1 + len(ids)]]
        assert answered == ids, (i, message)


def test_a_reply_cut_off_then_repaired_is_not_rejected_as_truncated(env, canonical, responder):
    # the step is read from the repaired reply, which the token limit did not cut
    task = next(t for t in env.tasks() if t.kind == "single_tool")

    class CutOnce(Breaking):
        async def chat(self, request: ChatRequest) -> ChatResponse:
            response = await super().chat(request)
            if len(self.requests) == 1:
                return ChatResponse(response.message, finish_reason="length")
            return response

    result = run(spec_of(task, canonical), env, CutOnce(responder), repair=True)
    assert [f.repaired for f in result.format_failures] == [True]
    assert result.verification.verified, result.verification.reason
    # without the repair turn the cut reply is the step's, and the reason says it was cut
    unrepaired = run(spec_of(task, canonical), env, CutOnce(responder))
    assert unrepaired.verification.reason.startswith("truncated: the reply at step(s) 1 ")


def test_a_second_malformed_reply_after_repair_is_a_format_failure(env, canonical, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    result = run(spec_of(task, canonical), env, Breaking(responder, broken=2), repair=True)
    assert result.ended == "format" and "after one repair turn" in result.verification.reason
    assert [f.repaired for f in result.format_failures] == [False, False]


def test_backend_outage_is_a_reason_not_an_exception(env, canonical):
    task = env.tasks()[0]
    backend = Scripted([TeacherError("no answer after 9 attempts (last: http 500)")])
    result = run(spec_of(task, canonical), env, backend)
    assert result.ended == "backend"
    assert result.verification.reason == "backend: no answer after 9 attempts (last: http 500)"


def test_the_step_limit_stops_a_model_that_never_answers(env, canonical):
    task = env.tasks()[0]
    call = {
        "id": "x",
        "type": "function",
        "function": {"name": "search_products", "arguments": json.dumps({"query": "lamp"})},
    }
    backend = Scripted([assistant_message(None, [call])])
    result = run(spec_of(task, canonical), env, backend, max_steps_per_turn=3)
    assert result.ended == "step_limit" and len(backend.requests) == 3
    assert result.verification.reason.startswith("step_limit: no final answer to turn 0")
    # every call got the id the loop gives, whatever the model called it
    calls = [e.call_id for e in result.events if type(e).__name__ == "ToolCall"]
    assert calls == ["call_0", "call_1", "call_2"]


def test_bad_arguments_fail_schema_and_execution_but_the_rollout_goes_on(env, canonical):
    task = env.tasks()[0]
    call = {
        "id": "x",
        "type": "function",
        "function": {"name": "search_products", "arguments": json.dumps({"colour": "red"})},
    }
    backend = Scripted([assistant_message(None, [call]), assistant_message("Sorry!")])
    result = run(spec_of(task, canonical), env, backend)
    assert result.ended == "answered"
    checks = result.verification.checks
    assert not checks["schema"] and not checks["execution"] and checks["format"]
    assert result.verification.reason.startswith(
        "schema: call_0: invalid arguments for search_products: $: "
    )


def test_an_unsolved_task_is_rejected_with_the_environments_reasons(env, canonical):
    task = env.tasks()[0]
    result = run(spec_of(task, canonical), env, Scripted([assistant_message("No idea.")]))
    assert result.ended == "answered" and not result.verification.checks["score"]
    assert result.verification.reason.startswith("score: ")
    assert result.verification.score == 0.0


def _api_call(arguments: str) -> dict:
    function = {"name": "search_products", "arguments": arguments}
    return assistant_message(None, [{"id": "c", "type": "function", "function": function}])


@pytest.mark.parametrize(
    "reply, problem",
    [
        (assistant_message('<tool_call>\n{"name": "search_products"\n</tool_call>'), "markup"),
        (assistant_message('[search_products(query="lamp")'), "calls block"),
        (assistant_message('search_products(query="lamp"'), "call to 'search_products'"),
        (assistant_message('```json\n[{"function": "search_products"\n```'), "calls block"),
        # lenient JSON readers take these; no row can hold them
        (_api_call('{"query": "lamp", "limit": NaN}'), "$.limit: NaN or Infinity"),
        (_api_call('{"query": "lamp", "limit": 1e400}'), "$.limit: NaN or Infinity"),
        (assistant_message("Here \ud83d"), "the assistant's text: "),
    ],
)
def test_unreadable_replies_are_format_failures(env, canonical, reply, problem):
    result = run(spec_of(env.tasks()[0], canonical), env, Scripted([reply]))
    assert result.ended == "format" and problem in result.verification.reason


def _hermes(query: str) -> str:
    body = json.dumps({"name": "search_products", "arguments": {"query": query}})
    return f"<tool_call>\n{body}\n</tool_call>"


# a call block, text, then the calls read at the end: the first call was kept as text and
# never ran, and no format failure was recorded
INTERLEAVED = [
    (Protocol("text", "hermes"), f"First.\n{_hermes('lamp')}\n", f"Then.\n{_hermes('desk')}"),
    (
        Protocol("text", "python", True),
        "First: <TOOLCALL>[search_products(query='lamp')]</TOOLCALL>\n",
        "Then.\n<TOOLCALL>[search_products(query='desk')]</TOOLCALL>",
    ),
]


@pytest.mark.parametrize(("protocol", "first", "then"), INTERLEAVED, ids=["hermes", "python+tag"])
def test_a_call_block_before_more_text_is_a_format_failure_not_a_lost_call(
    env, protocol, first, then
):
    harness = env.harness().replace(protocol=protocol)
    view = protocol_view(harness)
    with pytest.raises(StepError, match="the text before the reply's calls holds tool-call markup"):
        read_step(assistant_message(first + then), harness, view, 0)
    # text before the calls at the end, as every format writes a turn, is a step
    assert read_step(assistant_message(then), harness, view, 3) == [
        AssistantMessage("Then."),
        ToolCall("call_3", "search_products", {"query": "desk"}),
    ]


class CalledNone(Scripted):
    """Answers with the given messages, each said to have called tools (``finish_reason``)."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        answer = await super().chat(request)
        return ChatResponse(answer.message, finish_reason="tool_calls")


@pytest.mark.parametrize("content", [None, "", "Let me look."])
def test_a_reply_said_to_call_tools_that_holds_none_is_a_format_failure(env, canonical, content):
    # read as no call, it was a final answer (an abstention BFCL's irrelevance verified)
    reply = {"role": "assistant", "content": content, "tool_calls": []}
    result = run(spec_of(env.tasks()[0], canonical), env, CalledNone([reply]))
    assert result.ended == "format"
    assert "finish_reason 'tool_calls' says it called a tool, but it holds no call" in (
        result.verification.reason
    )


def test_a_call_left_in_the_text_beside_api_calls_ends_the_rollout_as_a_format_failure(
    env, canonical
):
    # what parse_output makes of interleaved Hermes blocks (the vllm and transformers backends)
    reply = _api_call('{"query": "desk"}')
    reply["content"] = f"First.\n{_hermes('lamp')}\nThen."
    result = run(spec_of(env.tasks()[0], canonical), env, Scripted([reply]))
    assert result.ended == "format"
    assert "the text before the reply's calls" in result.verification.reason


def test_thoughts_that_name_a_tool_beside_api_calls_are_no_format_failure(env, canonical):
    # a reasoning model served without a reasoning parser: its thoughts stay in the content
    reply = _api_call('{"query": "desk"}')
    reply["content"] = "<think>I should call search_products for a desk.</think>"
    result = run(spec_of(env.tasks()[0], canonical), env, Scripted([reply]))
    assert result.format_failures == () and result.ended != "format"


def test_a_reply_of_null_content_is_the_same_empty_answer_as_empty_text(env, canonical):
    # servers write a reply of no text and no call either way; neither is a format failure
    task = env.tasks()[0]
    none = run(spec_of(task, canonical), env, Scripted([assistant_message(None)]))
    empty = run(spec_of(task, canonical), env, Scripted([assistant_message("")]))
    assert none.ended == empty.ended == "answered"
    assert none.verification == empty.verification and none.events == empty.events
    assert none.format_failures == ()


def test_a_conversation_past_the_context_window_is_a_truncated_rollout(env, canonical):
    overflow = ContextOverflow("the conversation outgrew the model's context window (HTTP 400)")
    # refused at the first request, nothing has grown: a setting's error, sent again on a rerun
    first = run(spec_of(env.tasks()[0], canonical), env, Scripted([overflow]))
    assert first.ended == "backend"
    search = _api_call('{"query": "lamp"}')
    result = run(spec_of(env.tasks()[0], canonical), env, Scripted([search, overflow]))
    assert result.ended == "context" and not result.verification.checks["complete"]
    assert result.verification.reason.startswith("context: the conversation outgrew")
    from hsa.eval.metrics import failure_class  # how an evaluation classes the episode

    assert failure_class(result) == "truncated"


def test_loading_a_skill_the_harness_lacks_stops_the_rollout(env, canonical):
    skill_tool = canonical.harness.skill_tool.name
    arg = canonical.harness.skill_arg
    call = {
        "id": "s",
        "type": "function",
        "function": {"name": skill_tool, "arguments": json.dumps({arg: "no-such-skill"})},
    }
    backend = Scripted([assistant_message(None, [call])])
    result = run(spec_of(env.tasks()[0], canonical), env, backend)
    assert result.ended == "schema" and "no-such-skill" in result.verification.reason


def test_a_skill_load_with_an_argument_its_schema_refuses_is_refused_not_loaded(env, canonical):
    """The skill tool's call is judged by its schema as any tool's: an extra argument under
    ``additionalProperties: false`` gets an error result, loads nothing, and fails the schema
    check (it used to load the skill, its extra argument dropped unseen)."""
    skill_tool, arg = canonical.harness.skill_tool.name, canonical.harness.skill_arg
    skill = canonical.harness.skills[0].id
    args = json.dumps({arg: skill, "zzz_extra": 1})
    call = {"id": "s", "type": "function", "function": {"name": skill_tool, "arguments": args}}
    backend = Scripted([assistant_message(None, [call]), assistant_message("Done.")])
    result = run(spec_of(env.tasks()[0], canonical), env, backend)
    assert result.ended == "answered" and not result.verification.checks["schema"]
    assert result.verification.checks["format"]  # the recorded conversation parses back
    assert result.verification.reason.startswith(
        f"schema: call_0: invalid arguments for {skill_tool}: $: Additional properties"
    )
    assert not any(isinstance(e, SkillLoad) for e in result.events)
    results = [e for e in result.events if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].is_error
    from hsa.eval.metrics import failure_class

    assert failure_class(result) == "invalid_arguments"


def test_a_call_by_a_name_the_variant_renamed_is_refused_not_run(env, renamed):
    """A model writing the canonical name under a variant that renamed the tool gets an
    unknown-tool error, as a harness runtime would answer: the environment never runs it."""
    task = env.tasks()[0]
    assert renamed.mapping.tool_name("search_products") != "search_products"
    call = {
        "id": "x",
        "type": "function",
        "function": {"name": "search_products", "arguments": json.dumps({"query": "lamp"})},
    }
    backend = Scripted([assistant_message(None, [call]), assistant_message("Done.")])
    result = run(spec_of(task, renamed), env, backend)
    results = [e for e in result.events if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].is_error
    assert "unknown tool 'search_products'" in results[0].content
    assert result.verification.reason.startswith("schema: call_0: unknown tool 'search_products'")


def test_each_answer_latency_is_recorded_in_order(env, canonical):
    task = env.tasks()[0]
    backend = Scripted([assistant_message("One."), assistant_message("Two.")])
    result = run(spec_of(task, canonical), env, backend)
    assert len(result.latencies_s) == result.requests == len(backend.requests)


def test_what_was_planned_is_kept_out_of_full_collections_while_rollouts_run():
    import gc

    from hsa.teachers.rollout import planned_kept

    planned = [{"variant": i} for i in range(1000)]
    with planned_kept():
        assert gc.get_freeze_count() >= len(planned)
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), planned_kept():
        raise RuntimeError("a failed run")
    assert gc.get_freeze_count() == 0


def test_a_bfcl_reply_is_scored_as_made_with_no_result_and_no_second_try(external):
    # BFCL judges a call-scored entry on the model's first reply: a model that would call
    # again after a result never gets the chance, and the calls are never run.
    from hsa.augment.planner import canonical_variant
    from hsa.envs.bfcl import BfclEnvironment, reference_calls

    env = BfclEnvironment.from_corpus(external / "bfcl" / "BFCL_v4_parallel.json")
    task = env.tasks()[0]
    harness = env.harness_for(task)
    calls = reference_calls(task, env.tools(task))
    api_calls = [
        {
            "id": c.call_id,
            "type": "function",
            "function": {"name": c.tool, "arguments": json.dumps(c.args)},
        }
        for c in calls
    ]
    reply = assistant_message(None, api_calls)
    backend = Scripted([reply, reply])  # the same calls again, if it were asked twice
    done = run(spec_of(task, canonical_variant(harness)), env, backend)
    assert done.ended == "answered" and len(backend.requests) == 1
    assert done.verification.verified, done.verification
    assert not any(isinstance(e, ToolResult) for e in done.events)
    assert [e.kind for e in done.events] == ["user", *["tool_call"] * len(calls)]


def test_a_bfcl_call_is_scored_by_bfcls_checker_not_refused_for_its_values(external, tmp_path):
    # BFCL's checker takes strings in any case: `Fahrenheit` for the enum's `fahrenheit` is
    # right on its leaderboard. The call reaches the scorer; the row still fails `schema`.
    from hsa.augment.planner import canonical_variant
    from hsa.envs.bfcl import BfclEnvironment

    corpus = tmp_path / "bfcl"
    (corpus / "possible_answer").mkdir(parents=True)
    for name in ("BFCL_v4_live_simple.json", "possible_answer/BFCL_v4_live_simple.json"):
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines()
        (corpus / name).write_text(next(x for x in lines if '"live_simple_4-3-0"' in x) + "\n")
    env = BfclEnvironment.from_corpus(corpus)
    (task,) = env.tasks()
    harness = env.harness_for(task)
    (tool,) = harness.tools

    def answer(unit):
        args = json.dumps({"location": "Tel Aviv, Israel", "unit": unit})
        call = {"id": "c1", "type": "function", "function": {"name": tool.name, "arguments": args}}
        return run(
            spec_of(task, canonical_variant(harness)),
            env,
            Scripted([assistant_message(None, [call])]),
        )

    done = answer("Fahrenheit")
    assert done.ended == "answered" and done.verification.checks["score"], done.verification
    assert not done.verification.checks["schema"] and not done.verification.verified
    assert not any(isinstance(e, ToolResult) for e in done.events)
    wrong = answer("kelvin")  # a value BFCL refuses is still wrong, by BFCL's checker
    assert not wrong.verification.checks["score"]


def _bfcl_entries(external, tmp_path, category: str, *entries: str):
    """A BFCL corpus of ``entries`` of ``category`` (with their possible answers, if any)."""
    from hsa.envs.bfcl import BfclEnvironment

    corpus = tmp_path / "bfcl"
    (corpus / "possible_answer").mkdir(parents=True, exist_ok=True)
    for name in (f"BFCL_v4_{category}.json", f"possible_answer/BFCL_v4_{category}.json"):
        if not (external / "bfcl" / name).exists():
            continue  # irrelevance has no possible answers: no call is the answer
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines()
        kept = [x for x in lines if any(f'"{e}"' in x for e in entries)]
        (corpus / name).write_text("".join(x + "\n" for x in kept), "utf-8")
    return BfclEnvironment.from_corpus(corpus)


def _api(*calls: tuple[str, dict]) -> dict:
    return assistant_message(
        None,
        [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    )


@pytest.mark.parametrize(
    ("category", "entry", "extra"),
    [
        # a call to no offered tool is one call too many for BFCL's checker
        ("simple_python", "simple_python_0", ("no_such_tool", {})),
        # and so is one that leaves out a required argument (BFCL: no possible answer fits it)
        ("parallel", "parallel_0", ("spotify_play", {})),
    ],
)
def test_a_bfcl_call_the_harness_refuses_still_counts_as_a_call_made(
    external, tmp_path, category, entry, extra
):
    # The harness refuses the extra call, but BFCL scores every call the model made: the gold
    # calls and one more are the wrong count, not a solved entry.
    from hsa.augment.planner import canonical_variant
    from hsa.envs.bfcl import reference_calls

    env = _bfcl_entries(external, tmp_path, category, entry)
    (task,) = env.tasks()
    gold = [(c.tool, dict(c.args)) for c in reference_calls(task, env.tools(task))]
    spec = spec_of(task, canonical_variant(env.harness_for(task)))
    assert run(spec, env, Scripted([_api(*gold)])).verification.verified
    done = run(spec, env, Scripted([_api(*gold, extra)]))
    assert done.ended == "answered" and not done.verification.checks["score"]
    assert done.verification.reason.startswith("schema: call_")
    assert done.verification.score == 0.0
    from hsa.eval.metrics import failure_class, succeeded

    assert not succeeded(done) and failure_class(done) in ("unknown_tool", "invalid_arguments")


def test_a_bfcl_irrelevance_entry_fails_with_a_call_the_harness_refuses(external, tmp_path):
    # BFCL fails an irrelevance entry whose reply decodes to any call, to a tool it offers or not
    from hsa.augment.planner import canonical_variant

    env = _bfcl_entries(external, tmp_path, "irrelevance", "irrelevance_0")
    (task,) = env.tasks()
    spec = spec_of(task, canonical_variant(env.harness_for(task)))
    assert run(spec, env, Scripted([assistant_message("None fits.")])).verification.verified
    done = run(spec, env, Scripted([_api(("no_such_tool", {}))]))
    assert done.ended == "answered" and not done.verification.checks["score"]
    from hsa.eval.metrics import succeeded

    assert not succeeded(done)


def test_a_bfcl_call_by_the_canonical_name_of_a_renamed_tool_matches_nothing(external, tmp_path):
    # Under a variant that renamed the tool, its canonical name is unknown on the surface: the
    # call is refused, and mapped back it would name the canonical tool. It still matches no
    # possible answer, as BFCL, which sees the name as written, would have it.
    from hsa.augment import get_rule
    from hsa.augment.planner import Variant, apply_chain
    from hsa.envs.bfcl import reference_calls

    env = _bfcl_entries(external, tmp_path, "simple_python", "simple_python_0")
    (task,) = env.tasks()
    ((tool, args),) = [(c.tool, dict(c.args)) for c in reference_calls(task, env.tools(task))]
    harness = env.harness_for(task)
    rewrite, applied = apply_chain(
        harness, [(get_rule("tools.rename"), {"style": "camel"})], seed=0
    )
    variant = Variant("camel", harness.id, applied, rewrite.harness, rewrite.mapping)
    surface = variant.mapping.tool_name(tool)
    assert surface != tool
    spec = spec_of(task, variant)
    assert run(spec, env, Scripted([_api((surface, args))])).verification.verified
    done = run(spec, env, Scripted([_api((tool, args))]))
    assert done.ended == "answered" and not done.verification.checks["score"]
    assert done.verification.reason.startswith(f"schema: call_0: unknown tool {tool!r}")


@pytest.mark.parametrize(
    ("finish", "said"),
    [
        ("length", "at the token limit"),
        ("content_filter", "by the provider's content filter"),
        ("repetition", "as it repeated itself"),  # vLLM's: it was written as verified too
    ],
)
def test_a_reply_cut_off_is_rejected_however_it_reads(env, canonical, responder, finish, said):
    # what a real model returns at max_tokens: text that reads as an answer, cut short; a
    # provider's content filter cuts it the same way, and was written as a verified row
    task = env.tasks()[0]
    oracle = OracleBackend(responder)
    assert run(spec_of(task, canonical), env, oracle).verification.verified

    class CutOff(Backend):
        name = "cut-off"
        stats = BackendStats()

        async def chat(self, request: ChatRequest) -> ChatResponse:
            response = await oracle.chat(request)
            if response.message.get("tool_calls"):
                return response
            return ChatResponse(response.message, finish_reason=finish)

    result = run(spec_of(task, canonical), env, CutOff())
    # the episode runs as the model wrote it (an evaluation scores it as it reads), but the
    # row is no teaching material
    assert result.ended == "answered" and result.verification.checks["score"]
    assert not result.verification.verified and not result.verification.checks["complete"]
    assert result.verification.reason.startswith("truncated: the reply at step(s) ")
    assert f"was cut off {said}" in result.verification.reason
    from hsa.eval.metrics import failure_class

    assert failure_class(result) is None  # solved: an evaluation counts it a success


def test_hooks_a_variant_adds_fire_on_the_surface_and_stay_out_of_the_canonical_events(env):
    """``hooks.neutral_extra``'s hooks fire in the episode (in the requests, on the rows'
    conversation) in the variant's wording, after the canonical hooks of their event and not
    after a denial, while the canonical events are the solution's."""
    harness = env.harness()
    variant = make_variant(harness, [("hooks.neutral_extra", {"count": 5})])
    added = {h.id: h for h in variant.harness.hooks if harness.hook(h.id) is None}
    assert {h.event for h in added.values()} == set(HOOK_EVENTS)
    responder = OracleResponder(env, next_actions, variants={variant.variant_id: variant})
    backend = Breaking(responder, broken=0)
    for task in one_task_per_kind(env):
        result = run(spec_of(task, variant), env, backend)
        assert result.verification.verified, (task.id, result.verification.reason)
        assert list(result.events) == list(solve(env, task).events), task.id
        shown = parse(result.conversation, variant.harness)
        fired = [e for e in shown if isinstance(e, HookFired) and e.hook_id in added]
        rest = [e for e in shown if not (isinstance(e, HookFired) and e.hook_id in added)]
        assert rest == as_shown(result.events, harness), task.id
        denied = [
            e
            for e in result.events
            if isinstance(e, HookFired) and harness.hook(e.hook_id).effect == "deny"
        ]
        results = [e for e in result.events if isinstance(e, ToolResult)]
        runs = len(results) - sum(e.event == "pre_tool_use" for e in denied)
        events = [*result.events, None]
        answers = sum(
            isinstance(e, AssistantMessage) and not isinstance(after, ToolCall | SkillLoad)
            for e, after in pairwise(events)
        )
        want = {
            "session_start": 1,
            "user_prompt_submit": len(task.turns),
            "pre_tool_use": runs,
            "post_tool_use": runs,
            "stop": answers - sum(e.event == "stop" for e in denied),
        }
        assert Counter(e.event for e in fired) == {k: v for k, v in want.items() if v}, task.id
        for event in fired:  # shown as hsa augment renders the variant's hooks
            text = hook_text(variant.harness, event)[1]
            assert any(m.get("content") == text for m in result.conversation.messages)
    first = backend.requests[0].messages  # the opening the model is sent shows them too
    for hook in added.values():
        if hook.event in ("session_start", "user_prompt_submit"):
            assert any(hook.message in (m.get("content") or "") for m in first)


def test_a_hook_a_variant_adds_that_would_do_more_than_add_context_ends_the_rollout(env):
    harness = env.harness()
    denying = Hook(id="extra-deny", event="stop", effect="deny", message="No.", wrapper="x")
    variant = make_variant(harness, [])
    variant = dataclasses.replace(
        variant, harness=harness.replace(hooks=[*harness.hooks, denying]), rules=(("r", "1", {}),)
    )
    result = run(spec_of(env.tasks()[0], variant), env, Scripted([assistant_message("Hi.")]))
    assert result.ended == "error" and not result.verification.verified
    assert "hook 'extra-deny'" in result.detail and "may only add context" in result.detail


def test_hooks_a_variant_adds_do_not_fire_after_a_canonical_hook_denied(env):
    """As later hooks of an event after a denial: no added pre- or post-tool-use firing for a
    denied call, no added stop firing for a refused answer; the canonical events as before."""
    harness = env.harness()
    variant = make_variant(harness, [("hooks.neutral_extra", {"count": 5})])
    added = {h.id: h.event for h in variant.harness.hooks if harness.hook(h.id) is None}
    task = env.tasks()[0]
    sold_out = next(p.id for p in env.reset(task).world.products if p.stock == 0)
    pin = {
        "id": "x",
        "type": "function",
        "function": {"name": "pin_product", "arguments": json.dumps({"product_id": sold_out})},
    }
    replies = [
        assistant_message(None, [pin]),
        assistant_message("It is the best, guaranteed."),
        assistant_message("Sorry, that one is sold out."),
    ]
    result = run(spec_of(task, variant), env, Scripted(replies))
    canonical = run(spec_of(task, canonical_variant(harness)), env, Scripted(replies))
    assert result.events == canonical.events
    fired = [e.hook_id for e in result.events if isinstance(e, HookFired)]
    assert {"no-sold-out-pin", "compliance-guard"} <= set(fired)
    shown = parse(result.conversation, variant.harness)
    events = Counter(
        added[e.hook_id] for e in shown if isinstance(e, HookFired) and e.hook_id in added
    )
    assert events == {"session_start": 1, "user_prompt_submit": 1, "stop": 1}
    assert isinstance(shown[-1], HookFired) and added.get(shown[-1].hook_id) == "stop"
