"""The dataset card: ``README.md`` with statistics and PNG plots, the same bytes on every run.

Statistics are gathered per batch as plain counters (``batch_stats``), kept in the batch's
completion mark, and summed (``merge_stats``), so a resumed run describes every row without
reading the shards again. Plots are drawn with matplotlib's Agg backend and saved without
metadata, which makes them byte-identical across runs.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

PLOTS = "plots"
PROMPT_BUCKET = 500  # characters per bar of the prompt-length histogram


def _count_array(values: np.ndarray) -> dict[str, int]:
    keys, counts = np.unique(values, return_counts=True)
    return {str(k): int(c) for k, c in zip(keys.tolist(), counts.tolist(), strict=True)}


def batch_stats(
    *,
    split: str,
    variant_counts: np.ndarray,
    protocols: list[str],
    rules: list[tuple[str, ...]],
    canonical: list[bool],
    messages: np.ndarray,
    calls: np.ndarray,
    prompt_chars: np.ndarray,
    trajectories: int,
) -> dict[str, Any]:
    """Counters describing the rows of one split of one batch.

    Per-variant facts (``protocols``, ``rules``, ``canonical``) are weighted by
    ``variant_counts``; ``messages``, ``calls`` and ``prompt_chars`` have one entry per row.
    """
    protocol_counts: dict[str, int] = {}
    rule_counts: dict[str, int] = {}
    family_counts: dict[str, int] = {}
    for count, protocol, names in zip(variant_counts.tolist(), protocols, rules, strict=True):
        if not count:
            continue
        protocol_counts[protocol] = protocol_counts.get(protocol, 0) + count
        for name in set(names):
            rule_counts[name] = rule_counts.get(name, 0) + count
        for family in {n.split(".", 1)[0] for n in names}:
            family_counts[family] = family_counts.get(family, 0) + count
    rows = int(variant_counts.sum())
    return {
        "rows": rows,
        "trajectories": trajectories,
        "canonical": int(
            sum(c for c, k in zip(variant_counts.tolist(), canonical, strict=True) if k)
        ),
        "splits": {split: rows},
        "protocols": dict(sorted(protocol_counts.items())),
        "rules": dict(sorted(rule_counts.items())),
        "families": dict(sorted(family_counts.items())),
        "messages": _count_array(messages),
        "calls": _count_array(calls),
        "prompt_chars": _count_array((prompt_chars // PROMPT_BUCKET) * PROMPT_BUCKET),
    }


def merge_stats(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of batch statistics."""
    out: dict[str, Any] = {}
    for item in items:
        for key, value in item.items():
            if isinstance(value, Mapping):
                bucket = out.setdefault(key, {})
                for k, v in value.items():
                    bucket[k] = bucket.get(k, 0) + v
            else:
                out[key] = out.get(key, 0) + value
    return out


def _mean(hist: Mapping[str, int]) -> float:
    total = sum(hist.values())
    return sum(float(k) * v for k, v in hist.items()) / total if total else 0.0


def _quantile(hist: Mapping[str, int], q: float) -> float:
    items = sorted((float(k), v) for k, v in hist.items())
    total = sum(v for _, v in items)
    seen = 0
    for value, count in items:
        seen += count
        if seen >= q * total:
            return value
    return 0.0


def _table(title: str, counts: Mapping[str, int], total: int, label: str) -> list[str]:
    lines = [f"### {title}", "", f"| {label} | rows | share |", "|---|---:|---:|"]
    for key, value in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| `{key}` | {value:,} | {value / total:.1%} |")
    return [*lines, ""]


def _plot(panels: list[tuple[str, Mapping[str, int], bool]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), dpi=100)
    axes = np.atleast_1d(axes)
    for ax, (title, hist, numeric) in zip(axes, panels, strict=True):
        items = (
            sorted(hist.items(), key=lambda kv: float(kv[0]))
            if numeric
            else sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        labels = [k for k, _ in items]
        values = [v for _, v in items]
        if numeric:
            ax.bar([float(k) for k in labels], values, width=_width(labels), color="#4c72b0")
            ax.tick_params(axis="x", labelsize=7)
        else:
            ax.barh(labels[::-1], values[::-1], color="#55a868")
            ax.tick_params(axis="y", labelsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("" if not numeric else "rows")
    fig.tight_layout()
    buffer = io.BytesIO()
    # No metadata (Software, dates): the same figure gives the same bytes.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _width(labels: list[str]) -> float:
    values = sorted(float(k) for k in labels)
    gaps = [b - a for a, b in zip(values, values[1:], strict=False) if b > a]  # noqa: RUF007
    return 0.8 * (min(gaps) if gaps else 1.0)


def render_card(
    stats: Mapping[str, Any], manifest: Mapping[str, Any], title: str
) -> tuple[str, dict[str, bytes]]:
    """The card's Markdown and its plots (file name under ``plots/`` -> PNG bytes)."""
    rows = max(int(stats.get("rows", 0)), 1)
    plots = {
        "distributions.png": _plot(
            [
                ("messages per row", stats.get("messages", {}), True),
                ("tool calls per row", stats.get("calls", {}), True),
                (
                    f"system prompt length (chars, {PROMPT_BUCKET}s)",
                    stats.get("prompt_chars", {}),
                    True,
                ),
            ],
        ),
        "composition.png": _plot(
            [
                ("rows per protocol", stats.get("protocols", {}), False),
                ("rows per rule family", stats.get("families", {}), False),
            ],
        ),
    }
    splits = stats.get("splits", {})
    config = manifest.get("config", {})
    configs = [
        "configs:",
        "  - config_name: default",
        "    data_files:",
        *[f"      - split: {s}\n        path: data/{s}/*.parquet" for s in sorted(splits)],
    ]
    lines = [
        "---",
        *configs,
        "tags:",
        "  - tool-use",
        "  - harness-aware-training",
        "---",
        "",
        f"# {title}",
        "",
        "Harness-augmented tool-use conversations written by `hsa`: each canonical trajectory "
        "rendered under harness variants drawn by task-preserving rules, in OpenAI chat format "
        "(`messages`, `tools`) with lineage (source trajectory, task, variant, rules, split, "
        "teacher, verification).",
        "",
        "## Summary",
        "",
        "| | |",
        "|---|---:|",
        f"| rows | {stats.get('rows', 0):,} |",
        f"| source trajectories | {stats.get('trajectories', 0):,} |",
        f"| canonical rows | {stats.get('canonical', 0):,} |",
        f"| variants planned | {manifest.get('variants', 0):,} |",
        f"| seed | {manifest.get('seed')} |",
        f"| messages per row (mean / p50 / p95) | {_mean(stats.get('messages', {})):.1f} / "
        f"{_quantile(stats.get('messages', {}), 0.5):.0f} / "
        f"{_quantile(stats.get('messages', {}), 0.95):.0f} |",
        f"| tool calls per row (mean / max) | {_mean(stats.get('calls', {})):.2f} / "
        f"{max((float(k) for k in stats.get('calls', {}) or {'0': 0}), default=0):.0f} |",
        f"| system prompt chars (mean, {PROMPT_BUCKET}-char buckets) | "
        f"{_mean(stats.get('prompt_chars', {})):.0f} |",
        "",
        "![distributions](plots/distributions.png)",
        "",
        "![composition](plots/composition.png)",
        "",
        *_table("Splits", splits, rows, "split"),
        *_table("Protocols", stats.get("protocols", {}), rows, "protocol"),
        *_table("Rule families", stats.get("families", {}), rows, "family"),
        *_table("Rules", stats.get("rules", {}), rows, "rule"),
        "## Engine",
        "",
        "Rows rendered column-wise by the engine; the exact (per-row reference) path took "
        f"{manifest.get('engine', {}).get('calls_exact', 0):,} tool calls, "
        f"{manifest.get('engine', {}).get('hooks_exact', 0):,} hook firings and "
        f"{manifest.get('engine', {}).get('rows_exact', 0):,} whole rows.",
        "",
        "## Config",
        "",
        "```json",
        _pretty(config),
        "```",
        "",
        f"Config hash `{manifest.get('config_hash', '')}`; shard checksums are in `manifest.json`.",
        "",
    ]
    return "\n".join(lines), plots


def _pretty(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
