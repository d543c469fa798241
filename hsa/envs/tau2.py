"""tau2-bench as an environment: imported domain tasks, scored by tau2's action criterion.

A task is solved when every reference action (``evaluation_criteria.actions``) is matched by
some tool call of the episode, in any order, as tau2's ``ActionEvaluator`` checks it: same tool
name, and equal values for the action's ``compare_args`` (all of the call's arguments when the
action gives none; no argument at all when it gives an empty list), compared as they are (an
array sent as a JSON string is not the array); and, for a task whose ``reward_basis`` holds
``COMMUNICATE`` (airline's), when the assistant told the user each of its
``communicate_info`` strings, as tau2's ``CommunicateEvaluator`` checks it. Tasks without
either are solved by any episode.

This is not tau2's reward. The corpus holds tool schemas and reference calls, not tau2's tools
and databases, so tools run only where an output was recorded (other calls get an error), and
the database state tau2 compares (``DB``) is approximated by the reference actions: an extra
write, a write the database refused and the order of writes are not seen. Retail's natural-
language assertions (``NL_ASSERTION``, an LLM judge) are not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hsa.envs.base import Outcome, Task
from hsa.envs.episode import Episode
from hsa.envs.recorded import CorpusEnvironment, CorpusState, tool_calls
from hsa.harness.events import AssistantMessage, Event, ToolCall


def action_matches(action: Mapping[str, Any], name: str, args: Mapping[str, Any]) -> bool:
    """tau2's ``Action.compare_with_tool_call``, on a call's canonical name and arguments."""
    if action.get("name") != name:
        return False
    compare = action.get("compare_args")
    keys = list(args) if compare is None else list(compare)
    if not keys:
        return True
    expected = action.get("arguments") or {}
    return {k: v for k, v in args.items() if k in keys} == {
        k: v for k, v in expected.items() if k in keys
    }


#: what gates a task's reward when its criteria do not say (``EvaluationCriteria.reward_basis``)
DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")


class Tau2Environment(CorpusEnvironment):
    """One tau2 domain (retail, airline, ...): its harness, tasks and action criterion."""

    def __init__(
        self, harnesses, tasks, outputs=None, *, domain: str = "", notes: Sequence[str] = ()
    ):
        super().__init__("tau2", harnesses, tasks, outputs)
        self.domain = domain
        #: the import's notes (``split_tasks.json`` ids of no task, tasks of no split)
        self.notes = tuple(notes)

    @classmethod
    def from_corpus(cls, path: str | Path) -> Tau2Environment:
        """Import a tau2 domain folder ``path`` (``tools.json``, ``tasks.json``,
        ``policy.md``)."""
        from hsa.harness.importers import import_source

        result = import_source(path, format="tau2")
        tasks = [Task.from_dict(row) for row in result.tasks]
        # the notes about its tasks: those about its tools (the harness keeps them) were the
        # import's to say
        about_tools = {n for h in result.harnesses for n in h.metadata.get("import_notes") or ()}
        notes = [n for n in result.notes if n not in about_tools]
        return cls(result.harnesses, tasks, domain=Path(path).resolve().name, notes=notes)

    def left_out(self) -> tuple[str, ...]:
        return self.notes

    def _renamed(self, task: Task) -> dict[str, str]:
        """tau2 tool name -> harness tool name (they differ only where a name was illegal)."""
        name_map = self.harness_for(task).metadata.get("name_map") or {}
        return {source: legal for legal, source in name_map.items()}

    def actions(self, task: Task) -> list[dict[str, Any]]:
        """The reference actions, with tool names as the harness spells them."""
        rename = self._renamed(task)
        return [
            {**a, "name": rename.get(a["name"], a["name"])}
            for a in task.ground_truth.get("actions") or ()
        ]

    def opening(self, task: Task) -> str:
        scenario = task.metadata.get("user_scenario") or {}
        instructions = scenario.get("instructions") if isinstance(scenario, Mapping) else None
        if isinstance(instructions, Mapping) and instructions.get("reason_for_call"):
            # hsa has no user simulator to answer the agent's questions: the opening carries
            # what tau2's simulated user knows (its name, zip code, order ids, ...) as well
            parts = [str(instructions["reason_for_call"])]
            if instructions.get("known_info"):
                parts.append(str(instructions["known_info"]))
            return "\n\n".join(parts)
        if isinstance(instructions, str) and instructions:
            return instructions
        return super().opening(task)

    def communicate(self, task: Task) -> list[str]:
        """What the assistant must tell the user, when the task's reward counts it."""
        criteria = task.metadata.get("evaluation_criteria") or {}
        basis = criteria.get("reward_basis")
        if basis is None:  # tau2's EvaluationCriteria default, the original tau-bench's
            basis = DEFAULT_REWARD_BASIS
        if "COMMUNICATE" not in basis:
            return []
        return [str(info) for info in criteria.get("communicate_info") or ()]

    def reference_steps(self, task: Task) -> list[list[Event]]:
        steps: list[list[Event]] = [
            [ToolCall(f"call_{i}", a["name"], dict(a.get("arguments") or {}))]
            for i, a in enumerate(self.actions(task))
        ]
        told = self.communicate(task)
        if told:  # the final answer says what the user must be told
            steps.append([AssistantMessage("To confirm: " + "; ".join(told) + ".")])
        return steps

    def score(self, task: Task, state: CorpusState, events: Sequence[Event]) -> Outcome:
        calls = tool_calls(events)
        reasons = []
        for action in self.actions(task):
            if not any(action_matches(action, c.tool, c.args) for c in calls):
                args = json.dumps(action.get("arguments") or {}, ensure_ascii=False)
                reasons.append(
                    f"action {action.get('action_id', '?')} {action['name']} {args} was not "
                    "performed"
                )
        # tau2's CommunicateEvaluator: in some assistant text, lower-cased, commas removed
        said = [e.text.lower().replace(",", "") for e in events if isinstance(e, AssistantMessage)]
        told = self.communicate(task)
        for info in told:
            if not any(info.lower() in text for text in said):
                reasons.append(f"the user was not told {info!r}")
        total = len(self.actions(task)) + len(told)
        score = 1.0 if not total else (total - len(reasons)) / total
        return Outcome(success=not reasons, reasons=tuple(reasons), score=score)


def solve(env: CorpusEnvironment, task: Task) -> Episode:
    """The reference episode of ``task`` (``env.solve``), as ``hsa.envs.<name>.solve``."""
    return env.solve(task)
