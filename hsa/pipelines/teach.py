"""``teach``: run a teacher over an environment's tasks and variants, write verified shards.

The job is a list of rollouts in a fixed order (task, variant, sample), cut per split into
shards of ``shard_size``. Rollouts run concurrently; a shard is written, atomically, once all
its rollouts are done, with rows in job order, so the output does not depend on timing, and
then its completion mark (``.hsa/done/``, as the augment job marks its batches). Shards are
staged as the augment job stages its own (``OUT/.hsa/staging/data/{split}/part-NNNNN.parquet``,
``hsa.datasets.manifest.staged``) and move to ``OUT/data/`` in one rename once every shard is
written, just before the manifest (``hsa.datasets.manifest.publish``): a stopped job's folder
offers ``datasets.load_dataset``, Polars or DuckDB none of its rows, rather than some taken for
all (``load_dataset`` reads a lone ``teach.json`` as a row of settings, no trajectory). A
rerun skips exactly the shards whose marks match their files and asks the request cache before
the backend: a finished job makes no request, an interrupted one repeats none that had
finished, and a killed one ends with the same bytes as an uninterrupted one. With ``workers``
> 1 the pending shards are shared among processes (``hsa.pipelines.teach_workers``).

Only the model's outcomes are final: verified, or rejected for format, schema, execution,
score or the step limit. A rollout the backend could not answer (refused or reset connection,
5xx or timeouts after every retry, a refused key) says nothing about the model, so it is never
written: its shard stays unwritten, the job ends with ``TeachIncomplete``, and the rerun runs
that shard again, its finished rollouts answered from the cache and only the failed ones sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from hsa._version import made_by
from hsa.augment.planner import Variant
from hsa.augment.recipe import Recipe
from hsa.augment.seeded import derive_seed
from hsa.datasets import manifest as mf
from hsa.datasets.lock import hold
from hsa.datasets.schema import SCHEMA_VERSION, TEACHER_SCHEMA
from hsa.datasets.shards import count_true, write_shard
from hsa.envs.base import SPLITS, Environment, Task
from hsa.errors import TeacherError, first_few, refuse_kind, stops_held
from hsa.harness.events import Trajectory
from hsa.harness.model import compact_json
from hsa.teachers.backends.base import Backend, latency_percentiles, run_async
from hsa.teachers.backends.openai import REFUSED
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.config import TeachConfig
from hsa.teachers.make import make_backend, rollout_config
from hsa.teachers.rollout import (
    OPENING_TOO_LONG,
    Rollout,
    RolloutConfig,
    RolloutSpec,
    planned_kept,
    rollout,
    rollout_metadata,
)
from hsa.teachers.task_variants import (
    env_task_variants,
    recipe_from,
    short_tasks,
    trajectory_rules_note,
)

JOB_FILE = mf.TEACHER_JOB
CACHE_FILE = "cache.sqlite"

ProgressFn = Callable[[int, int, int], None]
ShardKey = tuple[str, int]
#: why a teacher's variants leave out the recipe's rules that depend on a trajectory
UNTRAJECTORIED = "a teacher's variants are planned before there is a trajectory"
#: a rollout that ended this way got no answer from the backend (or a refusal) and is run
#: again on a rerun
RETRY = "backend"


def is_refusal(reason: str) -> bool:
    """Whether a rollout that needs a retry ended so because the backend refused its request
    (an HTTP 4xx of ``hsa.teachers.backends.openai``: a model it does not serve, a
    ``max_tokens`` it will not take; a task's opening past the context window): the same
    settings get the same refusal, so the advice is to correct them, not to wait."""
    return REFUSED in reason or reason.startswith(OPENING_TOO_LONG)


@dataclass(slots=True)
class TeachReport:
    """What a job did. ``requests`` went to the backend; ``cache_hits`` were answered from the
    cache; ``skipped`` rollouts were already in shards from an earlier run; ``written`` rows
    were written by this run; ``verified`` counts verified rows in all the job's shards;
    ``reasons`` counts this run's rollouts by reason (``ok`` when verified, ``backend`` for
    those that need a retry); ``retry_reasons`` says why those got no answer; ``held`` counts
    rollouts that finished but were not written, since their shard holds some of those (a
    rerun writes them, from the request cache, with the retried ones)."""

    out: Path
    total: int = 0
    skipped: int = 0
    written: int = 0
    verified: int = 0
    held: int = 0
    reasons: Counter = field(default_factory=Counter)
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: Counter = field(default_factory=Counter)
    retry_reasons: Counter = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list, repr=False)
    wall_s: float = 0.0
    run_s: float = 0.0  # running rollouts, without loading the environment and planning
    shards: int = 0
    #: tasks left out because they ask another task again (``Environment.restates``)
    restated: int = 0
    #: what of its source and recipe the job left out, and why (``JobPlan.left_out``)
    left_out: tuple[str, ...] = ()
    variants_per_task: int = 0  # asked for
    short: int = 0  # tasks run under fewer (``JobPlan.short``)

    @property
    def retry(self) -> int:
        """Rollouts of this run that got no answer from the backend, left for a rerun."""
        return self.reasons.get(RETRY, 0)

    @property
    def refused(self) -> int:
        """Rollouts of ``retry`` whose request the backend refused (``is_refusal``): it
        answered, with an error of the job's settings, rather than not at all."""
        return sum(n for reason, n in self.retry_reasons.items() if is_refusal(reason))

    @property
    def rollouts_per_s(self) -> float:
        """Rollouts run per second of running them (skipped rollouts do not count)."""
        ran = self.total - self.skipped
        return ran / self.run_s if self.run_s > 0 else 0.0

    @property
    def latency(self) -> dict[str, float]:
        """p50/p90/p99 latency of the requests sent, in milliseconds."""
        return latency_percentiles(self.latencies_s)


class TeachIncomplete(TeacherError):
    """A job that ran to the end with rollouts the backend never answered; ``report`` says
    what it did. Rerunning the same job retries exactly those rollouts."""

    def __init__(self, report: TeachReport):
        ran = report.total - report.skipped
        reasons = report.retry_reasons.most_common()
        why = reasons[0][0] if reasons else "the backend failed"
        if len(reasons) > 1:  # the others too, most common first, each with its count
            why += f" ({report.retry_reasons[reasons[0][0]]} rollouts); also " + first_few(
                [f"{reason} ({count})" for reason, count in reasons[1:]], 2
            )
        held = (
            f" (nor {report.held} that finished in their shards, which the rerun writes)"
            if report.held
            else ""
        )
        if not report.refused:
            what = "got no answer from the backend"
            advice = "once it answers, rerun the same command to retry them"
        else:
            what = (
                "were refused by the backend"
                if report.refused == report.retry
                else "got no answer from the backend or were refused by it"
            )
            # a folder without rows takes other settings (``unstarted``)
            advice = (
                "once that is corrected, rerun: the same command resumes where the fix is "
                "outside the job's settings (the server, the key, --base-url); a changed "
                "setting (--model, --max-tokens) needs a new --out, this one holding rows of "
                "these settings"
                if report.written or report.skipped
                else "once that is corrected, rerun (this --out holds no row yet, so it "
                "takes the corrected settings)"
            )
        super().__init__(
            f"{report.retry} of {ran} rollouts {what} and were not written{held}: {why}; {advice}",
            file=str(report.out),
        )
        self.report = report


@dataclass(slots=True)
class _Shard:
    split: str
    index: int
    batch: int  # the shard's place in the job: its completion mark is ``.hsa/done/BATCH.json``
    specs: list[RolloutSpec]
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # finished, by rollout id
    retry: int = 0  # rollouts the backend did not answer: the shard is not written

    @property
    def key(self) -> ShardKey:
        return self.split, self.index


@dataclass(slots=True)
class JobPlan:
    """A job laid out: its environment, variants, rollouts and shards, and what is done."""

    config: TeachConfig
    out: Path
    env: Environment
    variants: dict[str, list[Variant]]
    shards: list[_Shard]
    pending: list[_Shard]
    entries: dict[ShardKey, dict[str, Any]]  # manifest entries of the written shards
    total: int
    restated: int = 0  # tasks left out: they ask another task again (``Environment.restates``)
    #: what of its source and recipe the job leaves out, and why: the environment's
    #: ``left_out``, the tasks it cannot play (``unplayable_note``) and the recipe's rules
    #: that depend on a trajectory (``trajectory_rules_note``)
    left_out: tuple[str, ...] = ()
    #: tasks run under fewer variants than ``variants_per_task`` asks (``short_tasks``): said
    #: in the summary and the manifest (``variants_per_task.short``), never silently
    short: int = 0

    @property
    def skipped(self) -> int:
        return self.total - sum(len(s.specs) for s in self.pending)

    def report(self) -> TeachReport:
        """The report a run of this plan starts from: what it plans, skips and leaves out."""
        return TeachReport(
            out=self.out,
            total=self.total,
            skipped=self.skipped,
            restated=self.restated,
            left_out=self.left_out,
            variants_per_task=self.config.variants_per_task,
            short=self.short,
        )

    @property
    def verified(self) -> int:
        return sum(e["verified"] for e in self.entries.values())


def shard_path(root: Path, split: str, index: int) -> Path:
    return root / "data" / split / f"part-{index:05d}.parquet"


def row(result: Rollout, *, teacher: str) -> dict[str, Any]:
    """The teacher row (``hsa.datasets.schema.TEACHER_SCHEMA``) of one rollout, recorded
    under the harness its variant was planned from."""
    spec = result.spec
    trajectory = Trajectory(
        id=spec.id,
        events=result.events,
        task_id=spec.task.id,
        harness_id=spec.variant.harness_id,
        source=f"teacher:{teacher}",
        metadata=rollout_metadata(result),
    )
    variant = spec.variant
    verification = result.verification
    return {
        **trajectory.to_row(),
        "source_id": spec.id,
        "variant_id": variant.variant_id,
        "canonical": variant.is_canonical,
        "rules": [name for name, _, _ in variant.rules],
        "rule_params": compact_json(variant.lineage()["rules"]),
        "protocol": variant.harness.protocol.label,
        "messages": list(result.conversation.messages),
        "tools": compact_json(result.conversation.tools),
        "split": spec.task.split,
        "teacher": teacher,
        "verified": verification.verified,
        "reason": verification.reason,
        "score": verification.score,
        "verification": compact_json(verification.to_dict()),
    }


def write_rows(root: Path, shard: _Shard, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write a shard of teacher rows with the one shard writer (``hsa.datasets.shards``:
    atomic, fsynced, pinned options, so equal rows give equal bytes) to its staged place
    (``hsa.datasets.manifest.staged``), then its completion mark, which lists it by its place
    under ``data/`` (``hsa.datasets.manifest``); returns its manifest entry."""
    listed = shard_path(root, shard.split, shard.index).relative_to(root).as_posix()
    staged = mf.staged(root, listed)
    assert staged is not None  # (``shard_path`` names every shard data/{split}/NAME)
    table = pa.Table.from_pylist(rows, schema=TEACHER_SCHEMA)
    written = write_shard(staged, table)
    entry = {
        "path": listed,
        "rows": written["rows"],
        "verified": count_true(table.column("verified")),
        "sha256": written["sha256"],
    }
    mark = {"batch": shard.batch, "ids": _ids_digest(shard), "shards": [entry]}
    mf.mark(root, shard.batch, mark)
    return entry


def done_entry(root: Path, shard: _Shard) -> dict[str, Any] | None:
    """The manifest entry of a shard an earlier run finished, or None.

    A shard is finished when its completion mark lists it with its sha256 and the file matches,
    staged or in place (``hsa.datasets.manifest.done``): a half-written file, one hsa did not
    write or one without its mark is written again. A mark listing other rollouts than the job
    plans is refused, naming the shard's file where it is (staged or in place).
    """
    found = mf.done(root, shard.batch)
    if found is None:
        return None
    planned = shard_path(root, shard.split, shard.index).relative_to(root).as_posix()
    listed = found.get("shards") or [{}]
    if found.get("ids") != _ids_digest(shard) or listed[0].get("path") != planned:
        # named where the file is: staged (``mf.placed``) until the job's last shard is written
        at = listed[0].get("path")
        raise TeacherError(
            "this shard's completion mark lists other rollouts than the job plans; use a new --out",
            file=str(mf.placed(root, at if isinstance(at, str) else planned)),
        )
    return dict(listed[0])


def _ids_digest(shard: _Shard) -> str:
    return hashlib.sha256("\n".join(s.id for s in shard.specs).encode("utf-8")).hexdigest()


def rollout_specs(
    tasks: list[Task], variants: Mapping[str, list[Variant]], *, samples: int, seed: int
) -> list[RolloutSpec]:
    """Every rollout of a job, in job order, with ids and sampling seeds derived from them."""
    specs = []
    for task in tasks:
        for variant in variants[task.id]:
            for sample in range(samples):
                rollout_id = f"{task.id}/{variant.variant_id}/{sample}"
                specs.append(
                    RolloutSpec(
                        id=rollout_id,
                        task=task,
                        variant=variant,
                        sample=sample,
                        seed=derive_seed("rollout", seed, rollout_id) % 2**31,
                    )
                )
    return specs


def plan_shards(specs: list[RolloutSpec], shard_size: int) -> list[_Shard]:
    """Rollouts cut per split (train, dev, test, then any other) into shards of ``shard_size``."""
    splits = [*SPLITS, *sorted({s.task.split for s in specs} - set(SPLITS))]
    shards: list[_Shard] = []
    for split in splits:
        chosen = [s for s in specs if s.task.split == split]
        for index, start in enumerate(range(0, len(chosen), shard_size)):
            shards.append(_Shard(split, index, len(shards), chosen[start : start + shard_size]))
    return shards


def check_job_file(out: Path, config: TeachConfig) -> None:
    """Refuse a directory of another job, or of something else (a built dataset, an
    evaluation). Writes nothing: ``record_job`` does once the job's backend is up, over the
    job file of another job that wrote no row (``unstarted``)."""
    if unstarted(out, config):
        return
    others = {mf.MANIFEST: "a dataset", "summary.json": "an evaluation"}
    owned = (JOB_FILE, mf.MANIFEST, "data", CACHE_FILE)
    found = mf.job_folder_problem(
        out, JOB_FILE, config.output_hash(), kind="a teacher job", others=others, owned=owned
    )
    if found is not None:
        raise TeacherError(found[0], file=str(found[1]))


def unstarted(out: Path, config: TeachConfig) -> bool:
    """Whether ``out`` holds the job file of a job with other settings that wrote no row: no
    shard, no completion mark, no manifest. Such a job failed before (a model the endpoint
    does not serve, a ``max_tokens`` it refuses): no row of it would mix with this job's, so
    the corrected settings its error advised take the folder. Its request cache stays: a
    request's key is all of it, so an answer there only ever answers the same request."""
    previous = _recorded_hash(out / JOB_FILE)
    if previous is None or previous == config.output_hash():
        return False
    return not (out / mf.MANIFEST).exists() and not mf.dataset_data(out)


def _recorded(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None  # none, or not a job file: ``check_job_file`` says what it is


def _recorded_hash(path: Path) -> Any:
    recorded = _recorded(path)
    return recorded.get("output_hash") if isinstance(recorded, dict) else None


def record_job(out: Path, config: TeachConfig) -> None:
    """Record the job's settings in its directory, over those of a job that wrote no row
    (``check_job_file`` let this job have the folder): the settings that decide what it
    writes (``TeachConfig.output_dict``), as the manifest does, so that a job run with other
    workers, concurrency, timeouts or server, or resumed under them, writes the same file
    (a rerun under a recipe or corpus named by another path, the same content, records that
    path, as its manifest does). Written only when it differs: the same for every worker."""
    path = out / JOB_FILE
    document = {"config": config.output_dict(), "output_hash": config.output_hash()}
    document = json.loads(json.dumps(document, default=str))
    if _recorded(path) == document:
        return
    out.mkdir(parents=True, exist_ok=True)
    mf.write_json(path, document)


def plan_job(
    config: TeachConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    only: Collection[ShardKey] | None = None,
    check: bool = True,
) -> JobPlan:
    """Lay the job out and find what is left to run (only the shards in ``only`` if given).

    A shard is done when its completion mark says so (``done_entry``). With ``check`` (call
    it holding ``out``'s lock), the directory's job file is checked (or written) and the
    temporary files of killed runs are removed.
    """
    out = Path(out)
    if env is None:
        from hsa.envs.registry import get

        env = get(config.env, **dict(config.env_options))
    every = env.tasks(config.split)
    tasks = [t for t in every if not env.restates(t)]
    restated = len(every) - len(tasks)
    left_out = env.left_out()
    # Where no tool runs (a corpus without tool outputs), only tasks scored on the calls as
    # made can be played: a task that runs its calls (BFCL's web_search entries) would get an
    # error back for every one. Those are left out and said; the rest are taught.
    unplayable = [] if env.runs_tools else [t for t in tasks if not env.ends_at_calls(t)]
    if unplayable:
        tasks = [t for t in tasks if env.ends_at_calls(t)]
        if not tasks:
            raise TeacherError(
                f"the {env.name} corpus records no tool outputs, so its tools cannot run: every "
                f"call of a teacher's rollout would get an error back, and every one of its "
                f"{len(unplayable)} tasks runs its calls (e.g. {unplayable[0].id}). Evaluate "
                "models on it with hsa eval run instead",
                where=f"env {config.env!r}",
            )
        left_out = (*left_out, unplayable_note(env, unplayable))
    if config.tasks is not None:
        tasks = tasks[: config.tasks]
    recipe = recipe_from(config.recipe) if config.variants_per_task else Recipe(rules=())
    variants = env_task_variants(
        env,
        tasks,
        recipe,
        seed=config.seed,
        per_task=config.variants_per_task,
        include_canonical=config.include_canonical,
    )
    specs = rollout_specs(tasks, variants, samples=config.samples, seed=config.seed)
    if not specs:
        why = (
            f"{config.env} has no {config.split + ' ' if config.split else ''}tasks"
            if not tasks
            else "the recipe draws no variants and the canonical harness is not included "
            "(--include-canonical)"
        )
        left = "".join(f"; {note}" for note in left_out) if not tasks else ""
        if not every:  # where it has tasks, if anywhere, and why not here
            why, left = env.no_tasks(config.split), ""
        elif not tasks and restated:
            left += (
                f"; its {restated} task(s) each ask another task again {RESTATED}, so teach "
                "the files of the tasks they ask"
            )
        raise TeacherError(f"the job plans no rollouts: {why}{left}", where=f"env {config.env!r}")
    # the planner leaves out, silently, the rules that need a trajectory: said here instead
    rules_note = trajectory_rules_note(recipe, UNTRAJECTORIED)
    if rules_note is not None:
        left_out = (*left_out, rules_note)
    shards = plan_shards(specs, config.shard_size)
    if check:
        check_job_file(out, config)
        mf.remove_temporaries(out)
    pending: list[_Shard] = []
    entries: dict[ShardKey, dict[str, Any]] = {}
    for shard in shards:
        entry = done_entry(out, shard)
        if entry is not None:
            entries[shard.key] = entry
        elif only is None or shard.key in only:
            pending.append(shard)
    return JobPlan(
        config,
        out,
        env,
        variants,
        shards,
        pending,
        entries,
        len(specs),
        restated,
        left_out,
        short=short_tasks(variants, config.variants_per_task),
    )


def unplayable_note(env: Environment, tasks: list[Task]) -> str:
    """What a job says of the ``tasks`` it left out because they run their calls, which
    ``env`` (a corpus without tool outputs) cannot run."""
    kinds = Counter(t.kind for t in tasks)
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return (
        f"{counted} task(s) that run their calls (e.g. {tasks[0].id}): the {env.name} corpus "
        "records no tool outputs, so every call of a teacher's rollout would get an error "
        "back; evaluate models on them with hsa eval run"
    )


def teach(
    config: TeachConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
) -> TeachReport:
    """Run the teacher job ``config`` into ``out``, locked (``hsa.datasets.lock``) so that a
    second job into the same folder refuses instead of sharing its shards and cache; see
    ``teach_unlocked``."""
    refuse_kind(config, TeachConfig, "config", "hsa.TeachConfig(...) makes one", TeacherError)
    with hold(out, command="hsa teach"):
        return teach_unlocked(config, out, env=env, backend=backend, progress=progress)


def teach_unlocked(
    config: TeachConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
) -> TeachReport:
    """Run the teacher job ``config`` and write its shards and manifest under ``out``.

    ``progress(done, total, verified)`` is called as rollouts finish (``done`` counts skipped
    ones). ``env`` and ``backend`` may be given ready-made; otherwise they are built from
    ``config`` (and with ``config.workers`` > 1, in each worker process). Returns what the job
    did. Raises ``TeachIncomplete`` (with the report) when the backend left rollouts
    unanswered, and ``HsaError`` for a bad setup (unknown environment, unreadable recipe, a
    directory of another job, a worker that died), never for a model's failed rollout.
    """
    if config.workers > 1 and env is None and backend is None:
        from hsa.pipelines.teach_workers import teach_in_workers

        report = teach_in_workers(config, out, progress=progress)
        if report.retry:
            raise TeachIncomplete(report)
        return report
    return run_async(teach_async(config, out, env=env, backend=backend, progress=progress))


async def teach_async(
    config: TeachConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
) -> TeachReport:
    """``teach`` inside a running event loop, in this process (``config.workers`` ignored);
    raises ``TeachIncomplete`` as ``teach`` does."""
    started = time.monotonic()
    plan = plan_job(config, out, env=env)
    report = plan.report()
    if progress is not None:
        progress(report.skipped, report.total, plan.verified)
    await run_plan(plan, report, backend=backend, progress=progress)
    finish(plan, report)
    report.wall_s = time.monotonic() - started
    if report.retry:
        raise TeachIncomplete(report)
    return report


async def run_plan(
    plan: JobPlan,
    report: TeachReport,
    *,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Run the plan's pending shards, adding what happened to ``report``.

    ``ready`` is called once the backend and cache are set up, just before the first rollout.
    """
    if not plan.pending:
        return
    config = plan.config
    by_id = {v.variant_id: v for vs in plan.variants.values() for v in vs}
    inner = backend if backend is not None else make_backend(config, plan.env, by_id)
    settings = rollout_config(config)
    cache = None
    running_since = time.monotonic()
    try:
        # Nothing is written before the backend is up: a missing model or server library
        # is a setup error that leaves the directory as it was.
        await inner.start()
        record_job(plan.out, config)
        # The in-process oracle answers about as fast as a cache lookup and always the same
        # way: unless asked for (--cache), a request cache would only cost (measured: 1.5 s of
        # the main build's 14 s teacher stage), never save.
        if backend is not None or config.backend != "oracle" or config.cache:
            cache = RequestCache(Path(config.cache) if config.cache else plan.out / CACHE_FILE)
        cached = CachedBackend(inner, cache) if cache is not None else inner
        if ready is not None:
            await asyncio.to_thread(ready)
        running_since = time.monotonic()
        with planned_kept():
            await _run(plan, cached, settings, report, progress)
    finally:
        report.run_s = time.monotonic() - running_since
        if backend is None:
            await inner.aclose()
        if cache is not None:
            cache.close()
    report.retries += inner.stats.retries
    report.failures.update(inner.stats.failures)
    report.latencies_s.extend(inner.stats.latencies_s)


async def _run(
    plan: JobPlan,
    backend: Backend,
    rollout_config: RolloutConfig,
    report: TeachReport,
    progress: ProgressFn | None,
) -> None:
    config, env = plan.config, plan.env
    todo = iter([(shard, spec) for shard in plan.pending for spec in shard.specs])
    counts = {"done": report.skipped, "verified": plan.verified}

    async def finished(shard: _Shard, result: Rollout) -> None:
        # The row is built as its rollout finishes (spreading the work), the shard is written
        # in a thread: a big shard blocking the event loop would stall every rollout in flight.
        report.requests += result.requests
        report.cache_hits += result.cache_hits
        if result.ended == RETRY:
            # Not a row: a written shard is final, and this rollout must run again.
            shard.retry += 1
            report.reasons[RETRY] += 1
            report.retry_reasons[result.detail or "no answer"] += 1
        else:
            shard.rows[result.spec.id] = row(result, teacher=config.teacher)
            report.reasons[result.verification.reason.split(":", 1)[0]] += 1
        counts["done"] += 1
        counts["verified"] += result.verification.verified
        if progress is not None:
            progress(counts["done"], report.total, counts["verified"])
        if shard.retry and len(shard.rows) + shard.retry == len(shard.specs):
            report.held += len(shard.rows)
            shard.rows.clear()  # the rerun replays these from the cache with the failed ones
        elif len(shard.rows) == len(shard.specs):
            rows = [shard.rows.pop(s.id) for s in shard.specs]
            plan.entries[shard.key] = await asyncio.to_thread(write_rows, plan.out, shard, rows)
            report.written += len(rows)

    async def lane(start_s: float) -> None:
        # Lanes share one iterator of the job's rollouts, in order: taking the next one never
        # awaits, so no rollout is taken twice and each lane holds one rollout at a time.
        if start_s:
            await asyncio.sleep(start_s)
        for shard, spec in todo:
            await finished(shard, await rollout(spec, env, backend, rollout_config))

    # Remote lanes start staggered (see ``TeachConfig.ramp_s``); an in-process engine batches
    # what arrives together, so its lanes all start at once.
    gap = config.ramp_s / config.concurrency if config.backend == "openai" else 0.0
    lanes = [asyncio.ensure_future(lane(k * gap)) for k in range(config.concurrency)]
    try:
        await asyncio.gather(*lanes)
    finally:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)


#: why a task that asks another again is left out
RESTATED = (
    "in another form (BFCL's format-sensitivity entries: augmentation varies the form itself)"
)


def finish(plan: JobPlan, report: TeachReport) -> None:
    """Count the job's shards and, once every shard is written, write its manifest."""
    report.verified = plan.verified
    report.shards = len(plan.entries)
    if any(s.key not in plan.entries for s in plan.shards):
        return  # an unfinished job has no manifest; the rerun writes it
    config = plan.config
    splits: dict[str, dict[str, Any]] = {}
    for shard in plan.shards:
        entry = plan.entries[shard.key]
        split = splits.setdefault(shard.split, {"rows": 0, "verified": 0, "shards": []})
        split["rows"] += entry["rows"]
        split["verified"] += entry["verified"]
        split["shards"].append(dict(entry))
    rules: dict[str, str] = {}
    for chosen in plan.variants.values():
        for variant in chosen:
            for name, version, _ in variant.rules:
                rules[name] = version
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": mf.TEACHER_KIND,
        # the hsa that wrote it, outside its hash: the job is identified by the versions of
        # what decides its rows (``output_hash``), so a newer hsa goes on with its rows
        **made_by(),
        "config": config.output_dict(),
        "config_hash": config.output_hash(),
        "seed": config.seed,
        "teacher": config.teacher,
        # the version of the environment's tasks and splits its rows were taught under (every
        # job records it, 1 too; a manifest without it is of version 1): ``hsa augment``
        # refuses rows of another version than the environment's now, whose splits are not
        # today's
        "task_version": plan.env.task_version,
        "rule_versions": dict(sorted(rules.items())),
        "rows": sum(s["rows"] for s in splits.values()),
        "verified": sum(s["verified"] for s in splits.values()),
        "splits": splits,
    }
    if plan.short:  # (a job that ran every task under as many variants as asked says nothing)
        manifest["variants_per_task"] = {"asked": config.variants_per_task, "short": plan.short}
    left_out = list(plan.left_out)
    if plan.restated:
        left_out.insert(0, f"{plan.restated} task(s) that ask another task again {RESTATED}")
    if left_out:
        # tasks of the source the job did not run, and rules of the recipe, and why
        manifest["left_out"] = left_out
    # a job that had nothing to run has not recorded it yet
    record_job(plan.out, config)
    # Only now do the shards move where readers look, all at once, the manifest right after
    # them, a stop held off meanwhile: every reader but hsa's (``load_dataset(DIR)``, Polars,
    # DuckDB) takes what data/ holds for the whole output, manifest or not. A rerun that
    # wrote no shard leaves a finished job's manifest as it is: rewritten, it would say that
    # the rows were made by this hsa (``"hsa"``), which did not make them.
    with stops_held():
        mf.publish(plan.out)
        if plan.pending or not _finished(plan.out):
            mf.write_json(plan.out / mf.MANIFEST, manifest)


def _finished(out: Path) -> bool:
    """Whether ``out`` holds the manifest of a finished teacher job (readable, of its kind)."""
    found = _recorded(out / mf.MANIFEST)
    return isinstance(found, dict) and found.get("kind") == mf.TEACHER_KIND
