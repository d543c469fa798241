"""``ExperimentConfig``: the two arms, the model, the training and the held-out tiers.

```yaml
seeds: [0, 1]                # training seeds: initial weights and data order
env: livestream
env_options: {compact: true}
base: [...]                  # rules every row and every tier shares (the compact harness)
arms:                        # the data of each arm: a recipe's drawn rules (base added)
  fixed: {rules: []}
  augmented: {variants_per_trajectory: 4, variants_per_harness: 16, rules: [...]}
model: {hidden: 96, layers: 4, vocab_size: 1500, heads: 2, kv_heads: 1}
train: {max_steps: 500, ...} # TRL's SFTConfig keys, as `hsa train sft` reads them
eval: {tasks: null, variants: 2, max_tokens: 64}
tiers:                       # each its own recipe and seed (base added), named by a plain
                             # file name (its recipe file and evaluation folder)
  canonical: {seed: 101, rules: []}
  styles: {seed: 102, rules: augmented}     # the augmented arm's rules, drawn anew
  parts: {seed: 103, held_out: true, rules: [...]}
```

``--scale gpu`` reads the ``gpu`` section instead of ``model``, ``train`` and ``eval``: a local
base model (0.5-1.5B parameters) both arms start from, trained on full rows (``view: conversation``)
with its own TRL settings, and evaluated with vLLM (one engine per model, every tier):

```yaml
gpu:
  model: models/Qwen2.5-0.5B-Instruct
  view: conversation         # or firstcall
  train: {max_steps: 1000, bf16: true, ...}
  eval: {tasks: null, variants: 4, max_tokens: 512, batch_size: 256}
  engine_args: {max_model_len: 8192, gpu_memory_utilization: 0.85}
```

A tier with ``held_out: true`` must not overlap the augmented arm's recipe
(``hsa.augment.recipe.overlaps``); ``rules: augmented`` draws the training rules with the
tier's own seed (new draws of the same styles).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsa.augment.recipe import Recipe, recipe_schema
from hsa.config import (
    bounded,
    did_you_mean,
    from_mapping,
    read_yaml,
    refuse,
    setting,
    settings_hash,
)
from hsa.errors import ExperimentError, HsaError
from hsa.harness.model import call_format_problem
from hsa.train.config import VIEWS

#: the largest seed a run takes (TRL's ``seed`` is 0 to 2**32 - 1)
MAX_SEED = 2**32 - 1

#: the arms, in the order they are reported
ARMS = ("fixed", "augmented")
#: what each first reply is scored by (``hsa.eval.firstcall``)
METRICS = ("name", "keys", "exact")
#: and whether it names something the harness offers at all (right or wrong)
OFFERED = "offered"
#: where an experiment runs: a tiny model on CPU, or a real base model on a GPU
SCALES = ("cpu", "gpu")


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The model both arms start from: a Qwen2-shaped model built from scratch."""

    hidden: int = setting(96, help="Hidden size.")
    layers: int = setting(4, help="Decoder layers.")
    vocab_size: int = setting(1500, help="Tokenizer vocabulary, trained on both arms' rows.")
    heads: int = setting(2, help="Attention heads per layer.")
    kv_heads: int = setting(1, help="Key/value heads the attention heads share (at most heads).")

    def __post_init__(self) -> None:
        problems = bounded(self, "hidden", "layers", "vocab_size", "heads", "kv_heads", low=1)
        if not problems and (self.hidden % self.heads or (self.hidden // self.heads) % 2):
            problems.append(
                ("heads", f"must split hidden ({self.hidden}) into heads of an even width")
            )
        if not problems and self.heads % self.kv_heads:
            problems.append(("kv_heads", f"must divide heads ({self.heads})"))
        refuse(problems, ExperimentError)


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """How each trained model is evaluated (the ``firstcall`` suite of ``hsa eval``)."""

    tasks: int | None = setting(None, help="Test tasks sampled per tier (unset: all).")
    variants: int = setting(2, help="Held-out variants per task in each tier.")
    max_tokens: int = setting(64, help="Tokens per reply.")
    batch_size: int = setting(32, help="Requests per generate call.")

    def __post_init__(self) -> None:
        refuse(bounded(self, "variants", "max_tokens", "batch_size", low=1), ExperimentError)
        refuse(bounded(self, "tasks", low=1), ExperimentError)


@dataclass(frozen=True, slots=True)
class GpuSettings:
    """``--scale gpu``: the base model both arms start from and how vLLM serves it."""

    model: str | None = setting(
        None, help="A local base model folder (0.5-1.5B parameters); both arms start from it."
    )
    view: str = setting(
        "conversation",
        help="What each row trains (hsa train sft's hsa.view): conversation (every turn) or "
        "firstcall.",
    )
    call_format: str = setting(
        "hermes", help="The format the model writes API tool calls in (hermes for Qwen)."
    )
    engine_args: Mapping[str, Any] = setting(
        default_factory=dict,
        help="Arguments of vllm.LLM (max_model_len, gpu_memory_utilization, ...).",
    )

    def __post_init__(self) -> None:
        problems = []
        if not self.model:
            problems.append(("model", "--scale gpu needs a local base model folder"))
        if self.view not in VIEWS:
            problems.append(("view", f"unknown view {self.view!r}: {', '.join(VIEWS)}"))
        if (why := call_format_problem(self.call_format)) is not None:
            problems.append(("call_format", why))
        refuse(problems, ExperimentError)


@dataclass(frozen=True, slots=True)
class Tier:
    """A held-out tier: its recipe (base rules added) and whether it must be held out."""

    name: str
    recipe: Recipe
    held_out: bool


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    """A whole experiment (see the module docstring)."""

    seeds: tuple[int, ...]
    env: str
    env_options: Mapping[str, Any]
    arms: Mapping[str, Recipe]
    variants: Mapping[str, int]  # rows per trajectory, per arm
    model: ModelSettings
    train: Mapping[str, Any]
    eval: EvalSettings
    tiers: tuple[Tier, ...]
    parallel: int = 2
    gpu: GpuSettings | None = None  # set at --scale gpu
    raw: Mapping[str, Any] = field(default_factory=dict)
    file: str | None = None

    @property
    def steps(self) -> int:
        return int(self.train.get("max_steps", 0))

    @property
    def scale(self) -> str:
        return "cpu" if self.gpu is None else "gpu"

    @property
    def view(self) -> str:
        return "firstcall" if self.gpu is None else self.gpu.view

    def hash(self) -> str:
        return settings_hash(self.raw)


#: a tier's name: the name of its recipe file and evaluation folder, and a Markdown table cell
_TIER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _non_string_key(value: Any, where: str) -> tuple[str, Any] | None:
    """The first key in ``value`` (at ``where``) that is not a string, and where its mapping
    is: the config's hash is its JSON text, whose keys are strings. (A value that holds
    itself, a YAML alias inside its own anchor, is refused where the file is read.)"""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return where, key
            if (found := _non_string_key(item, f"{where}.{key}")) is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if (found := _non_string_key(item, f"{where}[{i}]")) is not None:
                return found
    return None


def _integer(value: Any) -> bool:
    """Whether ``value`` is an integer as YAML writes one (``true`` is a bool, not 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    """Whether ``value`` is an integer, 1 or more (of steps, rows, trainings at a time)."""
    return _integer(value) and value >= 1


def _tier_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a tier (a key of ``tiers``), or ``None``."""
    if not _TIER_NAME.fullmatch(name):
        return (
            f"a tier's name must be one plain file name, {name!r} is not: letters, digits, "
            "'_', '.' and '-', starting with a letter or digit"
        )
    return None


def _recipe(
    data: Any, base: list[Any], seed: int, where: str, file: str | None, **extra: Any
) -> Recipe:
    if not isinstance(data, Mapping):
        raise ExperimentError("expected a mapping", file=file, where=where)
    body = {"seed": seed, "min_rules": 1 if data.get("rules") else 0, **extra}
    body |= {k: v for k, v in data.items() if k not in ("held_out",)}
    body["base"] = base
    try:
        return Recipe.from_dict(body, file=file, root=where)
    except HsaError as exc:
        raise ExperimentError(exc.message, file=file, where=exc.where) from None


def parse_config(
    data: Any, *, file: str | None = None, overrides: Mapping[str, Any] | None = None
) -> ExperimentConfig:
    """The experiment ``data`` (a YAML mapping) describes; ``overrides``: ``seeds``, ``steps``
    and ``scale`` from the command line."""
    if not isinstance(data, Mapping):
        raise ExperimentError("expected a mapping", file=file, where="$")
    data = dict(data)
    if (found := _non_string_key(data, "$")) is not None:
        at, key = found
        what = "a tier's name" if at == "$.tiers" else "a key"
        raise ExperimentError(
            f"{what} must be a string, got {type(key).__name__} {key!r} (YAML reads unquoted "
            "numbers, yes/no, on/off, true/false and null/~ so: quote it)",
            file=file,
            where=f"{at}.{key}",
        )
    overrides = overrides or {}
    known = {"seeds", "env", "env_options", "base", "arms", "model", "train", "eval", "tiers"}
    known |= {"parallel", "gpu"}
    unknown = sorted(set(data) - known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ExperimentError(
            f"unknown key {unknown[0]!r}{hint}", file=file, where=f"$.{unknown[0]}"
        )
    for key in ("arms", "model", "train", "eval", "tiers", "gpu"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise ExperimentError(
                f"expected a mapping, got {type(data[key]).__name__}", file=file, where=f"$.{key}"
            )
    if overrides.get("seeds") is not None:
        data["seeds"] = list(overrides["seeds"])
    scale = overrides.get("scale") or "cpu"
    if scale not in SCALES:
        raise ExperimentError(f"unknown scale {scale!r}: {', '.join(SCALES)}", where="--scale")
    gpu, train_at, eval_data = None, "$.train", data.get("eval")
    if scale == "gpu":
        section = data.get("gpu")
        if not isinstance(section, Mapping):
            raise ExperimentError(
                "--scale gpu needs a gpu section: the base model, its train and eval settings",
                file=file,
                where="$.gpu",
            )
        section = dict(section)
        train_at, eval_data = "$.gpu.train", section.pop("eval", None)
        data["train"] = section.pop("train", None)
        if data["train"] is not None and not isinstance(data["train"], Mapping):
            raise ExperimentError("expected a mapping", file=file, where=train_at)
        gpu = from_mapping(GpuSettings, section, error=ExperimentError, file=file, root="$.gpu")
        data["scale"] = "gpu"  # a GPU run's folder is not a CPU run's
    train = dict(data.get("train") or {})
    if overrides.get("steps") is not None:
        train["max_steps"] = int(overrides["steps"])
    data["train"] = train
    if not isinstance(data.get("env_options") or {}, Mapping):
        raise ExperimentError(
            "env_options must be a mapping of option: value", file=file, where="$.env_options"
        )
    seeds = data.get("seeds")
    if seeds is None:  # unset (or null): the default
        seeds = [0]
    # where the seeds came from: the command line's --seeds, or the file's
    given = overrides.get("seeds") is not None
    seeds_at, seeds_file = ("--seeds", None) if given else ("$.seeds", file)
    if isinstance(seeds, list) and not seeds:
        raise ExperimentError(
            "no seed given: name one or more (each is a run of each arm)",
            file=seeds_file,
            where=seeds_at,
        )
    if not isinstance(seeds, list) or not all(_integer(s) and 0 <= s <= MAX_SEED for s in seeds):
        raise ExperimentError(
            f"seeds must be a list of integers from 0 to {MAX_SEED} (the seeds TRL and torch take)",
            file=seeds_file,
            where=seeds_at,
        )
    if len(set(seeds)) != len(seeds):
        raise ExperimentError(
            f"seeds must differ (each seed is a run of its own): {seeds}",
            file=seeds_file,
            where=seeds_at,
        )
    steps = train.get("max_steps")
    if not _count(steps):
        raise ExperimentError(
            "train.max_steps must be a positive number of steps: an experiment is "
            "step-capped, never time-capped",
            file=file,
            where=f"{train_at}.max_steps",
        )
    base = data.get("base") or []
    if not isinstance(base, list):
        raise ExperimentError(
            "base must be a list of rules ({rule: NAME, params: {...}})", file=file, where="$.base"
        )
    # checked first on their own, so that a bad base rule is named where the file has it
    # ($.base[i]), not under the first arm whose recipe holds it
    _recipe({"rules": []}, base, 0, "$", file)
    arms_data = data.get("arms") or {}
    if not isinstance(arms_data, Mapping) or set(arms_data) != set(ARMS):
        raise ExperimentError(
            f"arms must name exactly {' and '.join(ARMS)}", file=file, where="$.arms"
        )
    arms, variants = {}, {}
    for arm in ARMS:
        if not isinstance(arms_data[arm] or {}, Mapping):
            raise ExperimentError("expected a mapping", file=file, where=f"$.arms.{arm}")
        spec = dict(arms_data[arm] or {})
        count = spec.pop("variants_per_trajectory", 1)
        if not _count(count):
            raise ExperimentError(
                f"expected an integer, 1 or more (the rows of each trajectory), got {count!r}",
                file=file,
                where=f"$.arms.{arm}.variants_per_trajectory",
            )
        variants[arm] = count
        # both arms draw the base rules as often: the same spread of compact harnesses
        spec.setdefault("variants_per_harness", 16)
        arms[arm] = _recipe(spec, base, 0, f"$.arms.{arm}", file)
    tiers = []
    for name, spec in (data.get("tiers") or {}).items():
        where = f"$.tiers.{name}"
        if (why := _tier_name_problem(name)) is not None:
            raise ExperimentError(why, file=file, where=where)
        if not isinstance(spec, Mapping):
            raise ExperimentError("expected a mapping", file=file, where=where)
        spec = dict(spec)
        if isinstance(spec.get("rules"), str) and spec["rules"] != "augmented":
            raise ExperimentError(
                f"{spec['rules']!r}: a tier's rules are a list of rules, or 'augmented' (the "
                "augmented arm's)",
                file=file,
                where=f"{where}.rules",
            )
        if spec.get("rules") == "augmented":
            spec["rules"] = [r.to_dict() for r in arms["augmented"].rules]
            spec.setdefault("min_rules", arms["augmented"].min_rules)
            spec.setdefault("max_rules", arms["augmented"].max_rules)
        seed = spec.pop("seed", None)
        if not isinstance(seed, int):
            close = difflib.get_close_matches("seed", [str(k) for k in spec], n=1)
            hint = f" (is {close[0]!r} meant to be 'seed'?)" if close else ""
            raise ExperimentError(f"each tier needs its own seed{hint}", file=file, where=where)
        known = {*recipe_schema()["properties"], "held_out"}
        for key in spec:
            if key not in known:
                raise ExperimentError(
                    f"unknown setting {key!r}; {did_you_mean(str(key), known)}",
                    file=file,
                    where=f"{where}.{key}",
                )
        held_out = spec.get("held_out", False)
        if not isinstance(held_out, bool):
            raise ExperimentError(
                f"expected true or false, got {held_out!r}", file=file, where=f"{where}.held_out"
            )
        spec.setdefault("variants_per_harness", 16)
        recipe = _recipe(spec, base, seed, where, file)
        tiers.append(Tier(name, recipe, held_out))
    if not tiers:
        raise ExperimentError("no tiers to evaluate", file=file, where="$.tiers")
    parallel = data.get("parallel", 2)
    if not _count(parallel):
        raise ExperimentError(
            f"parallel must be an integer, 1 or more (trainings at a time), got {parallel!r}",
            file=file,
            where="$.parallel",
        )
    unread = ("gpu",) if gpu is None else ("model", "eval")  # the other scale's sections
    if gpu is not None:
        parallel = 1  # one GPU: one training at a time
    return ExperimentConfig(
        seeds=tuple(seeds),
        env=str(data.get("env") or "livestream"),
        env_options=dict(data.get("env_options") or {}),
        arms=arms,
        variants=variants,
        model=from_mapping(
            ModelSettings, data.get("model") or {}, error=ExperimentError, file=file, root="$.model"
        ),
        train=train,
        eval=from_mapping(
            EvalSettings,
            eval_data or {},
            error=ExperimentError,
            file=file,
            root="$.gpu.eval" if gpu is not None else "$.eval",
        ),
        tiers=tuple(tiers),
        parallel=parallel,
        gpu=gpu,
        raw={k: v for k, v in data.items() if k not in unread},  # what identifies the run
        file=file,
    )


def load_config(path: str | Path, **overrides: Any) -> ExperimentConfig:
    data = read_yaml(path, error=ExperimentError)
    return parse_config(data, file=str(path), overrides=overrides)
