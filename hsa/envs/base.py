"""The Environment interface: a canonical harness, tasks by split, tool execution, scoring."""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsa.config import named_files
from hsa.errors import EnvError
from hsa.harness.events import Event
from hsa.harness.importers.base import SPLITS as SPLITS  # re-exported: a Task's split
from hsa.harness.model import Harness

if TYPE_CHECKING:
    from hsa.envs.episode import Episode, Policy


@dataclass(frozen=True, slots=True)
class Task:
    """One task: what the user says, and the ground truth the outcome is scored against.

    ``turns`` holds the user messages in order (a multi-turn task has several).
    ``ground_truth`` is environment-specific (facts the answer must contain, required and
    forbidden calls, reference calls, expected final state, ...). As JSON it is the row format
    of a ``tasks.jsonl`` file: ``Task.from_dict(Task.to_dict(t)) == t``.
    """

    id: str
    env: str
    turns: tuple[str, ...]
    ground_truth: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "default"
    split: str = "train"
    harness_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "env": self.env,
            "kind": self.kind,
            "split": self.split,
            "harness_id": self.harness_id,
            "turns": list(self.turns),
            "ground_truth": dict(self.ground_truth),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """The task ``to_dict`` wrote; an ``EnvError`` saying what is missing or wrong."""
        if not isinstance(data, Mapping):
            raise EnvError(f"a task is an object (Task.to_dict()), not a {type(data).__name__}")
        missing = [k for k in ("id", "env") if not isinstance(data.get(k), str) or not data[k]]
        if missing:
            keys = " and ".join(repr(k) for k in missing)
            raise EnvError(f"a task needs {keys}, a non-empty string")
        try:
            return cls(
                id=data["id"],
                env=data["env"],
                turns=tuple(data.get("turns") or ()),
                ground_truth=dict(data.get("ground_truth") or {}),
                kind=data.get("kind", "default"),
                split=data.get("split", "train"),
                harness_id=data.get("harness_id"),
                metadata=dict(data.get("metadata") or {}),
            )
        except (TypeError, ValueError) as exc:  # turns, ground_truth, metadata of other kinds
            raise EnvError(f"not a task: {exc}") from None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool call returned: JSON text, and whether it is an error."""

    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """A scored episode: ``success`` and, when it failed, every reason why. ``score`` is its
    reward (``hsa train rl``'s environment reward): unless given, 1.0 when it succeeded and 0.0
    when not, as the benchmarks hsa imports reward an episode, with no partial credit."""

    success: bool
    reasons: tuple[str, ...] = ()
    score: float | None = None

    def __post_init__(self) -> None:
        if self.score is None:
            object.__setattr__(self, "score", 1.0 if self.success else 0.0)


def tasks_of_split(tasks: Sequence[Task], split: str | None) -> list[Task]:
    """The tasks of ``split`` (all when None), in their order; an unknown split is an error."""
    if split is None:
        return list(tasks)
    if split not in SPLITS:
        from hsa.errors import EnvError

        raise EnvError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return [t for t in tasks if t.split == split]


class Environment(abc.ABC):
    """A world an agent acts in, through the tools of its canonical harness.

    Tool names and arguments passed to ``execute`` are canonical (as ``harness()`` spells
    them): callers working under an augmented harness map calls back first.
    """

    #: registry name, e.g. ``livestream``
    name: str = ""
    #: the version of ``score``: bumped when the same episode would score otherwise, so the
    #: teacher jobs and evaluations of an older one are not resumed into (it is part of their
    #: output hash from version 2 on)
    score_version: int = 1
    #: the version of ``tasks``: bumped when the same options give other tasks (other turns,
    #: ground truth or splits), so the teacher jobs, builds and evaluations of older ones are
    #: not resumed into (it is part of their hashes from version 2 on)
    task_version: int = 1

    @classmethod
    def corpus_files(cls, path: Path) -> dict[str, Path]:
        """The files the environment reads of its corpus at ``path`` (its ``path`` option), by
        the names a job's output hash takes them by (``hsa.envs.registry.corpus_hash``), so
        that an edit of one is another job and a file it does not read (a job's ``--out``
        inside the folder) is not. By default: a file, by its content alone (the name ``""``);
        a folder, its files by their paths relative to it (``hsa.config.folder_files``: not
        hidden entries, nor the folders of hsa jobs). An environment that reads files beside
        its corpus, only some of a folder's, or takes meaning from a name says which."""
        if path.is_dir():
            return named_files(path)
        return {"": path}

    @property
    def runs_tools(self) -> bool:
        """Whether ``execute`` runs the tools (or replays their recorded results); False for a
        corpus that records none, whose every call gets an error."""
        return True

    def left_out(self) -> tuple[str, ...]:
        """What of its source the environment does not offer as tasks, or offers otherwise
        than written, and why, one sentence each (an imported corpus's entries it cannot
        score; tau2 tasks that ``split_tasks.json`` puts in no split, so in test)."""
        return ()

    def no_tasks(self, split: str | None) -> str:
        """Why the environment offers no ``split`` tasks (None: no tasks at all), for an
        error: its notes (``left_out``) when it offers none at all, since they say why; else
        the splits it has tasks in, the notes said but as no cause."""
        notes = "; ".join(self.left_out())
        said = f"environment {self.name!r} has no {split + ' ' if split else ''}tasks"
        found = Counter(task.split for task in self.tasks())
        if not found:
            return f"{said}: {notes}" if notes else said
        has = ", ".join(f"{found[name]:,} {name}" for name in SPLITS if name in found)
        also = f"; also left out: {notes}" if notes else ""
        return f"{said} (it has {has} task(s){also})"

    def restates(self, task: Task) -> bool:
        """Whether ``task`` asks another task of this environment again in another form (BFCL's
        format-sensitivity entries: an entry under one of its prompt formats). A teacher job
        leaves such tasks out: their trajectory is the other task's, and a dataset's variants
        vary the form."""
        return False

    def ends_at_calls(self, task: Task) -> bool:
        """Whether ``task`` is over once the model has made its calls: they are scored as
        made and never run. BFCL's call-scored categories judge the model's first reply, so
        a call there gets no result and no second try. ``score`` then sees every call the
        model made: one its harness refused (the teachers' rollout) under a name no tool has,
        so it counts as a call and matches none."""
        return False

    def unparsed_is_no_call(self, task: Task) -> bool:
        """Whether on ``task`` a reply that does not parse is scored as no call, as the
        benchmark's own decoder reads it: BFCL's irrelevance entries, where a reply it cannot
        decode (arguments not JSON, or not an object) is no call, so the entry passes. The
        rollout still ends there as a format failure, which the teacher never verifies; the
        evaluation counts it solved when ``score`` says so (``hsa.eval.metrics.succeeded``)."""
        return False

    @abc.abstractmethod
    def harness(self) -> Harness:
        """The canonical harness of this environment."""

    def harness_for(self, task: Task) -> Harness:
        """The harness ``task`` is played under: the canonical one, unless the environment
        has one per task (imported corpora such as BFCL)."""
        return self.harness()

    def harnesses(self) -> list[Harness]:
        """Every harness a task is played under (``harness_for``)."""
        return [self.harness()]

    @abc.abstractmethod
    def tasks(self, split: str | None = None) -> list[Task]:
        """The tasks of ``split`` (all splits when None), in a stable order."""

    @abc.abstractmethod
    def reset(self, task: Task) -> Any:
        """A fresh, mutable episode state for ``task``."""

    @abc.abstractmethod
    def execute(self, state: Any, tool: str, args: Mapping[str, Any]) -> ToolOutput:
        """Run one tool call. Never raises for a bad call: returns an error ``ToolOutput``."""

    @abc.abstractmethod
    def score(self, task: Task, state: Any, events: Sequence[Event]) -> Outcome:
        """Score an episode's canonical events (and final state) against the task."""

    def turns(self, task: Task) -> tuple[str, ...]:
        """The user messages ``task`` is played with: its turns (a corpus whose users are
        simulated gives one opening message instead; see ``CorpusEnvironment``)."""
        return task.turns

    def oracle(self) -> Policy:
        """The environment's scripted policy: ``policy(task, events)`` gives the next step of
        its solution of ``task``. The one way to reach an environment's oracle: ``solve``,
        ``hsa env check``, the ``oracle`` teacher (``hsa teach``, ``hsa build``) and
        ``hsa serve oracle`` all get it here."""
        raise EnvError(
            f"environment {self.name!r} has no oracle (a scripted policy that solves its tasks)"
        )

    def solve(self, task: Task) -> Episode:
        """Play the environment's reference solution of ``task``, recording every event: its
        ``oracle`` (a corpus environment plays its recorded reference calls instead)."""
        from hsa.envs.episode import run_episode

        return run_episode(self, task, self.oracle(), source="oracle")
