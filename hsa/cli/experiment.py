"""``hsa experiment run``: build both arms' data, train both, evaluate both on held-out tiers."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import TaskID

from hsa.cli.flags import UserPath
from hsa.cli.output import console, progress


@click.group("experiment")
def group() -> None:
    """Experiments end to end: what harness augmentation does to a model."""


@group.command("run")
@click.argument("config", type=UserPath(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=UserPath(path_type=Path), required=True, help="The run's folder.")
@click.option(
    "--seeds", default=None, help="Training seeds, comma-separated (default: the config's)."
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=None,
    help="Training steps per model (max_steps).",
)
@click.option(
    "--scale",
    type=click.Choice(["cpu", "gpu"]),
    default="cpu",
    show_default=True,
    help="cpu: a tiny model from scratch on first calls; gpu: the config's gpu section (a local "
    "base model on full rows, vLLM for evaluation).",
)
@click.option(
    "--doc",
    type=UserPath(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the figures into this Markdown document's results section for CONFIG "
    "(named by its file's stem; with its plot and summary beside it), as docs/experiment.md "
    "holds them.",
)
def run_command(
    config: Path, out: Path, seeds: str | None, steps: int | None, scale: str, doc: Path | None
) -> None:
    """Run the experiment CONFIG into OUT: data (hsa build), training (hsa train sft, both arms
    from the same initial weights, same steps), evaluation (hsa eval's firstcall suite on each
    held-out tier); writes OUT/summary.json and OUT/report.md with its plot. A rerun finishes
    what an interrupted one left. OUT is locked while the run writes: a second run into it
    refuses."""
    from hsa.errors import ExperimentError
    from hsa.experiment.config import load_config
    from hsa.experiment.run import describe, run

    parsed = None
    if seeds is not None:
        try:
            parsed = [int(s) for s in seeds.split(",")]  # an empty item ("0,,1") too
        except ValueError:
            raise ExperimentError(f"--seeds: expected integers, got {seeds!r}") from None
    settings = load_config(config, seeds=parsed, steps=steps, scale=scale)
    if doc is not None:
        from hsa.experiment.report import check_doc

        check_doc(doc, config.stem)
    bar = progress(log_every=0)  # in a log: a line per step done (`train: 2/4`)
    with bar:
        jobs: dict[str, TaskID] = {}

        def advance(step: str, done: int, total: int) -> None:
            if step not in jobs:
                jobs[step] = bar.add_task(step, total=total)
            bar.update(jobs[step], completed=done, total=total)

        summary = run(settings, out, progress=advance)
    console().print(describe(summary))
    console().print(f"wrote {out / 'report.md'} and {out / 'summary.json'}")
    if doc is not None:
        from hsa.experiment.report import write_doc

        write_doc(summary, doc, config.stem)
        console().print(f"wrote the results section of {doc}")
