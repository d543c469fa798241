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
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from hsa._version import made_by
from hsa.augment.recipe import DEFAULT_RECIPE_FILE, Recipe, default_recipe, load_recipe
from hsa.config import (
    bounded,
    content_hash,
    first_schema_problem,
    from_mapping,
    read_yaml,
    refuse,
    setting,
    settings_of,
    typed,
)
from hsa.datasets import manifest as mf
from hsa.datasets.lock import hold
from hsa.datasets.schema import SCHEMA_VERSION
from hsa.datasets.source import (
    Source,
    changed_while_read,
    harness_hash,
    input_hash,
    open_source,
)
from hsa.envs.registry import corpus_hash, task_version
from hsa.errors import ConfigError, HsaError, refuse_kind, refuse_path
from hsa.harness.jsonvalues import json_path
from hsa.pipelines.augment import (
    AugmentConfig,
    AugmentReport,
    augment_locked,
    check_apart,
    check_not_empty,
    check_tokenizer,
    finished_report,
)
from hsa.pipelines.leaks import check_splits
from hsa.pipelines.teach import TeachReport, teach
from hsa.teachers.config import LOCAL_BACKENDS, OUTPUT_FIELDS, SET_OUTPUT_FIELDS, TeachConfig
from hsa.teachers.make import decode_version

#: (stage, done, total): stages are "read" (bytes of a JSONL source), "tasks", "teacher",
#: "augment"
Progress = Callable[[str, int, int], None]
SOURCE_DIR = Path(mf.STATE) / "source"


@lru_cache(maxsize=1)
def build_schema() -> dict[str, Any]:
    """The published JSON Schema of a build config."""
    text = resources.files("hsa.pipelines").joinpath("schema/build.schema.json").read_text("utf-8")
    return json.loads(text)


def _paths(config: object, *names: str) -> None:
    """A path setting of a config made in code may be given as a string, as in a file."""
    for name in names:
        if isinstance(getattr(config, name), str):
            object.__setattr__(config, name, Path(getattr(config, name)))


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """A build's ``source`` section: where its canonical trajectories come from.

    Exactly one of ``env`` and ``trajectories``; paths are resolved against the config file's
    folder when the config is parsed.
    """

    env: str | None = setting(
        None, help="A bundled environment whose tasks the teacher solves (or `trajectories`)."
    )
    env_options: Mapping[str, Any] = setting(
        default_factory=dict, help="Options of the environment (e.g. its seed)."
    )
    tasks: int | None = setting(None, help="Use the first N tasks (all when null).")
    split: str | None = setting(None, help="Only tasks of this split (every split when null).")
    trajectories: Path | None = setting(
        None,
        help="Canonical trajectories already recorded (or `env`): Parquet shards or an OpenAI "
        "chat JSONL file, relative to the config file.",
    )
    harness: Path | None = setting(
        None,
        help="The harness the trajectories were recorded under (a harness directory or JSON "
        "file, relative to the config file).",
    )

    def __post_init__(self) -> None:
        _paths(self, "trajectories", "harness")
        refuse([(f"$.source.{name}", why) for name, why in typed(self)], ConfigError)
        problems = []
        if (self.env is None) == (self.trajectories is None):
            problems.append(("$.source", "set exactly one of 'env' and 'trajectories'"))
        if self.env is None:
            for name in ("env_options", "tasks", "split"):
                if getattr(self, name) not in (None, {}):
                    problems.append((f"$.source.{name}", "only an 'env' source has tasks"))
        elif self.harness is not None:
            problems.append(("$.source.harness", "only recorded 'trajectories' take a harness"))
        problems += [(f"$.source.{name}", why) for name, why in bounded(self, "tasks", low=1)]
        refuse(problems, ConfigError)

    def teach_settings(self) -> dict[str, Any]:
        """The teacher settings this section decides (an ``env`` source's)."""
        return {
            "env": self.env,
            "env_options": dict(self.env_options),
            "tasks": self.tasks,
            "split": self.split,
        }

    def identity(self, file: str | None = None) -> dict[str, Any]:
        """The settings that are set, input files by their content (one that is not there is
        an error at its key of the config ``file``), and the environment's ``task_version``
        past 1 (other tasks from the same settings are another build, and another teacher
        run: the teacher's output is reused by this identity)."""
        out: dict[str, Any] = {}
        for found in settings_of(SourceConfig):
            value = getattr(self, found.name)
            if value in (None, {}):
                continue
            where = f"$.source.{found.name}"
            if isinstance(value, Path):  # by what is read of it (an import.json, its notes)
                hashing = input_hash if found.name == "trajectories" else harness_hash
                value = _fingerprint(value, file, where, hashing=hashing)
            elif found.name == "env_options" and isinstance(value.get("path"), str):
                # a corpus by the content of what the environment reads of it, as a teach
                # job's: the same path holding other data is another build
                corpus = partial(corpus_hash, str(self.env))
                path = _fingerprint(Path(value["path"]), file, f"{where}.path", hashing=corpus)
                value = {**value, "path": path}
            out[found.name] = value
        if self.env is not None and (tasks := task_version(self.env)) != 1:
            out["task_version"] = tasks
        return out


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """A validated build config (``parse_config``/``load_config`` read one from YAML).

    Settings are taken with one precedence, as everywhere in hsa: a command-line flag, then
    this config, then the recipe. A setting the config leaves out is unset (``augment.seed``
    is None), so the recipe's applies: the same recipe gives the same dataset under ``hsa
    build`` and ``hsa augment --recipe``. The YAML's top-level ``seed`` and ``splits`` are the
    augment stage's (``augment.seed``, ``augment.splits``).
    """

    source: SourceConfig = setting(
        help="Where canonical trajectories come from: exactly one of `env` (a bundled "
        "environment's tasks, solved by the teacher) or `trajectories` (recorded ones)."
    )
    name: str = setting("dataset", help="The dataset's name, shown in its card.")
    out: Path | None = setting(
        None,
        help="Output directory (relative to the config file); `hsa build --out` overrides it.",
    )
    teach: Mapping[str, Any] = setting(
        default_factory=dict,
        help="The teacher of an `env` source, as `hsa teach` settings: `backend: oracle` (the "
        "default) solves tasks in process; other backends run a model with these settings.",
    )
    augment: AugmentConfig = setting(
        default_factory=AugmentConfig,
        help="How trajectories are augmented (with the top-level `seed` and `splits`).",
    )
    file: str | None = setting(None, help="The config file, named in errors.")

    def __post_init__(self) -> None:
        _paths(self, "out")
        refuse([(f"$.{name}", why) for name, why in typed(self)], ConfigError)
        problems = []
        if self.teach and self.source.trajectories is not None:
            problems.append(
                (
                    "$.teach",
                    "only an 'env' source has a teacher: recorded 'trajectories' were made "
                    "already (their rows name their teacher); leave the section out",
                )
            )
        for key in self.teach:
            where = f"$.teach.{key}"
            if key in _FROM_SOURCE:
                problems.append(
                    (where, f"{key!r} is set in the 'source' section (source.{key}), not here")
                )
            elif key == "seed":
                problems.append(
                    (where, "the teacher's seed is the build's: set the top-level 'seed'")
                )
        refuse(problems, ConfigError)
        # every key checked whatever the backend, so a typo is never ignored
        from_mapping(TeachConfig, self.teach, error=ConfigError, root="$.teach")

    @property
    def seed(self) -> int | None:
        """The config's ``seed``; None when it sets none (the recipe's seed is used)."""
        return self.augment.seed

    def output(self, override: str | Path | None = None) -> Path:
        """Where the dataset goes: ``override`` (``--out``), else the config's ``out``."""
        if override is not None:
            return Path(override)
        if self.out is None:
            raise ConfigError("no output directory: set 'out' or pass --out", file=self.file)
        return self.out

    def teach_settings(self, teach: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The settings of the teach job of an ``env`` source (``hsa teach --config`` takes
        them as its own, with its ``teach`` section): each task once under its canonical
        harness unless ``teach`` says otherwise (the augment stage draws the variants), with
        the source's environment and tasks and the build's seed."""
        return {
            **_TEACH_DEFAULTS,
            **(self.teach if teach is None else teach),
            **self.source.teach_settings(),
            "seed": self.augment.resolved()[1],
        }

    def teach_config(self) -> TeachConfig:
        """The teach job of an ``env`` source (``teach_settings``)."""
        settings = self.teach_settings()
        try:
            config: TeachConfig = from_mapping(TeachConfig, settings, error=ConfigError)
        except HsaError as exc:
            where = f"$.teach.{exc.where}" if exc.where else "$.teach"
            raise ConfigError(exc.message, file=self.file, where=where) from None
        return config

    def teach_identity(self) -> dict[str, Any]:
        """The ``teach`` settings that decide what the teacher writes: not where it is served
        nor how it is asked (``base_url``, ``timeout_s``, ``max_retries``, ``concurrency``...:
        a rerun against a moved server, or with more patience, goes on with the same run).

        The backend, then each setting the section writes as the teacher reads it, unless at
        its default (``temperature: 0.0`` is the dataset that leaving it out is; a section
        that writes no default keeps the identity it has always had), and the ``vllm_args``
        that decide which engine answers (``TeachConfig.engine_args``), when there are any, and a
        local backend's ``decode_version`` (how it turns tokens into text)."""
        read = from_mapping(TeachConfig, {**_TEACH_DEFAULTS, **self.teach}, error=ConfigError)
        resolved = read.output_dict()
        defaults = _teach_defaults()
        out = {"backend": read.backend}
        for key in self.teach:
            if key in OUTPUT_FIELDS or key in SET_OUTPUT_FIELDS:
                value = resolved.get(key, defaults[key])  # (unset ones are left out of it)
                if key != "backend" and value != defaults[key]:
                    out[key] = value
        if "vllm_args" in resolved:
            out["vllm_args"] = resolved["vllm_args"]
        if read.backend in LOCAL_BACKENDS:  # how it decodes (other builds keep their identity)
            out["decode_version"] = decode_version(read.backend)
        if isinstance(out.get("recipe"), str):  # by its content: an edited recipe is another run
            out["recipe"] = _fingerprint(Path(out["recipe"]), self.file, "$.teach.recipe")
        return out

    def identity(self) -> dict[str, Any]:
        """What decides the dataset's content: the config with recipes and inputs resolved."""
        return {
            "kind": mf.KIND,
            "schema_version": SCHEMA_VERSION,
            **made_by(),
            "name": self.name,
            "source": self.source.identity(self.file),
            # (the oracle's default for recorded trajectories too, which no teacher makes: as
            # datasets made before recorded it, so that they keep their identity; their card
            # leaves it out)
            "teach": self.teach_identity(),
            "augment": self.augment.to_dict(),
        }


#: teacher settings a build takes from its ``source`` section, not from ``teach``
_FROM_SOURCE = ("env", "env_options", "tasks", "split")
#: what a build asks the teacher for unless its ``teach`` section says otherwise
_TEACH_DEFAULTS = {"variants_per_task": 0, "include_canonical": True}


def _teach_defaults() -> dict[str, Any]:
    """What a build's teacher takes for each setting its ``teach`` section leaves out."""
    out = {}
    for found in dataclasses.fields(TeachConfig):
        if found.default is not dataclasses.MISSING:
            out[found.name] = found.default
        elif found.default_factory is not dataclasses.MISSING:
            out[found.name] = found.default_factory()
    return {**out, **_TEACH_DEFAULTS}


def _absolute(value: str, base: Path) -> str:
    """``value``, a path relative to the folder ``base`` (unless absolute), made absolute: the
    same file is spelled the same whichever way the config was named on the command line."""
    found = Path(value).expanduser()
    return os.path.normpath(os.path.abspath(found if found.is_absolute() else base / found))


#: backends whose ``model`` is weights they load, which a config may give as a local folder
_LOCAL_MODELS = ("transformers", "vllm")


def teach_paths(teach: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A ``teach`` section with its paths relative to the config's folder ``base``: ``recipe``,
    ``cache``, and the ``model`` of a backend that loads weights when such a folder is there (a
    hub id, or the name an endpoint serves a model under, is left as written)."""
    out = dict(teach)
    for key in ("recipe", "cache"):
        if isinstance(out.get(key), str):
            out[key] = _absolute(out[key], base)
    model = out.get("model")
    if out.get("backend") in _LOCAL_MODELS and isinstance(model, str) and model:
        local = _absolute(model, base)
        if Path(local).exists():
            out["model"] = local
    return out


def _fingerprint(
    path: Path,
    file: str | None = None,
    where: str | None = None,
    *,
    hashing: Callable[[Path], str] = content_hash,
) -> str:
    """The content of the file or folder ``path``, as a hash (``hashing``: ``content_hash``
    unless given); one that is not there, or a file in it that cannot be read, is an error at
    ``where`` of the config ``file`` (given), else naming ``path``."""
    if not path.exists():
        if where is not None:
            raise ConfigError(f"{path}: no such file or directory", file=file, where=where)
        raise ConfigError("no such file or directory", file=str(path))
    try:
        return hashing(path)
    except OSError as exc:
        reading = Path(exc.filename) if exc.filename else path
        why = f"cannot read {reading}: {exc.strerror or exc}"
        if isinstance(exc, FileNotFoundError) and reading != path:
            why += f" (it went while {path} was read: is another job writing there?)"
        why += "; the build identifies its input by the content of the files it reads"
        if where is None:
            raise ConfigError(why, file=str(path)) from None
        raise ConfigError(why, file=file, where=where) from None


def parse_config(data: Any, *, base: Path = Path(), file: str | None = None) -> BuildConfig:
    """A build config from parsed YAML: checked against the published schema (errors name
    the JSON path), paths resolved against ``base``, the recipe loaded."""
    validator = Draft202012Validator(build_schema())
    problem = first_schema_problem(validator.iter_errors(data))
    if problem is not None:
        at, message = problem
        raise ConfigError(message, file=file, where=json_path(at))

    def path(value: str | None) -> Path | None:
        return None if value is None else Path(_absolute(value, base))

    try:
        source = dict(data["source"])
        for key in ("trajectories", "harness"):
            source[key] = path(source.get(key))
        # every path a config gives is relative to the config's folder, wherever it is read
        options = source.get("env_options")
        if isinstance(options, dict) and isinstance(options.get("path"), str):
            source["env_options"] = {**options, "path": _absolute(options["path"], base)}
        teach = teach_paths(data.get("teach") or {}, base)
        augment = dict(data.get("augment") or {})
        augment["recipe"] = _recipe(augment.get("recipe"), path, file)
        if augment.get("tokenizer"):
            augment["tokenizer"] = str(path(augment["tokenizer"]))
        augment["seed"] = data.get("seed")
        if data.get("splits") is not None:
            augment["splits"] = data["splits"]
        return BuildConfig(
            source=from_mapping(SourceConfig, source, error=ConfigError, root="$.source"),
            name=data.get("name") or "dataset",
            out=path(data.get("out")),
            teach=teach,
            augment=from_mapping(AugmentConfig, augment, error=ConfigError, root="$.augment"),
            file=file,
        )
    except HsaError as exc:
        # the YAML's top-level seed and splits are the augment stage's
        where = {"$.augment.seed": "$.seed", "$.augment.splits": "$.splits"}.get(
            exc.where or "", exc.where
        )
        raise ConfigError(exc.message, file=exc.file or file, where=where) from None


def _recipe(spec: Any, path: Callable[[str], Path | None], file: str | None) -> Recipe:
    if spec is None:
        return default_recipe()
    if isinstance(spec, str):
        found = path(spec)
        assert found is not None
        if not found.is_file():
            raise ConfigError(f"no recipe file {str(found)!r}", file=file, where="$.augment.recipe")
        return load_recipe(found)
    return Recipe.from_dict(spec, file=file, root="$.augment.recipe")


def recipe_source(data: Mapping[str, Any], config: Path) -> tuple[str, str]:
    """Where the recipe of the build config ``data`` (read from the file ``config``) is
    written, for errors that name its rules: ``(file, JSON path of the recipe in it)``."""
    spec = (data.get("augment") or {}).get("recipe")
    if spec is None:
        return DEFAULT_RECIPE_FILE, "$"
    if isinstance(spec, str):
        return _absolute(spec, config.parent), "$"
    return str(config), "$.augment.recipe"


def load_config(path: str | Path) -> BuildConfig:
    """A build config from a YAML file (``parse_config`` reads one from a mapping)."""
    refuse_path(path, ConfigError)
    path = Path(path)
    data = read_yaml(path, error=ConfigError)
    return parse_config(data, base=path.parent, file=str(path))


@dataclass(slots=True)
class BuildReport:
    out: Path
    tasks: int = 0
    trajectories: int = 0
    verified: int = 0
    teacher_skipped: bool = False
    augment: AugmentReport | None = None
    #: tasks the teacher left out: they ask another task again (``Environment.restates``)
    restated: int = 0
    #: what of its source the environment left out, and why (``Environment.left_out``)
    left_out: tuple[str, ...] = ()
    variants_per_task: int = 0  # the teacher's, asked for
    #: tasks the teacher ran under fewer variants than asked (``TeachReport.short``)
    short: int = 0


def build(
    config: BuildConfig, *, out: str | Path | None = None, progress: Progress | None = None
) -> BuildReport:
    """Run the build ``config`` into ``out`` (default: the config's ``out``).

    ``out`` is locked while the build runs (``hsa.datasets.lock``). Recorded trajectories
    with nothing to augment or whose splits would leak (``hsa.pipelines.leaks``), and a
    tokenizer the card cannot count with (``check_tokenizer``), are refused before anything
    is written. A teacher's output is
    kept when the augment stage fails before it writes a row (a rule that raises, every
    trajectory unverified), for a rerun with a corrected ``augment`` section.
    """
    reads = "hsa.build(hsa.load_config(path)) builds a config file"
    refuse_kind(config, BuildConfig, "config", reads, ConfigError)
    out = config.output(out)
    augment_config = config.augment
    check_tokenizer(augment_config)  # (the card, which counts with it, is written last)
    source = config.source
    harnesses = []
    recorded = None
    if source.env is not None:
        from hsa.envs.registry import from_config, names, required

        corpus = source.env_options.get("path")
        takes_corpus = source.env in names() and "path" in required(source.env)
        if takes_corpus and isinstance(corpus, str) and not Path(corpus).exists():
            # said at the config's key, as hashing it would (the environment names the path alone)
            where = "$.source.env_options.path"
            raise ConfigError(f"{corpus}: no such file or directory", file=config.file, where=where)
        # the teacher records the environment's harnesses (its options may change them)
        env = from_config(source.env, source.env_options, file=config.file, at="$.source")
        harnesses.extend(env.harnesses())
    # once the environment has checked its options (one it does not take is refused before a
    # folder it names is read whole to hash it)
    identity = config.identity()
    if source.trajectories is not None:
        harness = None
        if source.harness is not None:
            from hsa.harness.io import load

            harness = load(source.harness)
            harnesses.append(harness)
        on_read = None if progress is None else partial(progress, "read")
        recorded = open_source(source.trajectories, harness=harness, progress=on_read)
        check_not_empty(recorded, augment_config)
        check_splits(recorded, augment_config.splits, augment_config.resolved()[1])
        check_apart(recorded, out)
        # the identity was taken before they were read: rows of other content than it was
        # taken of would go into a dataset (and a rerun's "already complete") by its hash
        _refuse_changed(source, identity["source"], config.file)
    with hold(out, command="hsa build"):  # (it removes the folders it made, left empty)
        # a refusal of the folder (another config's data) leaves it as it is: what follows
        # clears only what this run left behind
        finished = mf.claim(out, mf.config_hash(identity))
        # on an error the teacher's output stays (a rerun reuses it when the source and
        # teacher are unchanged), and a corrected config may run (``mf.fail``)
        with mf.failing(out):
            return _build(
                config, out, identity, augment_config, recorded, harnesses, progress, finished
            )


def _refuse_changed(source: SourceConfig, taken: Mapping[str, Any], file: str | None) -> None:
    """Refuse recorded trajectories (or their harness) whose content is no longer the one the
    build's identity ``taken`` (``SourceConfig.identity``) was taken of."""
    again = source.identity(file)
    for name in ("trajectories", "harness"):
        path = getattr(source, name)
        if path is not None and again.get(name) != taken.get(name):
            raise changed_while_read(path)


def _build(
    config: BuildConfig,
    out: Path,
    identity: Mapping[str, Any],
    augment_config: AugmentConfig,
    recorded: Source | None,
    harnesses: list,
    progress: Progress | None,
    finished: bool,
) -> BuildReport:
    """The build in ``out``, claimed for it (``finished``: the dataset is there already)."""
    report = BuildReport(out=out)
    if finished:
        # the finished dataset stands on its own: the teacher output it was made from is not
        # read again (it may be gone, a copy of the folder without its dot-folders, or damaged,
        # which matters only to a batch redone)
        report.teacher_skipped = True
        report.augment = finished_report(out)
        report.trajectories = report.augment.trajectories
        return report
    if recorded is None:
        taught, report.teacher_skipped = _teach(config, out / SOURCE_DIR, progress)
        report.tasks, report.verified = taught.total, taught.verified
        report.restated, report.left_out = taught.restated, taught.left_out
        report.variants_per_task, report.short = taught.variants_per_task, taught.short
        src = open_source(out / SOURCE_DIR)
        check_not_empty(src, augment_config)
        check_splits(src, augment_config.splits, augment_config.resolved()[1])
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


def _intact(target: Path) -> bool:
    """Whether the teacher output at ``target`` holds every shard its manifest lists, as
    written (the augment stage reads it again whenever a batch of the dataset is redone)."""
    manifest = target / mf.MANIFEST
    if not manifest.is_file():
        return False
    splits = mf.read_json(manifest).get("splits") or {}
    shards = [entry for split in splits.values() for entry in split.get("shards", [])]
    return not mf.damaged(target, {"shards": shards})


def _teach(
    config: BuildConfig, target: Path, progress: Progress | None
) -> tuple[TeachReport, bool]:
    """Trajectories of the environment's tasks into ``target`` by the teach job
    (``hsa.pipelines.teach``), verified as ``hsa teach`` verifies them; its report (tasks,
    verified, restated, left out, short) and whether it was done before (``done.json``)."""
    done = target / "done.json"
    teach_config = config.teach_config()
    # what decides the teacher's output: a rerun reuses it only when this is unchanged
    ident = mf.config_hash(
        {
            "source": config.source.identity(config.file),
            "teach": config.teach_identity(),
            "seed": teach_config.seed,
        }
    )
    if done.is_file():
        found = mf.read_json(done)
        if found.get("identity") == ident and _intact(target):
            reused = TeachReport(
                out=target,
                total=found.get("tasks", 0),
                verified=found.get("verified", 0),
                restated=found.get("restated", 0),
                left_out=tuple(found.get("left_out", ())),
                variants_per_task=found.get("variants_per_task", 0),
                short=found.get("short", 0),
            )
            return reused, True
        if found.get("identity") != ident:
            shutil.rmtree(target)  # done.json with it
        else:  # a shard went missing or changed: the teach job below redoes exactly that one
            done.unlink()

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
    record = {
        "tasks": result.total,
        "verified": result.verified,
        "restated": result.restated,
        "left_out": list(result.left_out),
        "identity": ident,
    }
    if result.short:  # (a teacher that ran every task under as many as asked says nothing)
        record.update(variants_per_task=result.variants_per_task, short=result.short)
    mf.write_json(done, record)
    return result, False
