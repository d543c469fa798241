"""Import the Berkeley Function Calling Leaderboard (BFCL v4): questions, answers, API docs.

- A question file (``BFCL_v4_<category>.json``, JSON Lines) gives one harness per entry (id =
  the entry id; its functions as tools, its system messages as a persona section) and one
  task per entry, scored against ``possible_answer/<same name>`` when that sibling exists.
  ``irrelevance`` entries have no answers: their ground truth is "no call". A task's turns
  are its user messages: the few ``live_irrelevance`` questions that hold earlier messages
  (a user's, an assistant's), which BFCL sends as one request, are played one user message a
  turn, without the recorded assistant replies (hsa's tasks have no recorded history to
  show); ``ImportResult.notes`` counts them.
- A ``multi_turn_func_doc/*.json`` file gives one harness, ``bfcl-<file stem>``.
- Multi-turn questions (``involved_classes``) use the union of their classes' API docs, in the
  order the entry lists the classes, as BFCL does (``populate_test_cases_with_predefined_
  functions``): one harness per distinct class list, e.g. ``bfcl-gorilla_file_system-
  posting_api``. BFCL never removes ``excluded_function`` from that union, so neither do we;
  it is kept in the task metadata. A multi-turn task has one user message per BFCL turn, in
  line with its answer's ``calls_by_turn``; the turn of a ``miss_func`` entry that reveals
  held-out functions is asked with BFCL's message for it (``HELDOUT_TURN``). A harness offers
  its tools from the first turn, so the held-out functions are offered throughout; the task
  keeps ``missed_function`` (turn -> names) in its metadata.
- Every function description ends with BFCL's language hint (" Note that the provided
  function is in Python 3 syntax.", or Java's or JavaScript's), as BFCL shows it to a model.
- ``BFCL_v4_format_sensitivity.json`` lists entries BFCL re-asks under 26 prompt formats; each
  (entry, format) becomes a task on the entry's harness whose metadata carries the protocol
  to render it with (``text``, the call format, tool-call tag and doc format of the config).
- ``simple_java`` and ``simple_javascript`` functions are shown as BFCL shows them: every
  top-level parameter a string of source code, its declared type told in the description and
  kept in ``metadata["source_types"]`` for the checker (``bfcl_schema.language_functions``).
- ``web_search`` entries are asked twice, as BFCL's ``web_search_base`` and
  ``web_search_no_snippet`` (``initial_config`` says which); they are scored on the final
  answer (``ground_truth["answers"]``). Their harness, ``bfcl-web_search-agentic``, adds
  BFCL's answer-format system prompt to the ``web_search`` API doc.
- ``memory`` entries (class ``MemoryAPI``) are asked once per backend (``memory_kv``,
  ``memory_vector``, ``memory_rec_sum``) after the scenario's prerequisite conversations
  (``memory_prereq_conversation/memory_<scenario>.json``, imported as ``memory_<backend>_
  prereq`` tasks and listed in ``depends_on``).
- Tasks hsa cannot score as BFCL does carry ``metadata["scored"] = False`` and
  ``metadata["unscored_reason"]``: multi-turn entries and memory entries need BFCL's
  executable backends; prerequisite conversations are never scored; ``live_relevance``
  entries pass on any call, and the corpus has none to solve them with. ``ImportResult.notes``
  says so once per category.
- The ``bfcl/`` folder imports all of the above. A file that cannot be imported is left out
  and listed in ``ImportResult.failures``; the rest of the folder still imports.

Tool names are made API-legal (``math.factorial`` -> ``math_factorial``); each harness keeps
``metadata["name_map"]`` (legal -> BFCL name) and tasks use the legal names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hsa.config import named_files
from hsa.errors import HsaError, ImportFormatError
from hsa.harness.importers.base import (
    ImportResult,
    api_sections,
    harness_id,
    read_json,
    read_json_lines,
    renamed_note,
    system_section,
    task_row,
)
from hsa.harness.importers.bfcl_schema import (
    SchemaProblem,
    category_language,
    language_functions,
    normalize_schema,
    parse_python_call,
    problem_error,
    with_hint,
)
from hsa.harness.jsonvalues import json_path
from hsa.harness.model import Harness, Prompt, Protocol, Tool
from hsa.harness.toolformats import legalize

QUESTION_FILE = re.compile(r"^BFCL_v\d+_(?P<category>.+)\.json$")
DOC_DIR = "multi_turn_func_doc"
ANSWER_DIR = "possible_answer"
FORMAT_SENSITIVITY = "format_sensitivity"
#: BFCL's MULTI_TURN_FUNC_DOC_FILE_MAPPING (bfcl_eval/constants/executable_backend_config.py)
CLASS_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
DOC_CLASSES = {doc: cls for cls, doc in CLASS_DOCS.items()}
#: BFCL's return formats -> ``Protocol.call_format``
RETURN_FORMATS = {
    "python": "python",
    "json": "json",
    "verbose_xml": "xml_verbose",
    "concise_xml": "xml_concise",
}
ENV = "bfcl"
SPLIT = "test"
WEB_SEARCH = "web_search"
#: BFCL asks every web_search entry twice: with result snippets and without.
WEB_SEARCH_CATEGORIES = {"web_search_base": True, "web_search_no_snippet": False}
MEMORY = "memory"
MEMORY_BACKENDS = ("kv", "vector", "rec_sum")
PREREQ_DIR = "memory_prereq_conversation"
#: BFCL's ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT (bfcl_eval/constants/
#: default_prompts.py), the system message it puts before every web_search and memory
#: question: the prompt is part of the task, so it is kept word for word.
AGENTIC_PROMPT = (
    "For your final answer to the user, you must respond in this format: {'answer': A short "
    "and precise answer to the question, 'context': A brief explanation of how you arrived at "
    "this answer or why it is correct}. If you do not know the answer, respond with "
    "{'answer': 'I do not know', 'context': 'I do not know'}. If you think the question cannot "
    "be properly answered, response with {'answer': 'I cannot answer this question', "
    "'context': A short reason explaining why this question cannot be answered}.\n"
)
#: BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC: the user message of a turn that
#: reveals held-out functions (bfcl_eval/model_handler/base_handler.py)
HELDOUT_TURN = "I have updated some more functions you can choose from. What about now?"
UNSCORED = {
    "multi_turn": "BFCL scores multi-turn entries by executing its Python API backends and "
    "comparing their state and results turn by turn; hsa does not have those backends",
    "memory": "BFCL scores memory entries against a memory backend filled by the model's own "
    "run of the prerequisite conversations; hsa does not have BFCL's memory backends",
    "memory_prereq": "a prerequisite conversation: BFCL runs it to fill the memory backend "
    "and does not score it",
    "relevance": "BFCL passes a relevance entry when the model makes any call; the corpus "
    "gives no call to solve it with, so hsa does not score it",
    "no_answers": f"their question file has no {ANSWER_DIR}/ file of the same name beside it, "
    "which BFCL scores them against",
}


def is_bfcl_dir(path: Path) -> bool:
    return path.is_dir() and (
        path.name == DOC_DIR
        or (path / DOC_DIR).is_dir()
        or any(QUESTION_FILE.match(p.name) for p in path.iterdir())
    )


def import_bfcl(path: Path) -> ImportResult:
    """Import a BFCL question file, API doc file, format-sensitivity file or the whole folder."""
    job = _Import()
    if path.is_dir():
        if path.name == DOC_DIR:
            for doc in sorted(path.glob("*.json")):
                job.isolated(doc, job.doc_harness)
        else:
            questions = _question_files(path)
            if not questions and not (path / DOC_DIR).is_dir():
                raise ImportFormatError(
                    "no BFCL question file here (BFCL_v4_*.json, as the gorilla repository's "
                    "berkeley-function-call-leaderboard/bfcl_eval/data holds them)",
                    file=str(path),
                )
            for file in questions:
                if _category(file) != FORMAT_SENSITIVITY:
                    job.isolated(file, job.question_file)
            if (path / DOC_DIR).is_dir():
                for doc in sorted((path / DOC_DIR).glob("*.json")):
                    job.isolated(doc, job.doc_harness)
            for file in questions:
                if _category(file) == FORMAT_SENSITIVITY:
                    job.isolated(file, job.format_sensitivity)
    elif path.parent.name == DOC_DIR:
        job.doc_harness(path)
    elif _category(path) == FORMAT_SENSITIVITY:
        job.format_sensitivity(path)
        # Alone, the file brings only the harnesses of the entries it re-asks.
        used = {t["harness_id"] for t in job.tasks}
        job.harnesses = {k: h for k, h in job.harnesses.items() if k in used}
    else:
        job.question_file(path)
    return ImportResult(
        harnesses=tuple(job.harnesses.values()),
        tasks=tuple(job.tasks),
        source=str(path),
        format="bfcl",
        failures=tuple(job.failures),
        notes=_notes(job.tasks, job.harnesses.values()),
    )


def read_files(path: Path) -> dict[str, Path]:
    """The files ``import_bfcl(path)`` reads, by their paths relative to the BFCL data folder
    (that of the question files), so the names say what each is: a question file, named by
    its category; its ``possible_answer/`` file; the API docs (``multi_turn_func_doc/``,
    which multi-turn, web_search and memory entries use: all of them, whichever classes the
    entries name); the memory prerequisites of the memory questions. A format-sensitivity
    file reads the question files of the categories it names too, and the folder all of
    these."""
    if path.is_dir() and path.name == DOC_DIR:
        root, files = path.parent, sorted(p for p in path.glob("*.json") if p.is_file())
    elif path.is_dir():
        root, files = path, _with_answers(path, _question_files(path))
    elif path.parent.name == DOC_DIR:
        root, files = path.parent.parent, [path]
    else:
        root = path.parent
        questions = [path]
        if _category(path) == FORMAT_SENSITIVITY:  # it imports the files of the entries it names
            questions += _named_files(path)
        files = _with_answers(root, questions)
    return named_files(root, files)


def _named_files(path: Path) -> list[Path]:
    """The question files of the categories the format-sensitivity file ``path`` names, as
    ``_Import.format_sensitivity`` finds them (those there); none when it names none (its
    import fails)."""
    try:
        ids = read_json(path)
    except HsaError:
        return []
    named = set()
    for category in ids if isinstance(ids, Mapping) else ():
        try:
            named.add(path.with_name(path.name.replace(FORMAT_SENSITIVITY, category)))
        except ValueError:  # (a category that names no file: its import fails)
            continue
    return sorted(p for p in named if p != path)


def _question_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if QUESTION_FILE.match(p.name))


def _with_answers(root: Path, questions: list[Path]) -> list[Path]:
    """The question files ``questions`` of the data folder ``root``, their answer files and
    the API docs and memory prerequisites they may use (those there)."""
    files = [*questions, *(root / ANSWER_DIR / q.name for q in questions)]
    files += sorted((root / DOC_DIR).glob("*.json")) if (root / DOC_DIR).is_dir() else []
    if any(_category(q) == MEMORY for q in questions) and (root / PREREQ_DIR).is_dir():
        files += sorted((root / PREREQ_DIR).glob("*.json"))
    return [file for file in files if file.is_file()]


def _notes(tasks: Sequence[Mapping[str, Any]], harnesses: Iterable[Harness]) -> tuple[str, ...]:
    """The unscored tasks by kind, and the tool names made legal (over every harness)."""
    renamed: dict[str, str] = {}
    for harness in harnesses:
        renamed |= harness.metadata.get("name_map") or {}
    unscored: dict[str, tuple[int, str]] = {}
    for task in tasks:
        reason = task["metadata"].get("unscored_reason")
        if reason:
            count, _ = unscored.get(task["kind"], (0, reason))
            unscored[task["kind"]] = (count + 1, reason)
    said = renamed_note(dict(sorted(renamed.items())))
    split = sum(1 for task in tasks if _history(task["metadata"].get("question")))
    return (
        *([said] if said else []),
        *(
            f"{count:,} {kind} task(s) imported unscored: {reason}"
            for kind, (count, reason) in unscored.items()
        ),
        *(
            [
                f"{split:,} single-turn task(s) hold earlier messages in their question, which "
                "BFCL sends as one request: hsa plays each of their user messages as a turn of "
                "its own, and the recorded assistant replies among them are not shown"
            ]
            if split
            else []
        ),
    )


def _history(question: Any) -> bool:
    """Whether a single-turn question holds more than its one user message (bar system ones)."""
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        return False
    said = [m for m in question[0] if isinstance(m, Mapping) and m.get("role") != "system"]
    return len(said) > 1


def _category(path: Path) -> str:
    match = QUESTION_FILE.match(path.name)
    return match.group("category") if match else path.stem


class _Import:
    """Harnesses and tasks gathered so far; harnesses shared by several files are built once."""

    def __init__(self) -> None:
        self.harnesses: dict[str, Harness] = {}
        self.tasks: list[dict[str, Any]] = []
        self.entries: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # id -> entry, task
        self.docs: dict[Path, Harness] = {}
        self.failures: list[HsaError] = []
        self.failed: set[Path] = set()

    def isolated(self, path: Path, step: Any) -> None:
        """Run ``step(path)``; if the file cannot be imported, record why and undo its part."""
        saved = (dict(self.harnesses), len(self.tasks), dict(self.entries), dict(self.docs))
        try:
            step(path)
        except HsaError as exc:
            self.harnesses, self.entries, self.docs = saved[0], saved[2], saved[3]
            del self.tasks[saved[1] :]
            self.failed.add(path)
            self.failures.append(exc if exc.file else ImportFormatError(str(exc), file=str(path)))

    def add(self, harness: Harness, *, file: Path) -> Harness:
        known = self.harnesses.get(harness.id)
        if known is not None and known != harness:
            raise ImportFormatError(
                f"two different harnesses would both be called {harness.id!r}", file=str(file)
            )
        self.harnesses[harness.id] = harness
        return harness

    # --- question files ---

    def question_file(self, path: Path, *, keep_tasks: bool = True) -> None:
        category = _category(path)
        answers = _answers(path)
        if category == WEB_SEARCH:
            self.web_search_file(path, answers)
            return
        if category == MEMORY:
            self.memory_file(path, answers)
            return
        lines: dict[str, int] = {}  # each entry id's line in this file
        for lineno, entry in read_json_lines(path):
            where = f"line {lineno}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
                raise ImportFormatError(
                    "a BFCL entry must be an object with a string id", file=str(path), where=where
                )
            _once(lines, entry["id"], lineno, path)
            question = entry.get("question")
            if not _is_question(question):
                raise ImportFormatError(
                    "question must be a list of turns, each a list of {role, content} messages",
                    file=str(path),
                    where=f"{where}: $.question",
                )
            if "function" in entry:
                harness = self.add(_entry_harness(entry, path, where, category), file=path)
                task = self._single_turn_task(entry, harness, category, answers, path, where)
            elif "involved_classes" in entry:
                harness = self.add(self._union_harness(entry, path, where), file=path)
                task = _multi_turn_task(entry, harness, category, answers, path, where)
            else:
                raise ImportFormatError(
                    "a BFCL entry needs 'function' (single-turn) or 'involved_classes' "
                    "(multi-turn)",
                    file=str(path),
                    where=where,
                )
            if keep_tasks:
                self.tasks.append(task)
            self.entries[entry["id"]] = (dict(entry), task)

    def _single_turn_task(
        self,
        entry: Mapping[str, Any],
        harness: Harness,
        category: str,
        answers: dict[str, Any] | None,
        path: Path,
        where: str,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"category": category, "question": entry["question"]}
        if "language" in harness.metadata:
            metadata["language"] = harness.metadata["language"]
        if "irrelevance" in category:
            ground_truth: dict[str, Any] = {"calls": []}  # the right answer is not to call
        elif "relevance" in category:
            ground_truth = {}
            metadata.update(scored=False, unscored_reason=UNSCORED["relevance"])
        elif answers is None:
            ground_truth = {}
            metadata.update(scored=False, unscored_reason=UNSCORED["no_answers"])
        else:
            answer = answers.get(entry["id"])
            if answer is None:
                raise _no_answer(entry["id"], answers, path, where)
            calls, source_names = _rename_answer(answer, harness, path, where)
            ground_truth = {"calls": calls}
            metadata["source_names"] = source_names
        return task_row(
            id=entry["id"],
            env=ENV,
            kind=category,
            split=SPLIT,
            harness_id=harness.id,
            turns=_user_turns(entry["question"]),
            ground_truth=ground_truth,
            metadata=metadata,
        )

    # --- agentic categories: web_search and memory ---

    def _agentic_entries(
        self, path: Path
    ) -> list[tuple[str, dict[str, Any], list[list[dict[str, Any]]]]]:
        out = []
        lines: dict[str, int] = {}  # each entry id's line
        for lineno, entry in read_json_lines(path):
            where = f"line {lineno}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
                raise ImportFormatError(
                    "a BFCL entry must be an object with a string id", file=str(path), where=where
                )
            _once(lines, entry["id"], lineno, path)
            if not _is_question(entry.get("question")):
                raise ImportFormatError(
                    "question must be a list of turns, each a list of {role, content} messages",
                    file=str(path),
                    where=f"{where}: $.question",
                )
            out.append((where, dict(entry), entry["question"]))
        return out

    def _doc_of(self, cls: str, path: Path, where: str) -> Harness:
        doc = path.parent / DOC_DIR / CLASS_DOCS[cls]
        if not doc.is_file():
            raise ImportFormatError(
                f"{_category(path)} entries need the API docs of {cls}: {doc} is missing",
                file=str(path),
                where=where,
            )
        return self.doc_harness(doc)

    def _agentic_harness(self, cls: str, path: Path, where: str) -> Harness:
        doc = self._doc_of(cls, path, where)
        harness = Harness(
            id=f"{doc.id}-agentic",
            prompt=Prompt(sections=api_sections(system_section(AGENTIC_PROMPT))),
            tools=doc.tools,
            metadata={**doc.metadata, "system_prompt": "agentic"},
        )
        return self.add(harness, file=path)

    def web_search_file(self, path: Path, answers: dict[str, Any] | None) -> None:
        entries = self._agentic_entries(path)
        for category, show_snippet in WEB_SEARCH_CATEGORIES.items():
            for where, entry, question in entries:
                harness = self._agentic_harness("WebSearchAPI", path, where)
                ground_truth = {}
                if answers is not None:
                    ground_truth = {"answers": _text_answers(entry["id"], answers, path, where)}
                metadata: dict[str, Any] = {
                    "category": category,
                    "question": question,
                    "involved_classes": ["WebSearchAPI"],
                    "initial_config": {"WebSearchAPI": {"show_snippet": show_snippet}},
                }
                self.tasks.append(
                    task_row(
                        id=entry["id"].replace(WEB_SEARCH, category),
                        env=ENV,
                        kind=category,
                        split=SPLIT,
                        harness_id=harness.id,
                        turns=_user_turns(question),
                        ground_truth=ground_truth,
                        metadata=metadata,
                    )
                )

    def memory_file(self, path: Path, answers: dict[str, Any] | None) -> None:
        entries = self._agentic_entries(path)
        scenarios: dict[str, None] = {}
        for where, entry, _ in entries:
            if entry.get("involved_classes") != ["MemoryAPI"] or not isinstance(
                entry.get("scenario"), str
            ):
                raise ImportFormatError(
                    'a memory entry needs involved_classes ["MemoryAPI"] and a scenario',
                    file=str(path),
                    where=where,
                )
            scenarios[entry["scenario"]] = None
        prereqs = {s: self._prereq_entries(path, s) for s in scenarios}
        for backend in MEMORY_BACKENDS:
            category, cls = f"{MEMORY}_{backend}", f"MemoryAPI_{backend}"
            doc = self._doc_of(cls, path, "line 1")
            depends: dict[str, list[str]] = {}
            for scenario, (_, rows) in prereqs.items():
                depends[scenario] = []
                for _, row, question in rows:
                    task_id = row["id"].replace(MEMORY, category)
                    self.tasks.append(
                        task_row(
                            id=task_id,
                            env=ENV,
                            kind=f"{category}_prereq",
                            split=SPLIT,
                            harness_id=doc.id,
                            turns=_user_turns(question),
                            ground_truth={},
                            metadata={
                                "category": f"{category}_prereq",
                                "question": question,
                                "scenario": scenario,
                                "topic": row.get("topic"),
                                "involved_classes": [cls],
                                "depends_on": list(depends[scenario]),
                                "scored": False,
                                "unscored_reason": UNSCORED["memory_prereq"],
                            },
                        )
                    )
                    depends[scenario].append(task_id)
            harness = self._agentic_harness(cls, path, "line 1")
            for where, entry, question in entries:
                metadata: dict[str, Any] = {
                    "category": category,
                    "question": question,
                    "scenario": entry["scenario"],
                    "involved_classes": [cls],
                    "depends_on": depends[entry["scenario"]],
                    "scored": False,
                    "unscored_reason": UNSCORED["memory"],
                }
                prereq_path, _ = prereqs[entry["scenario"]]
                if not prereq_path.is_file():
                    metadata["missing_prerequisite"] = f"{PREREQ_DIR}/{prereq_path.name}"
                if answers is not None:
                    metadata["possible_answers"] = _text_answers(entry["id"], answers, path, where)
                self.tasks.append(
                    task_row(
                        id=entry["id"].replace(MEMORY, category),
                        env=ENV,
                        kind=category,
                        split=SPLIT,
                        harness_id=harness.id,
                        turns=_user_turns(question),
                        ground_truth={},
                        metadata=metadata,
                    )
                )

    def _prereq_entries(
        self, path: Path, scenario: str
    ) -> tuple[Path, list[tuple[str, dict[str, Any], list[list[dict[str, Any]]]]]]:
        prereq = path.parent / PREREQ_DIR / f"memory_{scenario}.json"
        # Without the conversations the questions are still valid data: they are imported
        # with no prerequisites and say which file was missing.
        return prereq, self._agentic_entries(prereq) if prereq.is_file() else []

    # --- multi-turn API docs ---

    def doc_harness(self, path: Path) -> Harness:
        if path in self.docs:
            return self.docs[path]
        tools: list[Tool] = []
        responses: dict[str, Any] = {}
        for lineno, fn in read_json_lines(path):
            # BFCL shows every API doc with its Python hint (``load_dataset_entry``)
            tool = _tool(with_hint(fn, "python"), path, f"line {lineno}: $")
            tools.append(tool)
            if isinstance(fn.get("response"), Mapping):
                responses[tool.name] = _schema(fn["response"], path, f"line {lineno}: $.response")
        legal, name_map = legalize(tools, file=str(path))
        renamed = {t.name: legal_t.name for t, legal_t in zip(tools, legal, strict=True)}
        cls = DOC_CLASSES.get(path.name)
        metadata: dict[str, Any] = {
            "source": "bfcl",
            "classes": [cls] if cls else [],
            "doc_files": [path.name],
        }
        if name_map:
            metadata["name_map"] = name_map
        if responses:
            metadata["responses"] = {renamed[k]: v for k, v in responses.items()}
        harness = Harness(
            id=harness_id(f"bfcl-{path.stem}"),
            prompt=Prompt(sections=api_sections()),
            tools=tuple(legal),
            metadata=metadata,
        )
        self.docs[path] = self.add(harness, file=path)
        return harness

    def _union_harness(self, entry: Mapping[str, Any], path: Path, where: str) -> Harness:
        classes = entry["involved_classes"]
        if not isinstance(classes, list) or not classes:
            raise ImportFormatError(
                "involved_classes must be a non-empty list", file=str(path), where=where
            )
        doc_dir = path.parent / DOC_DIR
        docs = []
        for cls in classes:
            if cls not in CLASS_DOCS:
                raise ImportFormatError(
                    f"unknown BFCL class {cls!r} (known: {', '.join(CLASS_DOCS)})",
                    file=str(path),
                    where=f"{where}: $.involved_classes",
                )
            doc = doc_dir / CLASS_DOCS[cls]
            if not doc.is_file():
                raise ImportFormatError(
                    f"multi-turn entries need the API docs of {cls}: {doc} is missing",
                    file=str(path),
                    where=where,
                )
            docs.append(self.doc_harness(doc))
        if len(docs) == 1:
            return docs[0]
        tools = [t for d in docs for t in d.tools]
        legal, name_map = legalize(tools, file=str(path))
        metadata: dict[str, Any] = {
            "source": "bfcl",
            "classes": [c for d in docs for c in d.metadata["classes"]],
            "doc_files": [f for d in docs for f in d.metadata["doc_files"]],
        }
        merged_map = {k: v for d in docs for k, v in (d.metadata.get("name_map") or {}).items()}
        if merged_map or name_map:
            metadata["name_map"] = {**merged_map, **name_map}
        responses = {k: v for d in docs for k, v in (d.metadata.get("responses") or {}).items()}
        if responses:
            metadata["responses"] = responses
        return Harness(
            id=harness_id("bfcl-" + "-".join(Path(f).stem for f in metadata["doc_files"])),
            prompt=Prompt(sections=api_sections()),
            tools=tuple(legal),
            metadata=metadata,
        )

    # --- format sensitivity ---

    def format_sensitivity(self, path: Path) -> None:
        ids = read_json(path)
        if not isinstance(ids, Mapping):
            raise ImportFormatError(
                "expected an object mapping each category to a list of entry ids",
                file=str(path),
                where="$",
            )
        for category, entry_ids in ids.items():
            name = path.name.replace(FORMAT_SENSITIVITY, category)
            try:
                if "\0" in name:  # (a path with a NUL is refused only once it is opened)
                    raise ValueError(name)
                source = path.with_name(name)
            except ValueError:
                raise ImportFormatError(
                    f"{category!r} names no category (no file {name!r} can hold its entries)",
                    file=str(path),
                    where=f"$.{category}",
                ) from None
            if source in self.failed:
                raise ImportFormatError(
                    f"the entries of {category!r} are in {source.name}, which could not be "
                    "imported",
                    file=str(path),
                    where=f"$.{category}",
                )
            if not any(e in self.entries for e in entry_ids or ()):
                if not source.is_file():
                    raise ImportFormatError(
                        f"the entries of {category!r} are in {source.name}, which is missing",
                        file=str(path),
                        where=f"$.{category}",
                    )
                # Only the entries' harnesses: their plain tasks belong to that file's import.
                self.question_file(source, keep_tasks=False)
            for i, entry_id in enumerate(entry_ids):
                if entry_id in entry_ids[:i]:
                    raise ImportFormatError(
                        f"entry {entry_id!r} is listed twice (also at "
                        f"$.{category}[{entry_ids.index(entry_id)}])",
                        file=str(path),
                        where=f"$.{category}[{i}]",
                    )
                if entry_id not in self.entries:
                    raise ImportFormatError(
                        f"entry {entry_id!r} is not in {source.name}",
                        file=str(path),
                        where=f"$.{category}[{i}]",
                    )
                _, base = self.entries[entry_id]
                for config in format_configs():
                    self.tasks.append(_format_task(base, config))


def _once(lines: dict[str, int], entry_id: str, lineno: int, path: Path) -> None:
    """Record ``entry_id``'s line in ``path``; refuse it when an earlier line has it (its
    answer and its task are looked up by it)."""
    if entry_id in lines:
        raise ImportFormatError(
            f"entry id {entry_id!r} is given twice (also at line {lines[entry_id]}): its "
            "answer and its task are looked up by it",
            file=str(path),
            where=f"line {lineno}: $.id",
        )
    lines[entry_id] = lineno


def format_configs() -> list[str]:
    """BFCL's 26 format-sensitivity configs (``get_all_format_sensitivity_configs``)."""
    configs = [
        f"ret_fmt={ret}&tool_call_tag={tag}&func_doc_fmt={doc}&prompt_fmt=plaintext&style=classic"
        for ret in RETURN_FORMATS
        for tag in ("True", "False")
        for doc in ("python", "xml", "json")
    ]
    base = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json"
    configs.append(f"{base}&prompt_fmt=markdown&style=classic")
    configs.append(f"{base}&prompt_fmt=plaintext&style=experimental")
    return configs


def format_protocol(config: str) -> dict[str, Any]:
    """What a format-sensitivity config asks for, in harness terms."""
    fields = dict(part.split("=", 1) for part in config.split("&"))
    protocol = Protocol(
        name="text",
        call_format=RETURN_FORMATS[fields["ret_fmt"]],
        call_tag=fields["tool_call_tag"] == "True",
        doc_format=fields["func_doc_fmt"],
    )
    return {
        "config": config,
        "protocol": protocol.to_dict(),
        "heading_style": "markdown" if fields["prompt_fmt"] == "markdown" else "plain",
        "prompt_style": fields["style"],
    }


def _format_task(base: Mapping[str, Any], config: str) -> dict[str, Any]:
    metadata = {**base["metadata"], FORMAT_SENSITIVITY: format_protocol(config)}
    return task_row(
        id=f"{FORMAT_SENSITIVITY}:{config}:{base['id']}",
        env=ENV,
        kind=FORMAT_SENSITIVITY,
        split=SPLIT,
        harness_id=base["harness_id"],
        turns=base["turns"],
        ground_truth=base["ground_truth"],
        metadata=metadata,
    )


# --- entries ---


def _is_question(question: Any) -> bool:
    return isinstance(question, list) and all(
        isinstance(turn, list)
        and all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and "content" in m
            for m in turn
        )
        for turn in question
    )


def _user_turns(question: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    return [str(m["content"]) for turn in question for m in turn if m["role"] == "user"]


def _schema(node: Any, path: Path, where: str) -> dict[str, Any]:
    try:
        return normalize_schema(node)
    except SchemaProblem as problem:
        raise problem_error(problem, file=str(path), where=where) from None


def _tool(fn: Any, path: Path, where: str) -> Tool:
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise ImportFormatError("a function doc needs a string name", file=str(path), where=where)
    description = fn.get("description") or ""
    if not isinstance(description, str):
        raise ImportFormatError(
            "description must be a string", file=str(path), where=f"{where}.description"
        )
    params = fn.get("parameters") or {"type": "dict", "properties": {}}
    schema = _schema(params, path, f"{where}.parameters")
    if schema.get("type") != "object":
        raise ImportFormatError(
            f"parameters of {fn['name']!r} must be a dict schema",
            file=str(path),
            where=f"{where}.parameters.type",
        )
    return Tool(name=fn["name"], description=description, parameters=schema)


def _entry_harness(entry: Mapping[str, Any], path: Path, where: str, category: str) -> Harness:
    functions = entry["function"]
    if not isinstance(functions, list):
        raise ImportFormatError(
            "function must be a list of function docs", file=str(path), where=f"{where}: $.function"
        )
    language = category_language(category)
    functions, source_types = language_functions(functions, language)
    tools = [_tool(fn, path, f"{where}: $.function[{j}]") for j, fn in enumerate(functions)]
    legal, name_map = legalize(tools, file=str(path))
    system = [str(m["content"]) for m in (entry["question"] or [[]])[0] if m["role"] == "system"]
    leading = (system_section("\n\n".join(system)),) if system else ()
    metadata: dict[str, Any] = {"source": "bfcl", "category": category}
    if name_map:
        metadata["name_map"] = name_map
    if source_types:
        renamed = {t.name: legal_t.name for t, legal_t in zip(tools, legal, strict=True)}
        metadata["language"] = language
        metadata["source_types"] = {renamed[k]: v for k, v in source_types.items() if k in renamed}
    return Harness(
        id=_entry_harness_id(entry["id"], path, where),
        prompt=Prompt(sections=api_sections(*leading)),
        tools=tuple(legal),
        metadata=metadata,
    )


#: the longest entry id a harness is named by: as long as a skill id may be (a harness folder
#: and a skill folder are named by their ids), far under a file name's 255 bytes; BFCL's own
#: ids are at most 30 characters
_ID_MAX = 128


def _entry_harness_id(entry_id: str, path: Path, where: str) -> str:
    """The id of the harness of the entry ``entry_id``: the entry's id (``harness_id``), which
    its folder is named by; refused when too long for a folder's name."""
    made = harness_id(entry_id)
    if len(made) > _ID_MAX:
        raise ImportFormatError(
            f"entry id {entry_id[:40]!r}... makes a harness id of {len(made):,} characters; a "
            f"harness id, which names the harness's folder, is at most {_ID_MAX}",
            file=str(path),
            where=f"{where}: $.id",
        )
    return made


def _answers(path: Path) -> dict[str, Any] | None:
    answer_path = path.parent / ANSWER_DIR / path.name
    if not answer_path.is_file():
        return None
    answers: dict[str, Any] = {}
    for lineno, row in read_json_lines(answer_path):
        if not isinstance(row, Mapping) or not isinstance(row.get("id"), str):
            raise ImportFormatError(
                "an answer must be an object with a string id",
                file=str(answer_path),
                where=f"line {lineno}",
            )
        if "ground_truth" not in row:
            raise ImportFormatError(
                "an answer needs ground_truth", file=str(answer_path), where=f"line {lineno}"
            )
        if row["id"] in answers:
            raise ImportFormatError(
                f"answer id {row['id']!r} is given twice (also at line {answers[row['id']][2]})",
                file=str(answer_path),
                where=f"line {lineno}: $.id",
            )
        answers[row["id"]] = (row["ground_truth"], answer_path, lineno)
    return answers


def _no_answer(entry_id: str, answers: dict[str, Any], path: Path, where: str) -> ImportFormatError:
    """The error of a question the answer file does not answer, naming the answer on the
    question's line when that one answers no question of this id (a mistyped id)."""
    line = where.split(":", 1)[0]
    beside = next((i for i, (_, _, n) in answers.items() if f"line {n}" == line), None)
    hint = f" (its line {line[5:]} answers {beside!r})" if beside is not None else ""
    return ImportFormatError(
        f"no possible answer for {entry_id!r} in {ANSWER_DIR}/{path.name}{hint}",
        file=str(path),
        where=where,
    )


def _text_answers(entry_id: str, answers: dict[str, Any], path: Path, where: str) -> list[str]:
    if entry_id not in answers:
        raise _no_answer(entry_id, answers, path, where)
    ground_truth, answer_path, lineno = answers[entry_id]
    if not isinstance(ground_truth, list) or not all(isinstance(a, str) for a in ground_truth):
        raise ImportFormatError(
            "ground_truth must be a list of acceptable answer strings",
            file=str(answer_path),
            where=f"line {lineno}: $.ground_truth",
        )
    return list(ground_truth)


def _legal_names(harness: Harness) -> dict[str, str]:
    """BFCL name -> harness tool name, for every tool of ``harness``."""
    names = {t.name: t.name for t in harness.tools}
    names.update(
        {source: legal for legal, source in (harness.metadata.get("name_map") or {}).items()}
    )
    return names


def _rename_answer(
    answer: tuple[Any, Path, int], harness: Harness, path: Path, where: str
) -> tuple[list[dict[str, Any]], list[str]]:
    ground_truth, answer_path, lineno = answer
    names = _legal_names(harness)
    if not isinstance(ground_truth, list):
        raise ImportFormatError(
            "ground_truth must be a list of {function: {param: [values]}}",
            file=str(answer_path),
            where=f"line {lineno}: $.ground_truth",
        )
    calls, sources = [], []
    for i, call in enumerate(ground_truth):
        at = f"line {lineno}: $.ground_truth[{i}]"
        if not isinstance(call, Mapping) or len(call) != 1:
            raise ImportFormatError(
                "each expected call must be {function_name: {param: [acceptable values]}}",
                file=str(answer_path),
                where=at,
            )
        ((name, args),) = call.items()
        if not isinstance(args, Mapping):
            raise ImportFormatError(
                "an expected call's parameters must be an object {param: [acceptable values]}",
                file=str(answer_path),
                where=at + json_path([name])[1:],
            )
        for param, values in args.items():
            if not isinstance(values, list):  # BFCL's checker reads a list of values
                raise ImportFormatError(
                    f"the acceptable values of a parameter must be a list, got "
                    f"{type(values).__name__}",
                    file=str(answer_path),
                    where=at + json_path([name, param])[1:],
                )
        if name not in names:
            raise ImportFormatError(
                f"the answer calls {name!r}, which the question does not offer",
                file=str(answer_path),
                where=at,
            )
        calls.append({names[name]: args})
        sources.append(name)
    return calls, sources


def _multi_turn_task(
    entry: Mapping[str, Any],
    harness: Harness,
    category: str,
    answers: dict[str, Any] | None,
    path: Path,
    where: str,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "category": category,
        "question": entry["question"],
        "scored": False,
        "unscored_reason": UNSCORED["multi_turn"],
    }
    for key in (
        "initial_config",
        "involved_classes",
        "path",
        "excluded_function",
        "missed_function",
    ):
        if key in entry:
            metadata[key] = entry[key]
    ground_truth: dict[str, Any] = {}
    if answers is not None:
        if entry["id"] not in answers:
            raise _no_answer(entry["id"], answers, path, where)
        turns, answer_path, lineno = answers[entry["id"]]
        ground_truth = {"calls_by_turn": _turn_calls(turns, harness, answer_path, lineno)}
        metadata["source_calls"] = turns
    return task_row(
        id=entry["id"],
        env=ENV,
        kind=category,
        split=SPLIT,
        harness_id=harness.id,
        turns=_bfcl_turns(entry["question"], entry.get("missed_function")),
        ground_truth=ground_truth,
        metadata=metadata,
    )


def _bfcl_turns(question: Sequence[Sequence[Mapping[str, Any]]], missed: Any) -> list[str]:
    """One user message per turn of a multi-turn entry, so that turn ``i`` lines up with the
    answer's calls of turn ``i``. A turn that reveals held-out functions (``missed_function``,
    the miss_func category) has no message of its own: BFCL asks it with
    ``HELDOUT_TURN`` (and adds the functions to the request's tools at that turn; a harness
    offers every function from the start, so the task keeps ``missed_function`` in its
    metadata)."""
    held = set(missed) if isinstance(missed, Mapping) else set()
    turns = []
    for index, turn in enumerate(question):
        said = [str(m["content"]) for m in turn if m["role"] == "user"]
        turns.append(HELDOUT_TURN if not said and str(index) in held else "\n\n".join(said))
    return turns


def _turn_calls(
    turns: Any, harness: Harness, answer_path: Path, lineno: int
) -> list[list[dict[str, Any]]]:
    names = _legal_names(harness)
    source_of = {legal: source for source, legal in names.items()}
    params = {
        source_of[t.name]: list((t.parameters.get("properties") or {}).keys())
        for t in harness.tools
    }
    if not isinstance(turns, list) or not all(isinstance(t, list) for t in turns):
        raise ImportFormatError(
            "ground_truth must be a list of turns, each a list of Python call strings",
            file=str(answer_path),
            where=f"line {lineno}: $.ground_truth",
        )
    out = []
    for t, turn in enumerate(turns):
        calls = []
        for i, text in enumerate(turn):
            at = f"line {lineno}: $.ground_truth[{t}][{i}]"
            try:
                if not isinstance(text, str):
                    raise ValueError("expected a call such as \"cd(folder='x')\"")
                name, args = parse_python_call(text, params)
            except ValueError as exc:
                raise ImportFormatError(str(exc), file=str(answer_path), where=at) from None
            if name not in names:
                raise ImportFormatError(
                    f"the answer calls {name!r}, which the involved classes do not offer",
                    file=str(answer_path),
                    where=at,
                )
            calls.append({"name": names[name], "arguments": args})
        out.append(calls)
    return out
