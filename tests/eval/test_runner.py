"""The evaluation runner end to end in process: the oracle, the fixed oracle, BFCL, reruns."""

from __future__ import annotations

import asyncio
import json

import pyarrow.parquet as pq
import pytest

from hsa.augment.recipe import Recipe
from hsa.envs.registry import get
from hsa.errors import EvalError, TeacherError
from hsa.eval.config import EvalConfig
from hsa.eval.runner import EPISODES, SUMMARY, EvalIncomplete, TrainingRecipe, evaluate, plan
from hsa.eval.suites import heldout_recipe
from hsa.teachers.backends.base import Backend, BackendStats, ContextOverflow
from hsa.teachers.oracle import OracleBackend, OracleResponder
from hsa.teachers.request import ChatRequest, ChatResponse
from tests.fakes import Unloadable

#: one rule per variant, so each episode's result is the result of one rule
PROBE = {
    "seed": 3,
    "variants_per_harness": 24,
    "min_rules": 1,
    "max_rules": 1,
    "rules": [
        # what a model trained on the canonical harness relies on
        {"rule": "tools.rename", "params": {"style": "synonym"}},
        {"rule": "tools.rename_params", "params": {"fraction": 1.0}},
        {"rule": "skill_ids.rename", "params": {"style": "random"}},
        {"rule": "protocol.switch", "params": {"target": "text"}},
        # what it does not
        {"rule": "tools.descriptions"},
        {"rule": "tools.shuffle"},
        {"rule": "prompt.section_order"},
        {"rule": "prompt.heading_style"},
        {"rule": "hooks.wording"},
        {"rule": "hooks.wrapper"},
        {"rule": "skill_content.shuffle"},
        {"rule": "skill_content.list_style"},
    ],
}
BREAKS = {"tools.rename", "tools.rename_params", "skill_ids.rename", "protocol.switch"}


@pytest.fixture(scope="module")
def livestream():
    return get("livestream")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    path = tmp_path_factory.mktemp("recipe") / "probe.yaml"
    path.write_text(json.dumps(PROBE), "utf-8")
    return path


def _config(**settings) -> EvalConfig:
    return EvalConfig(**{"tasks": 40, "variants": 6, **settings})


def test_the_oracle_scores_everything_on_canonical_and_held_out_variants(livestream, tmp_path):
    report = evaluate(_config(), tmp_path / "run", env=livestream)
    suites = report.summary["suites"]
    assert suites["canonical"]["success"] == 1.0 and suites["canonical"]["n"] == 40
    assert suites["variants"]["success"] == 1.0 and suites["variants"]["n"] == 240
    assert report.summary["drop"] == 0.0
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    assert len(rows) == 280 and all(r["success"] and r["failure"] is None for r in rows)
    assert {r["suite"] for r in rows} == {"canonical", "variants"}
    assert all(r["steps"] == len(r["call_latencies_s"]) >= 1 for r in rows)


def test_the_fixed_oracle_drops_exactly_on_what_it_relies_on(livestream, probe, tmp_path):
    config = _config(policy="fixed-oracle", recipe=str(probe), tasks=60, variants=8)
    summary = evaluate(config, tmp_path / "run", env=livestream).summary
    suites = summary["suites"]
    assert suites["canonical"]["success"] == 1.0
    variants = suites["variants"]
    by_rule = variants["by_rule"]
    assert set(by_rule) == {r["rule"] for r in PROBE["rules"]}
    for rule, entry in by_rule.items():
        if rule in BREAKS:
            assert entry["success"] < 0.8, (rule, entry)
        else:
            assert entry["success"] == 1.0, (rule, entry)
    families = variants["by_family"]
    for family in ("tools", "skill_ids", "protocol"):
        assert families[family]["success"] < 1.0, family
    for family in ("prompt", "hooks", "skill_content"):
        assert families[family]["success"] == 1.0, family
    assert summary["drop"] > 0.1
    # its failures are the model's: names the harness does not offer, unreadable calls
    assert {"unknown_tool", "unparseable_call"} <= set(variants["failures"])


def test_a_run_is_reproducible_and_a_rerun_asks_nothing(livestream, tmp_path):
    """Same seed, same episodes and figures; the request cache answers the rerun."""
    config = _config(tasks=10, variants=2, cache=str(tmp_path / "cache.sqlite"))
    first = evaluate(config, tmp_path / "a", env=livestream)
    assert first.requests > 0 and first.cache_hits == 0
    again = evaluate(config, tmp_path / "b", env=livestream)
    assert again.requests == 0 and again.cache_hits == first.requests
    a = pq.read_table(tmp_path / "a" / EPISODES)
    b = pq.read_table(tmp_path / "b" / EPISODES)
    assert a.equals(b)  # latencies too: a cached answer keeps its original latency
    assert a.column("variant_id").to_pylist() == b.column("variant_id").to_pylist()


def test_task_sampling_is_deterministic_and_shared_by_suites(livestream):
    one = plan(_config(tasks=12, variants=2), livestream)
    two = plan(_config(tasks=12, variants=2), livestream)
    assert [e.spec.id for e in one] == [e.spec.id for e in two]
    canonical = [e.spec.task.id for e in one if e.suite == "canonical"]
    variants = sorted({e.spec.task.id for e in one if e.suite == "variants"})
    assert sorted(canonical) == variants and len(canonical) == 12
    other = plan(_config(tasks=12, variants=2, seed=5), livestream)
    assert {e.spec.task.id for e in other} != set(canonical)
    # a task seed of its own: the same tasks under another seed's variants
    same = plan(_config(tasks=12, variants=2, seed=5, task_seed=0), livestream)
    assert {e.spec.task.id for e in same} == set(canonical)
    assert [e.spec.variant.variant_id for e in same if e.suite == "variants"] != [
        e.spec.variant.variant_id for e in one if e.suite == "variants"
    ]
    # unset, it leaves the run's identity as it was
    assert _config(task_seed=None).output_hash() == _config().output_hash()
    assert _config(task_seed=0).output_hash() != _config().output_hash()


def test_bfcl_reference_answers_score_everything_in_every_configuration(external, tmp_path):
    env = get("bfcl", path=str(external / "bfcl"))
    config = _config(env="bfcl", suites=("canonical", "bfcl"), tasks=6)
    summary = evaluate(config, tmp_path / "run", env=env).summary
    bfcl = summary["suites"]["bfcl"]
    assert bfcl["success"] == 1.0 and bfcl["tasks"] == 6
    assert bfcl["format_sensitivity"]["configurations"] == 26
    assert all(c["success"] == 1.0 for c in bfcl["by_config"].values())
    assert bfcl["format_sensitivity"]["max_delta"] == 0.0
    assert summary["suites"]["canonical"]["success"] == 1.0
    # the multi-turn entries BFCL cannot score here are left out, and the summary says so
    (note,) = summary["left_out"]
    assert note.startswith("200 multi_turn_base task(s) imported unscored: ")


def test_a_format_brittle_model_shows_the_drop_on_bfcl(external, tmp_path):
    """The fixed oracle answers in one format (the canonical protocol's) only."""
    env = get("bfcl", path=str(external / "bfcl"))
    config = _config(env="bfcl", policy="fixed-oracle", suites=("canonical", "bfcl"), tasks=6)
    summary = evaluate(config, tmp_path / "run", env=env).summary
    assert summary["suites"]["canonical"]["success"] == 1.0
    bfcl = summary["suites"]["bfcl"]
    assert bfcl["success"] == 0.0
    assert set(bfcl["failures"]) == {"unparseable_call"}


def test_tau2_tasks_are_played_from_their_opening_and_scored_by_actions(external, tmp_path):
    env = get("tau2", path=str(external / "tau2" / "retail"))
    summary = evaluate(_config(env="tau2", tasks=8, variants=2), tmp_path / "run", env=env).summary
    assert summary["suites"]["canonical"]["success"] == 1.0
    assert summary["suites"]["variants"]["success"] == 1.0


def tau2_domain(tmp_path, tasks):
    """A tau2 domain folder of one tool, ``lookup(id)``, and ``tasks``."""
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a record up.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
    domain = tmp_path / "shop"
    domain.mkdir()
    (domain / "tools.json").write_text(json.dumps([tool]), "utf-8")
    (domain / "tasks.json").write_text(json.dumps(tasks), "utf-8")
    return domain


#: a tau2 task hsa can score, and one it cannot (an assertion of tau2's Python to run)
SCORED = {
    "id": "scored",
    "evaluation_criteria": {
        "actions": [{"action_id": "a", "name": "lookup", "arguments": {"id": "1"}}],
        "reward_basis": ["DB"],
    },
}
ASSERTED = {
    "id": "asserted",
    "evaluation_criteria": {
        "env_assertions": [{"env_type": "assistant", "func_name": "assert_x", "arguments": {}}],
        "reward_basis": ["ENV_ASSERTION"],
    },
}


def test_the_tasks_an_environment_left_out_are_said_in_the_summary_and_report(tmp_path):
    domain = tau2_domain(tmp_path, [SCORED, ASSERTED])
    config = _config(env="tau2", env_options={"path": str(domain)}, suites=("canonical",))
    report = evaluate(config, tmp_path / "run")
    (note,) = report.left_out
    assert note.startswith("1 task(s) imported unscored (asserted): ")
    assert report.summary["suites"]["canonical"]["tasks"] == 1
    assert report.summary["left_out"] == [note]
    assert f"\n- {note}\n" in (tmp_path / "run" / "report.md").read_text("utf-8")


def test_an_environment_whose_tasks_are_all_left_out_says_why_it_has_none(tmp_path):
    domain = tau2_domain(tmp_path, [ASSERTED])
    config = _config(env="tau2", env_options={"path": str(domain)}, suites=("canonical",))
    with pytest.raises(EvalError) as caught:
        evaluate(config, tmp_path / "run")
    assert caught.value.message.startswith(
        "environment 'tau2' has no test tasks: 1 task(s) imported unscored (asserted): "
    )

    # a split left empty by the source, not by what was left out: the notes are no cause
    # ("has no train tasks: 1 task(s) imported unscored" read as the reason)
    (tmp_path / "other").mkdir()
    domain = tau2_domain(tmp_path / "other", [SCORED, ASSERTED])
    config = _config(env="tau2", env_options={"path": str(domain)}, split="train")
    with pytest.raises(EvalError) as caught:
        evaluate(config, tmp_path / "run")
    assert caught.value.message.startswith(
        "environment 'tau2' has no train tasks (it has 1 test task(s); also left out: 1 task(s) "
        "imported unscored (asserted): "
    )


class Down(Backend):
    name = "down"

    def __init__(self):
        self.stats = BackendStats()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise TeacherError("connection refused after 3 attempts")


@pytest.mark.parametrize("suites", ["canonical", "canonical,variants"])
def test_a_tau2_folder_of_several_domains_is_refused_naming_each(external, tmp_path, suites):
    """Run as it is, canonical would mix the domains' tasks and variants fail on their two
    harnesses: refused before anything runs or is written, naming the folders to pass."""
    corpus = external / "tau2"
    config = _config(env="tau2", env_options={"path": str(corpus)}, suites=suites, tasks=2)
    with pytest.raises(EvalError) as caught:
        evaluate(config, tmp_path / "run", backend=Down())
    error = caught.value
    assert error.file == str(corpus) and error.where == "env_options.path"
    assert "holds 2 tau2 domains (airline, retail)" in error.message
    assert f"{corpus / 'airline'} or {corpus / 'retail'}" in error.message
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_an_unanswered_run_writes_nothing_and_says_why(livestream, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(EvalIncomplete) as caught:
        evaluate(_config(tasks=3, variants=1), out, env=livestream, backend=Down())
    assert "connection refused" in str(caught.value) and caught.value.report.retry == 6
    assert not (out / SUMMARY).exists() and not (out / EPISODES).exists()


class TooLong(Down):
    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise ContextOverflow("the conversation outgrew the model's context window (HTTP 400)")


def test_openings_past_the_context_window_do_not_say_a_rerun_helps(livestream, tmp_path):
    # every attempt gets the same refusal: the error says what to change instead
    with pytest.raises(EvalIncomplete) as caught:
        evaluate(_config(tasks=2, variants=1), tmp_path / "run", env=livestream, backend=TooLong())
    message = str(caught.value)
    assert "the task's opening does not fit the model's context window" in message
    assert "A rerun gets the same refusal: serve the model with a longer context" in message
    assert "Once it answers" not in message


class Flaky(Backend):
    """The oracle, failing every request of its first ``down`` calls."""

    name = "flaky"

    def __init__(self, env, down: int):
        self.inner = OracleBackend(OracleResponder(env))
        self.down = down
        self.stats = BackendStats()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if self.down:
            self.down -= 1
            raise TeacherError("http 503")
        return await self.inner.chat(request)


def test_a_rerun_retries_what_failed_and_answers_the_rest_from_the_cache(livestream, tmp_path):
    out = tmp_path / "run"
    config = _config(tasks=6, suites=("canonical",), concurrency=1)
    with pytest.raises(EvalIncomplete):
        evaluate(config, out, env=livestream, backend=Flaky(livestream, down=1))
    report = evaluate(config, out, env=livestream, backend=Flaky(livestream, down=0))
    assert report.summary["suites"]["canonical"]["success"] == 1.0
    assert report.cache_hits > 0 and report.requests > 0


class Slow(Flaky):
    """The oracle, answering each request ``delay_s`` after it is asked."""

    def __init__(self, env, delay_s: float):
        super().__init__(env, down=0)
        self.delay_s = delay_s

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await asyncio.sleep(self.delay_s)
        return await super().chat(request)


def test_the_episodes_own_wall_times_are_counted(livestream, tmp_path):
    config = _config(tasks=4, suites=("canonical", "firstcall"), variants=1, concurrency=2)
    slow = Slow(livestream, 0.02)
    variants = {e.spec.variant.variant_id: e.spec.variant for e in plan(config, livestream)}
    slow.inner = OracleBackend(OracleResponder(livestream, variants=variants))
    report = evaluate(config, tmp_path / "run", env=livestream, backend=slow)
    assert report.requests > report.episodes  # canonical episodes make several calls
    # every call waits 20 ms inside its episode; the episodes share 2 lanes of the run
    assert report.requests * 0.02 <= report.episodes_s <= 2 * report.run_s


@pytest.mark.parametrize(
    "marker, what", [("manifest.json", "a dataset"), ("teach.json", "a teacher job")]
)
def test_a_directory_of_something_else_is_refused_untouched(livestream, tmp_path, marker, what):
    out = tmp_path / "other"
    out.mkdir()
    (out / marker).write_text("{}")
    with pytest.raises(EvalError, match=f"holds {what} \\({marker}\\), not an evaluation"):
        evaluate(_config(tasks=2, variants=1), out, env=livestream)
    assert sorted(p.name for p in out.iterdir()) == [marker]


def test_a_directory_of_files_hsa_did_not_write_is_refused_untouched(livestream, tmp_path):
    out = tmp_path / "notes"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / ".draft.tmp").write_text("keep")
    (out / "report.md").write_text("my notes")
    (out / "plan.txt").write_text("mine")
    with pytest.raises(EvalError, match=r"what hsa did not write there \(plan\.txt, sub\)"):
        evaluate(_config(tasks=2, variants=1), out, env=livestream)
    assert (out / "sub" / ".draft.tmp").read_text() == "keep"
    assert (out / "report.md").read_text() == "my notes"
    # a file named as a run's output, with no run started here, is the user's too
    (out / "plan.txt").unlink()
    (out / "sub" / ".draft.tmp").unlink()
    (out / "sub").rmdir()
    config = _config(tasks=2, variants=1, suites=("canonical",))
    with pytest.raises(EvalError, match=r"holds report\.md, named as an evaluation's files"):
        evaluate(config, out, env=livestream)
    assert (out / "report.md").read_text() == "my notes"
    # a killed run's temporaries and its cache journal are its own (it recorded its start)
    (out / "report.md").unlink()
    (out / ".hsa").mkdir()
    (out / ".hsa" / "evaluation.json").write_text(json.dumps({"output_hash": config.output_hash()}))
    (out / ".episodes.parquet.4242.tmp").write_bytes(b"half")
    (out / "cache.sqlite-journal").write_bytes(b"")
    evaluate(config, out, env=livestream)
    assert (out / "summary.json").is_file() and not (out / ".episodes.parquet.4242.tmp").exists()


def test_a_model_that_cannot_load_is_one_error_and_leaves_nothing(livestream, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(TeacherError, match="no model folder"):
        evaluate(_config(tasks=2, variants=1), out, env=livestream, backend=Unloadable())
    assert not out.exists()  # no cache, no folder


@pytest.mark.parametrize("kind", ["folder", "not sqlite"])
def test_a_bad_cache_is_one_error_and_leaves_nothing(livestream, tmp_path, kind):
    """A --cache that cannot be opened is a setup error: no start is recorded, so the rerun
    with the cache corrected (and other settings) is no other run's."""
    bad = tmp_path / "bad"
    if kind == "folder":
        bad.mkdir()
    else:
        bad.write_text("my notes")
    out = tmp_path / "run"
    with pytest.raises(TeacherError, match="choose another --cache"):
        evaluate(_config(tasks=1, variants=1, cache=str(bad)), out, env=livestream)
    assert not out.exists()
    evaluate(_config(tasks=2, variants=1), out, env=livestream)
    assert (out / SUMMARY).is_file()


def test_a_variants_suite_from_a_recipe_without_rules_is_refused(livestream, tmp_path):
    recipe = tmp_path / "none.yaml"
    recipe.write_text("rules: []\n")
    with pytest.raises(EvalError, match="draws no rules, so the variants suite") as caught:
        evaluate(_config(recipe=str(recipe)), tmp_path / "run", env=livestream)
    assert (caught.value.file, caught.value.where) == (str(recipe), "$.rules")
    assert not (tmp_path / "run").exists()
    # the canonical suite alone needs no drawn rules
    alone = _config(tasks=2, recipe=str(recipe), suites=("canonical",))
    assert evaluate(alone, tmp_path / "run", env=livestream).summary["suites"]["canonical"]


def test_a_directory_of_another_run_is_refused(livestream, tmp_path):
    evaluate(_config(tasks=3, variants=1), tmp_path / "run", env=livestream)
    with pytest.raises(EvalError, match="other settings"):
        evaluate(_config(tasks=3, variants=1, seed=9), tmp_path / "run", env=livestream)


def test_a_rerun_with_the_suites_in_another_order_is_the_same_run(livestream, tmp_path):
    """The suites' order is not a setting: the episodes, summary and report come out alike."""
    out, cache = tmp_path / "run", str(tmp_path / "cache.sqlite")
    config = _config(tasks=2, variants=1, suites="variants,canonical", cache=cache)
    first = evaluate(config, out, env=livestream)
    written = {name: (out / name).read_bytes() for name in (EPISODES, "report.md")}
    assert list(first.summary["suites"]) == ["canonical", "variants"]
    config = _config(tasks=2, variants=1, suites="canonical,variants", cache=cache)
    again = evaluate(config, out, env=livestream)
    assert again.requests == 0 and again.summary["suites"] == first.summary["suites"]
    assert again.summary["config"] == first.summary["config"]
    assert {name: (out / name).read_bytes() for name in written} == written


def test_a_held_out_recipe_that_overlaps_training_is_refused(livestream, probe):
    training = Recipe.from_dict(PROBE)
    with pytest.raises(EvalError, match=r"tools.rename .* overlaps training rules\[0\]") as caught:
        plan(_config(recipe=str(probe)), livestream, training)
    assert (caught.value.file, caught.value.where) == (str(probe), "$.rules[0]")
    wording = Recipe.from_dict({"rules": [{"rule": "hooks.wording"}]})
    assert plan(_config(tasks=2), livestream, wording)  # the built-in held-out recipe does not
    assert heldout_recipe().max_rules == 1


def test_an_overlap_names_both_recipes_files_and_the_training_rules_path(livestream, tmp_path):
    """The held-out rule by its file and JSON path, the training rule by its own (in a build
    config, under $.augment.recipe), and how many more overlap."""
    held = tmp_path / "held.yaml"
    held.write_text(json.dumps({"rules": [{"rule": "hooks.wording"}, {"rule": "tools.shuffle"}]}))
    training = Recipe.from_dict({"rules": [{"rule": "tools.shuffle"}, {"rule": "hooks.wording"}]})
    where = TrainingRecipe(training, file="build.yaml", root="$.augment.recipe")
    with pytest.raises(EvalError) as caught:
        plan(_config(recipe=str(held)), livestream, where)
    assert (caught.value.file, caught.value.where) == (str(held), "$.rules[0]")
    assert "hooks.wording {} overlaps training at build.yaml: $.augment.recipe.rules[1] {}" in (
        caught.value.message
    )
    assert "(and 1 more)" in caught.value.message
    # the built-in held-out recipe is named by its file too
    built_in = TrainingRecipe(heldout_recipe(), file="train.yaml")
    with pytest.raises(EvalError) as caught:
        plan(_config(tasks=2), livestream, built_in)
    assert (caught.value.file, caught.value.where) == ("hsa/eval/heldout.yaml", "$.rules[0]")
    assert "overlaps training at train.yaml: $.rules[0] " in caught.value.message


@pytest.mark.parametrize("side", ["held", "training"])
def test_an_overlapping_rule_of_probability_0_is_named_as_an_overlap(livestream, tmp_path, side):
    # a rule never drawn still overlaps (the check is by what a recipe names); finding the
    # pair once built one-rule recipes, which min_rules refused as never drawing a rule
    never = {"rule": "tools.shuffle", "probability": 0.0}
    held = [never if side == "held" else {"rule": "tools.shuffle"}, {"rule": "hooks.wording"}]
    trained = [never if side == "training" else {"rule": "tools.shuffle"}]
    (tmp_path / "held.yaml").write_text(json.dumps({"rules": held}))
    training = TrainingRecipe(Recipe.from_dict({"rules": trained, "min_rules": 0}), "t.yaml")
    with pytest.raises(EvalError, match=r"tools.shuffle {} overlaps training at t.yaml") as caught:
        plan(_config(recipe=str(tmp_path / "held.yaml")), livestream, training)
    assert caught.value.where == "$.rules[0]"


def test_a_refused_call_does_not_count_for_the_environment(external, tmp_path):
    """tau2 scores actions by the calls made: a call by a name the variant does not offer is
    refused and must not count as the action it would have been."""
    env = get("tau2", path=str(external / "tau2" / "retail"))
    recipe = tmp_path / "rename.yaml"
    recipe.write_text(json.dumps({"rules": [{"rule": "tools.rename"}], "max_rules": 1}), "utf-8")
    config = _config(env="tau2", policy="fixed-oracle", recipe=str(recipe), tasks=6, variants=2)
    summary = evaluate(config, tmp_path / "run", env=env).summary
    assert summary["suites"]["canonical"]["success"] == 1.0
    assert summary["suites"]["variants"]["success"] < 0.5


def test_a_cache_without_a_start_record_is_reused_and_a_foreign_summary_named(livestream, tmp_path):
    config = _config(tasks=2, variants=1, suites=("canonical",))
    first = tmp_path / "first"
    evaluate(config, first, env=livestream)
    # a run interrupted under an hsa that kept no start record left its cache alone
    older = tmp_path / "older"
    older.mkdir()
    (older / "summary.json").write_text("{}")  # and a summary.json that is no run's
    with pytest.raises(EvalError, match=r"holds summary\.json, which is not what an evaluation"):
        evaluate(config, older, env=livestream)
    (older / "summary.json").unlink()
    (older / "cache.sqlite").write_bytes(b"")
    evaluate(config, older, env=livestream)
    done = json.loads((older / "summary.json").read_text())
    assert done["output_hash"] == json.loads((first / "summary.json").read_text())["output_hash"]


def test_the_summary_records_the_environments_task_version(livestream, tmp_path):
    """Which tasks the splits hold is not in the config: the summary says it, for compare."""
    summary = evaluate(_config(tasks=2, variants=1), tmp_path / "a", env=livestream).summary
    assert summary["task_version"] == livestream.task_version == 2
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["task_version"] == 2


def test_a_recipe_file_edited_between_runs_is_two_samples_to_compare(livestream, tmp_path):
    """The summary records the held-out recipe's content, so a file edited between two runs
    (and read from wherever compare runs) is told apart by what each run drew from."""
    from hsa.eval.report import compare_rows, compare_table, read_summary

    recipe = tmp_path / "rx.yaml"
    recipe.write_text(json.dumps({**PROBE, "rules": PROBE["rules"][4:]}), "utf-8")
    config = _config(tasks=2, variants=1, recipe=str(recipe))
    evaluate(config, tmp_path / "a", env=livestream)
    recipe.write_text(json.dumps({**PROBE, "rules": PROBE["rules"][:4]}), "utf-8")
    evaluate(config, tmp_path / "b", env=livestream)
    a, b = read_summary(tmp_path / "a"), read_summary(tmp_path / "b")
    assert a["recipe"] == Recipe.from_dict({**PROBE, "rules": PROBE["rules"][4:]}).to_dict()
    assert a["config"]["recipe"] == b["config"]["recipe"] == str(recipe)
    note = compare_table(compare_rows([a, b], ["a", "b"])).splitlines()[-1]
    assert note.startswith("Note: these runs evaluate different samples (recipe rx.yaml (")
    # the built-in recipe, unnamed, is recorded as what it is
    built_in = evaluate(_config(tasks=2, variants=1), tmp_path / "c", env=livestream).summary
    assert built_in["recipe"] == heldout_recipe().to_dict()
