"""tau2-bench as an environment: imported domain tasks, scored by tau2's criteria as far as
hsa can check them.

A task's ``reward_basis`` (``DB`` and ``COMMUNICATE``, tau2's default, when its criteria give none)
says what gates it, and hsa checks:

- ``DB`` or ``ACTION``: every reference action (``evaluation_criteria.actions``) is matched by
  some tool call of the episode, in any order, as tau2's ``ActionEvaluator`` checks it: same
  tool name, and equal values for the action's ``compare_args`` (no argument at all when it
  gives an empty list), compared as they are (an array sent as a JSON string is not the
  array). Where an action gives no ``compare_args``, tau2's ``ACTION`` rule compares the
  call's own arguments, so a call that leaves arguments out matches; that rule is kept for a
  basis of ``ACTION`` without ``DB``. ``DB`` is tau2's final database, which hsa approximates
  by the reference actions, so there a call must make the same write: every argument either
  side gives, equal (one the call leaves out or adds is a difference; tau2 would replay the
  action's own arguments, and its tools refuse an argument they do not take), where an
  argument left out counts as its default in the tool's schema (the value tau2's tool writes).
- ``COMMUNICATE``: the assistant told the user each of the task's ``communicate_info``
  strings, as tau2's ``CommunicateEvaluator`` checks it.

A task whose basis holds neither is solved by any episode. A call the environment refused
(arguments its harness's schema refuses, an unknown tool) did nothing and matches no action;
tau2's ``ACTION`` rule reads the calls whatever their results, so this is stricter there.

The episode's ``score`` combines these checks as tau2's reward combines its components (the
product of 1s and 0s): 1 when every check passes, else 0, so an episode that made all but one of
the writes scores 0, not a share.

Still, it is not tau2's reward. The corpus holds tool schemas and reference calls, not tau2's tools
and databases, so tools run only where an output was recorded (other calls get an error), and
the database state tau2 compares is approximated by the reference actions, which errs both
ways. An extra write, a write tau2's database would refuse and the order of writes are not
seen. Arguments are compared as written, so a list in another order than the reference's
is another write, though some of tau2's tools store a list sorted (retail's item ids of an
exchange or a return), where the agent's order gives tau2 the same database and reward 1. And
a reference write that leaves tau2's final database as it was is still required, so
an agent that rightly leaves it out fails where tau2 gives reward 1: one tau2's own tools
refuse (retail tasks 64, whose action 64_6 exchanges items of an order not delivered, and 105,
whose action 106_0 is an exchange its gift card cannot pay for), or one a later write undoes
(retail task 22 changes the user's address and changes it back). Natural-language assertions
(``NL_ASSERTION``, an LLM judge) are not judged. Tasks hsa cannot score at all
(``ENV_ASSERTION`` in the basis, ``NL_ASSERTION`` alone, an ``initial_state`` to set up) are
left out, and ``left_out`` says so.
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
from hsa.harness.importers.tau2 import read_files
from hsa.harness.model import Tool


def action_matches(
    action: Mapping[str, Any],
    name: str,
    args: Mapping[str, Any],
    *,
    same_write: bool = False,
    defaults: Mapping[str, Any] | None = None,
) -> bool:
    """tau2's ``Action.compare_with_tool_call``, on a call's canonical name and arguments.

    With ``same_write`` (the ``DB`` approximation), an action without ``compare_args`` compares
    every argument the action or the call gives, not only the call's, and an argument either
    side leaves out counts as its ``defaults`` value where the tool's schema gives one (tau2's
    tool makes the same write: Python fills the default)."""
    if action.get("name") != name:
        return False
    expected = action.get("arguments") or {}
    if same_write and defaults:
        args, expected = {**defaults, **args}, {**defaults, **expected}
    compare = action.get("compare_args")
    if compare is not None:
        keys = set(compare)
    elif same_write:
        keys = set(args) | set(expected)
    else:
        keys = set(args)
    if not keys:
        return True
    return {k: v for k, v in args.items() if k in keys} == {
        k: v for k, v in expected.items() if k in keys
    }


#: what gates a task's reward when its criteria do not say (``EvaluationCriteria.reward_basis``)
DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")


def reward_basis(task: Task) -> tuple[str, ...]:
    """What gates ``task``'s reward in tau2: its criteria's ``reward_basis``, or tau2's
    default (the original tau-bench's)."""
    criteria = task.metadata.get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis")
    return DEFAULT_REWARD_BASIS if basis is None else tuple(basis)


def schema_defaults(tool: Tool) -> dict[str, Any]:
    """The ``default`` of each of ``tool``'s arguments whose schema gives one."""
    properties = tool.parameters.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        k: p["default"] for k, p in properties.items() if isinstance(p, Mapping) and "default" in p
    }


class Tau2Environment(CorpusEnvironment):
    """One tau2 domain (retail, airline, ...): its harness, tasks and action criterion."""

    #: 2: the score is tau2's 0/1 reward (it was a share of the criteria met)
    score_version = 2

    def __init__(
        self, harnesses, tasks, outputs=None, *, domain: str = "", notes: Sequence[str] = ()
    ):
        super().__init__("tau2", harnesses, tasks, outputs)
        self.domain = domain
        #: the import's notes (``split_tasks.json`` ids of no task, tasks of no split, tasks
        #: it could not score)
        self.notes = tuple(notes)

    @classmethod
    def from_corpus(cls, path: str | Path) -> Tau2Environment:
        """Import a tau2 domain folder ``path`` (``tools.json``, ``tasks.json``,
        ``policy.md``)."""
        from hsa.harness.importers import import_source

        result = import_source(path, format="tau2")
        # the tasks the import marked unscored (its notes say which and why) are left out
        tasks = [
            Task.from_dict(row)
            for row in result.tasks
            if row["metadata"].get("scored", True) is not False
        ]
        # the notes about its tasks: those about its tools (the harness keeps them) were the
        # import's to say
        about_tools = {n for h in result.harnesses for n in h.metadata.get("import_notes") or ()}
        notes = [n for n in result.notes if n not in about_tools]
        return cls(result.harnesses, tasks, domain=Path(path).resolve().name, notes=notes)

    @classmethod
    def corpus_files(cls, path: Path) -> dict[str, Path]:
        # only the files of its domains, by names that hold the domains' folders' names
        return read_files(path)

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

    def required(self, task: Task) -> list[dict[str, Any]]:
        """The reference actions the score requires: all of them when the task's reward
        basis holds ``DB`` (approximated by them) or ``ACTION``, else none."""
        if not {"DB", "ACTION"} & set(reward_basis(task)):
            return []
        return self.actions(task)

    def communicate(self, task: Task) -> list[str]:
        """What the assistant must tell the user, when the task's reward counts it."""
        if "COMMUNICATE" not in reward_basis(task):
            return []
        criteria = task.metadata.get("evaluation_criteria") or {}
        return [str(info) for info in criteria.get("communicate_info") or ()]

    def refused(self, task: Task, call: ToolCall) -> bool:
        """Whether ``execute`` refused ``call`` (``CorpusEnvironment.refusal``)."""
        return self.refusal(task, self.harness_for(task), call.tool, call.args) is not None

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
        calls = [c for c in tool_calls(events) if not self.refused(task, c)]
        same_write = "DB" in reward_basis(task)
        required = self.required(task)
        harness = self.harness_for(task)
        reasons = []
        for action in required:
            # the reference's name is the harness's (``actions``), so is its tool's schema
            tool = harness.tool(action["name"])
            defaults = tool.derived(schema_defaults) if tool is not None else None
            if not any(
                action_matches(action, c.tool, c.args, same_write=same_write, defaults=defaults)
                for c in calls
            ):
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
        # the score is Outcome's, 1 or 0 as tau2's reward: the product of its basis's components,
        # each 1 or 0, with no credit for the actions or strings that passed
        return Outcome(success=not reasons, reasons=tuple(reasons))


def solve(env: CorpusEnvironment, task: Task) -> Episode:
    """The reference episode of ``task`` (``env.solve``), as ``hsa.envs.<name>.solve``."""
    return env.solve(task)
