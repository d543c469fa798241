"""HSA-SFT: TRL's ``SFTTrainer`` on an hsa dataset, the loss on assistant turns only.

hsa supplies the rows (``hsa.train.data``), the config pattern (``hsa.train.config``) and the
training card (``hsa.train.card``); TRL trains. The loss covers the assistant turns alone
(``assistant_only_loss``, on by default here): TRL swaps in the training variant of the common
chat templates, whose ``{% generation %}`` markers say which tokens the model wrote. Packing,
the learning rate, the schedule, checkpoints and everything else are TRL's settings, by
TRL's names.
"""

from __future__ import annotations

import copy
import json
import shutil
import socket
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.datasets.export import cache_error
from hsa.datasets.lock import LOCK
from hsa.datasets.shards import write_atomic
from hsa.errors import TrainError, first_line
from hsa.harness.tokenizers import chat_template_problem, load_failure, tokenizer_problem
from hsa.train.card import (
    CARD,
    HF_CACHE,
    PLOT,
    RESOLVED,
    RUN_RECORD,
    caller_rngs_kept,
    finish,
    scratch_removed_on_failure,
    settings_dict,
)
from hsa.train.config import SftSettings, prepare
from hsa.train.data import TrainingRows, load_rows, manifest_of, verification_counts
from hsa.train.templates import (
    ReasoningLoss,
    carries_api_calls,
    check_renders_tools,
    drops_reasoning,
    reasoning_rows,
    sft_template,
)

__all__ = [
    "RESOLVED",
    "TrainReport",
    "load_model",
    "resume_point",
    "run_identity",
    "start_afresh",
    "starting_model",
    "train_sft",
]


@dataclass(slots=True)
class TrainReport:
    """What a run did: its steps, rows, final loss, and where it wrote."""

    out: Path
    steps: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    losses: list[tuple[int, float]] = field(default_factory=list)
    eval_losses: list[tuple[int, float]] = field(default_factory=list)
    resumed_from: str | None = None
    wall_s: float = 0.0


def last_checkpoint(out: Path) -> str | None:
    """The newest whole ``checkpoint-N`` folder TRL wrote in ``out``, or None. A folder
    without a readable ``trainer_state.json`` (the file the trainer writes last) was cut short
    by a stop while it was written, and is passed over: the trainer writes it again when its
    step comes round."""
    found = [p for p in _checkpoints(out) if _whole(p)]
    return str(max(found, key=lambda p: int(p.name[11:]))) if found else None


def _files(out: Path) -> Iterator[Path]:
    """The files and empty folders under ``out``."""
    for path in out.iterdir():
        if path.is_dir() and not path.is_symlink() and any(path.iterdir()):
            yield from _files(path)
        else:
            yield path


def _checkpoints(out: Path) -> list[Path]:
    return [p for p in out.glob("checkpoint-*") if p.is_dir() and p.name[11:].isdigit()]


def _whole(checkpoint: Path) -> bool:
    try:
        json.loads((checkpoint / "trainer_state.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return True


#: the trainer settings that decide which rows a step trains on and how many: a resumed run
#: with other values would mix two runs in one model (``max_steps`` may change, to train on)
_SAME_ON_RESUME = (
    "seed",
    "data_seed",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "dataloader_drop_last",
    # the order of the rows: shuffled by TRL as it prepares them, then drawn by the sampler
    "shuffle_dataset",
    "train_sampling_strategy",
    # what a resumed run does with the batches its checkpoint trained on (skips them, or not)
    "ignore_data_skip",
    # which rows are cut, dropped, or packed together
    "max_length",
    "truncation_mode",
    "packing",
    "packing_strategy",
    # GRPO's: how many answers of one prompt, and how many prompts, each step learns from
    "num_generations",
    "generation_batch_size",
    "steps_per_generation",
    "max_completion_length",
    "num_iterations",
)


def run_identity(
    command: str,
    settings: Any,
    args: Any,
    versions: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a resumed run must share with the run it continues: the ``command`` that trains it
    (``sft``, ``distill``, ``rl``), the ``hsa:`` settings (which rows, the teacher), the
    dataset itself by its manifest's config hash (wherever it lies: a copied or moved dataset
    is the same one, a dataset rebuilt at the same path another) and the trainer settings that
    order and cut the rows; and the ``versions`` of hsa's code that decide what the run draws
    where no dataset fixes it (``hsa train rl``'s tasks and variants: ``rl.run_versions``),
    and the ``inputs`` its settings name by path, by content (``rl.run_inputs``).
    Not the starting model's path: the checkpoint holds the model and tokenizer a resumed run
    goes on from (``starting_model``). A local teacher folder counts by its full path, however
    it was written."""
    chosen = settings_dict(settings)
    data = chosen.pop("data", None)
    chosen.pop("model", None)
    teacher = chosen.get("teacher")
    if isinstance(teacher, str) and Path(teacher).exists():
        chosen["teacher"] = str(Path(teacher).resolve())
    if data is not None:  # (a missing or broken manifest is refused here, naming it)
        chosen["dataset"] = manifest_of(Path(str(data))).get("config_hash")
    trainer = {k: getattr(args, k) for k in _SAME_ON_RESUME if hasattr(args, k)}
    found: dict[str, Any] = {"command": command, "hsa": chosen, "trainer": trainer}
    if versions is not None:
        found["versions"] = dict(versions)
    if inputs is not None:
        found["inputs"] = dict(inputs)
    text = json.dumps(found, default=str)
    return json.loads(text)  # as the record reads back, to compare with it


def resume_point(
    out: Path,
    resume: bool,
    max_steps: int = -1,
    *,
    can_finish: bool = False,
    identity: Mapping[str, Any] | None = None,
) -> str | None:
    """The checkpoint to resume from (``resume``), or None to start afresh (``start_afresh``
    then clears a finished run's files and records ``identity``, once the config's checks
    have passed: this changes nothing). Refuses to resume a folder without a checkpoint, or
    from one at ``max_steps`` or past it -- the trainer would take a step more than asked --
    unless the run stopped before writing its model and the caller ``can_finish`` it from
    that checkpoint, at ``max_steps`` exactly (``reached``); and refuses to start afresh over
    the checkpoints of an unfinished run. With the run's ``identity`` (``run_identity``), a
    resumed run is refused when the run it continues started with other settings."""
    if out.exists() and not out.is_dir():
        raise TrainError("is a file; --out names the folder the model is written to", file=str(out))
    found = last_checkpoint(out)
    finished = (out / RESOLVED).is_file()
    ours = bool(_checkpoints(out)) or finished or (out / RUN_RECORD).is_file()
    if not ours and out.is_dir() and any(p != out / LOCK for p in _files(out)):
        raise TrainError(
            "holds files that are not an hsa training run (a run would write over them); "
            "choose an empty or new --out",
            file=str(out),
        )
    if not resume:
        if found is not None and not finished:
            raise TrainError(
                f"holds the checkpoints of an unfinished run ({Path(found).name}): pass --resume "
                "to continue it, or choose a new --out",
                file=str(out),
            )
        return None  # (start_afresh clears the way, once the run is sure to train)
    if found is None and finished:
        raise TrainError(
            "the run here is finished (its model and card are written) and kept no checkpoint: "
            "nothing to resume; run without --resume to train again",
            file=str(out),
        )
    if found is None:
        cut = sorted(p.name for p in _checkpoints(out))
        why = f" ({', '.join(cut)} cut short: stopped while it was written)" if cut else ""
        again = "; run without --resume to start again" if cut else ""
        raise TrainError(f"no checkpoint here to resume from{why}{again}", file=str(out))
    if identity is not None:
        _check_same_run(out, identity)
    # finished from its checkpoint only at max_steps exactly: one past it holds more steps
    # than asked, and would be written as a run of max_steps
    past = reached(found, max_steps) and int(Path(found).name[11:]) > max_steps
    if reached(found, max_steps) and (finished or not can_finish or past):
        done = (
            "the run here is finished (its model and card are written), and its"
            if finished
            else "its"
        )
        at = "past" if past else "at"
        raise TrainError(
            f"{done} newest checkpoint ({Path(found).name}) is {at} max_steps={max_steps} "
            "already: nothing to resume; raise max_steps to train further",
            file=str(out),
        )
    return found


def start_afresh(out: Path, identity: Mapping[str, Any] | None = None, base: Any = None) -> None:
    """Start a run from its first step in ``out`` (``resume_point`` said it may): a finished
    run's checkpoints, record, card and plot there go, so that a --resume never continues it
    and a stop part way shows none of it, and ``identity`` is recorded, with the ``base``
    model the run started from (``recorded_base``; kept, not compared: a resumed run goes on
    from its checkpoint). Called once every check of the config has passed: a config refused
    leaves the finished run as it was."""
    if (out / RESOLVED).is_file():
        for old in out.glob("checkpoint-*"):
            shutil.rmtree(old, ignore_errors=True)
        for name in (RESOLVED, CARD, PLOT):
            (out / name).unlink(missing_ok=True)
    if identity is not None:
        (out / RUN_RECORD).parent.mkdir(parents=True, exist_ok=True)
        record = dict(identity)
        if base is not None:  # as given (what the card names) and where it lies (to load it)
            local = Path(str(base))
            record["base"] = str(base)
            record["base_path"] = str(local.resolve()) if local.exists() else str(base)
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        write_atomic(out / RUN_RECORD, text.encode("utf-8"))


def recorded_base(out: Path, key: str = "base_path") -> str | None:
    """The model a run in ``out`` started from, as ``start_afresh`` recorded it: its full
    path (``base_path``), or ``base`` as the config gave it (None: a record without it, or
    none)."""
    try:
        base = json.loads((out / RUN_RECORD).read_text("utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, str) else None


def resolved_settings(settings: Any, out: Path, checkpoint: str | None) -> dict[str, Any]:
    """The ``hsa:`` settings a finished run records and its card shows: a resumed run's
    ``model`` is the one it started from (``recorded_base``), which it went on from through
    its checkpoints, not the ``hsa.model`` of the resuming command, which is not read."""
    chosen = settings_dict(settings)
    started = recorded_base(out, "base") if checkpoint is not None else None
    if started is not None and "model" in chosen:
        chosen["model"] = started
    return chosen


def _differences(where: str, then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """How the record's ``then`` and this run's ``now`` differ, key by key (``where.key``),
    into the objects both hold (a recipe's rule versions: the rule whose version changed)."""
    found = []
    for key in sorted({*then, *now}):
        if key not in then:
            found.append(f"{where}.{key}: not recorded then, {_said(now[key])} now")
        elif key not in now:
            found.append(f"{where}.{key}: {_said(then[key])} then, not set now")
        elif isinstance(then[key], dict) and isinstance(now[key], dict):
            found += _differences(f"{where}.{key}", then[key], now[key])
        elif then[key] != now[key]:
            found.append(f"{where}.{key}: {_said(then[key])} then, {_said(now[key])} now")
    return found


def _said(value: Any) -> str:
    """A recorded value as a refusal names it: an object of more than a few keys (a recipe's
    rule versions) by its size."""
    if isinstance(value, dict) and len(value) > 3:
        return f"an object of {len(value)} keys"
    return repr(value)


def _check_same_run(out: Path, identity: Mapping[str, Any]) -> None:
    """Refuse to resume a run that started with other settings (``run_identity``): another
    command, or a setting with another value or set on one side only. A run without a record
    (an older hsa's) is resumed as it is; one whose record does not name its command (an
    older hsa's too) is refused: nothing says which trainer wrote its checkpoints."""
    try:
        started = json.loads((out / RUN_RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(started, dict) or "command" not in started:
        raise TrainError(
            "--resume continues a run whose record (.hsa/training.json, written by an older "
            "hsa) does not say which command trained it, so it cannot be compared: finish it "
            "with the hsa that started it, or train afresh into another --out",
            file=str(out),
        )
    if started["command"] != identity["command"]:
        raise TrainError(
            f"--resume continues a run of hsa train {started['command']}, not of hsa train "
            f"{identity['command']}: resume it with hsa train {started['command']}, or train "
            "afresh into another --out",
            file=str(out),
        )
    changed: list[str] = []
    redrawn = False
    for section, values in identity.items():
        if section == "command":
            continue
        then = started.get(section)
        before = len(changed)
        changed += _differences(section, then if isinstance(then, dict) else {}, values)
        redrawn = redrawn or (section == "versions" and len(changed) > before)
    if redrawn:  # the same settings would not give the same prompts: this hsa draws others
        # (a record of an older hsa says no versions: which tasks it drew is not known)
        raise TrainError(
            "--resume continues a run that started under other versions of the environment's "
            "tasks or scoring, of variant planning, of rendering or of the recipe's rules, or "
            "did not record them "
            f"({'; '.join(changed)}): it could train on other tasks, variants or rewards after "
            "its checkpoint than before; finish it with the hsa that started it, or train "
            "afresh into another --out",
            file=str(out),
        )
    if changed:
        raise TrainError(
            f"--resume continues a run that started with other settings ({'; '.join(changed)}): "
            "resume with the settings it started with, or train afresh into another --out",
            file=str(out),
        )


def starting_model(checkpoint: str | None, model: Any) -> str:
    """The model folder a run loads its model and tokenizer from: ``model`` (``hsa.model``),
    or for a resumed run the ``checkpoint`` it goes on from, which holds both as the run
    trained them (the trainer saves its tokenizer in every checkpoint); ``hsa.model`` is not
    read then: a model of another shape or vocabulary never meets the checkpoint's weights."""
    return checkpoint if checkpoint is not None else str(model)


def train_or_finish(trainer: Any, checkpoint: str | None, done: str | None) -> None:
    """Train from ``checkpoint`` (None: from the start); or, with ``done`` (a checkpoint at
    max_steps of a run stopped before it wrote its model, whose model the trainer was given),
    take that checkpoint's trainer state and train no step."""
    if done is None:
        trainer.train(resume_from_checkpoint=checkpoint)
        return
    from transformers import TrainerState

    trainer.state = TrainerState.load_from_json(str(Path(done) / "trainer_state.json"))
    seed_token_count(trainer.state)  # (no training: on_train_begin does not run)


def reached(checkpoint: str | None, max_steps: int) -> bool:
    """Whether ``checkpoint`` (``checkpoint-N``) holds a training's last step already."""
    return checkpoint is not None and 0 < max_steps <= int(Path(checkpoint).name[11:])


def count_tokens(trainer: Any) -> None:
    """Have ``trainer`` (an ``SFTTrainer``) keep the count of the tokens it trains on in its
    state (``num_input_tokens_seen``), which each checkpoint saves and a resumed run goes on
    from, so the count holds across ``--resume``s. It counts what TRL's ``num_tokens`` does,
    every token of each row (prompt and completion alike): the attention mask's sum; a
    padding-free batch (``packing`` by ``bfd``) has no mask and no padding, and TRL counts its
    every position. Set over the config's ``include_num_input_tokens_seen``: hsa's ``tokens``
    are this count. A run resumed from a checkpoint of an older hsa, which kept no count,
    starts from the sum of TRL's logged counts up to it (``trained_tokens``; short by the
    steps between a part's last log and the checkpoint the next part resumed from), and its
    own checkpoints carry that on, so a later part resumed from one of them counts it too."""
    from transformers import TrainerCallback

    padding_free = bool(getattr(trainer, "padding_free", False))
    trainer.args.include_num_input_tokens_seen = "all" if padding_free else "non_padding"

    class FromLoggedCounts(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if seed_token_count(state):
                # (the tokens/s transformers logs count this part's own tokens)
                trainer._initial_num_input_tokens_seen = state.num_input_tokens_seen

    trainer.add_callback(FromLoggedCounts())


def seed_token_count(state: Any) -> bool:
    """Start the token count of a trainer ``state`` read from an older hsa's checkpoint (which
    kept none) from TRL's logged counts up to it (``trained_tokens``); whether it did."""
    if not state.global_step or state.num_input_tokens_seen:
        return False
    state.num_input_tokens_seen = trained_tokens(state.log_history) or 0
    return True


def trained_tokens(log: Sequence[Mapping[str, Any]]) -> int | None:
    """The tokens of the batches a run trained on from TRL's logged running count
    (``num_tokens``). ``SFTTrainer``'s starts again from zero when a run resumes: the sum of
    each stretch's last count (the steps after a stretch's last log are not in it).
    ``DistillationTrainer``'s is the trainer state's, which a resumed run goes on from: it
    never falls, and its last is the run's."""
    total, last = 0, None
    for entry in log:
        if "num_tokens" in entry:
            count = int(entry["num_tokens"])
            if last is not None and count < last:
                total += last
            last = count
    return None if last is None else total + last


def template_error(
    exc: ValueError, model: str, file: str | None, template: str | None = None
) -> TrainError:
    """A ``TrainError`` for what TRL refused at setup: a chat template it cannot mark for
    assistant-only loss (naming the config's ``chat_template_path`` when it gave the template,
    else the model, and saying what to change), or a setting of the config (naming the config
    file)."""
    first = first_line(exc)
    if "assistant" not in first.lower() and "template" not in first.lower():
        return TrainError(f"TRL refused the setup: {first}", file=file)
    if template is not None:
        return TrainError(
            f"TRL refused the setup: {first}; the chat template {template} cannot be marked "
            "for assistant-only loss: give a training template or set assistant_only_loss: false",
            file=file,
            where="$.chat_template_path",
        )
    return TrainError(
        f"TRL refused the setup: {first}; for a chat template TRL cannot mark for "
        "assistant-only loss, set chat_template_path to a training template or "
        "assistant_only_loss: false",
        file=model,
    )


def check_model(path: str) -> None:
    """Refuse, at once, a model that cannot load: a local path with no model folder (no
    ``config.json``), or a hub name neither in the local Hugging Face cache nor reachable
    (the hub's client would retry for about a minute before saying so)."""
    local = Path(path)
    # a hub name is NAME or ORG/NAME; a path that cannot be one, or whose first folder is
    # here, is a local folder
    parts = local.parts
    meant_local = path.startswith((".", "/", "~")) or len(parts) > 2
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise TrainError("no config.json here: not a model folder", file=path)
        return
    missing = TrainError("no model here: give a local model folder (or a hub name)", file=path)
    if local.exists() or meant_local or (len(parts) == 2 and Path(parts[0]).is_dir()):
        raise missing
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(path, "config.json")
    except ValueError:  # not a hub name either
        raise missing from None
    if isinstance(cached, str):
        return  # downloaded before
    host = urllib.parse.urlsplit(constants.ENDPOINT).hostname or constants.ENDPOINT
    why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else None
    if why is None:
        try:
            socket.getaddrinfo(host, 443)
        except OSError as exc:
            why = f"{host} cannot be reached ({exc.strerror or exc})"
    if why is not None:
        raise TrainError(
            f"no model folder here, and no such hub model in the local cache; {why}: give a "
            "local model folder",
            file=path,
        )


def load_tokenizer(
    path: str, *, template: str | None = None, renders: bool = True, key: str = "model"
) -> Any:
    """The tokenizer at ``path``, which must render the rows' conversations: with its own
    chat template, or with the Jinja file ``template`` (SFT's ``chat_template_path``) when one
    is given. One with neither (a base model's, often) is refused naming the folder, rather
    than by the trainer's setup with a traceback; unless it ``renders`` nothing (a
    distillation teacher's: only its vocabulary is read). A folder with no tokenizer at all
    is refused (``tokenizer_problem``), naming the setting ``key`` that gave it."""
    from transformers import AutoTokenizer

    check_model(path)
    setting = f"hsa.{key}, --{key}"  # (said in the refusal of a folder without one)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        said = f"cannot load the model: {first_line(exc)}"
        raise TrainError(load_failure(path, said, setting), file=path) from None
    problem = tokenizer_problem(tokenizer, path, setting)
    if problem is not None:
        raise TrainError(problem, file=path)
    if renders and template is None:
        problem = chat_template_problem(tokenizer, setting, "chat_template_path (hsa train sft)")
        if problem is not None:
            raise TrainError(problem, file=path)
    return tokenizer


def load_model(
    path: str,
    *,
    template: str | None = None,
    renders: bool = True,
    key: str = "model",
    tokenizer: Any = None,
) -> tuple[Any, Any]:
    """The model and tokenizer at ``path`` (a local folder, or a hub name when online); the
    tokenizer as ``load_tokenizer`` checks it, unless ``tokenizer`` is one it returned."""
    from transformers import AutoModelForCausalLM

    if tokenizer is None:
        tokenizer = load_tokenizer(path, template=template, renders=renders, key=key)
    try:
        model = AutoModelForCausalLM.from_pretrained(path)
    except Exception as exc:  # a truncated download raises safetensors' own error
        raise TrainError(f"cannot load the model: {first_line(exc)}", file=path) from None
    return model, tokenizer


#: the column that carries each row's position through TRL's preparation of the data, to tell
#: which rows it kept (it drops those left with nothing to learn by truncation to max_length)
POSITION = "hsa_position"


def numbered(rows: Any) -> Any:
    """``rows`` (a ``datasets.Dataset``) with each row's position (``POSITION``)."""
    return rows.add_column(POSITION, list(range(len(rows))))


def kept_positions(trainer: Any, name: str) -> list[int] | None:
    """The positions of the rows TRL kept of its ``name`` dataset (``train_dataset``,
    ``eval_dataset``), whose position column is then removed; None when TRL's preparation left
    no such column (packing, which drops no row)."""
    dataset = getattr(trainer, name)
    if dataset is None or POSITION not in (dataset.column_names or ()):
        return None
    found = [int(i) for i in dataset[POSITION]]
    setattr(trainer, name, dataset.remove_columns(POSITION))
    return found


def count_kept(rows: TrainingRows, trainer: Any, args: Any) -> list[int]:
    """Count in ``rows.counts`` the rows TRL kept of those it was given -- ``train``,
    ``canonical``, ``variants`` and the verification counts (``verification_counts``) are those
    trained on -- those it dropped (``dropped``, by kind; ``eval_dropped``): rows truncated to
    ``max_length`` (``args``) with no assistant token left, and of those kept, the rows cut
    short (``truncated``): rows that lost some of their assistant tokens to the cut, a tool
    call cut mid-way or the final answer gone, or (``truncation_mode`` keep_end) their start;
    and with packing that loses no token (``bfd_split``, ``wrapped``), the rows split into
    pieces trained apart (``split``). Long rows are cut first, so the drop can change the
    canonical share. ``reasoning`` counts the rows trained on that carry reasoning. Returns the
    positions of the rows trained on, in ``rows.train``.

    TRL truncates each row, or with packing (its ``bfd`` strategy) cuts each row at
    ``max_length`` as it packs, and keeps no row's position; so the rows that reached the cut
    are prepared again whole, as the trainer prepares them, and their labelled tokens compared."""
    counts = rows.counts
    given = len(rows.canonical)
    prepared = trainer.train_dataset
    kept = kept_positions(trainer, "train_dataset")
    truncated = split = 0
    # bfd packing cuts each row at max_length; bfd_split and wrapped lose no token, but split
    # rows into pieces trained apart
    packs_cut = args.max_length is not None and args.packing_strategy == "bfd"
    if "labels" not in (prepared.column_names or ()):
        pass  # prepared by the caller (TRL's skip_prepare_dataset): nothing TRL cut to count
    elif args.max_length is not None and kept is not None:
        truncated = _cut_short(trainer, rows, prepared, args)
    elif packs_cut:
        kept, truncated = _cut_in_packing(trainer, rows.train, args.max_length)
    elif args.packing and args.max_length is not None:
        split = _split_in_packing(trainer, rows.train, args)
    if kept is None:  # packed whole (bfd_split, wrapped): no token is lost
        kept = list(range(given))
    canonical = sum(rows.canonical[i] for i in kept)
    counts["dropped"] = given - len(kept)
    counts["dropped_canonical"] = sum(rows.canonical) - canonical
    counts["dropped_variants"] = counts["dropped"] - counts["dropped_canonical"]
    counts["truncated"] = truncated
    if split:
        counts["split"] = split
    counts["train"], counts["canonical"] = len(kept), canonical
    counts["variants"] = len(kept) - canonical
    counts.update(verification_counts(rows.verified, kept))
    reasoned = sum(rows.reasoning[i] for i in kept)
    if reasoned:
        counts["reasoning"] = reasoned
    evaluated = kept_positions(trainer, "eval_dataset")
    packed = trainer.eval_dataset
    if evaluated is None and packed is not None and "labels" in (packed.column_names or ()):
        # packed too (eval_packing): cut as the training rows are, or packed whole
        evaluated = _cut_in_packing(trainer, rows.eval, args.max_length)[0] if packs_cut else None
    if evaluated is not None and "eval" in counts:
        counts["eval_dropped"] = counts["eval"] - len(evaluated)
        counts["eval"] = len(evaluated)
    return kept


def _cut_short(trainer: Any, rows: TrainingRows, prepared: Any, args: Any) -> int:
    """How many of the rows TRL truncated (``prepared``, each with its position) to
    ``args.max_length`` were cut short: those whose length reached it, prepared again whole,
    that lost labelled tokens; or, truncated from their start (``truncation_mode``
    keep_end), that were longer: their system prompt, tools and first user turn went, and
    the assistant tokens left were learned without them."""
    table = prepared.with_format("arrow")
    reached = pc.equal(pc.list_value_length(table["input_ids"]), args.max_length)
    positions = pc.filter(table[POSITION], reached).to_pylist()
    if not positions:
        return 0
    whole = _prepared_whole(trainer, numbered(rows.train).select(positions))
    if args.truncation_mode == "keep_end":
        return int(
            pc.sum(pc.greater(pc.list_value_length(whole["labels"]), args.max_length)).as_py()
        )
    left = labelled_tokens(pc.filter(table["labels"], reached))
    learned = dict(zip(whole[POSITION].to_pylist(), labelled_tokens(whole["labels"]), strict=True))
    return sum(int(n) < learned[p] for p, n in zip(positions, left, strict=True))


def _cut_in_packing(trainer: Any, rows: Any, max_length: int) -> tuple[list[int], int]:
    """The positions of the ``rows`` (training or evaluation rows, a ``datasets.Dataset``)
    with an assistant token left once packing cut each at ``max_length`` (the others train
    on nothing, as if dropped), and how many of those lost some: every row prepared again
    whole, since packing keeps no row's position."""
    whole = _prepared_whole(trainer, numbered(rows))
    learned = labelled_tokens(whole["labels"])
    left = labelled_tokens(pc.list_slice(whole["labels"], 0, max_length))
    positions = whole[POSITION].to_pylist()
    kept = sorted(p for p, n in zip(positions, left, strict=True) if n > 0)
    truncated = sum(0 < n < all_ for n, all_ in zip(left, learned, strict=True))
    return kept, int(truncated)


def _split_in_packing(trainer: Any, rows: Any, args: Any) -> int:
    """How many of ``rows`` (a ``datasets.Dataset``) packing that loses no token (strategy
    ``bfd_split``: a row longer than ``max_length`` in pieces; ``wrapped``: rows end to end,
    cut every ``max_length`` tokens) split into pieces trained apart, with assistant tokens
    in a piece that holds none of the row's start (its system prompt, tools, the user's
    request). TRL keeps no row's position as it packs, so the rows are prepared again whole,
    each token standing for its place among them, and packed by TRL's ``pack_dataset`` as
    the trainer packed them (shuffled first, by its seed, when it shuffles)."""
    from datasets import Dataset
    from datasets.table import InMemoryTable
    from trl.data_utils import pack_dataset

    labels = _prepared_whole(trainer, numbered(rows))["labels"].combine_chunks()
    starts = labels.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    starts -= starts[0]
    places = pa.LargeListArray.from_arrays(pa.array(starts), pa.array(np.arange(starts[-1])))
    flat = pa.LargeListArray.from_arrays(pa.array(starts), labels.flatten())
    table = InMemoryTable(pa.table({"input_ids": places, "labels": flat}))
    whole = Dataset(table)
    if args.shuffle_dataset:
        whole = whole.shuffle(seed=args.seed)
    kwargs = {"num_proc": args.dataset_num_proc}
    packed = pack_dataset(whole, args.max_length, args.packing_strategy, kwargs)
    packed = packed.with_format("arrow")[:]
    place = pc.list_flatten(packed["input_ids"]).to_numpy()
    learned = pc.not_equal(pc.list_flatten(packed["labels"]), -100).to_numpy()
    if "seq_lengths" in packed.column_names:  # bfd_split: each piece apart
        pieces = pc.list_flatten(packed["seq_lengths"]).to_numpy()
    else:  # wrapped: each pack one sequence
        pieces = pc.list_value_length(packed["input_ids"]).to_numpy()
    piece_of = np.repeat(np.arange(len(pieces)), pieces)
    piece_at = np.empty(starts[-1], dtype=np.int64)
    piece_at[place] = piece_of
    row_of = np.searchsorted(starts, place, side="right") - 1
    apart = (piece_at[starts[row_of]] != piece_of) & learned
    return len(np.unique(row_of[apart]))


def _prepared_whole(trainer: Any, rows: Any) -> Any:
    """``rows`` as ``trainer`` prepares its training rows -- tokenized, labelled -- but neither
    truncated nor packed nor shuffled, in Arrow (``POSITION`` and ``labels`` columns)."""
    whole = copy.copy(trainer.args)
    whole.max_length, whole.packing, whole.shuffle_dataset = None, False, False
    # TRL's own preparation, so that the tokens are exactly those it trains on
    prepared = trainer._prepare_dataset(rows, trainer.processing_class, whole, False, None, "train")
    return prepared.select_columns([POSITION, "labels"]).with_format("arrow")[:]


def labelled_tokens(labels: Any) -> list[int]:
    """How many tokens of each row carry a label (not -100, TRL's mask), of an Arrow list
    column."""
    if isinstance(labels, pa.ChunkedArray):
        labels = labels.combine_chunks() if labels.num_chunks else pa.array([], labels.type)
    lengths = pc.list_value_length(labels).fill_null(0).to_numpy(zero_copy_only=False)
    marks = pc.not_equal(labels.flatten(), -100).to_numpy(zero_copy_only=False)
    running = np.concatenate([[0], np.cumsum(marks, dtype=np.int64)])
    ends = np.cumsum(lengths, dtype=np.int64)
    return (running[ends] - running[ends - lengths]).tolist()


def has_labels(dataset: Any) -> bool:
    """Whether any token of a prepared dataset carries a label (not -100, TRL's mask)."""
    if "labels" not in (dataset.column_names or ()):
        return True  # prepared by the caller (TRL's skip_prepare_dataset): not ours to judge
    labels = dataset.with_format("arrow")["labels"]
    return any(pc.any(pc.not_equal(chunk.flatten(), -100)).as_py() for chunk in labels.chunks)


def dropped_because(args: Any) -> str:
    """Why TRL drops rows under ``args`` (an ``SFTConfig``), for the record and the card."""
    if args.packing:
        return (
            f"longer than max_length={args.max_length} tokens, packing (strategy "
            f"{args.packing_strategy}) cut them at it with no assistant token left to learn; "
            "raise max_length to keep them"
        )
    return (
        f"truncated to max_length={args.max_length} tokens (truncation_mode "
        f"{args.truncation_mode}), they had no assistant token left to learn, and TRL drops such "
        "rows; raise max_length (null: no limit) to keep them"
    )


def truncated_because(args: Any) -> str:
    """Why rows trained on were cut short under ``args``, for the record and the card."""
    if not args.packing and args.truncation_mode == "keep_end":
        return (
            f"longer than max_length={args.max_length} tokens, TRL truncated them from their "
            "start (truncation_mode keep_end), so their system prompt, tools and first user "
            "turn were cut off (with any assistant tokens before the cut), and the assistant "
            "tokens left were learned without them in view; set truncation_mode: keep_start "
            "(keep_end is deprecated in TRL) or raise max_length (null: no limit) to keep them "
            "whole"
        )
    how = (
        f"packing (strategy {args.packing_strategy}) cut them at it"
        if args.packing
        else f"TRL truncated them (truncation_mode {args.truncation_mode})"
    )
    limit = "raise max_length" if args.packing else "raise max_length (null: no limit)"
    return (
        f"longer than max_length={args.max_length} tokens, {how}, and part of their assistant "
        f"tokens (a tool call, the final answer) was cut off and not learned; {limit} to keep "
        "them whole"
    )


def split_because(args: Any) -> str:
    """Why rows trained on were split into pieces under ``args`` (packing that loses no
    token), for the record and the card."""
    how = (
        f"longer than max_length={args.max_length} tokens, packing (strategy bfd_split) split "
        "them into pieces of at most max_length, each trained as a sequence of its own"
        if args.packing_strategy == "bfd_split"
        else f"packing (strategy wrapped) put the rows end to end and cut them every "
        f"max_length={args.max_length} tokens, these across a cut"
    )
    return (
        f"{how}: the assistant tokens of a later piece were learned with none of the row's "
        "start (its system prompt, tools, the user's request) in view; raise max_length, or "
        "use packing_strategy bfd (which keeps each row's start, and cuts what does not fit)"
    )


def nothing_to_learn(args: Any) -> str:
    """Why a run whose prepared rows carry no label (every token masked) is refused."""
    if args.max_length is None:
        return "no training token carries a label (every one masked): nothing to learn"
    cut = (
        f"packing (strategy {args.packing_strategy}) cuts each row at it"
        if args.packing
        else "TRL drops fully masked rows"
    )
    limit = "raise max_length" if args.packing else "set max_length (null: no limit)"
    return (
        f"no training row has an assistant token left after truncation to max_length="
        f"{args.max_length} ({cut}); the dataset card gives the max_length that keeps rows "
        f"whole: {limit}"
    )


def check_chat_template(path: str | None, file: str | None) -> None:
    """Refuse a ``chat_template_path`` that is not there, before any training: a Jinja file
    (``.jinja``, ``.j2``: TRL takes any other value for a tokenizer, and a missing file for a
    hub name it would try to download), or a local tokenizer folder."""
    if path is None:
        return
    local = Path(path)
    jinja = path.endswith((".jinja", ".j2"))
    if jinja and local.is_file():
        return
    meant_local = jinja or path.startswith((".", "/", "~")) or len(local.parts) > 2
    if local.exists() and not jinja:
        return
    if meant_local:
        what = "chat template file" if jinja else "tokenizer folder"
        raise TrainError(
            f"no {what} {path!r} (read from the working directory, {Path.cwd()}); give a Jinja "
            "template file or a tokenizer folder",
            file=file,
            where="$.chat_template_path",
        )


def check_template(
    rows: TrainingRows, tokenizer: Any, args: Any, model: str, file: str | None
) -> ReasoningLoss | None:
    """Probe the chat template the trainer renders ``rows`` with (``sft_template``), named as
    the config's ``chat_template_path`` when it gave it, else as the ``model`` folder's.
    Refuse one that would train the rows under the api protocol (calls in ``tool_calls``,
    schemas in ``tools``) as empty call turns (``check_renders_tools``); rows with no call or
    tool beside their text (in-prompt protocols) need no such template. Return what it loses
    of the training rows' reasoning (``drops_reasoning``, said for the record), or None: a
    model trained on the answers without their reasoning is a choice, not a fault."""
    api = any(r is not None and carries_api_calls(r) for r in (rows.train, rows.eval))
    if not api and not any(rows.reasoning):
        return None
    try:
        probe, template = sft_template(tokenizer, args, file)
    except ValueError as exc:  # TRL cannot make a training template of it (as at its setup)
        raise template_error(exc, model, file, args.chat_template_path) from None
    swapped = "the training template TRL swaps in for " if template is not None else ""
    path = args.chat_template_path
    if api and path is not None:
        named = f"{swapped}the chat template {path}"
        check_renders_tools(probe, template, named=named, file=file, where="$.chat_template_path")
    elif api:
        check_renders_tools(probe, template, named=f"{swapped}its chat template", file=model)
    lost = drops_reasoning(probe, template) if any(rows.reasoning) else None
    if lost is None:
        return None
    whose = f"the chat template {path}" if path is not None else f"the chat template of {model}"
    return ReasoningLoss(
        lost.turns,
        f"{swapped}{whose} {lost.said} (rendering a probe: two exchanges, each assistant turn "
        "with its reasoning), so the reasoning of those turns is not trained on, only the answers "
        "around it; to train on it, set chat_template_path to a template that renders "
        "reasoning_content in every assistant turn (TRL's qwen3_training.jinja, for one)",
    )


def check_batches(rows: int, args: Any, file: str | None) -> None:
    """Refuse a run whose ``rows`` fill no batch (``dataloader_drop_last`` drops a batch short
    of ``per_device_train_batch_size`` rows on each process): it would train 0 steps and write
    the model it started from."""
    batch = int(args.per_device_train_batch_size) * int(args.world_size)
    if args.dataloader_drop_last and rows < batch:
        raise TrainError(
            f"{rows} training rows fill no batch of {batch} (dataloader_drop_last drops a "
            "short one): the run would train 0 steps; lower per_device_train_batch_size or "
            "set dataloader_drop_last: false",
            file=file,
            where="$.dataloader_drop_last",
        )


@caller_rngs_kept()
@scratch_removed_on_failure
def train_sft(
    config: Any,
    out: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    trl_overrides: dict[str, Any] | None = None,
    resume: bool = False,
    file: str | None = None,
) -> TrainReport:
    """Train as ``config`` (a YAML mapping: TRL's ``SFTConfig`` keys plus ``hsa:``) says,
    into ``out``. ``overrides`` replace ``hsa:`` settings, ``trl_overrides`` TRL keys (the
    command line). ``resume`` continues from the newest checkpoint in ``out``.

    Writes TRL's checkpoints and final model, the resolved config (``hsa-train.json``) and the
    training card (``README.md``, with the loss curve). Raises ``TrainError`` for a bad config,
    data or model, before anything is trained.
    """
    from trl import SFTConfig, SFTTrainer

    from hsa.train.clock import RunClock, carried

    started = time.monotonic()
    out = Path(out)
    settings, args, file = prepare(
        config,
        SFTConfig,
        SftSettings,
        out,
        overrides=overrides,
        trl_overrides=trl_overrides,
        trl_defaults={"assistant_only_loss": True},
        file=file,
    )
    identity = run_identity("sft", settings, args)
    checkpoint = resume_point(out, resume, args.max_steps, can_finish=True, identity=identity)
    # stopped after its last checkpoint, before writing its model: that checkpoint is the model
    done = checkpoint if reached(checkpoint, args.max_steps) else None
    clock = RunClock(carried(checkpoint), since=started)  # the earlier parts' time too
    start = starting_model(checkpoint, settings.model)
    check_chat_template(args.chat_template_path, file)
    tokenizer = load_tokenizer(start, template=args.chat_template_path)  # before the data
    evaluate = args.eval_strategy != "no"
    try:
        rows = load_rows(settings, seed=args.seed, cache=out / HF_CACHE, evaluate=evaluate)
    except OSError as exc:
        full = cache_error(exc, out / HF_CACHE)  # the rows filtered on a full disk
        if full is None:
            raise
        raise full from None
    reasoning_lost = check_template(rows, tokenizer, args, start, file)  # before the model loads
    model, tokenizer = load_model(start, tokenizer=tokenizer)
    try:
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=numbered(rows.train),
            eval_dataset=None if rows.eval is None else numbered(rows.eval),
            processing_class=tokenizer,
            callbacks=[clock],
        )
    except ValueError as exc:
        raise template_error(exc, start, file, args.chat_template_path) from None
    except OSError as exc:
        full = cache_error(exc, out / HF_CACHE)  # the rows tokenized on a full disk
        if full is not None:
            raise full from None
        if args.chat_template_path is None:
            raise
        # a chat_template_path TRL took for a tokenizer and could not load
        first = first_line(exc)
        raise TrainError(
            f"cannot load a chat template from {args.chat_template_path!r}: {first}",
            file=file,
            where="$.chat_template_path",
        ) from None
    kept = count_kept(rows, trainer, args)
    if reasoning_lost is not None:
        lost = reasoning_rows(rows.train, reasoning_lost.turns)
        not_trained = sum(lost[i] for i in kept)
        if not_trained:
            rows.counts["reasoning_not_trained"] = not_trained
    count_tokens(trainer)
    if rows.counts["train"] == 0 or not has_labels(trainer.train_dataset):
        raise TrainError(nothing_to_learn(args), file=file, where="max_length")
    check_batches(rows.counts["train"], args, file)
    if checkpoint is None:
        start_afresh(out, identity, settings.model)
    train_or_finish(trainer, checkpoint, done)
    report = TrainReport(out=out, steps=trainer.state.global_step, counts=rows.counts)
    report.resumed_from = checkpoint
    for entry in trainer.state.log_history:
        if "loss" in entry:
            report.losses.append((int(entry["step"]), float(entry["loss"])))
        if "eval_loss" in entry:
            report.eval_losses.append((int(entry["step"]), float(entry["eval_loss"])))
    resolved = {
        "command": "sft",
        "hsa": resolved_settings(settings, out, checkpoint),
        "data": {
            "manifest_hash": rows.manifest_hash,
            "rows": rows.counts,
            **({"dropped_because": dropped_because(args)} if rows.counts["dropped"] else {}),
            **({"truncated_because": truncated_because(args)} if rows.counts["truncated"] else {}),
            **({"split_because": split_because(args)} if rows.counts.get("split") else {}),
            **(
                {"reasoning_not_trained_because": reasoning_lost.said}
                if reasoning_lost is not None and rows.counts.get("reasoning_not_trained")
                else {}
            ),
        },
        "recipe": rows.recipe,
        "run": {
            "steps": report.steps,
            "tokens": int(trainer.state.num_input_tokens_seen),
            "wall_s": round(clock.wall_s(), 1),
        },
    }
    finish(out, trainer, tokenizer, resolved, report.losses, report.eval_losses)
    report.wall_s = time.monotonic() - started
    return report
