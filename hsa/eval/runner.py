"""``evaluate``: run a model through the suites' episodes and write what it measured.

The episodes are laid out in a fixed order (suite, task, variant; ``hsa.eval.suites``) and run
concurrently through the teachers' rollout loop and backends, exactly as a teacher runs, so a
model under evaluation is rendered, parsed and scored by the same code that made its training
data. Requests go through the request cache (``OUT/cache.sqlite``, as ``hsa teach``): a rerun
of a finished or interrupted run asks the model nothing it already answered.

A run writes, each file atomically, ``episodes.parquet`` (one row per episode, in episode
order: ``hsa.eval.metrics``), ``summary.json`` (``hsa.eval.summary``, with the run's settings,
the held-out recipe's content and, under ``left_out``, the environment's notes on the tasks of
its corpus it left out, and why) and the report (``hsa.eval.report``). An episode the backend
never answered (server down, timeouts after every retry) says nothing about the model: then
nothing is written, the run raises ``EvalIncomplete`` naming why, and the rerun retries those
episodes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from hsa.augment.recipe import Recipe, overlapping
from hsa.datasets import figures
from hsa.datasets import manifest as mf
from hsa.datasets.lock import hold
from hsa.datasets.shards import write_shard
from hsa.envs.base import Environment
from hsa.errors import EvalError, TeacherError
from hsa.eval.bfcl_decode import BfclDecoded
from hsa.eval.config import EvalConfig
from hsa.eval.firstcall import first_reply
from hsa.eval.ifeval import Prompt, Scorer, ask, ifeval_summary, load_prompts, scorer
from hsa.eval.metrics import episode_row, episodes_table, succeeded
from hsa.eval.report import PLOTS, REPORT
from hsa.eval.suites import (
    FORMAT_KIND,
    HELDOUT_FILE,
    Episode,
    episodes,
    heldout_recipe,
    split_tasks,
)
from hsa.eval.summary import summarize
from hsa.teachers.backends.base import Backend, run_async
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.make import make_backend, rollout_config
from hsa.teachers.rollout import OPENING_TOO_LONG, RolloutConfig, planned_kept, rollout

EPISODES = "episodes.parquet"
SUMMARY = "summary.json"
CACHE_FILE = "cache.sqlite"
#: what a run writes at the top of its directory (``write_run``; the cache while it runs)
OWNED = (EPISODES, SUMMARY, REPORT, CACHE_FILE, *PLOTS)
#: the run's settings (``output_hash``), written before anything else: the summary, which
#: records them too, is written last
STARTED = f"{mf.STATE}/evaluation.json"
#: policies answered in process, as fast as a cache lookup: no cache unless one is asked for
IN_PROCESS = ("oracle", "fixed-oracle")

ProgressFn = Callable[[int, int, int], None]


@dataclass(slots=True)
class EvalReport:
    """What a run did: episodes, successes, requests sent and answered from the cache,
    episodes the backend left unanswered (and why), and the summary it wrote."""

    out: Path
    episodes: int = 0
    done: int = 0  # episodes finished so far, for progress
    succeeded: int = 0
    requests: int = 0
    cache_hits: int = 0
    retry: int = 0
    retry_reasons: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    plan_s: float = 0.0  # loading the environment and laying the episodes out
    run_s: float = 0.0  # running the episodes
    write_s: float = 0.0  # writing the episodes, report and summary
    #: the answered episodes' own wall times, summed: each from its first request to its
    #: score (model calls, rendering, parsing, environment steps, hooks, scoring)
    episodes_s: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    #: what of its corpus the environment left out of the tasks evaluated, and why
    #: (``Environment.left_out``: tau2's and BFCL's tasks hsa cannot score)
    left_out: tuple[str, ...] = ()


class EvalIncomplete(TeacherError):
    """Episodes the backend never answered: nothing was written; rerun to retry them."""

    def __init__(self, report: EvalReport):
        reasons = report.retry_reasons.most_common()
        why = reasons[0][0] if reasons else "the backend failed"
        if why.startswith(OPENING_TOO_LONG):  # a rerun would be refused the same way
            then = (
                "A rerun gets the same refusal: serve the model with a longer context window "
                "(vLLM's --max-model-len), lower max_tokens, or leave those tasks out"
            )
        else:
            then = "Once it answers, rerun the same command: answered requests come from the cache"
        super().__init__(
            f"{report.retry} of {report.episodes} episodes got no answer from the model "
            f"({why}); no result was written (only the request cache). {then}",
            file=str(report.out),
        )
        self.report = report


@dataclass(frozen=True, slots=True)
class TrainingRecipe:
    """A training recipe the held-out recipe must not overlap, and where it was read from,
    so that an overlap names the training rule in its file."""

    recipe: Recipe
    file: str | None = None
    #: the recipe's JSON path in ``file``: ``$.augment.recipe`` in a build config
    root: str = "$"


def check_recipe(
    recipe: Recipe, training: Recipe | TrainingRecipe | None, *, file: str | None = None
) -> None:
    """Refuse a held-out recipe (read from ``file``) that draws what ``training`` draws,
    naming the first held-out rule that does and the training rule it overlaps."""
    if training is None:
        return
    if isinstance(training, Recipe):
        training = TrainingRecipe(training)
    found = overlapping(recipe, training.recipe)
    if not found:
        return
    first = found[0]
    at = f"{training.root}.rules[{first.training}]"
    at = f"at {training.file}: {at}" if training.file is not None else at.removeprefix("$.")
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise EvalError(
        f"the held-out recipe overlaps the training recipe: {first.rule} {first.params} "
        f"overlaps training {at} {first.other}{more}; an evaluation of held-out variants "
        "must draw rules or parameters training did not",
        file=file,
        where=f"$.rules[{first.held}]",
    )


def check_domains(config: EvalConfig, env: Environment) -> None:
    """Refuse a tau2 corpus of several domains (its ``domains/`` folder, say): a tau2
    environment is one domain, whose tasks run under its harness, and the suites would
    otherwise mix the domains (canonical) or fail on the environment's several harnesses
    (variants)."""
    if env.name != "tau2":
        return
    harnesses = env.harnesses()
    if len(harnesses) < 2:
        return
    domains = [str(h.metadata.get("domain") or h.id) for h in harnesses]
    path = config.env_options.get("path")
    folders = [str(Path(path) / d) for d in domains] if path is not None else domains
    raise EvalError(
        f"holds {len(domains)} tau2 domains ({', '.join(domains)}), and an evaluation runs "
        "one domain's tasks under its harness: pass one domain's folder as the path "
        f"(--env-path on the command line): {' or '.join(folders)}",
        file=None if path is None else str(path),
        where="env_options.path",
    )


def plan(
    config: EvalConfig, env: Environment, training: Recipe | TrainingRecipe | None = None
) -> list[Episode]:
    """The run's episodes, in order."""
    check_domains(config, env)
    return _laid_out(config, env, held_out(config, training))


def held_out(config: EvalConfig, training: Recipe | TrainingRecipe | None = None) -> Recipe | None:
    """The run's held-out recipe, checked against ``training``; None when the run names none
    and draws no variants."""
    draws = "variants" in config.suites or "firstcall" in config.suites
    if config.recipe is None and not draws:
        return None
    recipe = heldout_recipe(config.recipe)
    file = HELDOUT_FILE if config.recipe is None else config.recipe
    check_recipe(recipe, training, file=file)
    if "variants" in config.suites and not recipe.rules:
        raise EvalError(
            "the held-out recipe draws no rules, so the variants suite would have no "
            "episodes; give a recipe with rules or leave variants out of --suite",
            file=file,
            where="$.rules",
        )
    return recipe


def _laid_out(config: EvalConfig, env: Environment, recipe: Recipe | None) -> list[Episode]:
    """The run's episodes, in order, their variants drawn from ``recipe``."""
    task_seed = config.seed if config.task_seed is None else config.task_seed
    tasks, configured = split_tasks(env.tasks(config.split), config.tasks, task_seed)
    if not tasks and not configured:
        raise EvalError(env.no_tasks(config.split), where="split")
    return episodes(
        env,
        tasks,
        config.suites,
        recipe=recipe,
        k=config.variants,
        seed=config.seed,
        configured=configured,
    )


def evaluate(
    config: EvalConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    backend: Backend | None = None,
    training: Recipe | TrainingRecipe | None = None,
    progress: ProgressFn | None = None,
) -> EvalReport:
    """Run ``config`` into ``out`` (locked while it runs) and return what it did.

    ``progress(done, total, succeeded)`` is called as episodes finish. ``training``, when
    given, is the training recipe the held-out recipe must not overlap. Raises
    ``EvalIncomplete`` when the backend left episodes unanswered and ``HsaError`` for a bad
    setup (unknown environment or policy, a missing model, a directory of another run).
    """
    out = Path(out)
    with hold(out, command="hsa eval run"):
        return run_async(_evaluate(config, out, env, backend, training, progress))


def _check_dir(out: Path, config: EvalConfig) -> None:
    """Refuse a directory of an evaluation with other settings, or of something else (a
    dataset, a teacher job)."""
    others = {mf.MANIFEST: "a dataset", "teach.json": "a teacher job"}
    found = mf.job_folder_problem(
        out,
        SUMMARY,
        config.output_hash(),
        kind="an evaluation",
        others=others,
        owned=OWNED,
        started=STARTED,
        # an interrupted run's answers (an older hsa wrote no STARTED record): reused as
        # they are, never overwritten
        reusable=(CACHE_FILE,),
    )
    if found is not None:
        raise EvalError(found[0], file=str(found[1]))


async def _evaluate(
    config: EvalConfig,
    out: Path,
    env: Environment | None,
    backend: Backend | None,
    training: Recipe | TrainingRecipe | None,
    progress: ProgressFn | None,
) -> EvalReport:
    started = time.monotonic()
    _check_dir(out, config)
    mf.remove_temporaries(out)
    if env is None:
        from hsa.envs.registry import get

        env = get(config.env, **dict(config.env_options))
    check_domains(config, env)
    recipe = held_out(config, training)
    chosen = _laid_out(config, env, recipe)
    prompts: list[Prompt] = []
    score: Scorer | None = None
    if "ifeval" in config.suites:
        if backend is None and config.policy in IN_PROCESS:
            raise EvalError(
                f"the {config.policy} policy answers an environment's tasks only; the ifeval "
                "suite needs a model",
                where="suites",
            )
        # refused before any request when lm-eval or the prompts are missing: both said
        missing: list[EvalError] = []
        try:
            score = scorer()
        except EvalError as exc:
            missing.append(exc)
        try:
            prompts = load_prompts(config.ifeval_data, config.tasks)
        except EvalError as exc:
            missing.append(exc)
        if len(missing) == 1:
            raise missing[0]
        if missing:
            said = [e.message if e.where == "suites" else str(e) for e in missing]
            raise EvalError("; and ".join(said), where="suites")
    report = EvalReport(
        out=out,
        episodes=len(chosen) + len(prompts),
        plan_s=time.monotonic() - started,
        # the environment's notes where its tasks are evaluated (not by ifeval alone)
        left_out=env.left_out() if chosen else (),
    )
    variants = {e.spec.variant.variant_id: e.spec.variant for e in chosen}
    inner = backend if backend is not None else make_backend(config.teach_config(), env, variants)
    cache = None
    settings = rollout_config(config.teach_config())
    firsts = [e for e in chosen if e.suite == "firstcall"]
    chosen = [e for e in chosen if e.suite != "firstcall"]
    # each episode's row, made as it finishes: the rollout (its messages) is dropped at once,
    # so a long run's heap, and each garbage collection's pause, does not grow with it
    results: list[dict[str, Any] | None] = [None] * len(chosen)
    instructed: list[dict[str, Any]] = []
    answered: list[dict[str, Any]] = []  # firstcall rows, in episode order
    warming: threading.Thread | None = None
    try:
        # Nothing is written before the backend is up and the cache open: a missing model or
        # server library, or a --cache that is a folder or not a cache, is a setup error that
        # leaves the directory as it was (its rerun with corrected settings is no other run's).
        await inner.start()
        if backend is not None or config.policy not in IN_PROCESS or config.cache:
            cache = RequestCache(Path(config.cache) if config.cache else out / CACHE_FILE)
            _record_start(out, config)
        runner = CachedBackend(inner, cache) if cache is not None else inner
        running = time.monotonic()
        gap = 0.0
        if config.policy == "openai":
            gap = config.ramp_s / config.concurrency
            # While the episodes wait on a server, what writing the report imports loads on a
            # thread of its own rather than after they end (over half a second of wall time).
            # Not with a model in this process: a local engine may fork its workers.
            # A run that fails early waits for it (below): an import still running while the
            # interpreter shuts down fails.
            warming = threading.Thread(target=_report_imports, name="hsa-report-import")
            warming.start()
        with planned_kept():
            await _run(chosen, env, runner, settings, config, gap, results, report, progress)
            if firsts:
                replies = [first_reply(e, env, runner, settings, config.label) for e in firsts]
                found = await _bounded(replies, config.concurrency, report, progress)
                answered += _tally(found, report)
            if score is not None:
                asked = [
                    ask(p, runner, settings.model, settings.sampling, score, config.label)
                    for p in prompts
                ]
                instructed += _tally(
                    await _bounded(asked, config.concurrency, report, progress), report
                )
        report.run_s = time.monotonic() - running
    finally:
        if backend is None:
            await inner.aclose()
        if cache is not None:
            cache.close()
        if warming is not None:
            warming.join()
    if report.retry:
        report.wall_s = time.monotonic() - started
        raise EvalIncomplete(report)
    rows = [r for r in results if r is not None] + answered + instructed
    summary = summarize(rows, config.suites, resamples=config.bootstrap, seed=config.seed)
    if instructed:
        summary["suites"]["ifeval"]["lm_eval"] = ifeval_summary(instructed)
    summary.update(
        {
            "model": config.label,
            "env": config.env,
            # which tasks the environment's splits hold: runs of other versions evaluate
            # other tasks, whatever their configs (``hsa.eval.report.sample_differences``)
            "task_version": env.task_version,
            "config": config.public_dict(),
            # what the recipe was, not where: its file may be edited or gone when runs are
            # compared (``hsa.eval.report.recipe_identity``)
            "recipe": None if recipe is None else recipe.to_dict(),
            "output_hash": config.output_hash(),
        }
    )
    if report.left_out:  # the tasks the figures leave out, as the CLI says them
        summary["left_out"] = list(report.left_out)
    writing = time.monotonic()
    _record_start(out, config)
    write_run(out, rows, summary)
    report.write_s = time.monotonic() - writing
    report.summary = summary
    report.wall_s = time.monotonic() - started
    return report


def _report_imports() -> None:
    """Import what writing the results imports: the plotting library, and pandas (when it is
    installed), which pyarrow imports the first time it converts Python values, as the
    episodes table does."""
    figures.load()
    pa.array([0])


def recorded_hash(out: Path) -> str | None:
    """The ``output_hash`` of the evaluation in ``out``, finished (its summary) or started
    (``STARTED``); None where neither records one."""
    for name in (SUMMARY, STARTED):
        try:
            found = json.loads((out / name).read_text("utf-8")).get("output_hash")
        except (OSError, ValueError, AttributeError):
            continue
        return found if isinstance(found, str) else None
    return None


def _record_start(out: Path, config: EvalConfig) -> None:
    """Record the run's settings (``STARTED``) before it writes anything else, so a rerun
    tells its files from files by the same names that no evaluation wrote."""
    path = out / STARTED
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        mf.write_json(path, {"output_hash": config.output_hash()})


def write_run(out: Path, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Write the episodes, the report and, last, the summary (which marks the run done)."""
    from hsa.eval.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    write_shard(out / EPISODES, episodes_table(rows))
    write_report(out, summary, rows)
    mf.write_json(out / SUMMARY, summary)


def _tally(
    found: list[tuple[dict[str, Any], bool] | str], report: EvalReport
) -> list[dict[str, Any]]:
    """The rows of single-request episodes, counted into ``report``: requests, cache hits,
    and those the backend never answered."""
    rows = []
    for item in found:
        if isinstance(item, str):
            report.retry += 1
            report.retry_reasons[item] += 1
            continue
        row, cached = item
        rows.append(row)
        if cached:
            report.cache_hits += 1
        else:
            report.requests += 1
    return rows


async def _bounded(
    coroutines: list, limit: int, report: EvalReport, progress: ProgressFn | None
) -> list:
    """The results of single-request episodes, in order, at most ``limit`` running at once;
    each counted as done (with the run's progress) as it finishes."""
    gate = asyncio.Semaphore(limit)

    async def one(coroutine):
        async with gate:
            began = time.monotonic()
            found = await coroutine
        report.done += 1
        if not isinstance(found, str):
            report.episodes_s += time.monotonic() - began
            report.succeeded += found[0]["success"]
        if progress is not None:
            progress(report.done, report.episodes, report.succeeded)
        return found

    return list(await asyncio.gather(*(one(c) for c in coroutines)))


def _reader(episode: Episode, backend: Backend) -> Backend:
    """``backend``, its replies read as BFCL reads them for BFCL's own format-sensitivity
    entries (``hsa.eval.bfcl_decode``), whose scores are BFCL's."""
    if episode.suite != "bfcl" or episode.spec.task.kind != FORMAT_KIND:
        return backend
    protocol = episode.spec.variant.harness.protocol
    return BfclDecoded(backend, protocol, episode.config)


async def _run(
    chosen: list[Episode],
    env: Environment,
    backend: Backend,
    settings: RolloutConfig,
    config: EvalConfig,
    gap: float,
    results: list[dict[str, Any] | None],
    report: EvalReport,
    progress: ProgressFn | None,
) -> None:
    todo = iter(enumerate(chosen))

    async def lane(start_s: float) -> None:
        # Remote lanes start staggered (``TeachConfig.ramp_s``), so their requests do not all
        # arrive, and come back, at once. Lanes share one iterator: taking the next episode
        # never awaits, so none runs twice.
        if start_s:
            await asyncio.sleep(start_s)
        for index, episode in todo:
            began = time.monotonic()
            result = await rollout(episode.spec, env, _reader(episode, backend), settings)
            report.requests += result.requests
            report.cache_hits += result.cache_hits
            if result.ended == "backend":
                report.retry += 1
                report.retry_reasons[result.detail or "no answer"] += 1
            else:
                results[index] = episode_row(
                    episode.suite,
                    episode.config,
                    result,
                    policy=config.label,
                    group=episode.group,
                    rules=episode.rules,
                )
                report.episodes_s += time.monotonic() - began
                report.succeeded += succeeded(result)
            report.done += 1
            if progress is not None:
                progress(report.done, report.episodes, report.succeeded)

    count = min(config.concurrency, len(chosen)) or 1
    lanes = [asyncio.ensure_future(lane(k * gap)) for k in range(count)]
    try:
        await asyncio.gather(*lanes)
    finally:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
