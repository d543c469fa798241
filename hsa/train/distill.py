"""On-policy distillation: TRL's ``DistillationTrainer`` on prompts cut from an hsa dataset.

The student generates its own next assistant turn for each prompt -- a dataset row under its
harness variant, cut just before one of its assistant turns -- and the teacher model supplies
the per-token targets on what the student wrote (the divergence TRL computes: generalized JSD,
``beta``). So the student is corrected where it goes wrong under the harness variants it sees.

TRL 1.16's ``DistillationTrainer`` (stable, not experimental) renders one tools list for every
prompt (``tools=``: Python callables, run by the trainer). hsa's rows each carry their own tool
schemas, so rows under the ``api`` protocol, whose tools travel beside the messages, cannot be
rendered with their tools there; prompts are cut from rows under the in-prompt protocols,
whose tool docs are in the system prompt, and the rows left out are counted in the card.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsa.config import bounded, refuse, setting
from hsa.datasets.export import to_hf
from hsa.errors import TrainError
from hsa.train.card import HF_CACHE, caller_rngs_kept, finish, scratch_removed_on_failure
from hsa.train.config import prepare
from hsa.train.data import manifest_of, recipe_of
from hsa.train.sft import (
    load_model,
    reached,
    resolved_settings,
    resume_point,
    run_identity,
    start_afresh,
    starting_model,
    train_or_finish,
    trained_tokens,
)


@dataclass(frozen=True, slots=True)
class DistillSettings:
    """The ``hsa:`` section of ``hsa train distill``."""

    data: str | None = setting(None, help="The hsa dataset whose rows give the prompts.")
    model: str | None = setting(None, help="The student: a local model folder (or hub name).")
    teacher: str | None = setting(
        None, help="The teacher: a model folder sharing the student's vocabulary."
    )
    split: str = setting("train", help="The dataset split the prompts are cut from.")
    max_prompts: int | None = setting(None, help="At most this many prompts (unset: all).")

    def __post_init__(self) -> None:
        refuse(bounded(self, "max_prompts", low=1), TrainError)


@dataclass(slots=True)
class DistillReport:
    out: Path
    steps: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    losses: list[tuple[int, float]] = field(default_factory=list)
    #: the checkpoint a --resume went on from (None: trained from the start)
    resumed_from: str | None = None
    wall_s: float = 0.0


def cut_prompts(rows: Any, limit: int | None = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Prompts from dataset rows: each row cut before each of its assistant turns, rows under
    the ``api`` protocol left out (see the module docstring). Returns them and the counts, of
    the rows read: with a ``limit``, the rows after the one that reached it are not read."""
    prompts: list[dict[str, Any]] = []
    counts = {"rows": 0, "api_rows_left_out": 0, "variant_prompts": 0}
    for row in rows:
        if row["protocol"] == "api":
            counts["api_rows_left_out"] += 1
            continue
        counts["rows"] += 1
        messages = row["messages"]
        for i, message in enumerate(messages):
            if message["role"] == "assistant" and i > 0:
                prompts.append({"prompt": [_plain(m) for m in messages[:i]]})
                counts["variant_prompts"] += not row["canonical"]
                if limit is not None and len(prompts) == limit:
                    counts["prompts"] = len(prompts)
                    return prompts, counts
    counts["prompts"] = len(prompts)
    return prompts, counts


def check_prompts(prompts: int, args: Any, settings: DistillSettings, file: str | None) -> None:
    """Refuse a run whose ``prompts`` fill no batch: TRL's ``DistillationTrainer`` draws whole
    batches of ``per_device_train_batch_size`` x ``gradient_accumulation_steps`` prompts per
    process and leaves a short one out, so it would train 0 steps and write the student as it
    was."""
    per_process = int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps)
    batch = per_process * int(args.world_size)
    if prompts >= batch:
        return
    more = (
        f"raise hsa.max_prompts (now {settings.max_prompts}) or lower"
        if settings.max_prompts is not None and settings.max_prompts < batch
        else "lower"
    )
    processes = f" x {args.world_size} processes" if args.world_size > 1 else ""
    raise TrainError(
        f"{prompts} prompts fill no batch of {batch} (per_device_train_batch_size "
        f"{args.per_device_train_batch_size} x gradient_accumulation_steps "
        f"{args.gradient_accumulation_steps}{processes}): TRL trains on whole batches only, so "
        f"the run would train 0 steps; {more} per_device_train_batch_size",
        file=file,
        where="$.per_device_train_batch_size",
    )


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    # in-prompt protocols carry calls in the text: only role and content remain
    return {"role": message["role"], "content": message.get("content") or ""}


@caller_rngs_kept()
@scratch_removed_on_failure
def train_distill(
    config: Any,
    out: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    trl_overrides: dict[str, Any] | None = None,
    resume: bool = False,
    file: str | None = None,
) -> DistillReport:
    """Distil ``teacher`` into ``model`` on-policy, as ``config`` (TRL's
    ``DistillationConfig`` keys plus ``hsa:``) says, into ``out``."""
    import datasets
    from trl import DistillationConfig, DistillationTrainer

    from hsa.train.clock import RunClock, carried

    started = time.monotonic()
    out = Path(out)
    settings, args, file = prepare(
        config,
        DistillationConfig,
        DistillSettings,
        out,
        overrides=overrides,
        trl_overrides=trl_overrides,
        file=file,
    )
    for name in ("data", "teacher"):
        if getattr(settings, name) is None:
            raise TrainError(f"set hsa.{name} (or --{name})", file=file, where=f"$.hsa.{name}")
    identity = run_identity("distill", settings, args)
    checkpoint = resume_point(out, resume, args.max_steps, can_finish=True, identity=identity)
    # stopped after its last checkpoint, before writing its model: that checkpoint is the model
    done = checkpoint if reached(checkpoint, args.max_steps) else None
    clock = RunClock(carried(checkpoint), since=started)  # the earlier parts' time too
    manifest = manifest_of(Path(str(settings.data)))
    rows = to_hf(str(settings.data), settings.split, cache_dir=out / HF_CACHE)
    prompts, counts = cut_prompts(rows, settings.max_prompts)
    if not prompts:
        raise TrainError(
            "no prompt to distil on: every row is under the api protocol, whose tools TRL's "
            "DistillationTrainer cannot render per row; build data with in-prompt protocols",
            file=str(settings.data),
        )
    counts["split_rows"] = len(rows)
    counts["api_rows_left_out"] = sum(p == "api" for p in rows["protocol"])
    check_prompts(len(prompts), args, settings, file)
    student, tokenizer = load_model(starting_model(checkpoint, settings.model))
    # (the teacher's tokenizer renders nothing: only its vocabulary is compared)
    teacher, teacher_tokenizer = load_model(str(settings.teacher), renders=False, key="teacher")
    ours, theirs = tokenizer.get_vocab(), teacher_tokenizer.get_vocab()
    if ours != theirs:
        differ = len(set(ours.items()) ^ set(theirs.items()))
        raise TrainError(
            f"the teacher's vocabulary is not the student's ({differ} token ids differ): the "
            "student learns the teacher's distribution token by token, so both must share one "
            "tokenizer",
            file=str(settings.teacher),
        )
    tokenizer.padding_side = "left"
    trainer = DistillationTrainer(
        model=student,
        teacher_model=teacher,
        args=args,
        train_dataset=datasets.Dataset.from_list(prompts),
        processing_class=tokenizer,
        callbacks=[clock],
    )
    if checkpoint is None:
        start_afresh(out, identity, settings.model)
    train_or_finish(trainer, checkpoint, done)
    report = DistillReport(out=out, steps=trainer.state.global_step, counts=counts)
    report.resumed_from = checkpoint
    report.losses = [
        (int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e
    ]
    resolved = {
        "command": "distill",
        "hsa": resolved_settings(settings, out, checkpoint),
        "data": {"manifest_hash": manifest.get("config_hash"), "prompts": counts},
        "recipe": recipe_of(manifest),
        "run": {
            "steps": report.steps,
            "tokens": trained_tokens(trainer.state.log_history),
            "wall_s": round(clock.wall_s(), 1),
        },
    }
    finish(out, trainer, tokenizer, resolved, report.losses)
    report.wall_s = time.monotonic() - started
    return report
