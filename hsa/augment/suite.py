"""Check suites: the harnesses and canonical trajectories every rule is checked on, and the run.

A ``Subject`` is one canonical trajectory with its harness and how to replay it. Subjects come
from an environment and its oracle (replayed through the environment), from an imported corpus
(tau2 reference actions, BFCL ground truth, OpenAI chat JSONL; replayed against the
recording), or from a harness directory plus a trajectories file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.augment.checks import RECORDED, CheckReport, Replay, check_rewrite
from hsa.augment.planner import apply_chain
from hsa.augment.rule import Context, Rule
from hsa.envs.base import Environment, Task
from hsa.errors import HsaError, RuleError
from hsa.harness.events import AssistantMessage, Event, ToolCall, Trajectory, UserMessage
from hsa.harness.model import Harness


@dataclass(frozen=True, slots=True)
class Subject:
    """A canonical trajectory, the harness it was recorded under, and how to replay it."""

    harness: Harness
    trajectory: Trajectory
    replay: Replay = RECORDED
    source: str = ""


# --- reference trajectories from imported tasks ---


def _first_value(values: Any) -> tuple[bool, Any]:
    """BFCL lists every acceptable value of an argument; ``""`` first means "may be omitted"."""
    if not isinstance(values, list) or not values:
        return True, values
    if values[0] == "":
        return False, None
    return True, _concrete(values[0])


def _concrete(value: Any) -> Any:
    # Inside an object value, BFCL again lists acceptable values per key.
    if isinstance(value, dict):
        return _bfcl_args(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_bfcl_args(v) for v in value]
    return value


def _bfcl_args(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, values in spec.items():
        present, value = _first_value(values)
        if present:
            out[name] = value
    return out


def reference_events(task: Mapping[str, Any], harness: Harness) -> list[Event] | None:
    """Canonical events for an imported task's reference calls, or None when it has none.

    tau2: ``ground_truth.actions`` (name, arguments) in order. BFCL single-turn:
    ``ground_truth.calls`` (one ``{tool: {param: [acceptable values]}}`` each), called together
    in one assistant turn with the first acceptable value of every argument. Reference calls
    have no recorded results, so the events hold none.
    """
    truth = task.get("ground_truth") or {}
    turns = list(task.get("turns") or [])
    user = turns[0] if turns else f"(task {task.get('id')})"
    events: list[Event] = [UserMessage(user)]
    rename = {src: legal for legal, src in (harness.metadata.get("name_map") or {}).items()}
    calls: list[tuple[str, dict[str, Any]]] = []
    if isinstance(truth.get("actions"), list):
        for action in truth["actions"]:
            name = rename.get(action["name"], action["name"])
            calls.append((name, dict(action.get("arguments") or {})))
    elif isinstance(truth.get("calls"), list):
        for call in truth["calls"]:
            ((name, spec),) = call.items()
            calls.append((name, _bfcl_args(spec)))
    if not calls:
        return None
    for n, (name, args) in enumerate(calls):
        events.append(ToolCall(f"call_{n}", name, args))
    for turn in turns[1:]:
        events.append(UserMessage(turn))
    events.append(AssistantMessage("Done."))
    return events


def subjects_from_import(result: Any, *, limit: int | None = None) -> list[Subject]:
    """Subjects of an ``hsa.harness.importers.ImportResult``: its trajectories (OpenAI chat
    JSONL) and the reference calls of its tasks (tau2, BFCL), all replayed on the recording."""
    by_id = {h.id: h for h in result.harnesses}
    out: list[Subject] = []
    for trajectory in result.trajectories:
        harness = by_id.get(trajectory.harness_id or "") or (
            result.harnesses[0] if len(result.harnesses) == 1 else None
        )
        if harness is not None:
            out.append(Subject(harness, trajectory, RECORDED, result.format))
    for task in result.tasks:
        harness = by_id.get(task.get("harness_id") or "")
        if harness is None:
            continue
        events = reference_events(task, harness)
        if events is None:
            continue
        trajectory = Trajectory(
            f"{task['id']}:reference",
            tuple(events),
            task_id=task["id"],
            harness_id=harness.id,
            source=result.format,
        )
        out.append(Subject(harness, trajectory, RECORDED, result.format))
    return out[:limit] if limit is not None else out


def subjects_from_env(
    env: Environment,
    solve: Callable[[Environment, Task], Trajectory],
    *,
    split: str | None = None,
    limit: int | None = None,
) -> list[Subject]:
    """The oracle's trajectory for each task of ``env``, replayed through ``env`` itself."""
    harness = env.harness()
    out = []
    for task in env.tasks(split)[:limit]:
        trajectory = solve(env, task)
        out.append(Subject(harness, trajectory, Replay(env, task), env.name))
    return out


def subjects_from_files(harness: Harness, trajectories: Path) -> list[Subject]:
    """Subjects from a trajectories file under one harness: canonical Parquet
    (``hsa.harness.TRAJECTORY_SCHEMA``) or OpenAI chat JSONL (read under ``harness``)."""
    if trajectories.suffix == ".parquet":
        import pyarrow.parquet as pq

        from hsa.harness.events import trajectories_from_table

        try:
            table = pq.read_table(trajectories)
        except (OSError, ValueError) as exc:
            raise HsaError(f"cannot read Parquet: {exc}", file=str(trajectories)) from None
        found = trajectories_from_table(table)
        return [Subject(harness, t, RECORDED, "parquet") for t in found]
    from hsa.harness.importers import import_source

    result = import_source(trajectories, format="openai-jsonl", harness=harness)
    return [Subject(harness, t, RECORDED, "openai-jsonl") for t in result.trajectories]


# --- running ---


@dataclass(frozen=True, slots=True)
class Job:
    """One rule to check, with its parameters (defaults when empty)."""

    rule: Rule
    params: Mapping[str, Any] | None = None


def run(
    jobs: Sequence[Job],
    subjects: Sequence[Subject],
    *,
    seeds: Iterable[int] = (0, 1, 2),
    on_report: Callable[[CheckReport], None] | None = None,
) -> Iterator[CheckReport]:
    """Check every job on every subject under every seed; yields one report each.

    A rule that does not depend on the trajectory is applied once per harness and seed and
    reused across that harness's trajectories; one that does is applied per trajectory with
    its ``Context``. A rule that raises is reported as a failure of the ``harness`` check.
    """
    seeds = list(seeds)
    for job in jobs:
        cache: dict[tuple[str, int], Any] = {}
        for subject in subjects:
            for seed in seeds:
                report = _one(job, subject, seed, cache)
                if on_report is not None:
                    on_report(report)
                yield report


def _one(job: Job, subject: Subject, seed: int, cache: dict) -> CheckReport:
    from hsa.augment.checks import FAIL, Failure

    harness, trajectory = subject.harness, subject.trajectory
    context = Context.of(trajectory.events)
    key = (harness.to_json(), seed) if not job.rule.needs else None
    try:
        if key is not None and key in cache:
            rewrite = cache[key]
        else:
            rewrite, _ = apply_chain(
                harness, [(job.rule, job.params or {})], seed=seed, context=context
            )
            if key is not None:
                cache[key] = rewrite
    except RuleError as exc:
        return CheckReport(
            trajectory.id,
            {"harness": FAIL},
            (Failure("harness", f"seed {seed}", str(exc)),),
            job.rule.name,
        )
    return check_rewrite(
        harness,
        rewrite,
        trajectory.events,
        replay=subject.replay,
        trajectory_id=f"{trajectory.id}@seed{seed}",
        label=job.rule.name,
    )


def describe(report: CheckReport) -> str:
    """One line per failure of ``report``, for the CLI and for test messages."""
    return "\n".join(
        f"{report.label}: {report.trajectory_id}: {f}" for f in report.failures
    ) or json.dumps(report.outcomes)
