"""The experiment's figures: per arm and tier with intervals, paired differences, per seed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hsa.augment.recipe import Recipe
from hsa.experiment.config import Tier
from hsa.experiment.report import seed_table, table
from hsa.experiment.results import figures, per_task, tier_rows
from hsa.experiment.run import describe

TASKS = [f"t{i}" for i in range(40)]


def scores(fixed_rate, augmented_rate, seeds=(0, 1), tier="styles"):
    """Per-task scores: the first ``rate`` share of the tasks right, the others wrong."""

    def of(rate):
        right = round(rate * len(TASKS))
        values = {t: (1.0 if i < right else 0.0) for i, t in enumerate(TASKS)}
        return {"name": values, "keys": values, "exact": values, "offered": values}

    out = {}
    for seed in seeds:
        out[("fixed", seed, tier)] = of(fixed_rate)
        out[("augmented", seed, tier)] = of(augmented_rate)
    return out


def test_values_and_paired_differences_with_intervals():
    found = figures(scores(0.25, 0.75), [0, 1], ["styles"])
    fixed = found["arms"]["fixed"]["tiers"]["styles"]["name"]
    augmented = found["arms"]["augmented"]["tiers"]["styles"]["name"]
    diff = found["difference"]["styles"]["name"]
    assert fixed["value"] == 0.25 and augmented["value"] == 0.75
    assert diff["value"] == pytest.approx(0.5)
    low, high = diff["ci"]
    assert 0 < low < 0.5 < high <= 1
    assert fixed["ci"][0] < 0.25 < fixed["ci"][1]


def test_a_difference_on_the_same_tasks_is_paired():
    # the augmented arm gets right exactly the tasks the fixed arm does, plus none: no spread
    found = figures(scores(0.5, 0.5), [0], ["styles"])
    assert found["difference"]["styles"]["name"] == {"value": 0.0, "ci": [0.0, 0.0]}


def test_seeds_are_reported_alone_and_averaged_per_task():
    both = scores(0.0, 1.0, seeds=(0,)) | {
        ("fixed", 1, "styles"): scores(0.5, 0.5, seeds=(1,))[("fixed", 1, "styles")],
        ("augmented", 1, "styles"): scores(0.5, 0.5, seeds=(1,))[("augmented", 1, "styles")],
    }
    found = figures(both, [0, 1], ["styles"])
    assert found["per_seed"]["0"]["difference"]["styles"]["name"]["value"] == 1.0
    assert found["per_seed"]["1"]["difference"]["styles"]["name"]["value"] == 0.0
    assert found["difference"]["styles"]["name"]["value"] == pytest.approx(0.5)
    assert found["arms"]["fixed"]["tiers"]["styles"]["name"]["value"] == pytest.approx(0.25)


def test_per_task_means_a_tasks_episodes():
    rows = [
        {"task_id": "a", "name_match": True, "keys_match": True, "success": False},
        {"task_id": "a", "name_match": False, "keys_match": False, "success": False},
        {"task_id": "b", "name_match": True, "keys_match": False, "success": False},
    ]
    assert per_task(rows, "name") == {"a": 0.5, "b": 1.0}
    assert per_task(rows, "keys") == {"a": 0.5, "b": 0.0}
    assert per_task(rows, "exact") == {"a": 0.0, "b": 0.0}


def test_the_tables_show_every_tier_and_metric():
    found = figures(scores(0.25, 0.75), [0, 1], ["styles"])
    text = table(found)
    assert "| styles | name | 25.0% [" in text
    assert "| +0.500 [" in text
    assert len(text.splitlines()) == 2 + 3
    assert len(seed_table({**found}).splitlines()) == 2 + 2


def test_offered_counts_replies_naming_anything_the_harness_offers():
    # read from what the reply named, not its class: a reply cut off at max_tokens is classed
    # truncated whatever it named, and counted as naming nothing offered
    def row(task, offered, failure):
        return {"task_id": task, "name_match": False, "offered": offered, "failure": failure}

    rows = [
        row("a", True, "wrong_tool"),
        row("a", True, "truncated"),
        row("b", False, "unknown_tool"),
        row("b", False, "truncated"),
        row("c", True, "invalid_arguments"),
        row("c", False, "wrong_final_answer"),
    ]
    assert per_task(rows, "offered") == {"a": 1.0, "b": 0.0, "c": 0.5}


def tier(name, rules):
    recipe = Recipe.from_dict({"seed": 1, "min_rules": 1 if rules else 0, "rules": rules})
    return Tier(name, recipe, held_out=False)


def test_a_tiers_episodes_follow_its_recipe_not_its_name(tmp_path):
    # an evaluation holds each task under the base rules alone ("canonical") and, for a recipe
    # that draws rules, under its variants too
    configs = ["canonical", "canonical", "v1", "v2"]
    rows = [
        {"suite": "firstcall", "config": c, "task_id": f"t{i}", "offered": True}
        for i, c in enumerate(configs)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "episodes.parquet")
    renames = [{"rule": "tools.rename"}]
    for name in ("canonical", "baseline"):
        drawn = tier_rows(tmp_path, tier(name, renames))
        assert [r["config"] for r in drawn] == ["v1", "v2"]
        plain = tier_rows(tmp_path, tier(name, []))
        assert [r["config"] for r in plain] == ["canonical", "canonical"]


def test_episodes_an_earlier_hsa_wrote_without_offered_are_refused_naming_the_file(tmp_path):
    from hsa.errors import ExperimentError

    rows = [{"suite": "firstcall", "config": "canonical", "task_id": "t0", "failure": None}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "episodes.parquet")
    with pytest.raises(ExperimentError, match="no 'offered' column") as caught:
        tier_rows(tmp_path, tier("canonical", []))
    assert caught.value.file == str(tmp_path / "episodes.parquet")


def test_a_tier_without_episodes_reads_n_a_not_a_crash():
    empty = {"name": {}, "keys": {}, "exact": {}, "offered": {}}
    found = figures({(arm, 0, "x"): empty for arm in ("fixed", "augmented")}, [0], ["x"])
    assert "| 0 | x | n/a | n/a | n/a |" in seed_table(found)
    assert describe(found) == "name accuracy, fixed -> augmented: x n/a -> n/a (n/a)"
