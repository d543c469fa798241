"""``hsa augment``, ``hsa build`` and ``hsa inspect``: make augmented datasets and look at them."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hsa.cli.flags import (
    AUGMENT,
    Setting,
    UserPath,
    api_key_env_option,
    env_api_key,
    given,
    said_as_flags,
)
from hsa.cli.output import console, progress

MB = 1 << 20


def read_bar(bar: Any, description: str) -> Callable[[int, int], None]:
    """A ``progress(bytes read, size)`` for ``open_source`` that draws a bar of megabytes on
    ``bar``, added when first told."""
    task: list[Any] = []

    def on_read(done: int, total: int) -> None:
        done, total = _megabytes(done, total)
        if not task:
            task.append(bar.add_task(f"{description} (MB)", total=total))
        bar.update(task[0], completed=done)

    return on_read


def _megabytes(done: int, total: int) -> tuple[int, int]:
    """Bytes read of a file's size as whole megabytes for a bar (a file has at least one)."""
    return -(-done // MB), max(1, -(-total // MB))


def _summary(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right", overflow="fold")  # a long path folds, not cut
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
        ("variants rendered under", f"{report.variants:,}"),
        ("batches skipped (done before)", f"{report.skipped:,}"),
        (
            "exact path (calls / hooks / rows)",
            f"{engine.get('calls_exact', 0):,} / {engine.get('hooks_exact', 0):,} / "
            f"{engine.get('rows_exact', 0):,}",
        ),
        ("time", f"{seconds:.1f} s"),
    ]
    if report.complete_already:  # this run did no work: what it would count is not there
        rows[-3:-1] = [("dataset", "complete already: nothing to do")]
    after_splits = 3 + len(report.splits)  # (after "rows" and its splits)
    if report.unverified:
        rows.insert(after_splits, ("unverified input skipped", f"{report.unverified:,}"))
    if report.unverified_rows:
        rows.insert(
            after_splits, ("rows of unverified input (kept)", f"{report.unverified_rows:,}")
        )
    if report.short:
        rows.insert(
            -1,
            (
                f"under fewer than {report.variants_per_trajectory} variants",
                f"{report.short:,} trajectories (too few variants change what their rows show, "
                "or the others' text protocols cannot write them: assistant text read as "
                "calls, arguments too deep for Python literals)",
            ),
        )
    if report.timings:  # a run that did the work (not one that found it complete)
        parts = ", ".join(f"{name} {value:.1f} s" for name, value in report.timings.items())
        rows.append(("  of which", parts))
    return rows


def _one_harness(folder: Path) -> bool:
    """Whether the ``hsa harness import`` folder ``folder`` holds one harness, at its top."""
    from hsa.harness.io import MANIFEST

    return (folder / MANIFEST).is_file()


@click.command("augment")
@click.option(
    "--input",
    "input_path",
    required=True,
    type=UserPath(path_type=Path),
    help="Canonical trajectories: a directory of Parquet shards, a .parquet file, an OpenAI "
    "chat .jsonl file, or an `hsa harness import` folder (read under its harnesses).",
)
@click.option("--out", required=True, type=UserPath(path_type=Path), help="Dataset directory.")
@click.option(
    "--recipe",
    type=UserPath(path_type=Path),
    cls=Setting,
    config=AUGMENT,
    metavar="RECIPE",
)
@click.option(
    "--harness",
    "harness_paths",
    multiple=True,
    type=UserPath(path_type=Path),
    help="Harness the trajectories were recorded under (directory or JSON; repeatable), or "
    "an `hsa harness import` folder holding them all. A JSONL file without one gets "
    "harnesses derived from its rows.",
)
@click.option("--seed", type=click.IntRange(min=0), cls=Setting, config=AUGMENT)
@click.option("--variants-per-trajectory", type=int, cls=Setting, config=AUGMENT)
@click.option("--keep-canonical/--no-keep-canonical", cls=Setting, config=AUGMENT)
@click.option("--batch-size", type=int, cls=Setting, config=AUGMENT)
@click.option("--include-unverified", is_flag=True, cls=Setting, config=AUGMENT)
@click.option("--workers", type=click.IntRange(min=1), cls=Setting, config=AUGMENT)
@click.option("--tokenizer", type=UserPath(path_type=Path), cls=Setting, config=AUGMENT)
def augment_command(
    input_path: Path,
    out: Path,
    recipe: Path | None,
    harness_paths: tuple[Path, ...],
    tokenizer: Path | None,
    **flags: Any,
) -> None:
    """Render canonical trajectories under harness variants into a Parquet dataset.

    Writes DIR/data/{split}/part-NNNNN.parquet, variants.parquet, README.md (the card, with
    plots) and manifest.json; until the last batch is written the shards wait in DIR/.hsa/, so
    an unfinished DIR holds no rows. A rerun skips finished shards and ends with the same bytes.
    DIR is locked while the run writes: a second run into it refuses. Settings: a flag, then
    the recipe.
    """
    from hsa.augment.recipe import load_recipe
    from hsa.datasets.source import is_chat_file, is_import, open_source, with_imported_harnesses
    from hsa.harness.io import load
    from hsa.pipelines.augment import AugmentConfig, augment

    jsonl = is_chat_file(input_path)
    # a chat file is read under one harness: an import folder holding one is that harness
    folders = [p for p in harness_paths if is_import(p) and not (jsonl and _one_harness(p))]
    harnesses = [load(p) for p in harness_paths if p not in folders]
    if jsonl and (len(harnesses) > 1 or folders):
        raise click.UsageError(
            "a JSONL file is read under at most one --harness"
            + (f"; {folders[0]} holds several: name one of its folders" if folders else "")
        )
    if len(folders) > 1 or (folders and harnesses):
        raise click.UsageError(
            "give the harnesses as one `hsa harness import` folder or as harnesses, not both"
        )
    started = time.monotonic()
    with said_as_flags():
        config = AugmentConfig(
            recipe=load_recipe(recipe) if recipe is not None else None,
            tokenizer=None if tokenizer is None else str(tokenizer),
            **given(flags),
        )
    with progress() as bar:
        opening = time.perf_counter()
        source = open_source(
            input_path,
            harness=harnesses[0] if harnesses else None,
            progress=read_bar(bar, f"read {input_path.name}"),
        )
        if folders:
            source = with_imported_harnesses(source, folders[0])
        opened = time.perf_counter() - opening  # (a JSONL file is read into scratch here)
        task = bar.add_task("augment", total=None)

        def on_batch(done: int, total: int, rows: int) -> None:
            bar.update(task, completed=done, total=total, description=f"augment ({rows:,} rows)")

        report = augment(
            source,
            out,
            config,
            harnesses=harnesses if not jsonl else [],
            progress=on_batch,
        )
    if report.timings:  # the input as opened counts as read, as its batches do
        report.timings["read"] = report.timings.get("read", 0.0) + opened
    title = "hsa augment: already complete" if report.complete_already else "hsa augment"
    _summary(title, _augment_rows(report, time.monotonic() - started))
    for note in (*report.notes, *_card_kept(report, config.tokenizer)):
        console().print(f"note: {note}")


@click.command("build")
@click.argument("config_path", metavar="CONFIG", type=UserPath(path_type=Path))
@click.option("--out", type=UserPath(path_type=Path), help="Override the config's 'out'.")
@click.option("--tokenizer", type=UserPath(path_type=Path), cls=Setting, config=AUGMENT)
@click.option("--seed", type=click.IntRange(min=0), cls=Setting, config=AUGMENT)
@api_key_env_option
def build_command(
    config_path: Path,
    out: Path | None,
    tokenizer: Path | None,
    seed: int | None,
    api_key_env: str,
) -> None:
    """Build a dataset from a YAML config: source -> teacher -> augmentation -> splits -> card.

    A rerun skips finished stages and shards; a finished build is left as it is. The output
    folder is locked while the build writes: a second build into it refuses. Settings: a
    flag, then the config, then its recipe (a seed the config leaves out is the recipe's).
    """
    from hsa.pipelines.build import build, load_config

    started = time.monotonic()
    config = load_config(config_path)
    augment = config.augment  # a flag, then the config
    if tokenizer is not None:
        augment = dataclasses.replace(augment, tokenizer=str(tokenizer.resolve()))
    if seed is not None:
        augment = dataclasses.replace(augment, seed=seed)
    config = dataclasses.replace(config, augment=augment)
    if config.teach.get("backend") == "openai":
        # an openai teacher's key, read as hsa teach reads it (a config file is no place for
        # a secret, but may hold one)
        key = env_api_key(api_key_env, config.teach.get("api_key"))
        if key is not None:
            config = dataclasses.replace(config, teach={**config.teach, "api_key": key})
    names = {
        "read": "read trajectories (MB)",
        "tasks": "tasks",
        "teacher": "teacher trajectories",
        "augment": "augment",
    }
    with progress() as bar:
        tasks: dict[str, Any] = {}

        def on_stage(stage: str, done: int, total: int) -> None:
            if stage == "read":  # bytes of a JSONL source
                done, total = _megabytes(done, total)
            if stage not in tasks:
                tasks[stage] = bar.add_task(names.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = build(config, out=out, progress=on_stage)
    rows = [("config", str(config_path))]
    if report.tasks:
        # (the teacher's rollouts: a task under more variants or samples is run more times)
        rows.append(("teacher rollouts", f"{report.tasks:,} ({report.verified:,} verified)"))
    if report.restated:  # BFCL's format-sensitivity entries: augmentation varies the form
        rows.append(("tasks left out (another task asked again)", f"{report.restated:,}"))
    if report.short:  # (the recipe has too few variants that change these tasks' harness)
        rows.append(
            (f"under fewer than {report.variants_per_task} variants", f"{report.short:,} tasks")
        )
    if report.teacher_skipped and report.tasks:  # (recorded trajectories have no teacher)
        rows.append(("teacher", "skipped (done before)"))
    rows += _augment_rows(report.augment, time.monotonic() - started)
    _summary("hsa build: done", rows)
    done = report.augment  # its notes carry what the teacher left out
    notes = () if done is None else (*done.notes, *_card_kept(done, config.augment.tokenizer))
    for note in notes:
        console().print(f"note: {note}")


def _card_kept(report: Any, tokenizer: str | None) -> tuple[str, ...]:
    """What a rerun of a finished dataset says of a ``--tokenizer`` it did not apply."""
    if not (report.complete_already and tokenizer):
        return ()
    card = report.out / "README.md"
    return (
        "the dataset is complete already: its card is not written again, so --tokenizer "
        f"counted nothing (to count its tokens with {tokenizer}, delete {card} and rerun)",
    )


def _shorten(text: str | None, width: int) -> str:
    """``text`` cut to about ``width`` characters at a word boundary, so no word is cut."""
    if text is None:
        return "∅"
    if len(text) <= width:
        return text
    cut = text[:width]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return (cut[:space] if space > width // 2 else cut).rstrip() + " …"


@click.command("inspect")
@click.argument("path", metavar="DIR", type=UserPath(path_type=Path))
@click.option(
    "-n",
    "--rows",
    "count",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Rows to show (0: the summary alone).",
)
@click.option("--split", help="Show rows of this split.  [default: the first]")
@click.option(
    "--width",
    type=click.IntRange(min=1),
    default=400,
    show_default=True,
    help="Characters shown per message.",
)
def inspect_command(path: Path, count: int, split: str | None, width: int) -> None:
    """Summarise a dataset or `hsa teach` output directory and show rows rendered readably.

    The summary's counts are its manifest.json's, checked against the shards (their Parquet
    footers): a manifest that disagrees, or whose keys are not as hsa wrote them, is refused
    naming the key; rerunning the job that wrote the folder writes it again."""
    if _is_teacher_output(path):
        summary, files = _teacher_summary(path, split)
        _summary("hsa inspect: teacher output", summary)
    else:
        summary, files = _dataset_summary(path, split)
        _summary("hsa inspect", summary)
    if count == 0:
        return
    from hsa.datasets.shards import read_table

    shown = 0
    for file in files:
        for row in read_table(file).to_pylist():
            if shown >= count:
                return
            _show_row(row, width)
            shown += 1


def _is_teacher_output(path: Path) -> bool:
    """Whether ``path`` holds ``hsa teach`` output: its manifest's ``kind`` says so; without
    a manifest (or a kind), a teacher job's file does."""
    from hsa.datasets import manifest as mf
    from hsa.pipelines.teach import JOB_FILE

    if (path / mf.MANIFEST).is_file():
        manifest = mf.read_json(path / mf.MANIFEST)
        kind = manifest.get("kind") if isinstance(manifest, dict) else None
        if kind is not None:
            return bool(kind == mf.TEACHER_KIND)
    return (path / JOB_FILE).is_file()


def _count(value: Any) -> str:
    """A count read from a manifest, with thousands separators; anything else as it is."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` when a manifest holds a JSON object there, else nothing."""
    return value if isinstance(value, dict) else {}


def _dataset_summary(path: Path, split: str | None) -> tuple[list[tuple[str, str]], list[Path]]:
    """The summary of an augmented dataset, and the shards of the split whose rows are shown."""
    from hsa.datasets import manifest as mf
    from hsa.datasets.export import shards
    from hsa.errors import DatasetError

    manifest: Any = {}
    if (path / mf.MANIFEST).is_file():  # without one, shards() says what is missing
        manifest = mf.read_json(path / mf.MANIFEST)
        if not isinstance(manifest, dict):
            raise DatasetError(
                "not a dataset manifest: expected a JSON object", file=str(path / mf.MANIFEST)
            )
        if manifest.get("kind") == mf.KIND:  # (shards() names any other kind)
            # its files intact, its keys of their types, its counts the shards' own
            mf.check_finished(path, manifest)
    files = shards(path)
    rules = manifest.get("rules")
    rows = _mapping(manifest.get("rows"))
    engine = _mapping(manifest.get("engine"))
    summary = [
        ("dataset", str(path)),
        ("rows", _count(rows.get("total", 0))),
        *[(f"  {k}", _count(v)) for k, v in sorted(rows.items()) if k != "total"],
        ("source trajectories", _count(manifest.get("trajectories", 0))),
        ("variants", _count(manifest.get("variants", 0))),
        ("rules", f"{len(rules) if isinstance(rules, list) else 0}"),
        ("shards", f"{len(files)}"),
        ("seed", str(manifest.get("seed"))),
        (
            "exact path (calls / hooks / rows)",
            " / ".join(
                _count(engine.get(k, 0)) for k in ("calls_exact", "hooks_exact", "rows_exact")
            ),
        ),
    ]
    # what the run left out or fell short of, as its summary said it
    asked = _mapping(manifest.get("variants_per_trajectory"))
    if asked.get("short"):
        summary.append(
            (
                f"under fewer than {asked.get('asked')} variants",
                f"{_count(asked['short'])} trajectories",
            )
        )
    if manifest.get("unverified_skipped"):
        left = _count(manifest["unverified_skipped"])
        summary.append(("unverified left out", f"{left} trajectories"))
    notes = manifest.get("notes")
    for note in notes if isinstance(notes, list) else ():
        summary.append(("note", str(note)))
    if split is None and files:
        split = sorted({f.parent.name for f in files})[0]
    return summary, shards(path, split) if files else []


def _teacher_summary(path: Path, split: str | None) -> tuple[list[tuple[str, str]], list[Path]]:
    """The summary of ``hsa teach`` output (rows, verified, rejects by reason), and the shards
    of the split whose rows are shown."""
    from collections import Counter

    from hsa.datasets import manifest as mf
    from hsa.datasets.shards import read_table
    from hsa.errors import TeacherError

    if not (path / mf.MANIFEST).is_file():
        raise TeacherError(
            "the teacher job is not finished (no manifest.json): rerun the same `hsa teach` "
            "command to finish it",
            file=str(path),
        )
    manifest = mf.read_json(path / mf.MANIFEST)
    if not isinstance(manifest, dict):
        raise TeacherError("not a manifest: expected a JSON object", file=str(path / mf.MANIFEST))
    mf.check_finished(path, manifest, mf.TEACHER_KIND)  # its keys and counts, as written
    splits = manifest["splits"]
    files = mf.listed_shards(path, manifest)
    reasons: Counter = Counter()
    for file in files:
        for reason in read_table(file, columns=["reason"]).column("reason").to_pylist():
            reasons[str(reason).split(":", 1)[0]] += 1
    summary = [
        ("teacher output", str(path)),
        ("teacher", str(manifest.get("teacher"))),
        ("rows", _count(manifest.get("rows", 0))),
        *[
            (f"  {name}", f"{_count(s.get('rows', 0))} ({_count(s.get('verified', 0))} verified)")
            for name, s in sorted(splits.items())
        ],
        ("verified", _count(manifest.get("verified", 0))),
        *[(f"  rejected: {k}", f"{v:,}") for k, v in sorted(reasons.items()) if k != "ok"],
        ("rules", f"{len(_mapping(manifest.get('rule_versions')))}"),
        ("shards", f"{len(files)}"),
        ("seed", str(manifest.get("seed"))),
    ]
    asked = _mapping(manifest.get("variants_per_task"))  # what the job fell short of
    if asked.get("short"):
        summary.append(
            (f"under fewer than {asked.get('asked')} variants", f"{_count(asked['short'])} tasks")
        )
    if split is None and splits:
        split = sorted(splits)[0]
    return summary, mf.listed_shards(path, manifest, split) if splits else []


def _show_row(row: dict[str, Any], width: int) -> None:
    """One row in a panel. Printed without soft wrapping (the console's default), so rich
    wraps long lines at word boundaries instead of cropping them at the terminal's edge."""
    from rich.panel import Panel
    from rich.text import Text

    header = [
        f"split={row['split']}",
        f"protocol={row['protocol']}",
        f"rules={', '.join(row['rules']) or '(canonical)'}",
    ]
    if row.get("verified") is not None:
        header.append("verified" if row["verified"] else f"rejected: {_reason(row)}")
    lines = [Text("  ".join(header), style="dim")]
    for message in row["messages"]:
        body = _shorten(message.get("content"), width)
        lines.append(Text.assemble((message["role"], "bold cyan"), f": {body}"))
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            lines.append(
                Text.assemble(
                    (f"  → {fn['name']}", "magenta"),
                    f"({_shorten(fn['arguments'], width)})  ",
                    (str(call["id"]), "dim"),
                )
            )
    tools = json.loads(row["tools"]) if row["tools"] else []
    if tools:
        names = ", ".join(t["function"]["name"] for t in tools)
        lines.append(Text(f"tools: {names}", style="dim"))
    title = Text(row["id"], style="bold")
    console().print(Panel(Text("\n").join(lines), title=title, title_align="left"), soft_wrap=False)


def _reason(row: dict[str, Any]) -> str:
    """Why a row was rejected: a teacher row's ``reason``, else the one in its ``verification``
    (JSON object text in both row formats)."""
    if row.get("reason"):
        return row["reason"]
    try:
        reason = json.loads(row.get("verification") or "{}").get("reason")
    except (ValueError, AttributeError):
        reason = None
    return str(reason) if reason else "(no reason recorded)"
