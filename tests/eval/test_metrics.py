"""Failure classes: read from an episode's checks and calls, whatever its reason says first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace

import pytest

from hsa.augment import get_rule
from hsa.augment.planner import Variant, apply_chain, canonical_variant, variant_id
from hsa.envs.registry import get
from hsa.eval.metrics import episode_row, failure_class, succeeded
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.request import ChatRequest, ChatResponse, assistant_message
from hsa.teachers.rollout import Rollout, RolloutConfig, RolloutSpec, rollout

#: a product sold out in the default livestream world: the ``no-sold-out-pin`` hook denies its pin
SOLD_OUT = "P0001"


class Scripted(Backend):
    """Answers with the given messages in turn, the last one again once they run out."""

    name = "scripted"

    def __init__(self, replies: Sequence[dict]):
        self.replies = list(replies)
        self.asked = 0
        self.stats = BackendStats()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.asked += 1
        return ChatResponse(self.replies[min(self.asked, len(self.replies)) - 1])


@pytest.fixture(scope="module")
def livestream():
    return get("livestream")


@pytest.fixture(scope="module")
def canonical(livestream) -> Variant:
    return canonical_variant(livestream.harness())


@pytest.fixture(scope="module")
def renamed(livestream) -> Variant:
    harness = livestream.harness()
    chain = [(get_rule("tools.rename"), {"style": "synonym"})]
    rewrite, applied = apply_chain(harness, chain, seed=0)
    return Variant(
        variant_id(harness, applied, 0, None), harness.id, applied, rewrite.harness, rewrite.mapping
    )


def call(tool: str, **args) -> dict:
    function = {"name": tool, "arguments": json.dumps(args)}
    return assistant_message(None, [{"id": "c", "type": "function", "function": function}])


def play(env, variant: Variant, replies: Sequence[dict]) -> Rollout:
    spec = RolloutSpec("t", env.tasks()[0], variant)
    config = RolloutConfig(max_steps_per_turn=3)
    return asyncio.run(rollout(spec, env, Scripted(replies), config))


@pytest.mark.parametrize(
    "replies, failure",
    [
        ([call("nope_tool")], "unknown_tool"),
        ([call("search_products", query=3)], "invalid_arguments"),
        ([call("pin_product", product_id=SOLD_OUT)], "policy_violation"),
        ([call("pin_product", product_id="P9999")], "wrong_arguments"),
    ],
)
def test_a_call_failure_is_classed_as_such_whether_or_not_the_episode_was_answered(
    livestream, canonical, replies, failure
):
    limited = play(livestream, canonical, replies)  # the same call at every step
    assert limited.ended == "step_limit" and limited.verification.reason.startswith("step_limit")
    answered = play(livestream, canonical, [*replies, assistant_message("Done.")])
    assert answered.ended == "answered"
    assert failure_class(limited) == failure_class(answered) == failure


def test_the_first_call_the_harness_refused_decides_its_class(livestream, canonical):
    bad_then_unknown = [call("search_products", query=3), call("nope_tool")]
    result = play(livestream, canonical, bad_then_unknown)
    assert failure_class(result) == "invalid_arguments"
    unknown_then_bad = [call("nope_tool"), call("search_products", query=3)]
    assert failure_class(play(livestream, canonical, unknown_then_bad)) == "unknown_tool"


def test_a_name_the_variant_renamed_is_an_unknown_tool_at_the_step_limit(livestream, renamed):
    """The canonical events hold the refused call mapped back, which maps forward to a tool
    the variant offers: the class comes from the call as the model wrote it."""
    assert renamed.mapping.tool_name("get_product_details") != "get_product_details"
    result = play(livestream, renamed, [call("get_product_details", product_id="lamp")])
    assert result.ended == "step_limit"
    assert failure_class(result) == "unknown_tool"


def test_an_episode_without_call_failures_at_the_step_limit_is_a_step_limit(livestream, canonical):
    result = play(livestream, canonical, [call("search_products", query="lamp")])
    assert result.verification.checks["schema"] and result.verification.checks["execution"]
    assert failure_class(result) == "step_limit"


def test_an_answer_whose_conversation_does_not_parse_back_is_unparseable(livestream, canonical):
    """The reason then names the round trip, not the scorer: there is nothing to read a
    scorer's class from, and the format check is what failed."""
    result = play(livestream, canonical, [assistant_message("Done.")])
    checks = {**result.verification.checks, "format": False}
    why = "format: the recorded conversation parses back differently from event 2 on"
    broken = replace(result, verification=replace(result.verification, reason=why, checks=checks))
    assert failure_class(broken) == "unparseable_call"


def test_a_skill_load_counts_as_a_call_as_in_a_firstcall_row(livestream, canonical):
    # a skill load is a call of the skill tool: the calls column counts it in every suite
    from hsa.eval.metrics import episode_row
    from hsa.harness.events import SkillLoad, ToolCall

    replies = [
        call("load_skill", skill_id="product-qa"),
        call("search_products", query="serum"),
        assistant_message("Here you are.", None),
    ]
    result = play(livestream, canonical, replies)
    assert [type(e) for e in result.events if isinstance(e, ToolCall | SkillLoad)] == [
        SkillLoad,
        ToolCall,
    ]
    assert episode_row("canonical", "c", result, policy="scripted")["calls"] == 2


def _bfcl_entry(external, tmp_path, category: str, entry: str):
    """A BFCL environment of one entry of ``category`` (with its possible answer, if any)."""
    from hsa.envs.bfcl import BfclEnvironment

    corpus = tmp_path / category
    (corpus / "possible_answer").mkdir(parents=True)
    for name in (f"BFCL_v4_{category}.json", f"possible_answer/BFCL_v4_{category}.json"):
        source = external / "bfcl" / name
        if source.exists():  # irrelevance has no possible answers: no call is the answer
            kept = [x for x in source.read_text("utf-8").splitlines() if f'"{entry}"' in x]
            (corpus / name).write_text("".join(x + "\n" for x in kept), "utf-8")
    return BfclEnvironment.from_corpus(corpus)


def _bad_call(env, arguments: str) -> Rollout:
    """The rollout of ``env``'s one task whose reply calls its one tool with ``arguments``."""
    (task,) = env.tasks()
    variant = canonical_variant(env.harness_for(task))
    (tool,) = variant.harness.tools
    function = {"name": tool.name, "arguments": arguments}
    reply = assistant_message(None, [{"id": "c", "type": "function", "function": function}])
    return asyncio.run(
        rollout(RolloutSpec("t", task, variant), env, Scripted([reply]), RolloutConfig())
    )


@pytest.mark.parametrize("arguments", ['{"x": ', "[1]", '"text"'])
def test_a_call_that_does_not_decode_is_no_call_on_a_bfcl_irrelevance_entry(
    external, tmp_path, arguments
):
    """BFCL counts a reply its decoder cannot decode (arguments not JSON, or JSON that is not
    an object) as no call, so an irrelevance entry passes; the teacher still refuses it."""
    result = _bad_call(_bfcl_entry(external, tmp_path, "irrelevance", "irrelevance_0"), arguments)
    assert result.ended == "format" and not result.verification.verified
    assert result.verification.reason.startswith("format: ")
    assert succeeded(result) and failure_class(result) is None
    row = episode_row("canonical", "c", result, policy="scripted")
    assert row["success"] and row["failure"] is None and row["score"] == 1.0


def test_a_call_that_does_not_decode_fails_a_bfcl_entry_that_wants_a_call(external, tmp_path):
    env = _bfcl_entry(external, tmp_path, "simple_python", "simple_python_0")
    result = _bad_call(env, '{"x": ')
    assert result.ended == "format" and failure_class(result) == "unparseable_call"
