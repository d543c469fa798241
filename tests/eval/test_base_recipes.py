"""Held-out recipes with base rules and trajectory-dependent rules: the harness under
evaluation is the compact one the base makes, planned per task from its reference solution."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from hsa.augment.mapping import map_events
from hsa.augment.recipe import load_recipe
from hsa.augment.rule import Context
from hsa.envs.registry import get
from hsa.eval.config import EvalConfig
from hsa.eval.runner import EPISODES, evaluate, plan
from hsa.eval.suites import canonical_episodes, sample_tasks, variant_episodes
from hsa.harness.events import SkillLoad, ToolCall
from hsa.teachers.task_variants import task_variants

#: a compact harness (what the solution uses plus two tools, one skill) with every tool renamed
COMPACT = """\
seed: 5
variants_per_harness: 8
min_rules: 1
base:
  - {rule: tools.drop_unused, params: {keep: 2}}
  - {rule: skill_content.drop_unused, params: {keep: 1}}
rules:
  - {rule: tools.rename, probability: 1.0, params: {style: random, fraction: 1.0}}
"""
#: the same base with nothing drawn
BASE_ONLY = COMPACT[: COMPACT.index("\nrules:")] + "\nrules: []\n"
BASE = ["tools.drop_unused", "skill_content.drop_unused"]


@pytest.fixture(scope="module")
def livestream():
    return get("livestream", compact=True)


@pytest.fixture(scope="module")
def tasks(livestream):
    return sample_tasks(livestream.tasks("test"), 12, 0)


@pytest.fixture(scope="module")
def recipe_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("recipe") / "compact.yaml"
    path.write_text(COMPACT, "utf-8")
    return path


@pytest.fixture(scope="module")
def recipe(recipe_path):
    return load_recipe(recipe_path)


def _rules(episode) -> list[str]:
    return [name for name, _, _ in episode.spec.variant.rules]


def _first_name(events) -> str | None:
    """The canonical name of the first call: its tool, or the skill id it loads."""
    for event in events:
        if isinstance(event, SkillLoad):
            return event.skill_id
        if isinstance(event, ToolCall):
            return event.tool
    return None


def test_canonical_episodes_run_under_the_base_rules_alone(livestream, tasks, recipe):
    full = {t.name for t in livestream.harness().tools}
    episodes = canonical_episodes(livestream, tasks, seed=0, recipe=recipe)
    assert [e.spec.task.id for e in episodes] == [t.id for t in tasks]
    for episode in episodes:
        used = Context.of(livestream.solve(episode.spec.task).events)
        harness = episode.spec.variant.harness
        offered = {t.name for t in harness.tools}
        assert used.used_tools <= offered <= full
        assert len(offered) == len(used.used_tools) + 2, episode.spec.task.id
        assert harness.skill_tool is not None and harness.skill_tool.name == "load_skill"
        assert len(harness.skills) == len(used.used_skills) + 1
        assert used.used_skills <= {s.id for s in harness.skills}
        assert _rules(episode) == BASE and episode.config == "canonical"


def test_variant_episodes_apply_the_base_rules_then_the_drawn_ones(livestream, tasks, recipe):
    canonical = {t.name for t in livestream.harness().tools}
    episodes = variant_episodes(livestream, tasks, recipe, k=2, seed=0)
    assert len(episodes) == 2 * len(tasks)
    for episode in episodes:
        assert _rules(episode) == [*BASE, "tools.rename"]
        assert episode.rules == ("tools.rename",)  # attributed to the drawn rule alone
        offered = {t.name for t in episode.spec.variant.harness.tools}
        assert not offered & canonical  # every tool renamed
        used = Context.of(livestream.solve(episode.spec.task).events)
        assert len(offered) == len(used.used_tools) + 2


def test_tasks_grouped_by_context_get_the_variants_planned_for_each_alone(
    livestream, tasks, recipe
):
    found: dict[str, list[str]] = {}
    for episode in variant_episodes(livestream, tasks, recipe, k=2, seed=0):
        found.setdefault(episode.spec.task.id, []).append(episode.config)
    contexts = [Context.of(livestream.solve(t).events) for t in tasks]
    assert len({json.dumps(c.key(), sort_keys=True) for c in contexts}) > 1  # several groups
    for task, context in zip(tasks, contexts, strict=True):
        alone = task_variants(
            livestream.harness(),
            [task],
            recipe,
            seed=0,
            per_task=2,
            include_canonical=False,
            context=context,
        )
        assert found[task.id] == [v.variant_id for v in alone[task.id]]


def test_a_recipe_of_base_rules_alone_has_no_variants(livestream, tasks, tmp_path):
    path = tmp_path / "base-only.yaml"
    path.write_text(BASE_ONLY, "utf-8")
    recipe = load_recipe(path)
    assert recipe.base and not recipe.rules
    assert variant_episodes(livestream, tasks, recipe, k=4, seed=0) == []
    assert all(
        _rules(e) == BASE for e in canonical_episodes(livestream, tasks, seed=0, recipe=recipe)
    )


def _config(recipe_path, **settings) -> EvalConfig:
    return EvalConfig(
        **{
            "env": "livestream",
            "env_options": {"compact": True},
            "policy": "fixed-oracle",
            "suites": ("firstcall",),
            "recipe": str(recipe_path),
            "tasks": 10,
            "variants": 1,
            **settings,
        }
    )


def test_firstcall_targets_are_the_names_each_harness_offers(livestream, recipe_path, tmp_path):
    config = _config(recipe_path)
    evaluate(config, tmp_path / "run")
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    plain = [r for r in rows if r["config"] == "canonical"]
    renamed = [r for r in rows if r["config"] != "canonical"]
    assert len(plain) == len(renamed) == 10
    by_id = {t.id: t for t in livestream.tasks("test")}
    canonical_name = {}
    for row in plain:
        # the base rules are the harness under evaluation, no held-out family
        assert row["rules"] == row["families"] == []
        assert row["name_match"] is True and row["success"] and row["failure"] is None
        want = _first_name(livestream.solve(by_id[row["task_id"]]).events)
        assert row["target"] == want
        canonical_name[row["task_id"]] = want
    variants = {e.spec.variant.variant_id: e.spec.variant for e in plan(config, livestream)}
    tools = {t.name for t in livestream.harness().tools}
    for row in renamed:
        assert row["rules"] == ["tools.rename"] and row["families"] == ["tools"]
        # the canonical policy calls canonical names, which this harness does not offer
        assert row["failure"] == "unknown_tool" and not row["name_match"] and not row["success"]
        want = canonical_name[row["task_id"]]
        variant = variants[row["variant_id"]]
        if want in tools:  # a tool: renamed, and the variant's inverse mapping leads back
            assert row["target"] != want
            assert row["target"] in {t.name for t in variant.harness.tools}
            back = map_events([ToolCall("c", row["target"], {})], variant.mapping.inverse())
            assert back[0].tool == want
        else:  # a skill: tools.rename leaves skill ids alone, only load_skill is renamed
            assert row["target"] == want
            assert variant.harness.skill_tool.name != "load_skill"
    assert any(canonical_name[r["task_id"]] in tools for r in renamed)


def test_plan_uses_the_recipe_for_the_canonical_suite_alone(livestream, recipe_path):
    episodes = plan(_config(recipe_path, suites=("canonical",)), livestream)
    assert len(episodes) == 10 and all(_rules(e) == BASE for e in episodes)


def test_planning_twice_gives_the_same_variants(livestream, recipe_path):
    config = _config(recipe_path, variants=3)
    first = [(e.config, e.spec.id) for e in plan(config, livestream)]
    again = [(e.config, e.spec.id) for e in plan(config, get("livestream", compact=True))]
    assert first == again and len(first) == 10 * 4
    assert len({c for c, _ in first if c != "canonical"}) > 1


def test_base_rules_are_attributed_to_no_family(livestream, tmp_path):
    # base: renamed parameters (tools); drawn: hooks. Per family and rule, only hooks, and
    # the canonical episodes under the base alone are in no family
    recipe = tmp_path / "base.yaml"
    recipe.write_text(
        "seed: 1\nvariants_per_harness: 8\nmin_rules: 1\nmax_rules: 1\nbase:\n"
        "  - {rule: tools.rename_params, params: {style: camel, fraction: 1.0}}\nrules:\n"
        "  - {rule: hooks.neutral_extra, probability: 1.0, params: {count: 3}}\n",
        "utf-8",
    )
    config = EvalConfig(
        env="livestream",
        suites=("canonical", "variants", "firstcall"),
        recipe=str(recipe),
        tasks=6,
        variants=1,
    )
    summary = evaluate(config, tmp_path / "run", env=livestream).summary["suites"]
    for suite in ("variants", "firstcall"):
        assert set(summary[suite]["by_family"]) == {"hooks"}
        assert summary[suite]["by_family"]["hooks"]["n"] == 6
        assert set(summary[suite]["by_rule"]) == {"hooks.neutral_extra"}
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    for row in rows:
        drawn = row["config"] != "canonical"
        assert row["rules"] == (["hooks.neutral_extra"] if drawn else [])
