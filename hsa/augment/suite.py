"""Check suites: the harnesses and canonical trajectories every rule is checked on, and the run.

A ``Subject`` is one canonical trajectory with its harness and how to replay it. Subjects come
from an environment and its oracle (replayed through the environment), from an imported corpus
(tau2 reference actions, BFCL ground truth, OpenAI chat JSONL; replayed through the corpus
environment built from their recorded results and reference calls), or from a harness
directory plus a trajectories file.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.augment.checks import RECORDED, CheckReport, Replay, check_rewrite
from hsa.augment.param_schemas import copy_json
from hsa.augment.planner import HooksAlike, Sight, apply_chain
from hsa.augment.rule import Context, Rewrite, Rule, _outcome, one_line
from hsa.envs.base import Environment, Task
from hsa.errors import HsaError, RuleError, first_line
from hsa.harness.events import Trajectory, UserMessage
from hsa.harness.model import Harness


@dataclass(frozen=True, slots=True)
class Subject:
    """A canonical trajectory, the harness it was recorded under, and how to replay it."""

    harness: Harness
    trajectory: Trajectory
    replay: Replay = RECORDED
    source: str = ""


# --- subjects ---


def _played(task: Task, trajectory: Trajectory) -> Task:
    """``task`` with the user turns its trajectory shows (corpora with simulated users have
    none), so that replaying the trajectory's steps plays every turn."""
    if task.turns:
        return task
    turns = tuple(e.text for e in trajectory.events if isinstance(e, UserMessage))
    return dataclasses.replace(task, turns=turns)


def spread(items: Sequence[Any], limit: int | None) -> list[Any]:
    """At most ``limit`` of ``items``, evenly spaced, in order (all of them when None)."""
    items = list(items)
    if limit is None or limit >= len(items):
        return items
    return [items[(i * len(items)) // limit] for i in range(limit)]


def subjects_from_env(
    env: Environment,
    solve: Callable[[Environment, Task], Trajectory],
    *,
    split: str | None = None,
    limit: int | None = None,
) -> list[Subject]:
    """The trajectory ``solve`` records for each task of ``env`` (its oracle, or the corpus's
    reference solution), replayed through ``env`` itself; ``limit`` takes evenly spaced
    tasks."""
    out = []
    for task in spread(env.tasks(split), limit):
        harness = env.harness_for(task)
        trajectory = solve(env, task)
        replay = Replay(env, _played(task, trajectory), harness)
        out.append(Subject(harness, trajectory, replay, env.name))
    return out


def _episode_trajectory(solve: Callable[..., Any]) -> Callable[[Environment, Task], Trajectory]:
    return lambda env, task: solve(env, task).trajectory


def subjects_from_source(
    path: Path, *, harness: Harness | None = None, limit: int | None = None
) -> list[Subject]:
    """Subjects of an imported corpus, replayed through the environment built from it.

    BFCL files and tau2 domain folders become ``BfclEnvironment``/``Tau2Environment`` (their
    reference solutions, scored by BFCL's checker and tau2's action criterion); an OpenAI chat
    JSONL file becomes a ``RecordedEnvironment`` (read under ``harness`` when given). Corpus
    tools replay recorded outputs for exactly matching calls only, so an inverse-mapped call
    that is not exactly the recorded one gets an error and fails the replay check.
    """
    from hsa.envs import get_env
    from hsa.harness.importers import detect_format

    fmt = detect_format(path)
    if harness is not None and fmt != "openai-jsonl":
        raise HsaError("--harness applies to OpenAI chat JSONL sources only", file=str(path))
    if fmt in ("bfcl", "tau2"):
        import importlib

        env = get_env(fmt, path=str(path))
        solve = importlib.import_module(f"hsa.envs.{fmt}").solve
    elif fmt == "openai-jsonl":
        from hsa.envs.recorded import RecordedEnvironment

        env = RecordedEnvironment.from_jsonl(path, harness)
        solve = type(env).solve
    else:
        raise HsaError(
            f"a {fmt} source holds no trajectories or reference calls to check rules on",
            file=str(path),
        )
    found = subjects_from_env(env, _episode_trajectory(solve), limit=limit)
    if not found and env.left_out():
        raise HsaError(f"nothing to check on: {'; '.join(env.left_out())}", file=str(path))
    return found


def parquet_files(path: Path) -> list[Path] | None:
    """The Parquet files ``path`` names: itself, or a folder's shards (``hsa teach``'s
    output, say; hsa's own ``.hsa`` state aside), in name order; None when it is neither."""
    if path.suffix.lower() == ".parquet" and not path.is_dir():
        return [path]
    if not path.is_dir():
        return None
    shards = sorted(
        p
        for p in path.rglob("*.parquet")
        if not any(part.startswith(".") for part in p.relative_to(path).parts)
        and p.name != "variants.parquet"  # (a dataset's variants, beside its rows)
    )
    return shards or None


def subjects_from_files(
    harness: Harness, trajectories: Path, *, limit: int | None = None
) -> list[Subject]:
    """Subjects from a trajectories file recorded under ``harness``: canonical Parquet
    (``hsa.harness.TRAJECTORY_SCHEMA``) or OpenAI chat JSONL, replayed through a
    ``RecordedEnvironment`` built from the file's own calls and results."""
    from hsa.envs.recorded import RecordedEnvironment

    if not trajectories.exists():
        raise HsaError("no such file or folder", file=str(trajectories))
    shards = parquet_files(trajectories)
    if shards is None:
        return subjects_from_source(trajectories, harness=harness, limit=limit)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hsa.harness.events import trajectories_from_table

    try:
        tables = [pq.read_table(shard) for shard in shards]
    except (OSError, ValueError) as exc:
        first = first_line(exc)
        raise HsaError(f"cannot read Parquet: {first}", file=str(trajectories)) from None
    if any(t.schema != tables[0].schema for t in tables[1:]):
        raise HsaError(
            "its Parquet files hold different columns: give canonical trajectory shards (hsa "
            "teach's output, say), not a folder of several kinds of file",
            file=str(trajectories),
        )
    table = pa.concat_tables(tables)
    if "events" not in table.column_names:
        raise HsaError(
            "holds no canonical trajectories (no events column; an augmented dataset's rows, "
            "say): check rules on the trajectories it was made from",
            file=str(trajectories),
        )
    found = trajectories_from_table(table)
    # A file may hold trajectories of several harnesses: keep the ones recorded under this one.
    mine = [t for t in found if t.harness_id in (None, harness.id)]
    if found and not mine:  # checking rules on them would blame the rules for the mismatch
        ids = ", ".join(sorted({str(t.harness_id) for t in found}))
        raise HsaError(
            f"no trajectory here was recorded under the given harness {harness.id!r} (they "
            f"were under {ids}): give the harness they were recorded under",
            file=str(trajectories),
        )
    found = spread(mine, limit)
    tasks = [
        Task(
            id=t.id,
            env="recorded",
            turns=tuple(e.text for e in t.events if isinstance(e, UserMessage)),
            ground_truth={"trajectory": t.id},
            harness_id=harness.id,
        )
        for t in found
    ]
    found = [dataclasses.replace(t, harness_id=harness.id) for t in found]
    env = RecordedEnvironment([harness], tasks, found)
    return [
        Subject(harness, t, Replay(env, task, harness), "parquet")
        for t, task in zip(found, tasks, strict=True)
    ]


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
    across_processes: bool = False,
) -> Iterator[CheckReport]:
    """Check every job on every subject under every seed; yields one report each.

    A rule that does not depend on the trajectory is applied once per harness, seed and set
    of hooks fired (planning refuses a rewrite that drops a hook the trajectory fires) and
    reused across that harness's trajectories; one that does is applied per trajectory with
    its ``Context``. A rule that raises is reported as a failure of the ``harness`` check;
    a draw that planning gives up (``HooksAlike``) is checked as one that changes nothing.

    ``across_processes``: a rule that is not hsa's own is also applied again in other Python
    processes, one under each of ``ELSEWHERE_HASH_SEEDS`` (``hsa rules check``): a rewrite
    that depends on the order of a set of strings or on ``hash()`` is the same twice in one
    process and differs in the next, giving one variant id two contents. A rewrite that
    differs in one of them fails the ``harness`` check, and so does every other application
    of a rule one of them gave no answer for (``not checked in another process: ...``):
    unchecked is not passed. That rule's reports come when it is done.
    """
    seeds = list(seeds)
    for job in jobs:
        cache: dict[tuple, Any] = {}
        applied: list[_Applied] | None = [] if across_processes and job.rule.plugin else None
        held: list[tuple[CheckReport, int | None]] = []
        for subject in subjects:
            for seed in seeds:
                report, case = _one(job, subject, seed, cache, applied)
                if applied is not None:
                    held.append((report, case))
                    continue
                if on_report is not None:
                    on_report(report)
                yield report
        if applied is not None:
            differs, unchecked = _differs_elsewhere(job, applied)
            for report, case in held:
                if case is not None and case in differs:
                    report = _failed_elsewhere(report, applied[case].seed, differs[case])
                elif case is not None and unchecked is not None:
                    report = _unchecked_elsewhere(report, applied[case].seed, unchecked)
                if on_report is not None:
                    on_report(report)
                yield report


def _one(
    job: Job, subject: Subject, seed: int, cache: dict, applied: list[_Applied] | None = None
) -> tuple[CheckReport, int | None]:
    """The report of one subject and seed, and the index in ``applied`` of the application
    it checked (when ``applied`` records them)."""
    from hsa.augment.checks import FAIL, Failure

    harness, trajectory = subject.harness, subject.trajectory
    context = Context.of(trajectory.events, harness)
    sight = Sight.of(trajectory.events)
    # the hooks it fires are in the key: a rewrite that drops one is refused only where it
    # fires; and the arguments its calls use that their schemas do not declare, which the
    # rule's new names miss
    key = (harness.to_json(), seed, sight.hooks, context.arguments) if not job.rule.needs else None
    reason: str | None
    trace = ""
    case: int | None = None
    try:
        if key is not None and key in cache:
            rewrite, case = cache[key]
        else:
            rewrite = _apply_checked(job, harness, seed, context, sight.hooks)
            if applied is not None:
                case = len(applied)
                applied.append(_Applied(harness, seed, context, sight.hooks, _outcome(rewrite)))
            if key is not None:
                cache[key] = (rewrite, case)
    except RuleError as exc:
        reason, trace = str(exc), "".join(traceback.format_exception(exc))
    except Exception as exc:  # a rule that crashes fails its check; the run goes on
        reason = f"the rule raised {type(exc).__name__}: {exc}"
        trace = "".join(traceback.format_exception(exc))
    else:
        reason = None
    if reason is not None:
        failed = CheckReport(
            f"{trajectory.id}@seed{seed}",
            {"harness": FAIL},
            (Failure("harness", f"seed {seed}", reason, trace),),
            job.rule.name,
        )
        return failed, None
    report = check_rewrite(
        harness,
        rewrite,
        trajectory.events,
        replay=subject.replay,
        trajectory_id=f"{trajectory.id}@seed{seed}",
        label=job.rule.name,
    )
    return report, case


def _apply_checked(
    job: Job, harness: Harness, seed: int, context: Context, fired: Iterable[str]
) -> Rewrite:
    """The rule's rewrite of ``harness``, run strictly (``Rule.run``: it must leave the harness
    it is given as it was and give the same rewrite again from the same seed), on a copy: a
    rule that edits it in place leaves the harness the other seeds and rules are checked on
    as it was. A draw that makes two hooks' messages read alike (``HooksAlike``) is given up
    as planning gives it up (it draws again): the harness unchanged, a rewrite that changes
    nothing."""
    chain = [(job.rule, job.params or {})]
    given = _copied(harness)
    try:
        rewrite, _ = apply_chain(given, chain, seed=seed, context=context, strict=True, fired=fired)
    except HooksAlike:
        return Rewrite(given)
    return rewrite


def _copied(harness: Harness) -> Harness:
    """A deep copy of ``harness``; its tools' schemas copied level by level where they nest
    deeper than ``copy.deepcopy`` recurses (a schema the importer took)."""
    try:
        return copy.deepcopy(harness)
    except RecursionError:
        tools = [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]
        deep = [part for t in tools for part in (t.parameters, t.extra) if type(part) is dict]
        return copy.deepcopy(harness, {id(part): copy_json(part) for part in deep})


# --- the same rewrite in other processes ---


@dataclass(frozen=True, slots=True)
class _Applied:
    """One application of a rule: what it was given, and what it gave (``_outcome``)."""

    harness: Harness
    seed: int
    context: Context
    fired: tuple[str, ...]
    outcome: tuple[str, str]


#: the ``PYTHONHASHSEED`` of each other process a plugin's rule is applied again in (but this
#: process's own). A set of two or three short strings often orders alike under two seeds:
#: with one other process, a rule choosing by such a set's order passed about half the time.
#: These eight (picked so that no pair or triple of a list of common tool names orders alike
#: under all of them) order about 1 pair of random short strings in 170 alike, and a rule
#: choosing by it passes only where this process's order is that one too.
ELSEWHERE_HASH_SEEDS = ("50", "53", "326", "237", "51", "52", "54", "55")

#: how long the other processes may take over one rule's applications: this, and
#: ``ELSEWHERE_EACH_S`` more for each (an application takes milliseconds: a run of hours
#: here is given its hours there), times the processes each CPU runs (they run side by side)
ELSEWHERE_TIMEOUT_S = 600
ELSEWHERE_EACH_S = 0.05


def _differs_elsewhere(job: Job, applied: Sequence[_Applied]) -> tuple[dict[int, str], str | None]:
    """The applications of ``applied`` that give another rewrite (or an error) in another
    Python process, under another ``PYTHONHASHSEED``, by index, with what differed (in the
    first process it differed in); and why some could not be compared, when another
    process gave no answer (it could not load the rule, exited with an error or without an
    answer, or ran past its time limit). One process for all of a rule's applications under
    each of ``ELSEWHERE_HASH_SEEDS`` (but this process's own), run side by side. A rule the
    other processes cannot find by name (one defined in ``__main__``, a notebook's) is not
    run there."""
    if not applied or job.rule.fn.__module__ == "__main__":
        return {}, None
    ours = os.environ.get("PYTHONHASHSEED")
    others = [seed for seed in ELSEWHERE_HASH_SEEDS if seed != ours]
    out: dict[int, str] = {}
    unchecked = None
    for other, outcomes in zip(others, _outcomes_elsewhere(job, applied, others), strict=True):
        where = f"another process (PYTHONHASHSEED={other})"
        if isinstance(outcomes, str):
            unchecked = unchecked or f"not checked in {where}: {outcomes}"
            continue
        for i, (mine, theirs) in enumerate(zip(applied, outcomes, strict=True)):
            if i in out:
                continue
            if isinstance(theirs, str):
                out[i] = f"raised in {where}, not here: {theirs}"
            elif tuple(theirs) != mine.outcome:
                out[i] = f"gave another rewrite in {where} from the same seed"
    return out, unchecked


def _outcomes_elsewhere(
    job: Job, applied: Sequence[_Applied], hash_seeds: Sequence[str]
) -> list[list | str]:
    """What each application gave in another process (``_elsewhere``) under each of
    ``hash_seeds``, or why that process gave no answer. The processes run side by side,
    each given the applications from one file; each answer comes back in a file of its
    own: what the rule, its module or an ``atexit`` hook prints there cannot be taken for
    it or hide it."""
    import tempfile
    import time

    # the plugins load there as here: the same HSA_PLUGINS and entry points, and the same
    # import path (a plugin importable here from the current folder is there too)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    module = job.rule.fn.__module__
    rounds = -(-len(hash_seeds) // (os.cpu_count() or 1))
    limit = ELSEWHERE_TIMEOUT_S + ELSEWHERE_EACH_S * len(applied) * rounds
    code = "from hsa.augment.suite import _elsewhere; _elsewhere()"
    with tempfile.TemporaryDirectory(prefix="hsa-elsewhere-") as name:
        folder = Path(name)
        started: list[subprocess.Popen | str] = []
        try:
            given = pickle.dumps(
                (job.rule.name, module, dict(job.params or {}), [_given(a) for a in applied]), 5
            )
            (folder / "given.pickle").write_bytes(given)
        except Exception as exc:  # a harness that cannot be pickled
            return [f"it could not be started: {one_line(exc)}"] * len(hash_seeds)
        try:
            for i, hash_seed in enumerate(hash_seeds):
                started.append(_start(code, folder, i, {**env, "PYTHONHASHSEED": hash_seed}))
            deadline = time.monotonic() + limit
            return [
                _answer(one, folder, i, deadline, limit, len(applied))
                for i, one in enumerate(started)
            ]
        finally:
            for one in started:
                if not isinstance(one, str):
                    one.kill()  # (one that ran past the time limit; the others are done)
                    one.wait()


def _start(code: str, folder: Path, i: int, env: dict[str, str]) -> subprocess.Popen | str:
    """The ``i``-th other process of ``_outcomes_elsewhere``, started on the applications in
    ``folder``, or why it could not be."""
    try:
        with (
            open(folder / "given.pickle", "rb") as given,
            open(folder / f"stderr{i}", "wb") as errors,
        ):
            return subprocess.Popen(
                [sys.executable, "-c", code, str(folder / f"{i}-answer.json")],
                stdin=given,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=env,
            )
    except Exception as exc:  # no interpreter to start
        return f"it could not be started: {one_line(exc)}"


def _answer(
    process: subprocess.Popen | str, folder: Path, i: int, deadline: float, limit: float, n: int
) -> list | str:
    """What the ``i``-th other process of ``_outcomes_elsewhere`` gave, or why there is no
    answer."""
    import time

    if isinstance(process, str):
        return process
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return f"it gave no answer in {limit:g} s"
    try:
        said = json.loads((folder / f"{i}-answer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        said = None
    if process.returncode != 0:
        errors = (folder / f"stderr{i}").read_bytes()
        last = errors.decode("utf-8", "replace").strip().splitlines()
        return f"it exited with status {process.returncode}" + (f": {last[-1]}" if last else "")
    if isinstance(said, dict) and isinstance(said.get("error"), str):
        return f"it could not load the rule: {said['error']}"
    outcomes = said.get("outcomes") if isinstance(said, dict) else None
    if not isinstance(outcomes, list):
        return "it exited without an answer"
    if len(outcomes) != n:
        return f"it gave {len(outcomes)} answers for {n} applications"
    return outcomes


def _given(item: _Applied) -> tuple:
    return (item.harness, item.seed, item.context, item.fired)


def _failed_elsewhere(report: CheckReport, seed: int, why: str) -> CheckReport:
    message = (
        f"{why}: the rewrite differs across processes, so one variant id would hold two "
        "contents; draw everything from rng, never from random or the clock, and iterate "
        "sorted(...), never a set's order or hash() (docs/rules.md, 'Check it')"
    )
    return _fail_harness(report, seed, message)


def _unchecked_elsewhere(report: CheckReport, seed: int, why: str) -> CheckReport:
    message = (
        f"{why}, so whether the rewrite is the same across processes (set order or hash()) "
        "is not known, and an unchecked rule does not pass (docs/rules.md, 'Check it')"
    )
    return _fail_harness(report, seed, message)


def _fail_harness(report: CheckReport, seed: int, message: str) -> CheckReport:
    from hsa.augment.checks import FAIL, Failure

    failure = Failure("harness", f"seed {seed}", message)
    return dataclasses.replace(
        report,
        outcomes={**report.outcomes, "harness": FAIL},
        failures=(failure, *report.failures),
    )


def _elsewhere() -> None:
    """The other process of ``_differs_elsewhere``: read the rule and its applications from
    stdin (pickled), apply each as ``run`` does and write what each gave (``_outcome``, or
    the error) as JSON to the file named by its one argument: ``{"outcomes": [...]}``, or
    ``{"error": ...}`` when the rule cannot be loaded."""
    import importlib

    from hsa.augment.registry import get

    answer = Path(sys.argv[1])
    try:
        name, module, params, given = pickle.load(sys.stdin.buffer)
    except Exception as exc:
        answer.write_text(json.dumps({"error": one_line(exc)}), encoding="utf-8")
        return
    imported: Exception | None = None
    try:  # a test's or a script's rules register on import; a plugin's, by its entry point
        importlib.import_module(module)
    except Exception as exc:  # (a module with no importable name: run_path's, exec's)
        imported = exc
    try:
        job = Job(get(name), params)
    except Exception as exc:
        answer.write_text(json.dumps({"error": one_line(imported or exc)}), encoding="utf-8")
        return
    out: list[Any] = []
    for harness, seed, context, fired in given:
        try:
            out.append(_outcome(_apply_checked(job, harness, seed, context, fired)))
        except Exception as exc:
            out.append(one_line(exc))
    answer.write_text(json.dumps({"outcomes": out}), encoding="utf-8")


def describe(report: CheckReport) -> str:
    """One line per failure of ``report``, for the CLI and for test messages."""
    return "\n".join(
        f"{report.label}: {report.trajectory_id}: {f}" for f in report.failures
    ) or json.dumps(report.outcomes)
