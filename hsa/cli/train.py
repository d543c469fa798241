"""``hsa train sft``: TRL runs on hsa datasets."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import click

from hsa.cli.flags import UserPath
from hsa.cli.output import console, fail, library_bars_off_terminal


@click.group("train")
def group() -> None:
    """Train models with TRL: HSA-SFT and on-policy distillation on hsa datasets, HSA-RL in
    an environment."""


def _run_options(trl_config: str):
    """The options every training command has: its config file, OUT, TRL's max_steps, and
    resuming from the newest checkpoint."""

    def decorate(command):
        for option in reversed(
            [
                click.option(
                    "--config",
                    "config_file",
                    type=UserPath(path_type=Path),
                    help=f"YAML: TRL's {trl_config} fields by their TRL names, plus an 'hsa:' "
                    "section.",
                ),
                click.option(
                    "--out",
                    type=UserPath(path_type=Path),
                    required=True,
                    help="Checkpoints, model, card.",
                ),
                click.option("--max-steps", type=click.IntRange(min=1), help="TRL's max_steps."),
                click.option(
                    "--resume", is_flag=True, help="Continue from the newest checkpoint in OUT."
                ),
            ]
        ):
            command = option(command)
        return command

    return decorate


def _run_args(
    config_file: Path | None, max_steps: int | None, out: Path
) -> tuple[dict | Path, dict]:
    """The config (a file, or none) and the TRL keys the command line sets; an interrupted
    run will say how to continue."""
    from hsa.cli import when_interrupted

    when_interrupted(f"rerun with --resume to continue from the newest checkpoint in {out}, if any")
    trl: dict = {"max_steps": max_steps} if max_steps is not None else {}
    # off a terminal, the trainer's bar too (it logs each step as a line then), unless the
    # config says otherwise
    if library_bars_off_terminal() and "disable_tqdm" not in _keys(config_file):
        trl["disable_tqdm"] = True
    return ({} if config_file is None else config_file), trl


def _keys(config_file: Path | None) -> Collection[str]:
    """The top-level keys of a training config file (none when it cannot be read: the run
    says why)."""
    from hsa.config import read_yaml
    from hsa.errors import HsaError

    if config_file is None:
        return ()
    try:
        data = read_yaml(config_file, error=HsaError)
    except HsaError:
        return ()
    return data.keys() if isinstance(data, dict) else ()


def _curve(points: list[tuple[int, float]], digits: int = 4) -> str:
    """``first -> last`` of a logged curve."""
    if not points:
        return "– -> –"
    return f"{points[0][1]:.{digits}f} -> {points[-1][1]:.{digits}f}"


@group.command("sft")
@_run_options("SFTConfig")
@click.option("--data", type=UserPath(path_type=Path), help="The hsa dataset (hsa.data).")
@click.option("--model", help="A local model folder, or a hub name when online (hsa.model).")
def sft_command(
    config_file: Path | None,
    data: Path | None,
    model: str | None,
    out: Path,
    max_steps: int | None,
    resume: bool,
) -> None:
    """Supervised fine-tuning on an hsa dataset, the loss on assistant turns only.

    Writes the model and tokenizer to OUT with TRL's checkpoints, the resolved config
    (hsa-train.json) and a training card (README.md) with the loss curve.
    """
    from hsa.train.sft import train_sft

    overrides = {"data": str(data) if data else None, "model": model}
    config, trl = _run_args(config_file, max_steps, out)
    report = train_sft(config, out, overrides=overrides, trl_overrides=trl, resume=resume)
    shown = console()
    counts = report.counts
    if report.resumed_from:
        shown.print(f"resumed from {report.resumed_from}")
    cut = [
        f"{counts['truncated']} of them cut short at max_length" if counts.get("truncated") else "",
        f"{counts['split']} of them split into pieces at max_length" if counts.get("split") else "",
        f"{counts['dropped']} more dropped at max_length" if counts.get("dropped") else "",
    ]
    cut = [note for note in cut if note]
    checked = [
        f"{counts[key]} {label}"
        for key, label in (
            ("verified", "verified"),
            ("never_checked", "never checked by a teacher"),
            ("unverified", "unverified"),
            ("unverified_left_out", "unverified left out"),
        )
        if counts.get(key)
    ]
    shown.print(
        f"sft: {report.steps} steps on {counts.get('train', 0)} rows "
        f"({counts.get('canonical', 0)} canonical, {counts.get('variants', 0)} variants"
        + (f"; {', '.join(checked)}" if checked else "")
        + "".join(f"; {note}" for note in cut)
        + (", see README.md" if cut else "")
        + f"); loss {_curve(report.losses)}"
    )
    if counts.get("reasoning_not_trained"):
        shown.print(
            f"warning: {counts['reasoning_not_trained']} of the rows trained on carry reasoning "
            "(reasoning_content) that the chat template does not render: trained on without it, "
            "see README.md"
        )
    shown.print(f"wrote {out} (model, hsa-train.json, README.md) in {report.wall_s:.1f} s")


@group.command("rl")
@_run_options("GRPOConfig")
@click.option("--model", help="A local model folder, or a hub name when online (hsa.model).")
@click.option("--env", help="The environment whose tasks are the prompts (hsa.env).")
def rl_command(
    config_file: Path | None,
    model: str | None,
    env: str | None,
    out: Path,
    max_steps: int | None,
    resume: bool,
) -> None:
    """HSA-RL: GRPO with multi-turn tool use, tasks under harness variants, rewards from the
    environment.

    Writes the model to OUT with TRL's checkpoints, every episode's rewards and rule families
    (rollouts.jsonl), the resolved config (hsa-train.json) and a training card (README.md) with
    the reward curve and the reward per rule family.
    """
    from hsa.train.rl import train_rl

    config, trl = _run_args(config_file, max_steps, out)
    overrides = {"model": model, "env": env}
    report = train_rl(config, out, overrides=overrides, trl_overrides=trl, resume=resume)
    families = ", ".join(f"{k} {v:.2f}" for k, v in report.by_family.items())
    shown = console()
    if report.resumed_from:
        shown.print(f"resumed from {report.resumed_from}")
    shown.print(
        f"rl: {report.steps} steps, {report.episodes} episodes on {report.prompts} prompts; "
        f"reward {_curve(report.rewards, 3)}; environment reward per family: {families or '–'}"
    )
    shown.print(
        f"wrote {out} (model, rollouts.jsonl, hsa-train.json, README.md) in {report.wall_s:.1f} s"
    )
    if report.short:
        shown.print(
            f"under fewer than {report.variants_per_task} variants: {report.short} tasks (too "
            "few of the recipe's variants change their harness and differ from each other)"
        )
    for note in report.left_out:
        shown.print(f"left out: {note}")


@group.command("distill")
@_run_options("DistillationConfig")
@click.option("--data", type=UserPath(path_type=Path), help="The hsa dataset (hsa.data).")
@click.option("--model", help="The student model folder (hsa.model).")
@click.option("--teacher", help="The teacher model folder, same vocabulary (hsa.teacher).")
def distill_command(
    config_file: Path | None,
    data: Path | None,
    model: str | None,
    teacher: str | None,
    out: Path,
    max_steps: int | None,
    resume: bool,
) -> None:
    """On-policy distillation: the student answers prompts cut from the dataset's rows under
    their harness variants; the teacher's per-token distribution is the target.

    Writes the student to OUT with TRL's checkpoints, the resolved config (hsa-train.json)
    and a training card (README.md) with the loss curve.
    """
    from hsa.train.distill import train_distill

    overrides = {"data": str(data) if data else None, "model": model, "teacher": teacher}
    config, trl = _run_args(config_file, max_steps, out)
    report = train_distill(config, out, overrides=overrides, trl_overrides=trl, resume=resume)
    counts = report.counts
    shown = console()
    if report.resumed_from:
        shown.print(f"resumed from {report.resumed_from}")
    shown.print(
        f"distill: {report.steps} steps on {counts.get('prompts', 0)} prompts "
        f"({counts.get('variant_prompts', 0)} under variants; "
        f"{counts.get('api_rows_left_out', 0)} api rows left out); loss {_curve(report.losses)}"
    )
    shown.print(f"wrote {out} (model, hsa-train.json, README.md) in {report.wall_s:.1f} s")


@group.command("tiny-model")
@click.option(
    "--data",
    type=UserPath(path_type=Path),
    required=True,
    help="The hsa dataset whose texts the tokenizer is trained on.",
)
@click.option(
    "--out",
    type=UserPath(path_type=Path),
    required=True,
    help="The model folder: new, empty, or one this command wrote (rewritten).",
)
@click.option(
    "--hidden",
    type=click.IntRange(2, 1 << 16),
    default=32,
    show_default=True,
    help="Hidden size (even: two attention heads share it).",
)
@click.option(
    "--layers",
    type=click.IntRange(1, 256),
    default=2,
    show_default=True,
    help="Transformer layers.",
)
def tiny_model_command(data: Path, out: Path, hidden: int, layers: int) -> None:
    """A tiny untrained Qwen2-shaped model and a tokenizer trained on DATA's texts, with the
    Qwen2.5 tool-calling template: a model folder to try every training and evaluation
    command on a CPU, offline. It learns nothing useful."""
    library_bars_off_terminal()
    import shutil
    import tempfile

    from hsa.datasets.export import to_hf
    from hsa.train.data import manifest_of
    from hsa.train.tiny import texts_of, write_tiny, written_here

    if hidden % 2:
        fail(f"--hidden must be even (two attention heads share it), got {hidden}")
    # a rerun rewrites the model it wrote (its marker lists its files), never other files
    rewrite = out.is_dir() and written_here(out)
    if out.exists() and not (rewrite or (out.is_dir() and not any(out.iterdir()))):
        what = "a file" if not out.is_dir() else "a folder of other files"
        fail(
            f"{out}: is {what}; --out names a new or empty folder for the model, or one this "
            "command wrote"
        )
    manifest = manifest_of(data)  # a clear error for a folder that is not a dataset
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only place, one of another user's
        fail(f"{out}: cannot create: {exc.strerror or exc}")
    made_from = {
        "data": str(data),
        "manifest_hash": manifest.get("config_hash"),
        "hidden": hidden,
        "layers": layers,
    }
    try:
        with tempfile.TemporaryDirectory() as cache:
            rows = to_hf(data, "train", cache_dir=cache)
            write_tiny(out, texts_of(rows), made_from, hidden=hidden, layers=layers)
    except OSError as exc:  # a full disk
        fail(f"{out}: cannot write the model: {exc.strerror or exc}")
    finally:
        if created and out.is_dir() and not any(out.iterdir()):  # no model: leave no folder
            shutil.rmtree(out, ignore_errors=True)
    done = "rewrote the tiny model" if rewrite else "wrote a tiny model"
    console().print(f"{done} ({hidden} hidden, {layers} layers) to {out}")
