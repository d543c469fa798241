"""``hsa build``: a YAML config in, an augmented dataset directory out.

Stages: the source's canonical trajectories (a bundled environment's tasks solved by the teach
job, ``hsa.pipelines.teach`` -- with the scripted oracle backend, in process, by default -- or
recorded trajectories), then augmentation, splits and the card (``hsa.pipelines.augment``).
The config is validated against
``hsa/pipelines/schema/build.schema.json``; paths in it are relative to the config file.

The teacher's output (the folder ``hsa teach`` would write) is kept in ``OUT/.hsa/source/`` so
a rerun skips the stage; the
dataset is identified by the config (its hash), so rerunning a finished build does nothing
and a rerun after a crash ends with the same bytes as an uninterrupted build.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from hsa import __version__
from hsa.augment.recipe import Recipe, default_recipe, load_recipe
from hsa.datasets import manifest as mf
from hsa.datasets.lock import hold
from hsa.datasets.schema import SCHEMA_VERSION
from hsa.datasets.shards import sha256_file
from hsa.datasets.source import Source, open_source
from hsa.errors import ConfigError, HsaError
from hsa.harness.validate import json_path
from hsa.pipelines.augment import AugmentConfig, AugmentReport, augment_locked, check_not_empty
from hsa.pipelines.teach import teach
from hsa.teachers.config import TeachConfig

#: (stage, done, total): stages are "tasks", "teacher", "augment"
Progress = Callable[[str, int, int], None]
SOURCE_DIR = Path(mf.STATE) / "source"


@lru_cache(maxsize=1)
def build_schema() -> dict[str, Any]:
    """The published JSON Schema of a build config."""
    text = resources.files("hsa.pipelines").joinpath("schema/build.schema.json").read_text("utf-8")
    return json.loads(text)


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """A validated build config; ``base`` is the folder its relative paths start from.

    Settings are taken with one precedence, as everywhere in hsa: a command-line flag, then
    this config, then the recipe. A setting the config leaves out is unset (``seed`` is None),
    so the recipe's applies: the same recipe gives the same dataset under ``hsa build`` and
    ``hsa augment --recipe``.
    """

    data: Mapping[str, Any]
    base: Path = field(default_factory=Path)
    file: str | None = None

    @property
    def name(self) -> str:
        return self.data.get("name") or "dataset"

    @property
    def seed(self) -> int | None:
        """The config's ``seed``; None when it sets none (the recipe's seed is used)."""
        seed = self.data.get("seed")
        return None if seed is None else int(seed)

    def path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return Path(os.path.normpath(path if path.is_absolute() else self.base / path))

    def out(self, override: str | Path | None = None) -> Path:
        if override is not None:
            return Path(override)
        if "out" not in self.data:
            raise ConfigError("no output directory: set 'out' or pass --out", file=self.file)
        return self.path(self.data["out"])

    def recipe(self) -> Recipe:
        spec = (self.data.get("augment") or {}).get("recipe")
        if spec is None:
            return default_recipe()
        if isinstance(spec, str):
            return load_recipe(self.path(spec))
        return Recipe.from_dict(spec, file=self.file, root="$.augment.recipe")

    def augment_config(self) -> AugmentConfig:
        section = dict(self.data.get("augment") or {})
        section.pop("recipe", None)
        if section.get("tokenizer"):
            section["tokenizer"] = str(self.path(section["tokenizer"]))
        splits = self.data.get("splits") or {"train": 0.9, "dev": 0.05, "test": 0.05}
        return AugmentConfig(recipe=self.recipe(), seed=self.seed, splits=splits, **section)

    def identity(self) -> dict[str, Any]:
        """What decides the dataset's content: the config with recipes and inputs resolved."""
        source = dict(self.data["source"])
        for key in ("trajectories", "harness"):
            if key in source:
                path = self.path(source[key])
                source[key] = _fingerprint(path)
        return {
            "kind": mf.KIND,
            "schema_version": SCHEMA_VERSION,
            "hsa": __version__,
            "name": self.name,
            "source": source,
            "teach": dict(self.data.get("teach") or {"backend": "oracle"}),
            "augment": self.augment_config().to_dict(),
        }


def _fingerprint(path: Path) -> str:
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        text = "".join(f"{p.relative_to(path)}\0{sha256_file(p)}\n" for p in files)
        return mf.config_hash({"files": text})
    raise ConfigError("no such file or directory", file=str(path))


def parse_config(data: Any, *, base: Path = Path(), file: str | None = None) -> BuildConfig:
    """A build config from parsed YAML, validated against the schema."""
    validator = Draft202012Validator(build_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.path)))
    if errors:
        error = errors[0]
        raise ConfigError(error.message, file=file, where=json_path(error.absolute_path))
    config = BuildConfig(data, base, file)
    _check_teach(data.get("teach"), file)
    try:
        config.augment_config().check()
        config.recipe()
    except HsaError as exc:
        where = exc.where if exc.where else None
        raise ConfigError(exc.message, file=exc.file or file, where=where) from None
    return config


#: teacher settings a build takes from its ``source`` section, not from ``teach``
_FROM_SOURCE = ("env", "env_options", "tasks", "split")


def _check_teach(teach: Mapping[str, Any] | None, file: str | None) -> None:
    """Validate the ``teach`` section against ``TeachConfig`` whatever the backend, so a typo
    is never ignored (the oracle backend uses none of the other settings)."""
    teach = dict(teach or {})
    known = sorted(f.name for f in dataclasses.fields(TeachConfig))
    for key in teach:
        where = f"$.teach.{key}"
        if key in _FROM_SOURCE:
            raise ConfigError(
                f"{key!r} is set in the 'source' section (source.{key}), not under 'teach'",
                file=file,
                where=where,
            )
        if key == "seed":
            raise ConfigError(
                "the teacher's seed is the build's: set the top-level 'seed'",
                file=file,
                where=where,
            )
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
            raise ConfigError(f"unknown teach setting {key!r}; {hint}", file=file, where=where)
    try:
        TeachConfig.from_dict(teach, file=file)
    except HsaError as exc:
        where = f"$.teach.{exc.where}" if exc.where else "$.teach"
        raise ConfigError(exc.message, file=file, where=where) from None


def load_config(path: str | Path) -> BuildConfig:
    """A build config from a YAML file."""
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror or exc}", file=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid YAML: {reason}", file=str(path), where=where) from None
    return parse_config(data, base=path.parent, file=str(path))


@dataclass(slots=True)
class BuildReport:
    out: Path
    tasks: int = 0
    trajectories: int = 0
    verified: int = 0
    teacher_skipped: bool = False
    augment: AugmentReport | None = None


def build(
    config: BuildConfig, *, out: str | Path | None = None, progress: Progress | None = None
) -> BuildReport:
    """Run the build ``config`` into ``out`` (default: the config's ``out``).

    ``out`` is locked while the build runs (``hsa.datasets.lock``). Recorded trajectories
    with nothing to augment are refused before anything is written; a teacher's output with
    nothing to augment (every trajectory unverified) is refused after the teacher, and kept
    for a rerun with a corrected ``augment`` section.
    """
    out = config.out(out)
    identity = config.identity()
    augment_config = config.augment_config()
    source = config.data["source"]
    harnesses = []
    recorded = None
    if "env" not in source:
        harness = None
        if "harness" in source:
            from hsa.harness.io import load

            harness = load(config.path(source["harness"]))
            harnesses.append(harness)
        recorded = open_source(config.path(source["trajectories"]), harness=harness)
        check_not_empty(recorded, augment_config)
    with hold(out, command="hsa build"):
        return _build(config, out, identity, augment_config, recorded, harnesses, progress)


def _build(
    config: BuildConfig,
    out: Path,
    identity: Mapping[str, Any],
    augment_config: AugmentConfig,
    recorded: Source | None,
    harnesses: list,
    progress: Progress | None,
) -> BuildReport:
    report = BuildReport(out=out)
    if mf.claim(out, mf.config_hash(identity)):
        report.teacher_skipped = True
        src = recorded if recorded is not None else open_source(out / SOURCE_DIR)
        report.augment = augment_locked(src, out, augment_config, settings=identity)
        report.trajectories = report.augment.trajectories
        return report
    if recorded is None:
        source = config.data["source"]
        teacher = dict(config.data.get("teach") or {"backend": "oracle"})
        report.tasks, report.verified, report.teacher_skipped = _teach(
            config, source, teacher, out / SOURCE_DIR, progress
        )
        src = open_source(out / SOURCE_DIR)
        try:
            check_not_empty(src, augment_config)
        except HsaError:
            # The teacher's output stays (a rerun reuses it when the source and teacher are
            # unchanged); this config's run state goes, so a corrected config may run.
            mf.clear_run(out)
            raise
    else:
        src = recorded

    def on_batch(done: int, total: int, rows: int) -> None:
        if progress is not None:
            progress("augment", done, total)

    report.trajectories = src.total
    report.augment = augment_locked(
        src,
        out,
        augment_config,
        harnesses=harnesses,
        progress=on_batch,
        settings=identity,
    )
    return report


#: what a build asks the teacher for unless its ``teach`` section says otherwise: each task
#: once, under its canonical harness (the augment stage draws the variants)
_TEACH_DEFAULTS = {"variants_per_task": 0, "include_canonical": True}


def _teach(
    config: BuildConfig,
    source: Mapping[str, Any],
    teacher: Mapping[str, Any],
    target: Path,
    progress: Progress | None,
) -> tuple[int, int, bool]:
    """Trajectories of the environment's tasks into ``target`` by the teach job
    (``hsa.pipelines.teach``), verified as ``hsa teach`` verifies them; (tasks, verified,
    skipped)."""
    done = target / "done.json"
    # what decides the teacher's output: a rerun reuses it only when this is unchanged
    seed = config.augment_config().resolved()[1]
    ident = mf.config_hash({"source": dict(source), "teach": dict(teacher), "seed": seed})
    if done.is_file():
        found = mf.read_json(done)
        if found.get("identity") == ident:
            return found.get("tasks", 0), found.get("verified", 0), True
        shutil.rmtree(target)
    settings = {
        **_TEACH_DEFAULTS,
        **teacher,
        "env": source["env"],
        "env_options": dict(source.get("env_options") or {}),
        "tasks": source.get("tasks"),
        "split": source.get("split"),
        "seed": seed,
    }
    try:
        teach_config = TeachConfig.from_dict(settings, file=config.file)
    except HsaError as exc:
        raise ConfigError(exc.message, file=config.file, where=f"$.teach: {exc.where}") from None

    planned: list[bool] = []

    def on_rollout(done: int, total: int, verified: int) -> None:
        if progress is not None:
            if not planned:  # the job calls first once the tasks are loaded and planned
                planned.append(True)
                progress("tasks", 1, 1)
            progress("teacher", done, total)

    if progress is not None:
        progress("tasks", 0, 1)
    result = teach(teach_config, target, progress=on_rollout)
    mf.write_json(done, {"tasks": result.total, "verified": result.verified, "identity": ident})
    return result.total, result.verified, False
