"""A training command's config: TRL's own config, field names unchanged, plus an ``hsa:`` section.

```yaml
hsa:                       # hsa's settings (``SftSettings``)
  data: out/livestream     # an hsa dataset directory
  canonical_share: 0.2     # share of canonical rows among the training rows
learning_rate: 1.0e-5      # everything else is TRL's config (SFTConfig), as TRL names it
max_length: 8192
```

Unknown keys are refused with the nearest name -- TRL's fields at the top level, hsa's under
``hsa:`` -- before any model is loaded. Without a GPU, ``use_cpu: true`` and ``bf16: false``
are filled in unless the config sets them (TRL's defaults ask for bf16 on a GPU); the
``report_to`` default is ``none`` (no tracker is contacted unless asked for).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.config import (
    bounded,
    did_you_mean,
    from_mapping,
    read_yaml,
    refuse,
    setting,
    type_problem,
)
from hsa.errors import TrainError

#: what of each row a run trains on (``SftSettings.view``)
VIEWS = ("conversation", "firstcall")


@dataclass(frozen=True, slots=True)
class SftSettings:
    """The ``hsa:`` section of ``hsa train sft``: what to train on and from."""

    data: str | None = setting(None, help="The hsa dataset directory to train on.")
    model: str | None = setting(None, help="A local model folder (or a hub name, online).")
    canonical_share: float | None = setting(
        None,
        help="Share of canonical rows (the unchanged harness) among the training rows; the "
        "rest are variants. Rows are dropped, never repeated, to reach it (unset: as the "
        "dataset has them).",
    )
    train_split: str = setting("train", help="The dataset split trained on.")
    eval_split: str | None = setting(
        "dev", help="The split evaluated on during training (null: none)."
    )
    max_rows: int | None = setting(
        None,
        help="Train on at most this many rows (unset: all); with canonical_share, that share "
        "of them canonical.",
    )
    verified_only: bool = setting(
        True,
        help="Leave out rows whose trajectory a teacher marked unverified (verified false); "
        "rows no teacher checked (verified null: a recorded source) are kept, and counted in "
        "the run's summary.",
    )
    view: str = setting(
        "conversation",
        help="What of each row is trained on: conversation (the whole row) or firstcall (the "
        "row cut after its first assistant message, as prompt and completion: the first call "
        "is the target, what the firstcall eval suite scores).",
    )

    def __post_init__(self) -> None:
        problems = bounded(self, "canonical_share", low=0, high=1)
        if self.view not in VIEWS:
            problems.append(("view", f"unknown view {self.view!r}: {', '.join(VIEWS)}"))
        problems += bounded(self, "max_rows", low=1)
        refuse(problems, TrainError)


def trl_fields(trl_config: type) -> set[str]:
    """The field names of a TRL config class (what its YAML keys may be)."""
    return {f.name for f in dataclasses.fields(trl_config) if f.init}


def split_config(
    data: Any, trl_config: type, *, file: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(hsa section, TRL keys)`` of a YAML mapping; unknown TRL keys refused by name."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise TrainError(f"expected a mapping, got {type(data).__name__}", file=file, where="$")
    section = data.get("hsa") or {}
    if not isinstance(section, Mapping):
        raise TrainError("expected a mapping of hsa settings", file=file, where="$.hsa")
    known = trl_fields(trl_config)
    trl = {k: v for k, v in data.items() if k != "hsa"}
    hints = _trl_hints(trl_config)
    for key, value in trl.items():
        if key not in known:
            raise TrainError(
                f"{trl_config.__name__} has no field {key!r}; {did_you_mean(str(key), known)}",
                file=file,
                where=f"$.{key}",
            )
        expected = type_problem(value, hints[key]) if key in hints else None
        if expected:
            # said here, before a model loads, not by TRL's checks deep in the trainer
            raise TrainError(f"expected {expected}, got {value!r}", file=file, where=f"$.{key}")
    return dict(section), trl


@functools.cache
def _trl_hints(trl_config: type) -> dict[str, Any]:
    """The annotations of a TRL config's fields (none when they cannot be resolved)."""
    try:
        return typing.get_type_hints(trl_config)
    except Exception:  # an annotation this Python cannot resolve: TRL checks its own
        return {}


def load_yaml(path: str | Path | None) -> Any:
    if path is None:
        return {}
    return read_yaml(path, error=TrainError) or {}


def sft_settings(section: Mapping[str, Any], *, file: str | None = None) -> SftSettings:
    found: SftSettings = from_mapping(
        SftSettings, section, error=TrainError, file=file, root="$.hsa"
    )
    return found


def trl_args(
    trl_config: type, keys: Mapping[str, Any], out: str | Path, *, file: str | None = None
) -> Any:
    """TRL's config from ``keys``, writing to ``out``, with hsa's CPU and tracker defaults."""
    values = _checkpointing(trl_config, dict(keys))
    values["output_dir"] = str(out)
    values.setdefault("report_to", "none")
    if not _cuda():
        values.setdefault("use_cpu", True)
        values.setdefault("bf16", False)
    fields = {f.name for f in dataclasses.fields(trl_config)}
    for key, low in _AT_LEAST.items():  # what TRL, transformers or torch would fail on later
        value = values.get(key)
        if key in fields and value is not None and not _number_at_least(value, low):
            hint = ""
            if isinstance(value, str):  # YAML reads 1e-5 (no dot) as text
                hint = "; write a number with a dot, 1.0e-5, which YAML reads as a number"
            raise TrainError(
                f"{trl_config.__name__}: {key} must be a number of at least {low}, got "
                f"{value!r}{hint}",
                file=file,
                where=f"$.{key}",
            )
    # transformers trains by num_train_epochs for a negative max_steps, and not by epochs for
    # 0: only -1, its default, says "train num_train_epochs"
    steps = values.get("max_steps", -1)
    if "max_steps" in fields and steps != -1 and not _number_at_least(steps, 1):
        raise TrainError(
            f"{trl_config.__name__}: max_steps must be a number of at least 1 (or -1, TRL's "
            f"default: train num_train_epochs instead), got {steps!r}",
            file=file,
            where="$.max_steps",
        )
    try:
        args = trl_config(**values)
    except (TypeError, ValueError, ArithmeticError) as exc:
        # TRL names the setting it refuses in its words: its key, where the config has it
        text = str(exc)
        named = [k for k in keys if re.search(rf"\b{re.escape(k)}\b", text)]
        where = f"$.{min(named, key=text.index)}" if named else None
        raise TrainError(f"{trl_config.__name__}: {exc}", file=file, where=where) from None
    if args.max_steps <= 0 and args.num_train_epochs <= 0:  # the trainer would stop at step 0
        raise TrainError(
            f"num_train_epochs {args.num_train_epochs} without max_steps trains 0 steps: set "
            "num_train_epochs above 0, or max_steps",
            file=file,
            where="$.num_train_epochs",
        )
    return args


#: TRL and transformers settings and their least value: below it a run fails deep inside
#: torch or TRL (a batch of 0 rows, a division by zero steps, a NaN learning rate)
_AT_LEAST: dict[str, float] = {
    "per_device_train_batch_size": 1,
    "per_device_eval_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "learning_rate": 0,
    "num_generations": 1,
    "max_completion_length": 1,
    "max_prompt_length": 1,
    "max_new_tokens": 1,
}


def _number_at_least(value: Any, low: float) -> bool:
    """Whether ``value`` is a finite number (not a bool) of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= low


#: transformers 5's names of the settings TRL configs still give under the old ones
_RENAMED = {
    "gradient_checkpointing": "activation_checkpointing",
    "gradient_checkpointing_kwargs": "activation_checkpointing_kwargs",
}


def _checkpointing(trl_config: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``gradient_checkpointing*`` under their new names, where the config
    has them: transformers takes the old names with a deprecation warning, and TRL sets one
    (``gradient_checkpointing``, True) by default, so every run would warn. The default is
    given under the new name; a config that sets either name keeps what it says."""
    fields = {f.name: f for f in dataclasses.fields(trl_config)}
    for old, new in _RENAMED.items():
        if new not in fields or old not in fields or new in values:
            continue
        default = fields[old].default
        value = values.pop(old, None if default is dataclasses.MISSING else default)
        if value is not None:
            values[new] = value
    return values


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def prepare(
    config: Any,
    trl_config: type,
    settings_class: type,
    out: Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    trl_overrides: Mapping[str, Any] | None = None,
    trl_defaults: Mapping[str, Any] | None = None,
    file: str | None = None,
) -> tuple[Any, Any, str | None]:
    """``(hsa settings, TRL args, file)`` of a command's config: ``config`` is a mapping or a
    YAML path; ``overrides`` replace ``hsa:`` settings and ``trl_overrides`` TRL keys (the
    command line, unknown keys refused too); ``trl_defaults`` are hsa's defaults of TRL keys
    the config leaves out. The model setting is required."""
    data = config if isinstance(config, Mapping) else load_yaml(config)
    if file is None and not isinstance(config, Mapping):
        file = str(config)
    section, trl = split_config(data, trl_config, file=file)
    section.update({k: v for k, v in (overrides or {}).items() if v is not None})
    split_config(dict(trl_overrides or {}), trl_config)
    trl.update(trl_overrides or {})
    for key, value in (trl_defaults or {}).items():
        trl.setdefault(key, value)
    settings = from_mapping(settings_class, section, error=TrainError, file=file, root="$.hsa")
    if getattr(settings, "model", None) is None:
        raise TrainError(
            "no model to train: set hsa.model (or --model) to a model folder",
            file=file,
            where="$.hsa.model",
        )
    args = trl_args(trl_config, trl, out, file=file)
    if getattr(args, "use_vllm", False):
        from trl.import_utils import is_vllm_available

        if not is_vllm_available():  # TRL says so only after the models are loaded
            raise TrainError(
                "use_vllm needs vLLM, which is not installed here: pip install 'hsa[vllm]' "
                "(on a machine with a CUDA GPU), or leave use_vllm out",
                file=file,
                where="$.use_vllm",
            )
    return settings, args, file
