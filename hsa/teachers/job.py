"""``teach``: run a teacher over an environment's tasks and variants, write verified shards.

The job is a list of rollouts in a fixed order (task, variant, sample), cut per split into
shards of ``shard_size``. Rollouts run concurrently; a shard is written, atomically, once all
its rollouts are done, with rows in job order, so the output does not depend on timing. A rerun
skips the shards already written and asks the request cache before the backend: a finished
job makes no request, an interrupted one repeats none that had finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import importlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hsa.augment.draw import derive_seed
from hsa.augment.planner import Variant
from hsa.envs.base import SPLITS, Environment, Task
from hsa.envs.episode import Policy
from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.request import Sampling
from hsa.teachers.rollout import Rollout, RolloutConfig, RolloutSpec, rollout
from hsa.teachers.shards import (
    SCHEMA_VERSION,
    row,
    shard_entry,
    shard_ids,
    shard_path,
    write_manifest,
    write_shard,
)
from hsa.teachers.variants import recipe_from, task_variants

JOB_FILE = "teach.json"
CACHE_FILE = "cache.sqlite"
ORACLE_MODEL = "hsa-oracle"

#: fields that change what a job writes; the others (how fast, where the server is) do not
_OUTPUT_FIELDS = (
    "env",
    "env_options",
    "backend",
    "model",
    "tasks",
    "split",
    "variants_per_task",
    "include_canonical",
    "samples",
    "recipe",
    "seed",
    "max_steps_per_turn",
    "repair",
    "temperature",
    "top_p",
    "max_tokens",
    "shard_size",
    "call_format",
)


@dataclass(frozen=True, slots=True)
class TeachConfig:
    """A teacher job. The same names are used in YAML configs and as ``hsa teach`` flags.

    ``backend``: ``oracle`` (the environment's scripted policy, no model), ``openai`` (needs
    ``base_url`` and ``model``) or ``vllm`` (needs ``model``; ``vllm_args`` go to
    ``vllm.LLM``). ``tasks``: the first N tasks of ``split`` (every split when None).
    ``variants_per_task``: harness variants per task drawn from ``recipe`` (a recipe file; the
    default recipe when None); 0 runs the canonical harness only; ``include_canonical`` adds it.
    ``samples``: rollouts per task and variant, each with its own sampling seed.
    ``concurrency``: rollouts (and requests) in flight. ``repair``: give the model one more
    try after a malformed tool call. ``api_key`` is used for requests only: it is never
    written anywhere and not shown by ``repr``.
    """

    env: str = "livestream"
    env_options: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "oracle"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    tasks: int | None = None
    split: str | None = None
    variants_per_task: int = 1
    include_canonical: bool = False
    samples: int = 1
    recipe: str | None = None
    seed: int = 0
    concurrency: int = 64
    max_steps_per_turn: int = 16
    repair: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int | None = 1024
    timeout_s: float = 120.0
    max_retries: int = 8
    backoff_s: float = 0.5
    shard_size: int = 256
    cache: str | None = None
    call_format: str = "hermes"
    vllm_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.backend not in ("oracle", "openai", "vllm"):
            problems.append(("backend", f"unknown backend {self.backend!r}: oracle, openai, vllm"))
        if self.backend == "openai" and not self.base_url:
            problems.append(("base_url", "the openai backend needs a base URL"))
        if self.backend in ("openai", "vllm") and not self.model:
            problems.append(("model", f"the {self.backend} backend needs a model name"))
        for name in ("concurrency", "shard_size", "samples", "max_steps_per_turn"):
            if getattr(self, name) < 1:
                problems.append((name, f"must be at least 1, got {getattr(self, name)}"))
        if self.tasks is not None and self.tasks < 1:
            problems.append(("tasks", f"must be at least 1, got {self.tasks}"))
        if self.variants_per_task < 0:
            problems.append(("variants_per_task", "must be 0 or more"))
        if self.split is not None and self.split not in SPLITS:
            problems.append(("split", f"unknown split {self.split!r}: {', '.join(SPLITS)}"))
        if problems:
            name, message = problems[0]
            raise TeacherError(message, where=name)

    @property
    def model_name(self) -> str:
        return self.model or ORACLE_MODEL

    @property
    def teacher(self) -> str:
        """How rows name their teacher: ``backend/model``."""
        return f"{self.backend}/{self.model_name}"

    def public_dict(self) -> dict[str, Any]:
        """The config as it may be written down: no API key, no credentials in the URL."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("api_key")
        out["env_options"] = dict(self.env_options)
        out["vllm_args"] = dict(self.vllm_args)
        out["base_url"] = public_url(self.base_url)
        return out

    def output_hash(self) -> str:
        """A hash of the fields that decide what the job writes (see ``_OUTPUT_FIELDS``)."""
        public = self.public_dict()
        chosen = {name: public[name] for name in _OUTPUT_FIELDS}
        if self.recipe is not None:
            # an unreadable recipe is reported when it is loaded
            with contextlib.suppress(OSError):
                chosen["recipe"] = hashlib.sha256(Path(self.recipe).read_bytes()).hexdigest()
        text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str | None = None) -> TeachConfig:
        """A config from a mapping (a YAML ``teach:`` section), unknown keys refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TeacherError(
                f"unknown teach setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}",
                file=file,
            )
        try:
            return cls(**dict(data))
        except TeacherError as exc:
            raise TeacherError(exc.message, file=file, where=exc.where) from None
        except TypeError as exc:
            raise TeacherError(str(exc), file=file) from None


def public_url(url: str | None) -> str | None:
    """``url`` without user info, query or fragment, where credentials can hide."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(slots=True)
class TeachReport:
    """What a job did. ``requests`` went to the backend; ``cache_hits`` were answered from the
    cache; ``skipped`` rollouts were already in shards from an earlier run; ``written`` rows
    were written by this run; ``verified`` counts verified rows in all the job's shards;
    ``reasons`` counts this run's rollouts by reason (``ok`` when verified)."""

    out: Path
    total: int = 0
    skipped: int = 0
    written: int = 0
    verified: int = 0
    reasons: Counter = field(default_factory=Counter)
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: Counter = field(default_factory=Counter)
    latency: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    run_s: float = 0.0  # running rollouts, without loading the environment and planning
    shards: int = 0

    @property
    def rollouts_per_s(self) -> float:
        """Rollouts run per second of running them (skipped rollouts do not count)."""
        ran = self.total - self.skipped
        return ran / self.run_s if self.run_s > 0 else 0.0


@dataclass(slots=True)
class _Shard:
    split: str
    index: int
    specs: list[RolloutSpec]
    done: dict[str, Rollout] = field(default_factory=dict)

    @property
    def path_parts(self) -> tuple[str, int]:
        return self.split, self.index


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
    """Rollouts cut per split (train, dev, test order) into shards of ``shard_size``."""
    shards: list[_Shard] = []
    for split in SPLITS:
        chosen = [s for s in specs if s.task.split == split]
        for index, start in enumerate(range(0, len(chosen), shard_size)):
            shards.append(_Shard(split, index, chosen[start : start + shard_size]))
    extra = sorted({s.task.split for s in specs} - set(SPLITS))
    for split in extra:
        chosen = [s for s in specs if s.task.split == split]
        for index, start in enumerate(range(0, len(chosen), shard_size)):
            shards.append(_Shard(split, index, chosen[start : start + shard_size]))
    return shards


def oracle_policy(env: Environment) -> Policy:
    """The scripted policy of ``env``: its ``oracle`` attribute, or its package's
    ``next_actions`` (as ``hsa.envs.livestream.next_actions``)."""
    policy = getattr(env, "oracle", None)
    if callable(policy):
        return policy
    package = type(env).__module__.rpartition(".")[0]
    try:
        policy = getattr(importlib.import_module(package), "next_actions", None)
    except ImportError:
        policy = None
    if not callable(policy):
        raise TeacherError(
            f"environment {env.name!r} has no oracle policy; use --backend openai or vllm"
        )
    return policy


def make_backend(config: TeachConfig, env: Environment, variants: Mapping[str, Variant]) -> Backend:
    """The backend ``config`` names, built for ``env`` and the job's variants."""
    if config.backend == "oracle":
        from hsa.teachers.oracle import OracleBackend, OracleResponder

        return OracleBackend(OracleResponder(env, oracle_policy(env), variants=variants))
    if config.backend == "openai":
        from hsa.teachers.backends.openai import OpenAIBackend, OpenAIConfig
        from hsa.teachers.throttle import Backoff

        return OpenAIBackend(
            OpenAIConfig(
                base_url=str(config.base_url),
                model=config.model_name,
                api_key=config.api_key,
                concurrency=config.concurrency,
                timeout_s=config.timeout_s,
                max_retries=config.max_retries,
                backoff=Backoff(base_s=config.backoff_s),
                seed=config.seed,
            )
        )
    from hsa.teachers.backends.vllm import VLLMBackend, VLLMConfig

    return VLLMBackend(
        VLLMConfig(
            model=config.model_name,
            batch_size=config.concurrency,
            call_format=config.call_format,
            engine_args=dict(config.vllm_args),
        )
    )


def _check_job_file(out: Path, config: TeachConfig) -> None:
    path = out / JOB_FILE
    digest = config.output_hash()
    if path.exists():
        try:
            previous = json.loads(path.read_text("utf-8")).get("output_hash")
        except (OSError, ValueError, AttributeError):
            previous = None
        if previous != digest:
            raise TeacherError(
                "this directory holds a teacher job with different settings; use a new --out "
                "or the settings of that job",
                file=str(path),
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    document = {"config": config.public_dict(), "output_hash": digest}
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n", "utf-8")


ProgressFn = Callable[[int, int, int], None]


def teach(
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
    ``config``. Returns what the job did; raises ``HsaError`` only for a bad setup (unknown
    environment, unreadable recipe, a directory of another job), never for a failed rollout.
    """
    return asyncio.run(teach_async(config, out, env=env, backend=backend, progress=progress))


async def teach_async(
    config: TeachConfig,
    out: str | Path,
    *,
    env: Environment | None = None,
    backend: Backend | None = None,
    progress: ProgressFn | None = None,
) -> TeachReport:
    """``teach`` inside a running event loop."""
    started = time.monotonic()
    out = Path(out)
    report = TeachReport(out=out)
    if env is None:
        from hsa.envs.registry import get

        env = get(config.env, **dict(config.env_options))
    harness = env.harness()
    tasks = env.tasks(config.split)
    if config.tasks is not None:
        tasks = tasks[: config.tasks]
    recipe = recipe_from(config.recipe) if config.variants_per_task else None
    variants = task_variants(
        harness,
        tasks,
        recipe if recipe is not None else _empty_recipe(),
        seed=config.seed,
        per_task=config.variants_per_task,
        include_canonical=config.include_canonical,
    )
    specs = rollout_specs(tasks, variants, samples=config.samples, seed=config.seed)
    shards = plan_shards(specs, config.shard_size)
    report.total = len(specs)
    _check_job_file(out, config)

    pending: list[_Shard] = []
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    for shard in shards:
        path = shard_path(out, shard.split, shard.index)
        if path.exists():
            if shard_ids(path) != [s.id for s in shard.specs]:
                raise TeacherError(
                    "this shard holds other rollouts than the job plans; use a new --out",
                    file=str(path),
                )
            entries[shard.path_parts] = shard_entry(path)
            report.skipped += len(shard.specs)
        else:
            pending.append(shard)
    verified_before = sum(e["verified"] for e in entries.values())
    if progress is not None:
        progress(report.skipped, report.total, verified_before)

    if pending:
        by_id = {v.variant_id: v for vs in variants.values() for v in vs}
        inner = backend if backend is not None else make_backend(config, env, by_id)
        cache = RequestCache(Path(config.cache) if config.cache else out / CACHE_FILE)
        cached = CachedBackend(inner, cache)
        rollout_config = RolloutConfig(
            model=config.model_name,
            sampling=Sampling(config.temperature, config.top_p, config.max_tokens),
            max_steps_per_turn=config.max_steps_per_turn,
            repair=config.repair,
        )
        running_since = time.monotonic()
        try:
            await _run(config, env, cached, rollout_config, pending, out, entries, report, progress)
        finally:
            report.run_s = time.monotonic() - running_since
            if backend is None:
                await inner.aclose()
            cache.close()
        stats = inner.stats
        report.retries = stats.retries
        report.failures = Counter(stats.failures)
        report.latency = stats.latency_percentiles()

    report.verified = sum(e["verified"] for e in entries.values())
    report.shards = len(entries)
    _finish_manifest(out, config, shards, entries, variants)
    report.wall_s = time.monotonic() - started
    return report


def _empty_recipe():
    from hsa.augment.recipe import Recipe

    return Recipe(rules=())


async def _run(
    config: TeachConfig,
    env: Environment,
    backend: Backend,
    rollout_config: RolloutConfig,
    pending: list[_Shard],
    out: Path,
    entries: dict[tuple[str, int], dict[str, Any]],
    report: TeachReport,
    progress: ProgressFn | None,
) -> None:
    harness_id = env.harness().id
    queue = [(shard, spec) for shard in pending for spec in shard.specs]
    done = report.skipped
    verified = sum(e["verified"] for e in entries.values())
    position = 0
    running: set[asyncio.Task] = set()
    owner: dict[asyncio.Task, _Shard] = {}

    def launch() -> None:
        nonlocal position
        while position < len(queue) and len(running) < config.concurrency:
            shard, spec = queue[position]
            position += 1
            task = asyncio.ensure_future(rollout(spec, env, backend, rollout_config))
            running.add(task)
            owner[task] = shard

    launch()
    try:
        while running:
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                running.discard(task)
                shard = owner.pop(task)
                result = task.result()
                shard.done[result.spec.id] = result
                report.requests += result.requests
                report.cache_hits += result.cache_hits
                report.reasons[_reason_class(result.verification.reason)] += 1
                done += 1
                verified += result.verification.verified
                if len(shard.done) == len(shard.specs):
                    rows = [
                        row(shard.done[s.id], teacher=config.teacher, harness_id=harness_id)
                        for s in shard.specs
                    ]
                    entries[shard.path_parts] = write_shard(
                        shard_path(out, shard.split, shard.index), rows
                    )
                    report.written += len(rows)
                    shard.done.clear()
                if progress is not None:
                    progress(done, report.total, verified)
            launch()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def _reason_class(reason: str) -> str:
    return reason.split(":", 1)[0]


def _finish_manifest(
    out: Path,
    config: TeachConfig,
    shards: list[_Shard],
    entries: Mapping[tuple[str, int], Mapping[str, Any]],
    variants: Mapping[str, list[Variant]],
) -> None:
    if any(s.path_parts not in entries for s in shards):
        return  # an unfinished job has no manifest; the rerun writes it
    splits: dict[str, dict[str, Any]] = {}
    for shard in shards:
        entry = entries[shard.path_parts]
        split = splits.setdefault(shard.split, {"rows": 0, "verified": 0, "shards": []})
        split["rows"] += entry["rows"]
        split["verified"] += entry["verified"]
        split["shards"].append(dict(entry))
    rules: dict[str, str] = {}
    for chosen in variants.values():
        for variant in chosen:
            for name, version, _ in variant.rules:
                rules[name] = version
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": "teacher",
        "config": config.public_dict(),
        "config_hash": config.output_hash(),
        "seed": config.seed,
        "teacher": config.teacher,
        "rule_versions": dict(sorted(rules.items())),
        "rows": sum(s["rows"] for s in splits.values()),
        "verified": sum(s["verified"] for s in splits.values()),
        "splits": splits,
    }
    write_manifest(out, manifest)
