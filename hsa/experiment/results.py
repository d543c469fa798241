"""The experiment's figures: per arm and tier, the first call's name / keys / exact accuracy with
95% bootstrap intervals over tasks, and the paired difference (augmented - fixed) over the same
tasks and variants; per seed and over all seeds (each task's value averaged over the seeds).

A tier's episodes are its variant episodes; a tier whose recipe draws no rules (``canonical``
in the shipped configs) has its base-rules-only episodes, whatever its name. ``gold_seen`` is
the share of a tier's episodes whose expected name (the tool or skill id the first call must
name, under the episode's harness) occurs whole in the augmented arm's training rows.
``offered`` is the share of first replies that name a tool or skill the harness offers, right
or wrong (a model that reads the list at all; the episodes' ``offered`` column, what a reply
named, a reply cut off at ``max_tokens`` too: an API call by its name even when its arguments
were cut, an in-prompt call that does not parse by nothing), and ``chance`` the name accuracy
of a uniform pick among what the harness offers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from hsa.errors import ExperimentError
from hsa.eval.summary import bootstrap_mean
from hsa.experiment.config import ARMS, METRICS, OFFERED, ExperimentConfig, Tier
from hsa.harness.files import write_atomic

RESAMPLES = 2000
_COLUMNS = {"name": "name_match", "keys": "keys_match", "exact": "success", OFFERED: "offered"}
_WORD = re.compile(r"[A-Za-z0-9_.:-]+")


def tier_rows(folder: Path, tier: Tier) -> list[dict[str, Any]]:
    """The episodes of one evaluation that count for ``tier``: its variants, or for a recipe
    that draws no rules (whatever the tier's name) its base-rules-only episodes."""
    path = folder / "episodes.parquet"
    table = pq.read_table(path)
    if "offered" not in table.column_names:
        raise ExperimentError(
            "has no 'offered' column: an earlier hsa evaluated this (it read `offered` from "
            f"the failure class, which says nothing of a reply cut off); delete {folder} and "
            "rerun the experiment: it evaluates that model again and keeps what it trained",
            file=str(path),
        )
    rows = [r for r in table.to_pylist() if r["suite"] == "firstcall"]
    if not tier.recipe.rules:
        return [r for r in rows if r["config"] == "canonical"]
    return [r for r in rows if r["config"] != "canonical"]


def per_task(rows: list[dict[str, Any]], metric: str) -> dict[str, float]:
    """Each task's mean of ``metric`` (or ``offered``) over its episodes."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        sums.setdefault(row["task_id"], []).append(1.0 if row[_COLUMNS[metric]] else 0.0)
    return {task: sum(v) / len(v) for task, v in sorted(sums.items())}


def _interval(values: list[float], seed: int) -> dict[str, Any]:
    if not values:
        return {"value": None, "ci": [None, None]}
    value, low, high = bootstrap_mean(np.array(values), resamples=RESAMPLES, seed=seed)
    return {"value": value, "ci": [low, high]}


def _mean_over(seeds: list[dict[str, float]]) -> dict[str, float]:
    tasks = sorted(set.intersection(*(set(s) for s in seeds))) if seeds else []
    return {t: sum(s[t] for s in seeds) / len(seeds) for t in tasks}


def figures(
    scores: dict[tuple[str, int, str], dict[str, dict[str, float]]],
    seeds: list[int],
    tiers: list[str],
) -> dict[str, Any]:
    """``arms``, ``difference`` and ``per_seed`` from per-task scores keyed (arm, seed, tier)."""

    def block(pick: list[int]) -> dict[str, Any]:
        arms: dict[str, Any] = {arm: {"tiers": {}} for arm in ARMS}
        difference: dict[str, Any] = {}
        for tier in tiers:
            difference[tier] = {}
            for arm in ARMS:
                arms[arm]["tiers"][tier] = {}
            for metric in (*METRICS, OFFERED):
                means = {
                    arm: _mean_over([scores[(arm, s, tier)][metric] for s in pick]) for arm in ARMS
                }
                for arm in ARMS:
                    arms[arm]["tiers"][tier][metric] = _interval(list(means[arm].values()), 0)
                shared = sorted(set(means["fixed"]) & set(means["augmented"]))
                paired = [means["augmented"][t] - means["fixed"][t] for t in shared]
                difference[tier][metric] = _interval(paired, 0)
        return {"arms": arms, "difference": difference}

    out = block(seeds)
    out["per_seed"] = {str(seed): block([seed]) for seed in seeds}
    return out


def training_words(data: Path) -> set[str]:
    """Every name-like word of an arm's training rows (what ``gold_seen`` looks names up in)."""
    table = pq.read_table(
        sorted((data / "data" / "train").glob("*.parquet")), columns=["messages", "tools"]
    )
    words: set[str] = set()
    for column in ("messages", "tools"):
        for value in table.column(column).to_pylist():
            words.update(_WORD.findall(json.dumps(value, ensure_ascii=False)))
    return words


def write_results(
    config: ExperimentConfig,
    out: Path,
    data: dict[str, Path],
    runs: dict[tuple[str, int], Path],
    evals: dict[tuple[str, int, str], Path],
    walls: dict[str, float],
    *,
    resumed: bool = False,
) -> dict[str, Any]:
    """``out/summary.json``, ``out/report.md`` and ``out/tiers.png``; returns the summary."""
    from hsa.experiment.report import write_report
    from hsa.train.card import RESOLVED

    tiers = [t.name for t in config.tiers]
    tier_of = {t.name: t for t in config.tiers}
    scores: dict[tuple[str, int, str], dict[str, dict[str, float]]] = {}
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for (arm, seed, name), folder in evals.items():
        rows = tier_rows(folder, tier_of[name])
        scores[(arm, seed, name)] = {m: per_task(rows, m) for m in (*METRICS, OFFERED)}
        rows_of.setdefault(name, rows)
    summary: dict[str, Any] = {"config_hash": config.hash(), "seeds": list(config.seeds)}
    summary["scale"] = config.scale
    if config.gpu is not None:
        summary["base_model"] = config.gpu.model
    summary["view"] = config.view
    summary["steps"] = config.steps
    summary["batch_size"] = int(config.train.get("per_device_train_batch_size", 8))
    summary |= figures(scores, list(config.seeds), tiers)
    seen = training_words(data["augmented"])
    summary["tiers"] = {}
    for tier in config.tiers:
        rows = rows_of.get(tier.name, [])
        gold = [r["target"] for r in rows if r["target"] is not None]
        choices = [r["choices"] for r in rows if r["choices"]]
        summary["tiers"][tier.name] = {
            "held_out": tier.held_out,
            "seed": tier.recipe.seed,
            "rules": [r.rule for r in tier.recipe.rules],
            "episodes": len(rows),
            "tasks": len({r["task_id"] for r in rows}),
            "gold_seen": round(sum(g in seen for g in gold) / len(gold), 4) if gold else None,
            "chance": round(sum(1 / c for c in choices) / len(choices), 4) if choices else None,
        }
    summary["data"] = {}
    for arm in ARMS:
        manifest = json.loads((data[arm] / "manifest.json").read_text("utf-8"))
        summary["data"][arm] = {
            "config_hash": manifest.get("config_hash"),
            "rows": manifest.get("rows"),
        }
    summary["training"] = {}
    for (arm, seed), folder in sorted(runs.items()):
        resolved = json.loads((folder / RESOLVED).read_text("utf-8"))
        summary["training"][f"{arm}-s{seed}"] = {
            **resolved.get("run", {}),
            "rows": resolved["data"]["rows"].get("train"),
            "manifest_hash": resolved["data"]["manifest_hash"],
        }
    summary["wall_s"] = {k: round(v, 1) for k, v in walls.items()}
    if resumed:  # the wall times are this invocation's, which went on from earlier work
        summary["resumed"] = True
    text = json.dumps(summary, indent=2) + "\n"
    write_atomic(out / "summary.json", text, error=ExperimentError)
    write_report(summary, out)
    return summary
