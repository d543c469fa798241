"""BFCL as an environment: imported single-turn entries, scored by their possible answers.

Tasks come from ``hsa.harness.importers`` (one harness per entry, tool names made API-legal)
and keep BFCL's categories; ``irrelevance`` entries are solved by making no call. Multi-turn
entries are left out: BFCL scores them by executing its Python backends, which the corpus does
not hold. Tools cannot run either, so every call gets a structured error unless an output was
recorded for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hsa.envs.base import Outcome, Task
from hsa.envs.bfcl_check import check_calls
from hsa.envs.episode import Episode
from hsa.envs.recorded import CorpusEnvironment, CorpusState, tool_calls
from hsa.harness.events import Event, ToolCall


def _concrete(candidates: Any) -> tuple[bool, Any]:
    """``(present, value)``: the first acceptable value of a possible-answer entry."""
    if not isinstance(candidates, list):
        return True, candidates
    for candidate in candidates:
        if candidate == "":
            continue
        return True, _fill(candidate)
    return False, None


def _fill(value: Any) -> Any:
    # Dicts inside possible answers list acceptable values per key, like parameters do.
    if isinstance(value, dict):
        out = {}
        for key, candidates in value.items():
            present, chosen = _concrete(candidates)
            if present:
                out[key] = chosen
        return out
    if isinstance(value, list):
        return [_fill(v) if isinstance(v, dict) else v for v in value]
    return value


def reference_calls(task: Task, tools: Mapping[str, Mapping[str, Any]]) -> list[ToolCall]:
    """One acceptable answer of a BFCL task as canonical calls.

    Each parameter gets its first acceptable value, except that a parameter the answer lets
    be left out (``""`` among its values) is left out when it is not required or not in the
    tool's schema; a required parameter whose only value is ``""`` gets ``""``.
    """
    calls = []
    for i, answer in enumerate(task.ground_truth.get("calls") or ()):
        ((name, possible),) = answer.items()
        schema = tools.get(name) or {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        args = {}
        for param, candidates in possible.items():
            optional = isinstance(candidates, list) and "" in candidates
            if optional and (param not in required or param not in props):
                continue
            present, value = _concrete(candidates)
            if present:
                args[param] = value
            elif optional:
                args[param] = ""
        calls.append(ToolCall(f"call_{i}", name, args))
    return calls


def answer_defects(task: Task, tools: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why no call can satisfy the task's possible answers under BFCL's checker, if so: a
    required parameter with no acceptable value, or a value the answer demands for a parameter
    the function does not declare (a handful of BFCL entries have such answers)."""
    defects = []
    for answer in task.ground_truth.get("calls") or ():
        ((name, possible),) = answer.items()
        schema = tools.get(name) or {}
        props = schema.get("properties") or {}
        for param in schema.get("required") or ():
            if param in possible and not possible[param]:
                defects.append(f"{name}: required parameter {param!r} has no acceptable value")
        for param, candidates in possible.items():
            if param not in props and "" not in candidates:
                defects.append(f"{name}: the answer needs {param!r}, which is not a parameter")
    return defects


class BfclEnvironment(CorpusEnvironment):
    """BFCL single-turn categories with BFCL's AST-checker scoring."""

    def __init__(self, harnesses, tasks, outputs=None):
        super().__init__("bfcl", harnesses, tasks, outputs)

    @classmethod
    def from_corpus(cls, path: str | Path) -> BfclEnvironment:
        """Import a BFCL question file or folder; keep the entries with a single-turn answer."""
        from hsa.harness.importers import import_source

        result = import_source(path, format="bfcl")
        tasks = [
            Task.from_dict(row)
            for row in result.tasks
            if "calls" in (row.get("ground_truth") or {})
        ]
        used = {t.harness_id for t in tasks}
        return cls([h for h in result.harnesses if h.id in used], tasks)

    def category(self, task: Task) -> str:
        return str(task.metadata.get("category") or task.kind)

    def tools(self, task: Task) -> dict[str, Mapping[str, Any]]:
        """Tool name -> parameter schema, for the functions ``task`` offers."""
        return {t.name: t.parameters for t in self.harness_for(task).tools}

    def reference_steps(self, task: Task) -> list[list[Event]]:
        calls = reference_calls(task, self.tools(task))
        return [list(calls)] if calls else []

    def score(self, task: Task, state: CorpusState, events: Sequence[Event]) -> Outcome:
        calls = [{c.tool: dict(c.args)} for c in tool_calls(events)]
        answers = list(task.ground_truth.get("calls") or ())
        tools = self.tools(task)
        problem = check_calls(self.category(task), tools, calls, answers)
        if problem is None:
            return Outcome(success=True)
        defects = [
            f"the corpus's possible answer cannot be met: {d}" for d in answer_defects(task, tools)
        ]
        return Outcome(success=False, reasons=(problem, *defects))


def solve(env: CorpusEnvironment, task: Task) -> Episode:
    """The reference episode of ``task`` (``env.solve``), as ``hsa.envs.<name>.solve``."""
    return env.solve(task)
