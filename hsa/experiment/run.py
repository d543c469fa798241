"""``run``: the experiment end to end, through hsa's own build, training and evaluation.

1. **Data.** ``hsa build`` once per arm: the environment's tasks solved by the oracle, every
   trajectory rendered under the arm's recipe (the compact harness's base rules first);
   ``DIR/data/<arm>``.
2. **Initial weights.** Per seed, one tokenizer (trained on both arms' first-call rows) and one
   randomly initialised model; both arms of a seed start from it: ``DIR/init-s<seed>``.
3. **Training.** ``hsa train sft`` (the ``firstcall`` view: each row's first assistant message
   is the target) per arm and seed, the same steps and batch, ``parallel`` runs at a time, each
   in its own process on one thread: ``DIR/runs/<arm>-s<seed>``.
4. **Evaluation.** ``hsa eval``'s ``firstcall`` suite with the ``transformers`` policy, once
   per model and tier (the tier's recipe and seed): ``DIR/eval/<arm>-s<seed>/<tier>``.
5. **Results.** ``DIR/summary.json``, ``DIR/report.md`` and its plot (``hsa.experiment.results``).

At ``--scale gpu`` (``ExperimentConfig.gpu``) both arms start from a local base model instead
of step 2, train on the view the config names (full rows by default) one run at a time, and are
evaluated with the ``vllm`` policy: one engine per model, kept for all its tiers.

Every step skips what a previous run finished (a build's manifest, a training's resolved
config, an evaluation's summary), so a rerun after a failure redoes only what failed; a
training stopped part way resumes from its newest checkpoint (one every tenth of its steps).
What was made from a dataset that is not there any more (one deleted and built again, under a
newer hsa say) is made again, and what was made from that: initial weights whose record names
other datasets (or none), with the trainings of their seed; a training whose data is another
dataset's, with its evaluations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from hsa.datasets.lock import hold, lock_path
from hsa.errors import AnotherDataset, ExperimentError, HsaError
from hsa.experiment.config import ARMS, ExperimentConfig
from hsa.experiment.report import share
from hsa.experiment.results import write_results
from hsa.harness.files import blocked, write_atomic
from hsa.harness.io import dump_yaml

#: checkpoints a training writes over its steps (an interrupted one resumes from the newest)
CHECKPOINTS = 10
#: how long a stopped training has to exit before it is killed
STOP_S = 30.0

#: what a step says while it runs: (step, done, total)
Progress = Callable[[str, int, int], None]


def _quiet(_: str, __: int, ___: int) -> None:
    return None


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """The experiment's own progress bars only: not one per dataset split and model load.
    The libraries' bars are the process's: those the caller had on are on again after."""
    import datasets
    from transformers.utils import logging

    bars = datasets.is_progress_bar_enabled(), logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars[0]:
            datasets.enable_progress_bars()
        if bars[1]:
            logging.enable_progress_bar()


def run(config: ExperimentConfig, out: str | Path, *, progress: Progress = _quiet) -> dict:
    """Run ``config`` into ``out`` and return the summary (also ``out/summary.json``).

    ``out`` is locked for the whole run (``hsa.datasets.lock``): a second run into it is
    refused at once, naming the first, rather than both building and training the same files.
    """
    out = Path(out)
    check_out(out)
    # (it removes the folders it made, left empty: a config refused below leaves none)
    with hold(out, command="hsa experiment run"), _quiet_libraries():
        return _run(config, out, progress)


def _run(config: ExperimentConfig, out: Path, progress: Progress) -> dict:
    check_env(config)
    check_training(config)
    check_tiers(config)
    check_gpu(config)
    marker = out / "experiment.json"
    try:
        found = json.loads(marker.read_text("utf-8")) if marker.exists() else None
    except ValueError:
        raise ExperimentError("not an experiment's record (not JSON)", file=str(marker)) from None
    contents = _contents(out)
    if found is None and contents:
        raise ExperimentError(
            "is not empty and holds no experiment; use a new folder", file=str(out)
        )
    # another experiment's record alone (it failed before writing anything) does not block
    blocking = any(p != marker for p in contents)
    if found is not None and found.get("config_hash") != config.hash() and blocking:
        raise ExperimentError(
            "holds another experiment (its config differs); use a new folder",
            file=str(out),
        )
    # a rerun into a folder of this experiment's work goes on from it: its wall times are its
    # own, not the experiment's (the report says so)
    resumed = found is not None and blocking
    text = json.dumps({"config_hash": config.hash()}, indent=2) + "\n"
    write_atomic(marker, text, error=ExperimentError)
    walls: dict[str, float] = {}
    started = time.monotonic()
    data = build_data(config, out, progress)
    walls["data"] = time.monotonic() - started
    mark = time.monotonic()
    if config.gpu is not None:
        inits = {seed: Path(str(config.gpu.model)) for seed in config.seeds}
    else:
        inits = {seed: initial_model(config, out, data, seed) for seed in config.seeds}
    runs = train_all(config, out, data, inits, progress)
    walls["train"] = time.monotonic() - mark
    mark = time.monotonic()
    evals = evaluate_all(config, out, runs, progress)
    walls["eval"] = time.monotonic() - mark
    walls["total"] = time.monotonic() - started
    return write_results(config, out, data, runs, evals, walls, resumed=resumed)


def _contents(out: Path) -> list[Path]:
    """What ``out`` holds, but for the folder of this run's own lock when it holds nothing
    else."""
    lock = lock_path(out)
    found = []
    for path in out.iterdir():
        if path == lock.parent and [p.name for p in path.iterdir()] == [lock.name]:
            continue
        found.append(path)
    return found


def check_out(out: Path) -> None:
    """Refuse an output folder that a file stands in the way of, as ``hsa build`` does, before
    anything is built."""
    found = blocked(out / "experiment.json")
    if found is not None:
        raise ExperimentError("is a file, where the output folder should be", file=str(found))


def check_training(config: ExperimentConfig) -> None:
    """Refuse a ``train`` section TRL would refuse, before anything is built."""
    from trl import SFTConfig

    from hsa.train.config import split_config

    try:
        split_config(dict(config.train), SFTConfig)
    except HsaError as exc:
        where = "$.train" + (exc.where or "$")[1:]
        raise ExperimentError(exc.message, file=config.file, where=where) from None


def check_env(config: ExperimentConfig) -> None:
    """Refuse an environment that cannot be built (an unknown name, an option it does not
    take) before anything is built, naming the config's key."""
    from hsa.envs.registry import from_config

    try:
        from_config(config.env, config.env_options, file=config.file)
    except HsaError as exc:
        raise ExperimentError(exc.message, file=exc.file, where=exc.where) from None


def check_tiers(config: ExperimentConfig) -> None:
    """Refuse a held-out tier that draws what the augmented arm's recipe draws, before anything
    is built (``hsa eval`` checks it again before evaluating)."""
    from hsa.eval.runner import TrainingRecipe, check_recipe

    # (a tier's and an arm's rules are their recipes' rules, one for one: base is apart)
    training = TrainingRecipe(config.arms["augmented"], config.file, "$.arms.augmented")
    for tier in config.tiers:
        if tier.held_out:
            try:
                check_recipe(tier.recipe, training)
            except HsaError as exc:
                raise ExperimentError(
                    f"tier {tier.name!r}: {exc.message}",
                    file=config.file,
                    where=f"$.tiers.{tier.name}{(exc.where or '$')[1:]}",
                ) from None


def check_gpu(config: ExperimentConfig) -> None:
    """At ``--scale gpu``: refuse a missing base model, a machine without a CUDA GPU, or one
    without vLLM, before anything is built."""
    if config.gpu is None:
        return
    folder = Path(str(config.gpu.model))
    if not (folder / "config.json").is_file():
        raise ExperimentError(
            f"{folder} is not a local model folder (no config.json); --scale gpu trains a base "
            "model from a local path",
            file=config.file,
            where="$.gpu.model",
        )
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise ExperimentError(
            "--scale gpu needs a CUDA GPU, and torch sees none here; the CPU scale is the default",
            file=config.file,
            where="--scale",
        )
    if importlib.util.find_spec("vllm") is None:
        raise ExperimentError(
            "--scale gpu evaluates with vLLM: pip install 'hsa[vllm]'",
            file=config.file,
            where="--scale",
        )


def build_data(config: ExperimentConfig, out: Path, progress: Progress) -> dict[str, Path]:
    """Each arm's dataset, built by ``hsa build`` (skipped when already built)."""
    from hsa.pipelines.build import build, parse_config

    folders = {}
    for index, arm in enumerate(ARMS):
        progress("data", index, len(ARMS))
        recipe = config.arms[arm]
        spec = {
            "name": f"experiment-{arm}",
            "seed": recipe.seed,
            "source": {"env": config.env, "env_options": dict(config.env_options)},
            "teach": {"backend": "oracle"},
            "augment": {
                "variants_per_trajectory": config.variants[arm],
                "keep_canonical": False,
                "recipe": recipe.to_dict(),
            },
        }
        target = out / "data" / arm
        try:
            build(parse_config(spec, file=f"arms.{arm}"), out=target)
        except AnotherDataset as exc:
            if exc.file != str(target):
                raise
            raise ExperimentError(
                f"{exc.reason}; delete {target} and run the "
                "experiment again (it builds that arm's data again, and redoes the initial "
                "weights, trainings and evaluations made from the old), or run it into a new "
                "--out",
                file=str(target),
            ) from None
        folders[arm] = target
    progress("data", len(ARMS), len(ARMS))
    return folders


#: what initial weights were made from (``initial_model``), in their folder
INIT_RECORD = "hsa-init.json"


def data_hashes(data: dict[str, Path]) -> dict[str, str | None]:
    """Each arm's dataset by its manifest's config hash (what a training records as its
    ``manifest_hash``)."""
    hashes = {}
    for arm, folder in data.items():
        manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
        hashes[arm] = manifest.get("config_hash")
    return hashes


def _remove(*folders: Path) -> None:
    for folder in folders:
        if folder.is_dir():
            shutil.rmtree(folder)


def _made_from(out: Path, seed: int) -> None:
    """Remove what was made from the initial weights of ``seed``: its trainings (and their
    config and log) and their evaluations."""
    for arm in ARMS:
        run = out / "runs" / f"{arm}-s{seed}"
        _remove(run, out / "eval" / run.name)
        for suffix in (".yaml", ".log"):
            run.with_name(run.name + suffix).unlink(missing_ok=True)


@lru_cache(maxsize=4)
def _first_call_texts(data: Path) -> list[str]:
    from hsa.datasets.export import to_hf
    from hsa.train.data import first_call
    from hsa.train.tiny import texts_of

    rows = []
    for row in to_hf(data, "train"):
        cut = first_call(row["messages"])
        if cut is not None:
            rows.append({"messages": cut[0] + cut[1], "tools": row["tools"]})
    return texts_of(rows)


def initial_model(config: ExperimentConfig, out: Path, data: dict[str, Path], seed: int) -> Path:
    """The weights both arms of ``seed`` start from, with the tokenizer both arms share."""
    from hsa.train.tiny import save_tiny

    folder = out / f"init-s{seed}"
    # the tokenizer is trained on both arms' rows: weights made from other datasets (or by an
    # hsa that recorded none) are made again, and the trainings that started from them redone
    made_from = {"data": data_hashes(data)}
    record = folder / INIT_RECORD
    try:
        found = json.loads(record.read_text("utf-8"))
    except (OSError, ValueError):
        found = None
    whole = all((folder / name).exists() for name in ("config.json", "tokenizer.json"))
    if found == made_from and whole:
        return folder
    if folder.exists():
        _made_from(out, seed)  # first: a stop part way leaves nothing stale behind
        _remove(folder)
    texts = [t for arm in ARMS for t in _first_call_texts(data[arm])]
    partial = folder.with_name(folder.name + ".partial")
    _remove(partial)
    save_tiny(
        partial,
        texts,
        hidden=config.model.hidden,
        layers=config.model.layers,
        vocab_size=config.model.vocab_size,
        seed=seed,
        heads=config.model.heads,
        kv_heads=config.model.kv_heads,
    )
    write_atomic(partial / INIT_RECORD, json.dumps(made_from) + "\n", error=ExperimentError)
    partial.rename(folder)
    return folder


def train_config(config: ExperimentConfig, data: Path, init: Path, seed: int) -> dict:
    """What ``hsa train sft`` is given for one arm and seed: the config's ``train`` section,
    with a checkpoint every tenth of the steps (the newest kept) unless it says otherwise, so
    that an interrupted training resumes instead of starting over."""
    return {
        "save_strategy": "steps",
        "save_steps": -(-config.steps // CHECKPOINTS),
        "save_total_limit": 1,
        **dict(config.train),
        "seed": seed,
        "hsa": {"data": str(data), "model": str(init), "view": config.view, "eval_split": None},
    }


class Children:
    """The child processes the trainings run in, stopped together when the run is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._stopped = False

    def run(self, command: list[str], **options: Any) -> int | None:
        """``command``'s exit status, or None when the run stopped before or while it ran."""
        with self._lock:
            if self._stopped:
                return None
            child = subprocess.Popen(command, **options)
            self._running.add(child)
        try:
            status = child.wait()
        finally:
            with self._lock:
                self._running.discard(child)
        return None if self._stopped else status

    def stop(self) -> None:
        """Ask every running child to stop (as SIGTERM stops ``hsa``) and wait for it."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        for child in running:
            try:
                child.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def train_all(
    config: ExperimentConfig,
    out: Path,
    data: dict[str, Path],
    inits: dict[int, Path],
    progress: Progress,
) -> dict[tuple[str, int], Path]:
    """Every (arm, seed) model, trained by ``hsa train sft`` in its own process."""
    from hsa.train.card import RESOLVED
    from hsa.train.sft import last_checkpoint

    jobs = [(arm, seed) for seed in config.seeds for arm in ARMS]
    runs = {job: out / "runs" / f"{job[0]}-s{job[1]}" for job in jobs}
    hashes = data_hashes(data)
    for job in jobs:  # trained on a dataset that is not the arm's now: trained again
        if trained_on(runs[job]) not in (None, hashes[job[0]]):
            _remove(runs[job])
    todo = [job for job in jobs if not (runs[job] / RESOLVED).exists()]
    for arm, seed in todo:  # the evaluations of a model trained now are of another model
        _remove(out / "eval" / f"{arm}-s{seed}")
    done = len(jobs) - len(todo)
    progress("train", done, len(jobs))

    def one(job: tuple[str, int]) -> tuple[tuple[str, int], str | None]:
        arm, seed = job
        folder = runs[job]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder.parent / f"{folder.name}.yaml"
        text = dump_yaml(train_config(config, data[arm], inits[seed], seed))
        write_atomic(path, text, error=ExperimentError)
        env = dict(os.environ)
        if config.gpu is None:  # two tiny models train side by side, a core each
            env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            env["TOKENIZERS_PARALLELISM"] = "false"
        command = [sys.executable, "-m", "hsa", "train", "sft", "--config", str(path)]
        command += ["--out", str(folder)]
        resume = last_checkpoint(folder) is not None  # an earlier run stopped part way
        if resume:
            command.append("--resume")
        log = folder.parent / f"{folder.name}.log"
        with log.open("a" if resume else "w", encoding="utf-8") as stream:
            returncode = children.run(command, stdout=stream, stderr=subprocess.STDOUT, env=env)
        if returncode is None:
            return job, "stopped"
        if returncode != 0:
            lines = [x for x in log.read_text("utf-8", "replace").splitlines() if x.strip()]
            last = lines[-1].strip() if lines else "no output"
            return job, f"hsa train sft exited {returncode}: {last} (log: {log})"
        for checkpoint in folder.glob("checkpoint-*"):  # done: the model is in the folder
            shutil.rmtree(checkpoint)
        return job, None

    failures = []
    children = Children()
    pool = ThreadPoolExecutor(max_workers=config.parallel)
    try:
        for job, problem in pool.map(one, todo):
            done += 1
            progress("train", done, len(jobs))
            if problem is not None:
                failures.append(f"{job[0]} seed {job[1]}: {problem}")
    except BaseException:
        # Ctrl-C or SIGTERM (to this process alone): the trainings stop too, each from its
        # newest checkpoint on the rerun, rather than running all their steps first
        children.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failures:
        raise ExperimentError("training failed: " + "; ".join(failures), file=str(out / "runs"))
    return runs


def trained_on(run: Path) -> str | None:
    """The dataset a training in ``run`` was on, by its manifest's config hash: a finished
    one's (``hsa-train.json``), or what a training stopped part way recorded as it started;
    None when it says none (nothing trained there yet)."""
    from hsa.train.card import RESOLVED, RUN_RECORD

    for path, keys in (
        (run / RESOLVED, ("data", "manifest_hash")),
        (run / RUN_RECORD, ("hsa", "dataset")),
    ):
        try:
            found = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        for key in keys:
            found = found.get(key) if isinstance(found, dict) else None
        return str(found) if found is not None else None
    return None


def eval_config(config: ExperimentConfig, model: Path, recipe: Path, seed: int) -> Any:
    """What ``hsa eval`` is given for one model and tier: the ``firstcall`` suite, with the
    ``transformers`` policy (CPU scale) or ``vllm`` (GPU scale)."""
    from hsa.eval.config import EvalConfig

    settings = EvalConfig(
        env=config.env,
        env_options=dict(config.env_options),
        policy="transformers" if config.gpu is None else "vllm",
        model=str(model),
        suites=("firstcall",),
        tasks=config.eval.tasks,
        variants=config.eval.variants,
        recipe=str(recipe),
        seed=seed,
        # a sample of tasks is the same for every tier, so that tiers compare on one sample
        task_seed=None if config.eval.tasks is None else 0,
        max_tokens=config.eval.max_tokens,
        concurrency=config.eval.batch_size,
    )
    if config.gpu is None:
        return settings
    return dataclasses.replace(settings, call_format=config.gpu.call_format)


def model_backend(config: ExperimentConfig, model: Path) -> Any:
    """At ``--scale gpu``, the one vLLM engine a model's tiers share (built on its first
    batch); ``None`` at CPU scale, where each evaluation loads its small model itself."""
    if config.gpu is None:
        return None
    from hsa.teachers.backends.vllm import VLLMBackend, VLLMConfig

    return VLLMBackend(
        VLLMConfig(
            model=str(model),
            batch_size=config.eval.batch_size,
            call_format=config.gpu.call_format,
            engine_args=dict(config.gpu.engine_args),
        )
    )


def evaluate_all(
    config: ExperimentConfig,
    out: Path,
    runs: dict[tuple[str, int], Path],
    progress: Progress,
) -> dict[tuple[str, int, str], Path]:
    """Every (arm, seed, tier) evaluation folder, run by ``hsa eval``'s firstcall suite."""
    import gc

    from hsa.envs.registry import get
    from hsa.eval.runner import SUMMARY, evaluate, recorded_hash

    env = get(config.env, **dict(config.env_options))
    recipes = out / "recipes"
    recipes.mkdir(exist_ok=True)
    paths = {}
    for tier in config.tiers:
        paths[tier.name] = recipes / f"{tier.name}.yaml"
        write_atomic(paths[tier.name], tier.recipe.to_yaml(), error=ExperimentError)
    held_out = {t.name: t.held_out for t in config.tiers}
    seeds = {t.name: t.recipe.seed for t in config.tiers}
    total = len(runs) * len(config.tiers)
    folders: dict[tuple[str, int, str], Path] = {}
    for (arm, seed), model in runs.items():
        backend = None
        for tier in config.tiers:
            name = tier.name
            progress("eval", len(folders), total)
            folder = out / "eval" / f"{arm}-s{seed}" / name
            folders[(arm, seed, name)] = folder
            settings = eval_config(config, model, paths[name], seeds[name])
            recorded, current = recorded_hash(folder), settings.output_hash()
            if (folder / SUMMARY).exists() and (
                recorded == current or recorded == _moved(folder, settings)
            ):
                continue
            if recorded is not None and recorded != current:
                # begun or finished by an hsa that plans, renders or scores otherwise:
                # evaluated again
                _remove(folder)
            backend = backend or model_backend(config, model)
            try:
                evaluate(
                    settings,
                    folder,
                    env=env,
                    backend=backend,
                    training=config.arms["augmented"] if held_out[name] else None,
                )
            except HsaError as exc:
                raise ExperimentError(
                    f"evaluating {arm} seed {seed} on tier {name}: {exc.message}",
                    file=exc.file,
                    where=exc.where,
                ) from None
        del backend  # a vLLM engine frees its GPU memory before the next model's
        gc.collect()
    progress("eval", total, total)
    return folders


def _moved(folder: Path, settings: Any) -> str | None:
    """The ``output_hash`` of ``settings`` with the model where the finished evaluation in
    ``folder`` found it: the experiment's folder moved since (the model's path is one of the
    evaluation's settings; the experiment tells its models apart by their records)."""
    from hsa.eval.runner import SUMMARY

    try:
        found = json.loads((folder / SUMMARY).read_text("utf-8"))
        model = found["config"]["model"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(model, str):
        return None
    return str(dataclasses.replace(settings, model=model).output_hash())


def describe(summary: dict[str, Any]) -> str:
    """One line: each tier's name accuracy, fixed vs augmented."""
    parts = []
    for tier, diff in summary["difference"].items():
        fixed = summary["arms"]["fixed"]["tiers"][tier]["name"]["value"]
        augmented = summary["arms"]["augmented"]["tiers"][tier]["name"]["value"]
        change = diff["name"]["value"]
        parts.append(
            f"{tier} {share(fixed)} -> {share(augmented)} "
            f"({'n/a' if change is None else f'{change:+.2f}'})"
        )
    return "name accuracy, fixed -> augmented: " + "; ".join(parts)
