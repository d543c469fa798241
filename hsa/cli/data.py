"""``hsa augment``, ``hsa build`` and ``hsa inspect``: make augmented datasets and look at them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from hsa.cli.output import console, error_console, progress


def _bars():
    """Progress bars on a terminal; nothing in a pipe, so errors stay one line."""
    bars = progress()
    bars.disable = not error_console().is_terminal
    return bars


def _summary(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for key, value in rows:
        table.add_row(key, value)
    console().print(table)


def _augment_rows(report: Any, seconds: float) -> list[tuple[str, str]]:
    engine = report.engine
    rows = [
        ("output", str(report.out)),
        ("trajectories", f"{report.trajectories:,}"),
        ("rows", f"{report.rows:,}"),
        *[(f"  {split}", f"{n:,}") for split, n in sorted(report.splits.items())],
        ("variants planned", f"{report.variants:,}"),
        ("batches skipped (done before)", f"{report.skipped:,}"),
        (
            "exact path (calls / hooks / rows)",
            f"{engine.get('calls_exact', 0):,} / {engine.get('hooks_exact', 0):,} / "
            f"{engine.get('rows_exact', 0):,}",
        ),
        ("time", f"{seconds:.1f} s"),
    ]
    if report.unverified:
        rows.insert(3, ("unverified input skipped", f"{report.unverified:,}"))
    return rows


@click.command("augment")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Canonical trajectories: a directory of Parquet shards, a .parquet file, or an "
    "OpenAI chat .jsonl file.",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Dataset directory.")
@click.option(
    "--recipe",
    type=click.Path(path_type=Path),
    help="Recipe YAML (rules, probabilities, variants).  [default: every family]",
)
@click.option(
    "--harness",
    "harness_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Harness the trajectories were recorded under (directory or JSON; repeatable). "
    "A JSONL file without one gets harnesses derived from its rows.",
)
@click.option("--seed", type=int, help="Planning, picking and split seed.  [default: recipe's]")
@click.option(
    "--variants-per-trajectory",
    type=int,
    help="Variants each trajectory is rendered under.  [default: recipe's]",
)
@click.option(
    "--keep-canonical/--no-keep-canonical",
    default=True,
    show_default=True,
    help="Also write each trajectory under its unchanged harness.",
)
@click.option(
    "--batch-size", type=int, default=4096, show_default=True, help="Trajectories per shard."
)
@click.option(
    "--include-unverified", is_flag=True, help="Also augment rows a teacher marked unverified."
)
def augment_command(
    input_path: Path,
    out: Path,
    recipe: Path | None,
    harness_paths: tuple[Path, ...],
    seed: int | None,
    variants_per_trajectory: int | None,
    keep_canonical: bool,
    batch_size: int,
    include_unverified: bool,
) -> None:
    """Render canonical trajectories under harness variants into a Parquet dataset.

    Writes DIR/data/{split}/part-NNNNN.parquet, variants.parquet, README.md (the card, with
    plots) and manifest.json. A rerun skips finished shards and ends with the same bytes.
    """
    from hsa.augment.recipe import load_recipe
    from hsa.datasets.job import AugmentConfig, augment
    from hsa.datasets.source import open_source
    from hsa.harness.io import load

    harnesses = [load(p) for p in harness_paths]
    if len(harnesses) > 1 and input_path.suffix == ".jsonl":
        raise click.UsageError("a JSONL file is read under at most one --harness")
    started = time.monotonic()
    source = open_source(input_path, harness=harnesses[0] if harnesses else None)
    config = AugmentConfig(
        recipe=load_recipe(recipe) if recipe is not None else None,
        seed=seed,
        variants_per_trajectory=variants_per_trajectory,
        keep_canonical=keep_canonical,
        batch_size=batch_size,
        include_unverified=include_unverified,
    )
    with _bars() as bar:
        task = bar.add_task("augment", total=None)

        def on_batch(done: int, total: int, rows: int) -> None:
            bar.update(task, completed=done, total=total, description=f"augment ({rows:,} rows)")

        report = augment(
            source,
            out,
            config,
            harnesses=harnesses if input_path.suffix != ".jsonl" else [],
            progress=on_batch,
        )
    title = "hsa augment: already complete" if report.complete_already else "hsa augment"
    _summary(title, _augment_rows(report, time.monotonic() - started))


@click.command("build")
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="Override the config's 'out'.")
def build_command(config_path: Path, out: Path | None) -> None:
    """Build a dataset from a YAML config: source -> teacher -> augmentation -> splits -> card.

    A rerun skips finished stages and shards; a finished build is left as it is.
    """
    from hsa.datasets.build import build, load_config

    started = time.monotonic()
    config = load_config(config_path)
    names = {"tasks": "tasks", "teacher": "teacher trajectories", "augment": "augment"}
    with _bars() as bar:
        tasks: dict[str, Any] = {}

        def on_stage(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(names.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = build(config, out=out, progress=on_stage)
    rows = [("config", str(config_path))]
    if report.tasks:
        rows.append(("tasks", f"{report.tasks:,} ({report.verified:,} verified)"))
    if report.teacher_skipped:
        rows.append(("teacher", "skipped (done before)"))
    rows += _augment_rows(report.augment, time.monotonic() - started)
    _summary("hsa build: done", rows)


def _shorten(text: str | None, width: int) -> str:
    if text is None:
        return "∅"
    text = text if len(text) <= width else text[: width - 1] + "…"
    return text


@click.command("inspect")
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.option("-n", "--rows", "count", type=int, default=2, show_default=True, help="Rows to show.")
@click.option("--split", help="Show rows of this split.  [default: the first]")
@click.option(
    "--width", type=int, default=400, show_default=True, help="Characters shown per message."
)
def inspect_command(path: Path, count: int, split: str | None, width: int) -> None:
    """Summarise a dataset directory and show rows rendered readably."""
    from rich.panel import Panel

    from hsa.datasets import manifest as mf
    from hsa.datasets.export import iter_rows, shards

    files = shards(path)
    manifest = mf.read_json(path / mf.MANIFEST)
    rows = manifest.get("rows", {})
    engine = manifest.get("engine", {})
    summary = [
        ("dataset", str(path)),
        ("rows", f"{rows.get('total', 0):,}"),
        *[(f"  {k}", f"{v:,}") for k, v in sorted(rows.items()) if k != "total"],
        ("source trajectories", f"{manifest.get('trajectories', 0):,}"),
        ("variants", f"{manifest.get('variants', 0):,}"),
        ("rules", f"{len(manifest.get('rules', []))}"),
        ("shards", f"{len(files)}"),
        ("seed", str(manifest.get("seed"))),
        (
            "exact path (calls / hooks / rows)",
            f"{engine.get('calls_exact', 0):,} / {engine.get('hooks_exact', 0):,} / "
            f"{engine.get('rows_exact', 0):,}",
        ),
    ]
    _summary("hsa inspect", summary)
    if count <= 0:
        return
    if split is None and files:
        split = sorted({f.parent.name for f in files})[0]
    out = console()
    for i, row in enumerate(iter_rows(path, split)):
        if i >= count:
            break
        header = (
            f"[bold]{row['id']}[/bold]  split={row['split']}  protocol={row['protocol']}  "
            f"rules={', '.join(row['rules']) or '(canonical)'}"
        )
        lines = []
        for message in row["messages"]:
            role = message["role"]
            body = _shorten(message.get("content"), width)
            lines.append(f"[bold cyan]{role}[/bold cyan]: {_escape(body)}")
            for call in message.get("tool_calls") or []:
                fn = call["function"]
                lines.append(
                    f"  [magenta]→ {_escape(fn['name'])}[/magenta]"
                    f"({_escape(_shorten(fn['arguments'], width))})  [dim]{call['id']}[/dim]"
                )
        tools = json.loads(row["tools"]) if row["tools"] else []
        if tools:
            lines.append(f"[dim]tools: {', '.join(t['function']['name'] for t in tools)}[/dim]")
        out.print(Panel("\n".join(lines), title=header, title_align="left"))


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
