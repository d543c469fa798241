"""Livestream tasks: drafts from the templates, made distinct, given ids and split by request.

Each task's ``metadata`` holds ``now`` (the stream time the episode starts at), ``template``
and ``plan``: the request as a structured intent, one entry per user turn (what a reader of
the viewer's message understands; every value an answer states still has to come from tools).

A task's split is drawn from the intent of its first turn, not from its id: tasks that open
with the same request (a follow-up opens with a price task word for word; a template words
one request several ways, or asks it at several stream times) are one source task, and share
a split, so no held-out task is a train task or the start of one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hsa.envs.base import SPLITS, Task
from hsa.envs.livestream.state import ticket_id
from hsa.envs.livestream.world import World

#: the task kinds, in the order tasks are listed
KINDS = (
    "single_tool",
    "multi_tool",
    "promotion",
    "out_of_stock",
    "compliance_trap",
    "multi_turn",
    "skill_first",
    "unanswerable",
)
SPLIT_WEIGHTS = (80, 10, 10)  # percent of tasks in train, dev, test


@dataclass(slots=True)
class Draft:
    """A task before it has an id: what the viewer says, the intent, and the ground truth."""

    kind: str
    template: str
    turns: list[str]
    plan: list[dict[str, Any]]
    now: str
    facts: list[Any] = field(default_factory=list)
    required_calls: list[dict[str, Any]] = field(default_factory=list)
    forbidden_calls: list[dict[str, Any]] = field(default_factory=list)
    required_skills: list[str] = field(default_factory=list)
    product_ids: list[str] = field(default_factory=list)
    pinned: dict[str, str] = field(default_factory=dict)
    handoffs: list[str] = field(default_factory=list)

    def require(self, tool: str, **args: Any) -> None:
        self.required_calls.append({"tool": tool, "args": args})

    def forbid(self, tool: str, **args: Any) -> None:
        self.forbidden_calls.append({"tool": tool, "args": args})


def split_group(plan: list[dict[str, Any]]) -> str:
    """What a task's split is drawn from: the intent of its first turn, as sorted JSON, so tasks
    that open with one request (a follow-up and the question it starts with; one request in
    other words) are never apart. Its cost: a template whose tasks all open with one request
    is one group, in one split. Engagement's 72 tasks (one greeting, in three wordings, at 72
    stream times) are all train, so no dev or test task needs the viewer-engagement skill."""
    return json.dumps(plan[0], sort_keys=True)


def split_of(group: str) -> str:
    """The split of the tasks of ``group`` (``split_group``), from a hash of it: stable across
    runs and seeds, and whatever other tasks there are."""
    bucket = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) % 100
    edge = 0
    for name, weight in zip(SPLITS, SPLIT_WEIGHTS, strict=True):
        edge += weight
        if bucket < edge:
            return name
    return SPLITS[-1]


def make_tasks(world: World, drafts: Iterator[Draft], n_tasks: int | None = None) -> list[Task]:
    """Number the distinct drafts into tasks; with ``n_tasks``, keep that many, kinds and
    templates mixed (the kept tasks have the ids and splits they have in the full set)."""
    seen: set[tuple[str, ...]] = set()
    by_kind: dict[str, list[Draft]] = {k: [] for k in KINDS}
    for draft in drafts:
        key = (draft.now, *draft.turns)
        if key in seen:
            continue
        seen.add(key)
        by_kind[draft.kind].append(draft)
    ordered = [d for k in KINDS for d in by_kind[k]]
    counters: dict[str, int] = {}
    tasks = []
    for draft in ordered:
        counters[draft.template] = counters.get(draft.template, 0) + 1
        task_id = f"livestream-s{world.seed}-{draft.template}-{counters[draft.template]:04d}"
        tasks.append(_task(task_id, draft))
    if n_tasks is not None and n_tasks < len(tasks):
        keep = set(_sample(tasks, n_tasks))
        tasks = [t for t in tasks if t.id in keep]
    return tasks


def _sample(tasks: list[Task], n_tasks: int) -> list[str]:
    """The ids of ``n_tasks`` tasks, round-robin over kinds and, within a kind, over its
    templates, each from the front: a small sample still covers every kind and template."""
    by_kind: dict[str, dict[str, list[str]]] = {}
    for t in tasks:
        by_kind.setdefault(t.kind, {}).setdefault(t.metadata["template"], []).append(t.id)
    kinds = [_round_robin(list(templates.values())) for templates in by_kind.values()]
    return _round_robin(kinds)[:n_tasks]


def _round_robin(queues: list[list[str]]) -> list[str]:
    """The first of each queue in turn, then the second of each, and so on."""
    out: list[str] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def _task(task_id: str, draft: Draft) -> Task:
    # A hand-off ticket is named after the task, so facts can mention it only now.
    facts = [
        ticket_id(task_id, int(f[len("@ticket:") :]))
        if isinstance(f, str) and f.startswith("@ticket:")
        else f
        for f in draft.facts
    ]
    return Task(
        id=task_id,
        env="livestream",
        kind=draft.kind,
        split=split_of(split_group(draft.plan)),
        harness_id="livestream",
        turns=tuple(draft.turns),
        ground_truth={
            "facts": facts,
            "required_calls": draft.required_calls,
            "forbidden_calls": draft.forbidden_calls,
            "required_skills": draft.required_skills,
            "product_ids": sorted(set(draft.product_ids)),
            "final_state": {
                "pinned": dict(sorted(draft.pinned.items())),
                "handoffs": draft.handoffs,
            },
        },
        metadata={"now": draft.now, "template": draft.template, "plan": draft.plan},
    )
