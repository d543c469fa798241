"""BFCL as an environment: imported entries scored by their possible answers, as BFCL does.

Tasks come from ``hsa.harness.importers`` (one harness per entry, tool names made API-legal)
and keep BFCL's categories. Single-turn entries (Python, Java, JavaScript) are scored by the
AST checker; ``irrelevance`` entries are solved by making no call; ``web_search`` entries by
the final answer. Tasks the importer marks unscored (multi-turn and memory entries, which BFCL
scores by executing its Python backends) are left out. Tools cannot run, so every call gets a
structured error unless an output was recorded for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hsa.envs.base import Outcome, Task
from hsa.envs.bfcl_check import check_answer, check_calls, check_param, source_text
from hsa.envs.episode import Episode
from hsa.envs.recorded import CorpusEnvironment, CorpusState, tool_calls
from hsa.errors import ImportFormatError
from hsa.harness.events import AssistantMessage, Event, ToolCall
from hsa.harness.importers.bfcl import FORMAT_SENSITIVITY, read_files

#: Source types of a Java/JavaScript harness: ``(language, {tool: {param: declared type}})``.
Source = tuple[str, Mapping[str, Mapping[str, Mapping[str, str]]]]


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


def reference_calls(
    task: Task, tools: Mapping[str, Mapping[str, Any]], source: Source | None = None
) -> list[ToolCall]:
    """One acceptable answer of a BFCL task as canonical calls.

    Each parameter gets its first acceptable value, except that a parameter the answer lets
    be left out (``""`` among its values) is left out when it is not required or not in the
    tool's schema; a required parameter whose only value is ``""`` gets ``""``. With
    ``source`` (Java/JavaScript), each value is written as the source text BFCL expects.
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
                if source is not None:
                    declared = (source[1].get(name) or {}).get(param) or {"type": "any"}
                    value = source_text(
                        value, source[0], declared.get("type", "any"), declared.get("items")
                    )
                args[param] = value
            elif optional:
                args[param] = ""
        calls.append(ToolCall(f"call_{i}", name, args))
    return calls


#: the reference reply to an entry no offered function fits (BFCL's ``irrelevance``): its
#: system prompt asks the model to point that out, and any reply without a call passes
NO_FITTING_FUNCTION = "None of the given functions can be used for this request."


def reference_answer(task: Task) -> str:
    """The first acceptable answer in the format BFCL's agentic system prompt asks for."""
    answers = task.ground_truth.get("answers") or [""]
    return repr({"answer": answers[0], "context": "the reference answer"})


def scored(row: Mapping[str, Any]) -> bool:
    """Whether an imported task row can be scored here as BFCL scores it."""
    truth = row.get("ground_truth") or {}
    metadata = row.get("metadata") or {}
    return metadata.get("scored", True) is not False and ("calls" in truth or "answers" in truth)


def answer_defects(
    task: Task, tools: Mapping[str, Mapping[str, Any]], source: Source | None = None
) -> list[str]:
    """Why no call can satisfy the task's possible answers under BFCL's checker, if so: a
    required parameter with no acceptable value, a value the answer demands for a parameter
    the function does not declare (a handful of BFCL entries have such answers), or a Java/JS
    value that no source text reads back as (e.g. ``42`` in an ``ArrayList`` of ``any``,
    whose items BFCL always reads as strings)."""
    defects = []
    if source is not None:
        language, types = source
        for call in reference_calls(task, tools, source):
            possible = next(a[call.tool] for a in task.ground_truth["calls"] if call.tool in a)
            props = (tools.get(call.tool) or {}).get("properties") or {}
            for param, text in call.args.items():
                declared = (types.get(call.tool) or {}).get(param) or {"type": "any"}
                if param in props and check_param(
                    param, text, props[param], possible[param], (language, declared)
                ):
                    defects.append(
                        f"{call.tool}: no {language} {declared.get('type')} text of {param!r} "
                        "reads back as its acceptable value"
                    )
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
    """BFCL's scored categories: AST checker for calls, answer checker for web_search."""

    #: 2: an irrelevance entry ending at a reply that does not parse succeeds, as no call
    #: (``unparsed_is_no_call``; it was an ``unparseable_call`` failure); 3: a Java/JavaScript
    #: number with one final newline (``"3\n"``) reads as the number, as in BFCL
    score_version = 3
    #: the import's notes on the entries it could not score (left out here)
    notes: tuple[str, ...] = ()

    def __init__(self, harnesses, tasks, outputs=None):
        super().__init__("bfcl", harnesses, tasks, outputs)

    @classmethod
    def from_corpus(cls, path: str | Path) -> BfclEnvironment:
        """Import a BFCL question file or folder; keep the entries hsa can score.

        A folder with a file that cannot be imported is refused: an environment built from
        part of a corpus would look complete.
        """
        from hsa.harness.importers import import_source

        result = import_source(path, format="bfcl")
        if result.failures:
            first = result.failures[0]
            more = f" (and {len(result.failures) - 1} more file(s))" if result.failures[1:] else ""
            raise ImportFormatError(first.message + more, file=first.file, where=first.where)
        tasks = [Task.from_dict(row) for row in result.tasks if scored(row)]
        used = {t.harness_id for t in tasks}
        env = cls([h for h in result.harnesses if h.id in used], tasks)
        env.notes = tuple(n for n in result.notes if "unscored" in n)
        return env

    @classmethod
    def corpus_files(cls, path: Path) -> dict[str, Path]:
        # a question file's answers and API docs beside it, by names that keep its category
        return read_files(path)

    def left_out(self) -> tuple[str, ...]:
        return self.notes

    def restates(self, task: Task) -> bool:
        # a format-sensitivity task is another entry asked under one of BFCL's prompt formats
        return task.kind == FORMAT_SENSITIVITY

    def ends_at_calls(self, task: Task) -> bool:
        # BFCL scores a call-scored entry on the model's first reply: its calls are not run
        return "calls" in task.ground_truth

    def unparsed_is_no_call(self, task: Task) -> bool:
        # BFCL's relevance scoring (``_evaluate_single_relevance_entry``) counts a reply that
        # ``decode_ast`` cannot decode, or decodes to nothing, as no call: an irrelevance entry
        # (no call expected) passes with it
        return task.ground_truth.get("calls") == []

    def category(self, task: Task) -> str:
        return str(task.metadata.get("category") or task.kind)

    def tools(self, task: Task) -> dict[str, Mapping[str, Any]]:
        """Tool name -> parameter schema, for the functions ``task`` offers."""
        return {t.name: t.parameters for t in self.harness_for(task).tools}

    def source(self, task: Task) -> Source | None:
        """``(language, declared types)`` when ``task``'s functions are Java or JavaScript."""
        metadata = self.harness_for(task).metadata
        if "source_types" not in metadata:
            return None
        return str(metadata["language"]), metadata["source_types"]

    def reference_steps(self, task: Task) -> list[list[Event]]:
        if "answers" in task.ground_truth:
            return [[AssistantMessage(reference_answer(task))]]
        calls = reference_calls(task, self.tools(task), self.source(task))
        # an irrelevance entry is solved by not calling: by saying so
        return [list(calls)] if calls else [[AssistantMessage(NO_FITTING_FUNCTION)]]

    def score(self, task: Task, state: CorpusState, events: Sequence[Event]) -> Outcome:
        if "answers" in task.ground_truth:
            # BFCL reads the last message that is not a call: the model's final answer.
            texts = [e.text for e in events if isinstance(e, AssistantMessage) and e.text]
            if not texts:
                return Outcome(success=False, reasons=("no final answer",))
            problem = check_answer(texts[-1], task.ground_truth["answers"])
            return Outcome(success=problem is None, reasons=(problem,) if problem else ())
        calls = [{c.tool: dict(c.args)} for c in tool_calls(events)]
        answers = list(task.ground_truth.get("calls") or ())
        tools = self.tools(task)
        language, types = self.source(task) or ("python", None)
        problem = check_calls(self.category(task), tools, calls, answers, language, types)
        if problem is None:
            return Outcome(success=True)
        defects = [
            f"the corpus's possible answer cannot be met: {d}"
            for d in answer_defects(task, tools, self.source(task))
        ]
        return Outcome(success=False, reasons=(problem, *defects))


def solve(env: CorpusEnvironment, task: Task) -> Episode:
    """The reference episode of ``task`` (``env.solve``), as ``hsa.envs.<name>.solve``."""
    return env.solve(task)
