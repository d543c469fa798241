"""The run's report (``report.md`` with plots) and the side-by-side comparison of runs.

Plots are drawn under matplotlib's defaults on its Agg canvas (``hsa.datasets.figures``: no
user matplotlibrc applies) and saved without metadata, so the same figures give the same bytes:
success on the canonical harness against held-out variants, robustness per rule family (bars
with their 95% intervals), failure classes, and the latency CDF per model call. ``compare``
reads the ``summary.json`` of several runs and gives HAT's table -- model x canonical x
variants x drop -- and a plot of it.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from hsa.datasets.figures import drawn, figure, png
from hsa.datasets.shards import write_atomic
from hsa.errors import EvalError
from hsa.harness.files import blocked
from hsa.harness.jsonvalues import json_path, unwritable

REPORT = "report.md"
COMPARE_PLOT = "compare.png"
#: the plots of a run's report, in the order it shows them
PLOTS = ("success.png", "failures.png", "latency.png")
_BLUE, _ORANGE, _GREEN, _RED = "#4c72b0", "#dd8452", "#55a868", "#c44e52"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def interval(entry: Mapping[str, Any]) -> str:
    if entry.get("success") is None:
        return "–"
    if entry.get("tasks") == 1:  # resampling one task gives its own mean: no interval
        return f"{percent(entry['success'])} [one task]"
    return f"{percent(entry['success'])} [{percent(entry['low'])}, {percent(entry['high'])}]"


def _bars(
    ax, entries: Mapping[str, Mapping[str, Any]], color: str, title: str, label: str = "success %"
) -> None:
    labels = [k for k, v in entries.items() if v.get("success") is not None]
    values = [100 * entries[k]["success"] for k in labels]
    low = [100 * (entries[k]["success"] - entries[k]["low"]) for k in labels]
    high = [100 * (entries[k]["high"] - entries[k]["success"]) for k in labels]
    ax.barh(labels[::-1], values[::-1], xerr=[low[::-1], high[::-1]], color=color, capsize=3)
    ax.set_xlim(0, 100)
    ax.set_xlabel(label)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="y", labelsize=8)


@drawn
def plot_success(summary: Mapping[str, Any]) -> bytes:
    """Success per suite, and per rule family in the variants suite (in a run without it,
    the firstcall suite's name match per rule family), with intervals."""
    suites = summary["suites"]
    families = (suites.get("variants") or {}).get("by_family") or {}
    title, label = "held-out variants: success per rule family", "success %"
    if not families:
        first = (suites.get("firstcall") or {}).get("by_family") or {}
        families = {k: v["name"] for k, v in first.items() if "name" in v}
        title, label = "first call: right name per rule family", "right name %"
    panels = 2 if families else 1
    fig = figure(figsize=(5.5 * panels, 3.4), dpi=100)
    axes = fig.subplots(1, panels, squeeze=False)
    _bars(axes[0][0], suites, _BLUE, "success per suite")
    if families:
        _bars(axes[0][1], families, _ORANGE, title, label)
    return png(fig)


@drawn
def plot_failures(summary: Mapping[str, Any]) -> bytes | None:
    """Failure classes per suite, stacked; None when nothing failed."""
    suites = summary["suites"]
    classes = sorted({c for s in suites.values() for c in s.get("failures", {})})
    if not classes:
        return None
    from matplotlib import colormaps

    fig = figure(figsize=(6.5, 3.2), dpi=100)
    ax = fig.subplots()
    names = list(suites)
    left = [0] * len(names)
    cmap = colormaps["tab10"]
    for i, name in enumerate(classes):
        counts = [suites[s].get("failures", {}).get(name, 0) for s in names]
        ax.barh(names[::-1], counts[::-1], left=left[::-1], color=cmap(i % 10), label=name)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.set_xlabel("failed episodes")
    ax.set_title("failure classes", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars, on none
    return png(fig)


@drawn
def plot_latency(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    """The CDF of latency per model call, per suite; None when no call was timed."""
    suites: dict[str, list[float]] = {}
    for row in rows:
        suites.setdefault(row["suite"], []).extend(row["call_latencies_s"])
    if not any(suites.values()):
        return None
    fig = figure(figsize=(5.5, 3.2), dpi=100)
    ax = fig.subplots()
    for name, values in suites.items():
        if values:
            ordered = sorted(1000 * v for v in values)
            ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
    ax.set_xlabel("latency per model call (ms)")
    ax.set_ylabel("share of calls")
    ax.set_title("latency CDF", fontsize=10)
    ax.legend(fontsize=8)
    return png(fig)


def render_report(summary: Mapping[str, Any], plots: Sequence[str]) -> str:
    """``report.md``: the run's figures as tables, and its plots."""
    suites = summary["suites"]
    lines = [
        f"# Evaluation: {summary.get('model', '?')} on {summary.get('env', '?')}",
        "",
        f"{summary.get('episodes', 0):,} episodes. Success is the environment's score, the "
        "mean over tasks of each task's success, with a 95% bootstrap interval over tasks.",
        "",
        "| suite | success % [95% CI] | episodes | tasks | verified % |",
        "|---|---|---:|---:|---:|",
    ]
    for name, entry in suites.items():
        lines.append(
            f"| {name} | {interval(entry)} | {entry['n']:,} | {entry['tasks']:,} | "
            f"{percent(entry.get('verified'))} |"
        )
    if "drop" in summary:
        lines += [
            "",
            f"Drop from canonical to held-out variants: **{percent(summary['drop'])}** points.",
        ]
    if summary.get("left_out"):
        lines += [
            "",
            "What of its corpus the environment left out of its tasks (so of these figures), "
            "or offers otherwise than written:",
            "",
        ]
        lines += [f"- {note}" for note in summary["left_out"]]
    lines.append("")
    for plot in plots:
        lines += [f"![{plot}]({plot})", ""]
    for name, entry in suites.items():
        for key, title in (
            ("by_harness", "per harness"),
            ("by_family", "per rule family"),
            ("by_rule", "per rule"),
            ("by_config", "per format configuration"),
            ("by_protocol", "per protocol"),
            ("by_kind", "per task kind"),
        ):
            table = entry.get(key)
            if not table:
                continue
            steps = all("name" in v for v in table.values())  # firstcall: each step's rate
            lines += [
                f"## {name}: {title}",
                "",
                "| | name % [95% CI] | keys % [95% CI] | exact % [95% CI] | episodes | tasks |"
                if steps
                else "| | success % [95% CI] | episodes | tasks |",
                "|---|---|---|---|---:|---:|" if steps else "|---|---|---:|---:|",
            ]
            for k, v in table.items():
                cells = [interval(v[step]) for step in ("name", "keys")] if steps else []
                tasks = v.get("tasks")
                lines.append(
                    f"| `{k}` | {' | '.join([*cells, interval(v)])} | {v['n']:,} | "
                    f"{'–' if tasks is None else f'{tasks:,}'} |"
                )
            lines.append("")
        if "exact" in entry:
            lines += [
                f"## {name}: the first call",
                "",
                "| match | % [95% CI] |",
                "|---|---|",
                *(f"| {k} | {interval(entry[k])} |" for k in ("name", "keys", "exact")),
                "",
            ]
        sensitivity = entry.get("format_sensitivity")
        if sensitivity:
            lines += [
                f"Format sensitivity over {sensitivity['configurations']} configurations: mean "
                f"{percent(sensitivity['mean'])}, standard deviation "
                f"{percent(sensitivity['std'])}, max delta {percent(sensitivity['max_delta'])} "
                "points.",
                "",
            ]
        if entry.get("failures"):
            lines += [f"## {name}: failure classes", "", "| class | episodes |", "|---|---:|"]
            lines += [f"| {k} | {v:,} |" for k, v in entry["failures"].items()]
            lines.append("")
    latency = summary.get("latency") or {}
    if latency.get("per_call"):
        call, episode = latency["per_call"], latency.get("per_episode") or {}
        lines += [
            "## Latency",
            "",
            f"Per model call: P50 {call['p50_ms']:.1f} ms, P95 {call['p95_ms']:.1f} ms; per "
            f"episode: P50 {episode.get('p50_ms', 0):.1f} ms, P95 {episode.get('p95_ms', 0):.1f} "
            "ms (a cached answer counts with its original latency).",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def write_report(out: Path, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the plots and ``report.md`` under ``out``."""
    plots = []
    for name, data in zip(
        PLOTS, (plot_success(summary), plot_failures(summary), plot_latency(rows)), strict=True
    ):
        if data is not None:
            write_atomic(out / name, data)
            plots.append(name)
    write_atomic(out / REPORT, render_report(summary, plots).encode("utf-8"))


def read_summary(path: str | Path) -> dict[str, Any]:
    """The ``summary.json`` of a finished run directory."""
    target = Path(path) / "summary.json"
    try:
        found = json.loads(target.read_text("utf-8"))
    except FileNotFoundError:
        raise EvalError(
            "no finished evaluation here (summary.json is missing)", file=str(path)
        ) from None
    except (OSError, ValueError) as exc:
        raise EvalError(f"cannot read the summary: {exc}", file=str(target)) from None
    if not isinstance(found, dict) or "suites" not in found:
        raise EvalError("not an hsa evaluation summary", file=str(target))
    bad = unwritable(found, "$")  # NaN passes every bound
    if bad is not None:
        raise EvalError(f"not an hsa evaluation summary: {bad[0]}: {bad[1]}", file=str(target))
    problem = best_match(Draft202012Validator(_SUMMARY).iter_errors(found))
    if problem is not None:
        raise EvalError(
            f"not an hsa evaluation summary: {json_path(problem.absolute_path)}: {problem.message}",
            file=str(target),
        )
    return found


_SHARE = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_RATE = {"type": ["object", "null"], "properties": {k: _SHARE for k in ("success", "low", "high")}}
#: the parts of a summary that reports and comparisons read, and their shapes
_SUMMARY = {
    "type": "object",
    "properties": {
        "suites": {
            "type": "object",
            "additionalProperties": {"type": "object"},
            "properties": {
                **{k: _RATE for k in ("canonical", "variants", "bfcl")},
                "firstcall": {"type": "object", "properties": {"name": _RATE}},
            },
        },
        "drop": {"type": ["number", "null"], "minimum": -1, "maximum": 1},
        "recipe": {"type": ["object", "null"]},
    },
}


def environment(summary: Mapping[str, Any]) -> str | None:
    """The environment a run was on: its name, with the options it was built with (its seed,
    its corpus), as ``tau2 (path=...)``; None when the summary does not say."""
    name = summary.get("env")
    if name is None:
        return None
    config = summary.get("config")
    options = config.get("env_options") if isinstance(config, Mapping) else None
    if not isinstance(options, Mapping) or not options:
        return str(name)
    return f"{name} ({', '.join(f'{k}={v}' for k, v in sorted(options.items()))})"


def run_labels(runs: Sequence[str | PurePath]) -> list[str]:
    """How the table and the plot name each compared run: the fewest trailing parts of its
    path, as given, that no other run's path ends in (``a/run`` and ``b/run``, not ``run``
    twice); a path given twice gets the same label."""
    parts = [PurePath(run).parts for run in runs]

    def tail(found: tuple[str, ...], k: int) -> tuple[str, ...]:
        return found[-k:] if k < len(found) else found

    labels = []
    for run, mine in zip(runs, parts, strict=True):
        others = [p for p in parts if p != mine]
        k = 1
        while k < len(mine) and any(tail(mine, k) == tail(p, k) for p in others):
            k += 1
        labels.append(str(PurePath(*tail(mine, k))) if mine else str(run))
    return labels


def compare_rows(
    summaries: Sequence[Mapping[str, Any]], names: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per run: its model, its environment, and success on canonical, on variants,
    and the drop."""
    rows = []
    labels: dict[str, str] = {}
    # beside a summary of an older hsa, which recorded the recipe's path alone, every run is
    # told by its path (a run of the same file is not called another sample for that)
    by_path = any("recipe" not in s for s in summaries)
    for name, summary in zip(names, summaries, strict=True):
        suites = summary["suites"]
        row: dict[str, Any] = {
            "run": name,
            "model": summary.get("model", "?"),
            "env": environment(summary),
        }
        for suite in ("canonical", "variants", "bfcl"):
            row[suite] = suites.get(suite)
        row["firstcall"] = (suites.get("firstcall") or {}).get("name")
        row["drop"] = summary.get("drop")
        config = summary.get("config")
        config = config if isinstance(config, Mapping) else {}
        row["sample"] = {key: config.get(key) for key in SAMPLE_SETTINGS}
        # unset, the task seed is --seed: runs sampling by the same seed either way sample alike
        if config.get("task_seed") is None:
            row["sample"]["task_seed"] = config.get("seed")
        # one recipe in files of several names is one sample, named as the first run names it
        identity, label = recipe_identity({} if by_path else summary, config.get("recipe"))
        row["sample"]["recipe"] = labels.setdefault(identity, label)
        # the environment's splits, which its config does not say (a summary of an older hsa,
        # without it, was of version 1)
        row["sample"]["task_version"] = summary.get("task_version", 1)
        rows.append(row)
    return rows


#: the settings that decide which tasks and variants a run evaluates (``task_seed`` compared
#: as the seed the tasks were sampled by: ``seed`` where it was unset)
SAMPLE_SETTINGS = ("split", "tasks", "seed", "task_seed", "variants", "recipe")
#: what a row's sample is compared by: the settings, and the version of the environment's
#: tasks (which tasks its splits hold) from the summary
_SAMPLE = (*SAMPLE_SETTINGS, "task_version")


def recipe_identity(summary: Mapping[str, Any], path: Any = None) -> tuple[str, str]:
    """What a run's held-out recipe was, from what its summary recorded, to tell runs apart:
    ``(identity, label)``, the label ``built-in`` for hsa's built-in held-out recipe (or
    none), else the name of the file the run read it from (``path``, as given to the run) and
    a hash of its content, ``NAME (HASH)``.

    A summary of an older hsa recorded only the path: then the path as given is all there is
    (its file may have been edited since, or be read from another folder)."""
    from hsa.eval.suites import heldout_recipe

    if "recipe" not in summary:
        return ("built-in", "built-in") if path is None else (f"path {path}", str(path))
    recipe = summary["recipe"]
    if recipe is None or recipe == heldout_recipe().to_dict():
        return "built-in", "built-in"
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode()).hexdigest()
    name = "built-in" if path is None else Path(str(path)).name
    return digest, f"{name} ({digest[:8]})"


def sample_differences(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """``setting a/b`` for each setting of ``SAMPLE_SETTINGS``, and the environment's
    ``task_version``, that the compared runs differ in."""
    out = []
    for key in _SAMPLE:
        values = list(dict.fromkeys(_setting(key, r.get("sample", {}).get(key)) for r in rows))
        if len(values) > 1:
            out.append(f"{key} {'/'.join(values)}")
    return out


def _setting(key: str, value: Any) -> str:
    """A sample setting as a note says it: ``tasks`` unset is all of them."""
    return "all" if key == "tasks" and value is None else str(value)


def environments(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The environments of the compared runs that say theirs, each once, in order."""
    return list(dict.fromkeys(r["env"] for r in rows if r.get("env") is not None))


def compare_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """HAT's table, as Markdown: model x canonical x variants x drop (and bfcl when run).

    Runs on different environments (or one built with other options) get an ``env`` column
    and a line under the table saying that their rates are of different tasks."""
    bfcl = any(r.get("bfcl") for r in rows)
    firstcall = any(r.get("firstcall") for r in rows)
    envs = environments(rows)
    mixed = len(envs) > 1
    head = "| run | model | canonical % [95% CI] | variants % [95% CI] | drop |"
    rule = "|---|---|---|---|---:|"
    if mixed:
        head = head.replace("| model |", "| model | env |")
        rule = "|---" + rule
    if bfcl:
        head, rule = head + " bfcl % [95% CI] |", rule + "---|"
    if firstcall:
        head, rule = head + " first call: name % [95% CI] |", rule + "---|"
    lines = [head, rule]
    for r in rows:
        line = (
            f"| {r['run']} | {r['model']} | "
            + (f"{r.get('env') or '?'} | " if mixed else "")
            + f"{interval(r['canonical'] or {})} | {interval(r['variants'] or {})} | "
            f"{percent(r['drop'])} |"
        )
        if bfcl:
            line += f" {interval(r['bfcl'] or {})} |"
        if firstcall:
            line += f" {interval(r['firstcall'] or {})} |"
        lines.append(line)
    if mixed:
        lines += [
            "",
            f"Note: these runs are on different environments ({'; '.join(envs)}): "
            "their success rates are over different tasks, not comparable side by side.",
        ]
    elif differ := sample_differences(rows):
        lines += [
            "",
            f"Note: these runs evaluate different samples ({'; '.join(differ)}): "
            "their success rates are over different tasks or variants, not comparable side by "
            "side.",
        ]
    return "\n".join(lines) + "\n"


def check_plot_path(path: Path, runs: Sequence[Path] = ()) -> None:
    """An ``EvalError`` when a plot cannot be written at ``path``, said before any work: a
    file where one of its folders would be, a folder at ``path`` itself, a place inside one of
    the compared ``runs`` (a run's own files), or a file there already that is not a PNG."""
    inside = next((r for r in runs if path.resolve().is_relative_to(r.resolve())), None)
    if inside is None and (path.parent / "summary.json").is_file():
        inside = path.parent  # an evaluation run, compared or not
    if inside is not None:
        raise EvalError(
            f"cannot write the plot inside the evaluation run {inside}: a run's files are its "
            "own; give a path outside it",
            file=str(path),
        )
    if path.is_file() and path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        raise EvalError(
            "cannot write the plot: a file that is not a PNG is there already", file=str(path)
        )
    if path.is_dir():
        raise EvalError(
            f"cannot write the plot: {path} is a directory; give a file name such as "
            f"{path / COMPARE_PLOT}",
            file=str(path),
        )
    folder = blocked(path)
    if folder is not None:
        raise EvalError(f"cannot write the plot: {folder} is not a directory", file=str(path))
    if path.suffix.lower() != ".png":
        raise EvalError("the plot is a PNG: give a file name ending in .png", file=str(path))


@drawn
def plot_compare(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Grouped bars: per run, success on canonical and on held-out variants, with intervals."""
    fig = figure(figsize=(1.8 + 1.6 * len(rows), 3.4), dpi=100)
    ax = fig.subplots()
    series = [("canonical", _BLUE), ("variants", _ORANGE)]
    if any(r.get("firstcall") for r in rows):
        series.append(("firstcall", _GREEN))
    width = 0.76 / len(series)
    for index, (suite, color) in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        xs: list[float] = []
        values: list[float] = []
        errors: list[list[float]] = [[], []]
        for i, r in enumerate(rows):
            entry = r.get(suite) or {}
            if entry.get("success") is None:
                continue
            xs.append(i + offset)
            values.append(100 * entry["success"])
            errors[0].append(100 * (entry["success"] - entry["low"]))
            errors[1].append(100 * (entry["high"] - entry["success"]))
        label = "first call (name)" if suite == "firstcall" else suite
        ax.bar(xs, values, width, yerr=errors, color=color, capsize=3, label=label)
    # long names wrapped, to the width of a group of bars (they ran into each other)
    names = [textwrap.fill(r["run"], 22) for r in rows]
    ax.set_xticks(range(len(rows)), names, fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("success %")
    title = "canonical vs held-out harness variants"
    if len(environments(rows)) > 1:  # as the table's note says
        title += "\n(runs on different environments: not comparable)"
    elif sample_differences(rows):
        title += "\n(runs on different samples: not comparable)"
    ax.set_title(title, fontsize=10)
    # beside the axes: below them, it covered the run names of more than one line
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return png(fig)
