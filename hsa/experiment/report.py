"""``report.md`` and ``tiers.png`` from an experiment's summary: the table a person reads first,
the per-seed table, the tiers and what the run cost. ``table(summary)`` is the part
``docs/experiment.md`` quotes (a test checks the document against its summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hsa.datasets.figures import drawn, figure, png
from hsa.errors import ExperimentError
from hsa.experiment.config import ARMS, METRICS, OFFERED
from hsa.harness.files import write_atomic


def _pct(cell: dict[str, Any]) -> str:
    if cell["value"] is None:
        return "n/a"
    low, high = cell["ci"]
    return f"{cell['value']:.1%} [{low:.1%}, {high:.1%}]"


def share(value: float | None) -> str:
    """A share as a percentage, or ``n/a`` for a tier with no episodes."""
    return "n/a" if value is None else f"{value:.1%}"


def _diff(cell: dict[str, Any]) -> str:
    if cell["value"] is None:
        return "n/a"
    low, high = cell["ci"]
    return f"{cell['value']:+.3f} [{low:+.3f}, {high:+.3f}]"


def table(summary: dict[str, Any]) -> str:
    """Tier x metric: each arm's accuracy and the paired difference, with 95% intervals, over
    every seed."""
    lines = [
        "| tier | metric | fixed | augmented | augmented - fixed |",
        "|---|---|---|---|---|",
    ]
    for tier in summary["difference"]:
        for metric in METRICS:
            cells = [_pct(summary["arms"][arm]["tiers"][tier][metric]) for arm in ARMS]
            diff = _diff(summary["difference"][tier][metric])
            lines.append(f"| {tier} | {metric} | {cells[0]} | {cells[1]} | {diff} |")
    return "\n".join(lines)


def seed_table(summary: dict[str, Any]) -> str:
    """Name accuracy per seed and tier: fixed, augmented, the difference and its interval."""
    lines = ["| seed | tier | fixed | augmented | difference |", "|---|---|---|---|---|"]
    for seed, block in summary["per_seed"].items():
        for tier, diff in block["difference"].items():
            fixed = block["arms"]["fixed"]["tiers"][tier]["name"]["value"]
            augmented = block["arms"]["augmented"]["tiers"][tier]["name"]["value"]
            lines.append(
                f"| {seed} | {tier} | {share(fixed)} | {share(augmented)} | {_diff(diff['name'])} |"
            )
    return "\n".join(lines)


def choice_table(summary: dict[str, Any]) -> str:
    """Per tier: the chance of naming the right tool by a uniform pick, each arm's name
    accuracy, and the share of replies naming anything the harness offers."""
    lines = [
        "| tier | chance | name: fixed | name: augmented | offered: fixed | offered: augmented |",
        "|---|---|---|---|---|---|",
    ]
    for tier, about in summary["tiers"].items():
        chance = share(about["chance"])
        cells = [_pct(summary["arms"][arm]["tiers"][tier]["name"]) for arm in ARMS]
        cells += [_pct(summary["arms"][arm]["tiers"][tier][OFFERED]) for arm in ARMS]
        lines.append(f"| {tier} | {chance} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tier_table(summary: dict[str, Any]) -> str:
    lines = [
        "| tier | seed | rules | held out | tasks | episodes | gold names seen in training |",
        "|---|---|---|---|---|---|---|",
    ]
    for tier, about in summary["tiers"].items():
        seen = share(about["gold_seen"])
        rules = ", ".join(about["rules"]) or "(base rules only)"
        lines.append(
            f"| {tier} | {about['seed']} | {rules} | {'yes' if about['held_out'] else 'no'} | "
            f"{about['tasks']} | {about['episodes']} | {seen} |"
        )
    return "\n".join(lines)


@drawn
def plot(summary: dict[str, Any]) -> bytes:
    """Name accuracy per tier, one bar per arm, with 95% intervals; a tier with no episodes
    (``n/a`` in the tables) has no bars: ``n/a`` where they would be."""
    tiers = list(summary["difference"])
    # wide enough for the title with one tier
    fig = figure(figsize=(max(1.6 * len(tiers) + 2, 5.5), 3.6))
    ax = fig.subplots()
    width = 0.38
    for i, arm in enumerate(ARMS):
        cells = [summary["arms"][arm]["tiers"][t]["name"] for t in tiers]
        shown = [(x, c) for x, c in enumerate(cells) if c["value"] is not None]
        values = [c["value"] for _, c in shown]
        low = [v - (c["ci"][0] or 0.0) for v, (_, c) in zip(values, shown, strict=True)]
        high = [(c["ci"][1] or 0.0) - v for v, (_, c) in zip(values, shown, strict=True)]
        xs = [x + (i - 0.5) * width for x, _ in shown]
        ax.bar(xs, values, width, yerr=[low, high], capsize=3, label=arm)
        for x, cell in enumerate(cells):
            if cell["value"] is None:  # not a bar of 0
                ax.text(x + (i - 0.5) * width, 0.02, "n/a", ha="center", fontsize=8)
    ax.set_xticks(range(len(tiers)), tiers)
    ax.set_xlim(-0.6, len(tiers) - 0.4)  # every tier's place, one with no bars too
    ax.set_ylim(0, 1)
    ax.set_ylabel("first-call name accuracy")
    ax.set_title("fixed vs augmented training, per tier (95% CI)")
    ax.legend()
    fig.tight_layout()
    return png(fig)


def results(summary: dict[str, Any], plot_path: str) -> str:
    """The figures of a run as Markdown (level-3 headings): what ``report.md`` shows and what
    ``write_doc`` puts in a document."""
    walls = summary["wall_s"]
    start = "both arms from the same initial weights per seed"
    if summary.get("scale") == "gpu":
        model, view = summary["base_model"], summary["view"]
        start = f"both arms from the base model `{model}`, on {view} rows"
    lines = [
        f"Seeds {', '.join(map(str, summary['seeds']))}; {summary['steps']} steps at batch "
        f"{summary['batch_size']} per model, {start}. "
        "Each cell: the share of first replies that name the right tool (`name`), with the "
        "right argument names (`keys`), with the right values (`exact`), averaged over the "
        "seeds, with a 95% bootstrap interval over tasks; the difference is paired over the "
        "same tasks and variants.",
        "",
        table(summary),
        "",
        f"![name accuracy per tier]({plot_path})",
        "",
        "### Per seed (name accuracy)",
        "",
        seed_table(summary),
        "",
        "### Against chance",
        "",
        "`offered`: the share of first replies naming a tool or skill the harness offers, right "
        "or wrong (a model that reads the list); `chance`: a uniform pick among them.",
        "",
        choice_table(summary),
        "",
        "### Tiers",
        "",
        tier_table(summary),
        "",
        "### Cost",
        "",
        "| run | rows | steps | tokens | wall s |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {run.get('rows')} | {run.get('steps')} | {run.get('tokens')} | "
            f"{run.get('wall_s')} |"
            for name, run in summary["training"].items()
        ),
        "",
        (
            "Wall time of this invocation, which went on from an earlier one's work (the runs' "
            "own times are in the table above, a resumed training's over all its parts): "
            if summary.get("resumed")
            else "Wall time: "
        )
        + f"data {walls['data']} s, training {walls['train']} s, evaluation "
        f"{walls['eval']} s, total {walls['total']} s.",
    ]
    return "\n".join(lines)


def write_report(summary: dict[str, Any], out: Path) -> None:
    """``out/report.md`` and its plot ``out/tiers.png``."""
    write_atomic(out / "tiers.png", plot(summary), error=ExperimentError)
    text = "# Harness-augmentation experiment\n\n" + results(summary, "tiers.png") + "\n"
    write_atomic(out / "report.md", text, error=ExperimentError)


#: the results section ``write_doc`` writes for the default config (``examples/experiment.yaml``)
DEFAULT = "experiment"


def markers(name: str = DEFAULT) -> tuple[str, str]:
    """The lines around the results section of config ``name`` (its file's stem) in a
    document: one document can hold the figures of several configs' runs."""
    label = "experiment results" if name == DEFAULT else f"experiment results ({name})"
    begin = f"<!-- {label}: written by hsa experiment run --doc; do not edit by hand -->"
    return begin, f"<!-- end of {label} -->"


def check_doc(doc: Path, name: str = DEFAULT) -> None:
    """Refuse a document that exists but has no results section for ``name`` (before a run,
    not after)."""
    if doc.exists():
        begin, end = markers(name)
        text = doc.read_text("utf-8")
        if begin not in text or end not in text:
            raise ExperimentError(
                f"has no results section for {name} (add the lines {begin} and {end})",
                file=str(doc),
            )


def write_doc(summary: dict[str, Any], doc: Path, name: str = DEFAULT) -> None:
    """Put a run's figures into ``doc``'s results section for config ``name``, its plot at
    ``images/<name>-tiers.png`` and its summary at ``<name>-summary.json`` beside it."""
    import json

    check_doc(doc, name)
    begin, end = markers(name)
    text = doc.read_text("utf-8") if doc.exists() else f"{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    body = results(summary, f"images/{name}-tiers.png")
    (doc.parent / "images").mkdir(parents=True, exist_ok=True)
    write_atomic(doc.parent / "images" / f"{name}-tiers.png", plot(summary), error=ExperimentError)
    dumped = json.dumps(summary, indent=2) + "\n"
    write_atomic(doc.parent / f"{name}-summary.json", dumped, error=ExperimentError)
    write_atomic(doc, f"{head}{begin}\n{body}\n{end}{tail}", error=ExperimentError)
