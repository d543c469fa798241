"""The training card: ``README.md`` beside the checkpoint, with the loss curve as a plot.

It says what the model was trained on (the dataset's manifest hash, its rows by kind, the
recipe its variants came from) and how (TRL's settings that matter most), so a checkpoint
can be traced back to its data. The plot is saved without metadata: the same curve gives the
same bytes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from hsa.datasets.figures import drawn, figure, png
from hsa.datasets.lock import hold
from hsa.datasets.shards import write_atomic
from hsa.errors import stops_held

CARD = "README.md"
#: the resolved config of a run: hsa's settings, TRL's every setting, the data and recipe
RESOLVED = "hsa-train.json"
#: scratch under a run folder: the tokenized dataset (datasets' Arrow cache), removed once the
#: model is saved (a training on 18,528 short rows left 415 MB there)
HF_CACHE = Path(".hsa") / "hf-cache"
#: what a run started with (``hsa.train.sft.run_identity``), for a ``--resume`` to compare
RUN_RECORD = Path(".hsa") / "training.json"
PLOT = "loss.png"
#: TRL settings shown in the card (all of them are in hsa-train.json)
_SHOWN = (
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_length",
    "packing",
    "assistant_only_loss",
    "seed",
)


@drawn
def plot_losses(
    losses: Sequence[tuple[int, float]],
    eval_losses: Sequence[tuple[int, float]],
    name: str = "loss",
) -> bytes | None:
    """The training (and evaluation) loss (or reward) per step; None without any logged."""
    if not losses and not eval_losses:
        return None
    fig = figure(figsize=(6, 3.4), dpi=100)
    ax = fig.subplots()
    if losses:
        ax.plot([s for s, _ in losses], [v for _, v in losses], label="train", color="#4c72b0")
    if eval_losses:
        ax.plot(
            [s for s, _ in eval_losses],
            [v for _, v in eval_losses],
            label="eval",
            color="#dd8452",
            marker="o",
        )
    ax.set_xlabel("step")
    ax.set_ylabel(name)
    ax.set_title(name, fontsize=10)
    ax.legend(fontsize=8)
    return png(fig)


def verification_line(rows: dict[str, Any]) -> str:
    """What the card says of the verification of the rows trained on (an SFT run's
    ``rows`` counts), and of those ``verified_only`` left out; empty for a run that counted
    none (one recorded before these counts)."""
    if "never_checked" not in rows:
        return ""
    parts = [
        f"{rows.get('verified', 0):,} are of trajectories a teacher verified",
        f"{rows.get('never_checked', 0):,} of trajectories no teacher checked (`verified` "
        "null: a recorded source, augmented as it is)",
    ]
    if rows.get("unverified"):
        parts.append(
            f"{rows['unverified']:,} of trajectories a teacher marked unverified "
            "(`verified_only` false)"
        )
    line = "Of the training rows, " + ", ".join(parts) + "."
    if rows.get("unverified_left_out"):
        line += (
            f" {rows['unverified_left_out']:,} rows of trajectories a teacher marked "
            "unverified were left out (`verified_only`)."
        )
    return line


def render_card(
    resolved: Mapping[str, Any],
    losses: Sequence[tuple[int, float]],
    eval_losses: Sequence[tuple[int, float]],
    plot: bool,
) -> str:
    hsa, trl, data = resolved["hsa"], resolved["trl"], resolved["data"]
    rows = data.get("rows") or {}
    command = resolved["command"]
    name = "reward" if command == "rl" else "loss"
    lines = [f"# {command.upper()} of {hsa.get('model')}", ""]
    if command == "rl":
        lines.append(
            f"Trained with `hsa train rl` (TRL's GRPO) in the `{hsa.get('env')}` environment: "
            f"{data.get('prompts', 0):,} prompts (tasks under harness variants), "
            f"{data.get('episodes', 0):,} episodes played by the model, rewarded by the "
            "environment's score and a format term."
        )
        asked = data.get("variants_per_task") or {}
        if asked.get("short"):
            lines.append(
                f"{asked['short']:,} tasks were under fewer than {asked.get('asked')} harness "
                "variants each: too few of the recipe's variants change their harness and "
                "differ from each other."
            )
    elif command == "distill":
        prompts = data.get("prompts") or {}
        lines.append(
            f"Distilled on-policy from `{hsa.get('teacher')}` (TRL's DistillationTrainer) on "
            f"{prompts.get('prompts', 0):,} prompts cut from {prompts.get('rows', 0):,} rows of "
            f"the `{hsa.get('split', 'train')}` split of the hsa dataset `{hsa.get('data')}` "
            f"(manifest hash `{data.get('manifest_hash')}`), "
            f"{prompts.get('variant_prompts', 0):,} of them under harness variants; "
            + (
                f"{prompts.get('api_rows_left_out', 0):,} of the split's "
                f"{prompts['split_rows']:,} rows are under the api protocol and were left out "
                if "split_rows" in prompts
                else f"{prompts.get('api_rows_left_out', 0):,} rows under the api protocol were "
                "left out "
            )
            + "(their tools cannot be rendered per row by the trainer)."
        )
    else:
        lines.append(
            f"Trained with `hsa train {command}` on the hsa dataset `{hsa.get('data')}` "
            f"(manifest hash `{data.get('manifest_hash')}`): {rows.get('train', 0):,} training "
            f"rows, {rows.get('canonical', 0):,} under the canonical harness and "
            f"{rows.get('variants', 0):,} under harness variants"
            + (f"; {rows['eval']:,} evaluation rows" if "eval" in rows else "")
            + "."
        )
        checked = verification_line(rows)
        if checked:
            lines.append(checked)
        if rows.get("dropped") or rows.get("eval_dropped"):
            # packing drops no row: a row cut with nothing left to learn stays in its sequence
            subject = "Nothing was left to learn in" if trl.get("packing") else "TRL dropped"
            lines.append(
                f"{subject} {rows.get('dropped', 0):,} more training rows "
                f"({rows.get('dropped_canonical', 0):,} canonical, "
                f"{rows.get('dropped_variants', 0):,} under variants)"
                + (
                    f" and {rows['eval_dropped']:,} evaluation rows"
                    if rows.get("eval_dropped")
                    else ""
                )
                + f": {data.get('dropped_because', 'they had nothing left to learn')}."
            )
        if rows.get("truncated"):
            lines.append(
                f"{rows['truncated']:,} of the rows trained on were cut short: "
                f"{data.get('truncated_because', 'part of their assistant tokens was cut off')}."
            )
        if rows.get("split"):
            lines.append(
                f"{rows['split']:,} of the rows trained on were split into pieces trained apart: "
                f"{data.get('split_because', 'packing split them at max_length')}."
            )
        if rows.get("reasoning_not_trained"):
            lines.append(
                f"{rows['reasoning_not_trained']:,} of the rows trained on carry reasoning "
                "(`reasoning_content`) that was not trained on: "
                f"{data.get('reasoning_not_trained_because', 'the chat template renders none')}."
            )
    lines += ["", "| setting | value |", "|---|---|"]
    lines += [f"| `{k}` | `{trl.get(k)}` |" for k in _SHOWN if k in trl]
    lines.append("")
    if losses:
        lines.append(
            f"Training {name}: {losses[0][1]:.4f} at step {losses[0][0]}, {losses[-1][1]:.4f} "
            f"at step {losses[-1][0]}."
        )
    if eval_losses:
        lines.append(f"Evaluation loss: {eval_losses[-1][1]:.4f} at step {eval_losses[-1][0]}.")
    if plot:
        lines += ["", f"![{name}]({PLOT})"]
    families = resolved.get("reward_by_family") or {}
    if families:
        lines += [
            "",
            "## Environment reward per rule family",
            "",
            "| family | mean |",
            "|---|---:|",
        ]
        lines += [f"| `{k}` | {v:.3f} |" for k, v in families.items()]
    recipe = resolved.get("recipe")
    if recipe:
        lines += [
            "",
            "## The recipe the variants came from",
            "",
            "```json",
            json.dumps(recipe, indent=2, sort_keys=True),
            "```",
        ]
    lines += ["", "Every setting, resolved: `hsa-train.json`."]
    return "\n".join(lines) + "\n"


def write_card(
    out: Path,
    resolved: Mapping[str, Any],
    losses: Sequence[tuple[int, float]],
    eval_losses: Sequence[tuple[int, float]],
) -> None:
    image = plot_losses(losses, eval_losses, "reward" if resolved["command"] == "rl" else "loss")
    if image is not None:
        write_atomic(out / PLOT, image)
    text = render_card(resolved, losses, eval_losses, image is not None)
    write_atomic(out / CARD, text.encode("utf-8"))


def finish(
    out: Path,
    trainer: Any,
    tokenizer: Any,
    resolved: dict[str, Any],
    curve: Sequence[tuple[int, float]],
    eval_curve: Sequence[tuple[int, float]] = (),
) -> None:
    """Save the trained model and tokenizer, the card and the resolved config (``RESOLVED``:
    ``resolved`` with TRL's every setting, no token); then remove the run's scratch
    (``HF_CACHE``).

    ``RESOLVED`` marks the run finished, so it is written last, and a stop (Ctrl-C, SIGTERM)
    waits until everything is: a stop in between left a folder that read as finished with
    another run's card, or none, and a ``--resume`` that had nothing to resume."""
    trl = json.loads(trainer.args.to_json_string())
    trl.pop("hub_token", None)
    resolved = {**resolved, "trl": trl}
    text = json.dumps(resolved, indent=2, sort_keys=True, default=str) + "\n"
    with stops_held():
        trainer.save_model(str(out))
        tokenizer.save_pretrained(str(out))
        write_card(out, resolved, curve, eval_curve)
        write_atomic(out / RESOLVED, text.encode("utf-8"))
        shutil.rmtree(out / HF_CACHE, ignore_errors=True)


Train = TypeVar("Train", bound=Callable[..., Any])


@contextlib.contextmanager
def caller_rngs_kept() -> Iterator[None]:
    """Put back the process's random number generators as they were, when the training inside
    returns or raises: Python's ``random``, numpy's global one, torch's CPU one and, where
    there is CUDA, torch's on every GPU. The trainer seeds them all from its ``seed`` (TRL and
    transformers call ``set_seed``), so a sweep drawing its next learning rate with
    ``random.random()`` drew the same one after every run. The training itself is as
    reproducible as before: it seeds itself inside, and is put back only after."""
    import random

    import numpy as np
    import torch

    python = random.getstate()
    numpy = np.random.get_state()
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def scratch_removed_on_failure(train: Train) -> Train:
    """``train(config, out, ...)`` holding ``out``'s lock (``hsa.datasets.lock``: a second
    run into the same folder is refused, naming the first) that, when it fails or is
    stopped, removes the scratch it made under ``out`` (``HF_CACHE``: a tokenized copy of the
    data, hundreds of megabytes for a large dataset) and the folders left empty; its
    checkpoints stay, to resume from, with the record of what the run started with
    (``RUN_RECORD``). With no checkpoint to resume from, the files it made at the top of
    ``out`` go too (a log begun, a card TRL wrote; a file it wrote again counts as made):
    left, they made the folder one no run would write into; the record stays only while
    files of an earlier run are there. With one, the card TRL wrote at it goes (a card of a
    model that is not there). A run that wrote its ``RESOLVED`` is whole, and a stop held
    until then (``finish``) removes nothing of it."""

    @functools.wraps(train)
    def run(config: Any, out: str | Path, *args: Any, **kwargs: Any) -> Any:
        out = Path(out)
        existed = out.exists()
        if existed and not out.is_dir():
            return train(config, out, *args, **kwargs)  # refuses the file, naming it
        with hold(out, command="hsa " + train.__name__.replace("_", " ")):
            before = _top_files(out)
            try:
                return train(config, out, *args, **kwargs)
            except BaseException:
                shutil.rmtree(out / HF_CACHE, ignore_errors=True)
                now = _top_files(out)
                if now.get(out / RESOLVED) not in (None, before.get(out / RESOLVED)):
                    raise  # written whole, then stopped (a stop held while it was written)
                made = {p for p, stamp in now.items() if before.get(p) != stamp}
                if any(out.glob("checkpoint-*")):  # what a resume reads stays
                    made &= {out / CARD}  # (but not the card TRL wrote at a checkpoint)
                for path in made:
                    path.unlink(missing_ok=True)
                if not any(out.glob("checkpoint-*")) and not _top_files(out):
                    (out / RUN_RECORD).unlink(missing_ok=True)  # nothing to resume, nothing left
                raise  # (releasing the lock removes the folders left empty)

    return cast(Train, run)


def _top_files(folder: Path) -> dict[Path, tuple[int, int]]:
    """The files at the top of ``folder`` (none when it is not there), each with what tells
    a file written again from the one that was there: its inode and modification time."""
    if not folder.is_dir():
        return {}
    found = {}
    for path in folder.iterdir():
        if path.is_file():
            stat = path.stat()
            found[path] = (stat.st_ino, stat.st_mtime_ns)
    return found


def settings_dict(settings: Any) -> dict[str, Any]:
    """A settings dataclass as the resolved config records it."""
    return {k: getattr(settings, k) for k in settings.__dataclass_fields__}
