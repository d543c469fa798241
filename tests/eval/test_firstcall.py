"""The firstcall suite: one reply per task and harness, scored name / keys / exact."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from hsa.augment.planner import canonical_variant
from hsa.envs.registry import get
from hsa.eval.config import EvalConfig
from hsa.eval.firstcall import judge
from hsa.eval.runner import EPISODES, evaluate
from hsa.harness.events import SkillLoad, ToolCall
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.request import ChatResponse
from tests.eval.test_runner import PROBE


@pytest.fixture(scope="module")
def livestream():
    return get("livestream")


def call(tool, **args):
    return ToolCall("call_0", tool, args)


@pytest.mark.parametrize(
    "got, expected",
    [
        (call("search", query="lamp"), (True, True, True, None)),
        (call("search", query="desk"), (True, True, False, "wrong_arguments")),
        (call("search", q="lamp"), (True, False, False, "wrong_arguments")),
        (call("order", query="lamp"), (False, False, False, "wrong_tool")),
        (None, (False, False, False, "wrong_final_answer")),
        (SkillLoad("returns"), (False, False, False, "wrong_tool")),
    ],
)
def test_a_first_call_is_judged_in_three_steps(got, expected):
    assert judge(call("search", query="lamp"), got, None) == expected


def test_no_call_matches_an_answer_without_a_call_and_problems_fail_everything():
    assert judge(None, None, None) == (True, True, True, None)
    assert judge(None, call("search"), None)[3] == "wrong_tool"
    assert judge(call("search"), None, "unknown_tool") == (False, False, False, "unknown_tool")
    assert judge(SkillLoad("a"), SkillLoad("a"), None) == (True, True, True, None)
    # the right tool, called with arguments its schema refuses: the name, not the keys
    refused = judge(call("search"), None, "invalid_arguments", named="search")
    assert refused == (True, False, False, "invalid_arguments")
    assert judge(call("search"), None, "invalid_arguments", named="buy")[0] is False


def test_the_oracle_is_exact_and_the_fixed_oracle_loses_only_under_variants(livestream, tmp_path):
    recipe = tmp_path / "probe.yaml"
    import json

    recipe.write_text(json.dumps(PROBE), "utf-8")
    settings = {"suites": ("firstcall",), "tasks": 30, "variants": 6, "recipe": str(recipe)}
    oracle = evaluate(EvalConfig(**settings), tmp_path / "oracle", env=livestream).summary
    assert oracle["suites"]["firstcall"]["exact"]["success"] == 1.0
    fixed = evaluate(
        EvalConfig(policy="fixed-oracle", **settings), tmp_path / "fixed", env=livestream
    ).summary["suites"]["firstcall"]
    assert fixed["by_harness"]["canonical"]["success"] == 1.0
    assert fixed["by_harness"]["variants"]["success"] < 0.9
    assert fixed["name"]["success"] >= fixed["keys"]["success"] >= fixed["exact"]["success"]
    rows = pq.read_table(tmp_path / "fixed" / EPISODES).to_pylist()
    assert len(rows) == 30 * 7 and all(r["steps"] == 1 for r in rows)
    renamed = [r for r in rows if r["rules"] == ["tools.rename"]]
    # a canonical name the variant renamed is an unknown tool, never a name match
    assert renamed and not any(r["name_match"] for r in renamed if r["failure"])
    assert {r["failure"] for r in renamed} <= {None, "unknown_tool"}


def test_the_right_tool_with_refused_arguments_matches_the_name_only(livestream, tmp_path):
    # wrapped arguments: the fixed oracle calls the right tool with the canonical arguments,
    # which the wrapped schema refuses
    recipe = tmp_path / "wrap.yaml"
    recipe.write_text("variants_per_harness: 4\nrules: [{rule: tools.wrap_args}]\n", "utf-8")
    settings = {"suites": ("firstcall",), "tasks": 12, "variants": 2, "recipe": str(recipe)}
    evaluate(EvalConfig(policy="fixed-oracle", **settings), tmp_path / "fixed", env=livestream)
    rows = pq.read_table(tmp_path / "fixed" / EPISODES).to_pylist()
    refused = [r for r in rows if r["failure"] == "invalid_arguments"]
    assert refused and all(r["name_match"] and not r["keys_match"] for r in refused)


@pytest.mark.parametrize(
    ("finish", "said"),
    [("length", "at the token limit"), ("repetition", "as it repeated itself")],
)
def test_a_failed_reply_cut_off_is_classed_truncated(livestream, tmp_path, finish, said):
    from hsa.teachers.backends.base import Backend, BackendStats
    from hsa.teachers.request import ChatResponse, assistant_message

    class CutOff(Backend):
        name = "cut-off"
        stats = BackendStats()

        async def chat(self, request):
            return ChatResponse(assistant_message("Let me look that up for", []), finish)

    config = EvalConfig(suites=("firstcall",), tasks=3, variants=1)
    evaluate(config, tmp_path / "out", env=livestream, backend=CutOff())
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    assert rows and {r["failure"] for r in rows} == {"truncated"}
    assert all(r["reason"].startswith(f"cut off {said}") for r in rows)


@pytest.mark.parametrize("offers", [True, False])
@pytest.mark.parametrize("arguments", ["{}", '{"order_id": "NW-1'])  # whole, or cut mid-way
def test_a_reply_cut_off_is_offered_by_what_it_named(livestream, tmp_path, offers, arguments):
    # a reply cut off is classed truncated whatever it named, and the experiment read
    # `offered` from the class: one naming an offered tool counted as naming nothing; and a
    # reply cut inside its arguments, which does not parse, was offered nothing
    from hsa.teachers.request import assistant_message

    class CutOffCall(Backend):
        name = "cut-off-call"
        stats = BackendStats()

        async def chat(self, request):
            tool = request.tools[-1]["function"]["name"] if offers else "nope"
            function = {"name": tool, "arguments": arguments}
            call = {"id": "c0", "type": "function", "function": function}
            return ChatResponse(assistant_message(None, [call]), "length")

    config = EvalConfig(suites=("firstcall",), tasks=6, variants=1)
    evaluate(config, tmp_path / "out", env=livestream, backend=CutOffCall())
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    api = [r for r in rows if r["protocol"] == "api" and not r["success"]]
    assert api and {r["failure"] for r in api} == {"truncated"}
    assert all(r["offered"] is offers for r in api)


def test_the_firstcall_suite_is_named_when_it_needs_one_harness(tmp_path):
    from hsa.errors import EvalError
    from hsa.eval.suites import firstcall_episodes, heldout_recipe

    class Many:
        name = "many"

        def harness(self):
            from hsa.errors import EnvError

            raise EnvError("this environment has one harness per task")

    with pytest.raises(EvalError, match="the firstcall suite needs"):
        firstcall_episodes(Many(), [], heldout_recipe(), k=1, seed=0)


def test_a_reply_calling_an_unknown_tool_counts_its_calls(livestream, tmp_path):
    from hsa.teachers.backends.base import Backend, BackendStats
    from hsa.teachers.request import ChatResponse, assistant_message

    class Unknown(Backend):
        name = "unknown"
        stats = BackendStats()

        async def chat(self, request):
            calls = [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": f"nope{i}", "arguments": "{}"},
                }
                for i in range(2)
            ]
            return ChatResponse(assistant_message(None, calls))

    config = EvalConfig(suites=("firstcall",), tasks=3, variants=1)
    evaluate(config, tmp_path / "out", env=livestream, backend=Unknown())
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    api = [r for r in rows if r["protocol"] == "api"]
    assert api and all(r["failure"] == "unknown_tool" and r["calls"] == 2 for r in api)


def test_a_refused_skill_tool_call_names_the_skill_its_skill_argument_names():
    # a skill load's target is its skill: a refused call to the skill tool matches the name
    # when its skill argument names the right skill, and none without one
    want = SkillLoad("ad-compliance")
    refused = judge(want, None, "invalid_arguments", named=SkillLoad("ad-compliance"))
    assert refused == (True, False, False, "invalid_arguments")
    assert judge(want, None, "invalid_arguments", named=SkillLoad("other"))[0] is False
    assert judge(want, None, "invalid_arguments", named=None)[0] is False
    assert judge(call("search"), None, "invalid_arguments", named=want)[0] is False


class ExtraArgument(Backend):
    """A backend's answers with an argument the skill tool's schema refuses added to their
    skill loads (those sent as API calls to the skill tool, by its canonical name)."""

    name = "extra-argument"

    def __init__(self, inner, skill_tool):
        self.inner = inner
        self.skill_tool = skill_tool
        self.stats = BackendStats()

    async def chat(self, request):
        response = await self.inner.chat(request)
        message = json.loads(json.dumps(response.message))
        for tool_call in message.get("tool_calls") or ():
            function = tool_call["function"]
            if function["name"] == self.skill_tool:
                function["arguments"] = json.dumps(
                    {**json.loads(function["arguments"]), "zzz_extra": 1}
                )
        return ChatResponse(message, response.finish_reason)


def test_a_skill_load_with_an_argument_its_schema_refuses_is_refused_in_every_suite(
    livestream, tmp_path, monkeypatch
):
    # It used to load the skill, the argument dropped unseen: success, verified and an exact
    # first call. A variant renaming the skill tool's parameter keeps its name.
    import hsa.eval.runner as runner

    made = runner.make_backend
    skill_tool = livestream.harness().skill_tool.name
    monkeypatch.setattr(runner, "make_backend", lambda *a: ExtraArgument(made(*a), skill_tool))
    recipe = tmp_path / "params.yaml"
    recipe.write_text("rules: [{rule: tools.rename_params}]\n", "utf-8")
    suites = ("canonical", "variants", "firstcall")
    config = EvalConfig(suites=suites, tasks=8, variants=1, recipe=str(recipe))
    evaluate(config, tmp_path / "out", env=livestream)
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    skills = {s.id for s in livestream.harness().skills}
    loads = {r["task_id"] for r in rows if r["suite"] == "firstcall" and r["target"] in skills}
    assert loads  # tasks whose first step loads a skill
    for row in (r for r in rows if r["task_id"] in loads):
        assert not row["success"] and not row["verified"], row
        assert row["failure"] == "invalid_arguments", row
        if row["suite"] == "firstcall":
            assert "zzz_extra" in row["reason"]
            # the right skill named, by the variant's skill argument: the name, not the keys
            assert row["name_match"] and not row["keys_match"] and row["calls"] == 1


def test_a_first_reply_loading_a_skill_counts_it_as_a_call(livestream, tmp_path):
    config = EvalConfig(suites=("firstcall",), tasks=8, variants=1)
    evaluate(config, tmp_path / "out", env=livestream)
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    skills = {s.id for s in livestream.harness().skills}
    loads = [r for r in rows if r["target"] in skills and not r["rules"]]
    assert loads and all(r["success"] and r["calls"] == 1 for r in loads)


def test_a_skill_tool_call_without_the_variants_skill_argument_names_no_skill(livestream, tmp_path):
    # the fixed oracle writes the canonical skill argument, which the variant renamed: the
    # skill tool alone names no skill, so no name match (a regular tool's call would match)
    recipe = tmp_path / "params.yaml"
    recipe.write_text("rules: [{rule: tools.rename_params}]\n", "utf-8")
    config = EvalConfig(
        policy="fixed-oracle", suites=("firstcall",), tasks=8, variants=1, recipe=str(recipe)
    )
    evaluate(config, tmp_path / "out", env=livestream)
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    skills = {s.id for s in livestream.harness().skills}
    loads = [r for r in rows if r["target"] in skills and r["rules"]]
    assert loads and all(r["failure"] == "invalid_arguments" for r in loads)
    assert not any(r["name_match"] for r in loads) and all(r["calls"] == 1 for r in loads)
    tools = [r for r in rows if r["target"] not in skills and r["rules"] and r["failure"]]
    assert tools and all(r["name_match"] for r in tools)


def test_the_first_request_under_a_variant_shows_the_hooks_it_adds(livestream, tmp_path):
    """``hooks.neutral_extra``'s session-start and prompt-submit notes are in the opening the
    model is asked to answer, as the rollout of the variants suite sends it."""
    from hsa.teachers.backends.base import Backend, BackendStats
    from hsa.teachers.request import ChatResponse, assistant_message

    asked = []

    class Recording(Backend):
        name = "recording"
        stats = BackendStats()

        async def chat(self, request):
            asked.append(request)
            return ChatResponse(assistant_message("Hello.", []))

    recipe = tmp_path / "neutral.yaml"
    recipe.write_text(
        "seed: 3\nvariants_per_harness: 4\nmin_rules: 1\nmax_rules: 1\nrules:\n"
        "  - {rule: hooks.neutral_extra, probability: 1.0, params: {count: 5}}\n",
        "utf-8",
    )
    config = EvalConfig(suites=("firstcall",), tasks=2, variants=1, recipe=str(recipe))
    evaluate(config, tmp_path / "out", env=livestream, backend=Recording())
    canonical = canonical_variant(livestream.harness()).variant_id
    drawn = [r for r in asked if r.metadata["hsa_variant"] != canonical]
    assert len(drawn) == 2 and len(asked) > len(drawn)
    for request in asked:
        text = "\n".join(m.get("content") or "" for m in request.messages)
        notes = ("Session started.", "Read the whole request before acting.")
        assert all((note in text) == (request in drawn) for note in notes), request.metadata


def test_a_reply_that_does_not_parse_is_no_call_on_a_bfcl_irrelevance_entry(external, tmp_path):
    # BFCL reads a call whose arguments do not decode as no call, so the irrelevance entry
    # passes: the canonical suite said so, the firstcall suite failed it as unparseable_call
    from hsa.teachers.request import assistant_message
    from tests.eval.test_metrics import _bfcl_entry

    env = _bfcl_entry(external, tmp_path, "irrelevance", "irrelevance_0")

    class CutArguments(Backend):
        name = "cut-arguments"
        stats = BackendStats()

        async def chat(self, request):
            function = {"name": request.tools[0]["function"]["name"], "arguments": '{"x": '}
            call = {"id": "c0", "type": "function", "function": function}
            return ChatResponse(assistant_message(None, [call]), "tool_calls")

    config = EvalConfig(env="bfcl", suites=("canonical", "firstcall"), variants=1)
    evaluate(config, tmp_path / "out", env=env, backend=CutArguments())
    rows = pq.read_table(tmp_path / "out" / EPISODES).to_pylist()
    assert {r["suite"] for r in rows} == {"canonical", "firstcall"}
    assert all(r["success"] and r["failure"] is None for r in rows)
    firstcall = [r for r in rows if r["suite"] == "firstcall"]
    assert all(r["name_match"] and r["offered"] and r["calls"] == 0 for r in firstcall)
    assert not any(r["verified"] for r in rows)  # it did not parse
