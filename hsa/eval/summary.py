"""From episode rows to the figures a run reports: success with intervals, and breakdowns.

A success rate is the mean over tasks of each task's mean success, so a task run under four
variants weighs as much as a task run once (a BFCL entry asked under its 26 format
configurations is one task); its 95% interval is a percentile bootstrap over
tasks (tasks resampled with replacement, ``resamples`` times, from a generator seeded by the
run's seed, so the same episodes always give the same interval). Breakdowns (per rule family,
rule, protocol, task kind and, in bfcl, format configuration) are computed the same way over
the episodes that belong to them; an episode under a variant of several rules counts toward
each of their families. Latency percentiles are nearest-rank, as the teachers report them.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hsa.teachers.backends.base import latency_percentiles


def bootstrap_mean(means: np.ndarray, *, resamples: int, seed: int) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of per-task values and its 95% percentile-bootstrap
    interval over tasks (paired differences: pass each task's difference), rounded."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(means), size=(resamples, len(means)))
    low, high = np.percentile(means[picks].mean(axis=1), [2.5, 97.5])
    return round(float(means.mean()), 6), round(float(low), 6), round(float(high), 6)


def success_rate(rows: Sequence[Mapping[str, Any]], *, resamples: int, seed: int) -> dict[str, Any]:
    """``{"success", "low", "high", "n", "tasks"}`` for ``rows`` (empty rows: nulls)."""
    by_task: dict[str, list[float]] = {}
    for row in rows:
        by_task.setdefault(row["task_group"], []).append(1.0 if row["success"] else 0.0)
    if not by_task:
        return {"success": None, "low": None, "high": None, "n": 0, "tasks": 0}
    means = np.array([sum(v) / len(v) for v in by_task.values()], dtype=np.float64)
    value, low, high = bootstrap_mean(means, resamples=resamples, seed=seed)
    return {
        "success": value,
        "low": low,
        "high": high,
        "n": len(rows),
        "tasks": len(by_task),
    }


def breakdown(
    rows: Sequence[Mapping[str, Any]],
    keys: Callable[[Mapping[str, Any]], Iterable[str]],
    *,
    resamples: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """``success_rate`` of the rows under each key ``keys(row)`` gives, keys sorted."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        for key in keys(row):
            groups.setdefault(key, []).append(row)
    return {
        key: success_rate(groups[key], resamples=resamples, seed=seed) for key in sorted(groups)
    }


def latency(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """P50/P95 latency per model call and per episode, in milliseconds."""
    calls = [x for row in rows for x in row["call_latencies_s"]]
    episodes = [row["latency_s"] for row in rows]
    return {"per_call": _p50_p95(calls), "per_episode": _p50_p95(episodes)}


def _p50_p95(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50_ms": at(0.5), "p95_ms": at(0.95), "p99_ms": latency_percentiles(values)["p99_ms"]}


def suite_summary(
    suite: str, rows: Sequence[Mapping[str, Any]], *, resamples: int, seed: int
) -> dict[str, Any]:
    """The figures of one suite's episodes."""
    out: dict[str, Any] = success_rate(rows, resamples=resamples, seed=seed)
    out["verified"] = round(sum(r["verified"] for r in rows) / len(rows), 6) if rows else None
    failures = Counter(r["failure"] for r in rows if r["failure"] is not None)
    out["failures"] = dict(sorted(failures.items()))
    by = {"resamples": resamples, "seed": seed}
    out["by_kind"] = breakdown(rows, lambda r: [r["task_kind"]], **by)
    out["by_protocol"] = breakdown(rows, lambda r: [r["protocol"]], **by)
    if suite in ("variants", "firstcall"):
        out["by_family"] = breakdown(rows, _families, **by)
        out["by_rule"] = breakdown(rows, _rules, **by)
    if suite == "firstcall":
        plain = [r for r in rows if r["config"] == "canonical"]
        varied = [r for r in rows if r["config"] != "canonical"]
        out["by_harness"] = {"canonical": plain, "variants": varied}
        # each step of the match overall, and beside the exact call's success of each
        # breakdown by harness, rule family and rule: how far a model gets, and where
        for key, column in (("name", "name_match"), ("keys", "keys_match"), ("exact", "success")):
            out[key] = success_rate(_matched(rows, column), resamples=resamples, seed=seed)
        for group, part in out["by_harness"].items():
            out["by_harness"][group] = success_rate(part, resamples=resamples, seed=seed)
            for key, column in (("name", "name_match"), ("keys", "keys_match")):
                rate = success_rate(_matched(part, column), resamples=resamples, seed=seed)
                out["by_harness"][group][key] = rate
        for table, keys in (("by_family", _families), ("by_rule", _rules)):
            for key, column in (("name", "name_match"), ("keys", "keys_match")):
                for group, rate in breakdown(_matched(rows, column), keys, **by).items():
                    out[table][group][key] = rate
    if suite == "bfcl":
        configs = breakdown(rows, lambda r: [r["config"]], **by)
        out["by_config"] = configs
        rates = [c["success"] for c in configs.values() if c["success"] is not None]
        if rates:
            # the sample standard deviation, 0 for one configuration, as BFCL's own checker
            # (berkeley-function-call-leaderboard/bfcl_eval/eval_checker/eval_runner.py,
            # format sensitivity) takes it across configurations
            std = statistics.stdev(rates) if len(rates) > 1 else 0.0
            out["format_sensitivity"] = {
                "configurations": len(rates),
                "mean": round(statistics.fmean(rates), 6),
                "std": round(std, 6),
                "max_delta": round(max(rates) - min(rates), 6),
            }
    out["tokens"] = {
        "in": int(sum(r["tokens_in"] for r in rows)),
        "out": int(sum(r["tokens_out"] for r in rows)),
    }
    out["latency"] = latency(rows)
    return out


def _families(row: Mapping[str, Any]) -> list[str]:
    return row["families"]


def _rules(row: Mapping[str, Any]) -> list[str]:
    return row["rules"]


def _matched(rows: Sequence[Mapping[str, Any]], column: str) -> list[dict[str, Any]]:
    """``rows`` with ``column`` (a firstcall step's match) as their success."""
    return [{**r, "success": bool(r[column])} for r in rows]


def summarize(
    rows: Sequence[Mapping[str, Any]],
    suites: Sequence[str],
    *,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Per suite (in ``suites`` order) its figures; with both canonical and variants, the
    drop from one to the other; and latency over every episode."""
    out: dict[str, Any] = {"suites": {}}
    for suite in suites:
        chosen = [r for r in rows if r["suite"] == suite]
        out["suites"][suite] = suite_summary(suite, chosen, resamples=resamples, seed=seed)
    found = out["suites"]
    if "canonical" in found and "variants" in found:
        a, b = found["canonical"]["success"], found["variants"]["success"]
        if a is not None and b is not None:
            out["drop"] = round(a - b, 6)
    out["latency"] = latency(rows)
    out["episodes"] = len(rows)
    return out
