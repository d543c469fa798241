"""Import a tau2-bench domain folder: tools with ``$defs``/``$ref``, the policy, the tasks.

A domain folder holds ``tools.json``, ``tasks.json`` and ``policy.md`` (and ``split_tasks.json``
where tau2 splits its tasks), as the shared corpus's ``tau2/`` does. tau2-bench itself keeps a
domain's tools as Python code (``src/tau2/domains/<domain>/tools.py``) and ships no
``tools.json``: its data folder (``data/tau2/domains/<domain>/``) imports once the OpenAI
schemas of those tools (each tool's ``openai_schema``, as a JSON list) are written beside
``tasks.json`` (``EXPORT_TOOLS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hsa.errors import ImportFormatError, first_few
from hsa.harness.importers.base import (
    SPLITS,
    ImportResult,
    api_sections,
    drop_self,
    harness_id,
    literal_template,
    read_json,
    read_text,
    renamed_note,
    task_row,
)
from hsa.harness.model import Harness, Prompt, Section
from hsa.harness.toolformats import tools_from_document

TOOLS_FILE = "tools.json"
POLICY_FILE = "policy.md"
TASKS_FILE = "tasks.json"
#: tau2's train/test split of a domain's tasks (upstream, beside tasks.json)
SPLITS_FILE = "split_tasks.json"
#: how a user writes a domain's tools.json with tau2-bench installed (run in the domain's
#: folder, DOMAIN its name)
EXPORT_TOOLS = (
    "python -c 'import json; from tau2.domains.DOMAIN.environment import get_environment; "
    'json.dump([t.openai_schema for t in get_environment().get_tools()], open("tools.json", '
    '"w"), indent=1)\''
)
#: ``reward_basis`` values (tau2's ``RewardType``)
REWARD_TYPES = ("DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE")
#: why a task is imported unscored (``metadata["unscored_reason"]``): what its reward needs
#: that hsa cannot check
UNSCORED = {
    "env_assertion": "their reward_basis holds ENV_ASSERTION: tau2 checks their env_assertions "
    "by running its domain's Python functions on the final database, which hsa does not have",
    "nl_assertion": "their reward_basis holds NL_ASSERTION and nothing else hsa checks (DB, "
    "ACTION or COMMUNICATE): tau2 judges their nl_assertions with an LLM, which hsa does not",
    "initial_state": "they start from an initial_state (initialization_data, "
    "initialization_actions or message_history) that tau2 applies before the episode; hsa "
    "has no database to apply it to and plays each task from one opening message",
}


def is_domain(path: Path) -> bool:
    return path.is_dir() and (path / TOOLS_FILE).is_file() and (path / TASKS_FILE).is_file()


def domains(path: Path) -> list[Path]:
    """The tau2 domains at ``path``: itself when it is one, else its sub-folders that are
    (the shared corpus's ``tau2/``, say), in name order."""
    if is_domain(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if is_domain(p))


def not_a_domain(path: Path) -> ImportFormatError:
    """The error for a folder that is no tau2 domain and holds none: where ``tasks.json`` is
    there without ``tools.json`` (tau2-bench's own data folders), how to write it."""
    expected = f"expected {TOOLS_FILE} and {TASKS_FILE} (and {POLICY_FILE})"
    folders = [path, *(sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else ())]
    bare = [p for p in folders if (p / TASKS_FILE).is_file() and not (p / TOOLS_FILE).is_file()]
    if not bare:
        return ImportFormatError(
            f"not a tau2 domain folder: {expected}, or folders that each hold them",
            file=str(path),
        )
    if bare[0] == path:
        which = "it has"
    else:
        which = f"its folder{'s' if bare[1:] else ''} {first_few([p.name for p in bare])} "
        which += "have" if bare[1:] else "has"
    return ImportFormatError(
        f"not a tau2 domain folder: {expected}, and {which} {TASKS_FILE} without "
        f"{TOOLS_FILE}: tau2-bench ships its tools as Python code, not as {TOOLS_FILE}; write "
        "their OpenAI schemas beside tasks.json with tau2-bench installed, as "
        f"{EXPORT_TOOLS.replace('DOMAIN', bare[0].name)}",
        file=str(path),
    )


def read_files(path: Path) -> dict[str, Path]:
    """The files ``import_tau2(path)`` reads (each domain's ``tools.json``, ``tasks.json``,
    and its ``policy.md`` and ``split_tasks.json`` where there), by names that hold the name
    of their domain's folder, which names its harness and tasks: ``airline/tasks.json``, for
    a domain folder and for a folder of domains alike (whose own name names nothing)."""
    out = {}
    for domain in domains(path):
        name = domain.resolve().name
        for file in (domain / n for n in (TOOLS_FILE, TASKS_FILE, POLICY_FILE, SPLITS_FILE)):
            key = f"{name}/{file.name}"
            if key in out:  # (two folders, one a link, of one domain's name: both are read)
                key = f"{domain.name}/{key}"
            if file.is_file():
                out[key] = file
    return out


def import_tau2(path: Path) -> ImportResult:
    """Every domain at ``path`` (``domains``): a harness and its tasks each."""
    found = domains(path)
    if not found:
        raise not_a_domain(path)
    results = [import_domain(domain) for domain in found]
    return ImportResult(
        harnesses=tuple(h for r in results for h in r.harnesses),
        tasks=tuple(t for r in results for t in r.tasks),
        source=str(path),
        format="tau2",
        notes=tuple(n for r in results for n in r.notes),
    )


def import_domain(path: Path) -> ImportResult:
    """One harness (``tau2-<domain>``) and one task per entry of ``tasks.json``.

    The policy becomes a prompt section of kind ``policy``. Each task's ground truth is
    ``{"actions": [...]}``, the reference tool calls exactly as ``evaluation_criteria.actions``
    lists them; the user scenario and the other evaluation criteria are kept in its metadata
    (tau2 users are simulated from instructions, so a task has no fixed user turns). A task
    whose reward needs what hsa cannot check (``UNSCORED``) is imported with
    ``metadata["scored"]`` false and ``metadata["unscored_reason"]``, and the notes count them.
    """
    if not is_domain(path):
        raise not_a_domain(path)
    domain = path.resolve().name
    tools_path = path / TOOLS_FILE
    tools, name_map = tools_from_document(read_json(tools_path, once=True), file=str(tools_path))
    tools, note = drop_self(tools, TOOLS_FILE)
    sections: list[Section] = []
    policy_path = path / POLICY_FILE
    if policy_path.is_file():
        sections.append(
            Section(
                id="policy",
                kind="policy",
                title="Policy",
                # tau2-bench opens it in text mode: its agents read CRLF and CR as LF
                body=literal_template(_newlines(read_text(policy_path))),
            )
        )
    metadata: dict[str, Any] = {"source": "tau2", "domain": domain}
    if name_map:
        metadata["name_map"] = name_map
    about_tools = [n for n in (renamed_note(name_map), note) if n]
    if about_tools:  # what the import changed of the tools, kept with them
        metadata["import_notes"] = about_tools
    harness = Harness(
        id=harness_id(f"tau2-{domain}"),
        prompt=Prompt(sections=api_sections(*sections)),
        tools=tuple(tools),
        metadata=metadata,
    )
    splits = _splits(path / SPLITS_FILE)
    tasks = _tasks(path / TASKS_FILE, domain, harness, splits)
    notes = (
        *about_tools,
        *_split_notes(splits, [str(t["metadata"]["source_id"]) for t in tasks]),
        *_unscored_notes(tasks),
    )
    return ImportResult(
        harnesses=(harness,), tasks=tuple(tasks), source=str(path), format="tau2", notes=notes
    )


def _splits(path: Path) -> dict[str, str] | None:
    """Task id -> split, from tau2's ``split_tasks.json`` when the domain has one (None
    without): its split lists (``base``, every task, aside) by the names hsa's splits have.
    Without it every task is a test task."""
    if not path.is_file():
        return None
    data = read_json(path)
    if not isinstance(data, Mapping):
        raise ImportFormatError("must map split names to lists of task ids", file=str(path))
    out: dict[str, str] = {}
    for split, ids in data.items():
        if split == "base":
            continue
        where = f"$.{split}"
        if split not in SPLITS:
            raise ImportFormatError(
                f"split {split!r} is none of hsa's ({', '.join(SPLITS)}); rename it",
                file=str(path),
                where=where,
            )
        if not isinstance(ids, list):
            raise ImportFormatError("must be a list of task ids", file=str(path), where=where)
        for task_id in map(str, ids):
            if out.setdefault(task_id, split) != split:
                message = f"task {task_id!r} is in split {out[task_id]!r} too"
                raise ImportFormatError(message, file=str(path), where=where)
    return out


def _split_notes(splits: Mapping[str, str] | None, ids: list[str]) -> tuple[str, ...]:
    """What a user reads about a split file's ids that name no task, and tasks it leaves out."""
    if splits is None:
        return ()
    notes = []
    unknown = sorted(set(splits) - set(ids))
    if unknown:
        notes.append(
            f"{len(unknown)} task id(s) in {SPLITS_FILE} are not in {TASKS_FILE}: "
            f"{first_few(unknown, 20)}"
        )
    unlisted = [i for i in ids if i not in splits]
    if unlisted:
        notes.append(
            f"{len(unlisted)} task(s) are in no split of {SPLITS_FILE}, so test tasks: "
            f"{first_few(unlisted, 20)}"
        )
    return tuple(notes)


def _tasks(
    path: Path, domain: str, harness: Harness, splits: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    data = read_json(path)
    if not isinstance(data, list):
        raise ImportFormatError("tasks.json must be a list of tasks", file=str(path), where="$")
    rename = {source: legal for legal, source in (harness.metadata.get("name_map") or {}).items()}
    known = {t.name for t in harness.tools}
    rows = []
    first_at: dict[str, int] = {}  # each task id's position
    for i, task in enumerate(data):
        where = f"$[{i}]"
        if not isinstance(task, Mapping) or not isinstance(task.get("id"), str | int):
            raise ImportFormatError(
                "a task must be an object with an id", file=str(path), where=where
            )
        earlier = first_at.setdefault(str(task["id"]), i)
        if earlier != i:  # a task looked up by its id would be either
            raise ImportFormatError(
                f"task id {task['id']!r} is given twice (also at $[{earlier}])",
                file=str(path),
                where=f"{where}.id",
            )
        criteria = task.get("evaluation_criteria") or {}
        if not isinstance(criteria, Mapping):
            raise ImportFormatError(
                "must be an object", file=str(path), where=f"{where}.evaluation_criteria"
            )
        actions = criteria.get("actions") or []
        for j, action in enumerate(actions):
            at = f"{where}.evaluation_criteria.actions[{j}]"
            if not isinstance(action, Mapping) or not isinstance(action.get("name"), str):
                raise ImportFormatError("an action needs a name", file=str(path), where=at)
            requestor = action.get("requestor", "assistant")
            if requestor == "user":
                raise ImportFormatError(
                    f"action {action['name']!r} is the user's (requestor 'user'): hsa's tau2 "
                    "environment runs the agent's tools only, with no user tools or user "
                    "simulator to perform it, so a domain whose tasks need the user to act "
                    "(telecom) cannot be imported",
                    file=str(path),
                    where=f"{at}.requestor",
                )
            if requestor != "assistant":
                raise ImportFormatError(
                    f"requestor must be 'assistant' or 'user', not {requestor!r}",
                    file=str(path),
                    where=f"{at}.requestor",
                )
            if rename.get(action["name"], action["name"]) not in known:
                raise ImportFormatError(
                    f"action calls {action['name']!r}, which is not a tool of this domain",
                    file=str(path),
                    where=f"{at}.name",
                )
            if not isinstance(action.get("arguments", {}), Mapping):
                raise ImportFormatError(
                    "arguments must be an object", file=str(path), where=f"{at}.arguments"
                )
            compare = action.get("compare_args")
            if compare is not None and (
                not isinstance(compare, list) or not all(isinstance(k, str) for k in compare)
            ):
                raise ImportFormatError(
                    "compare_args must be a list of argument names, or null (every argument)",
                    file=str(path),
                    where=f"{at}.compare_args",
                )
        basis = criteria.get("reward_basis")
        if basis is not None and (
            not isinstance(basis, list) or not all(b in REWARD_TYPES for b in basis)
        ):
            raise ImportFormatError(
                f"reward_basis must be a list of {', '.join(REWARD_TYPES)}, or null (DB and "
                "COMMUNICATE)",
                file=str(path),
                where=f"{where}.evaluation_criteria.reward_basis",
            )
        told = criteria.get("communicate_info")
        if told is not None and (
            not isinstance(told, list) or not all(isinstance(t, str) for t in told)
        ):
            # tau2's EvaluationCriteria.communicate_info is Optional[list[str]]: a string
            # would be read as its characters, each one a thing the user must be told
            raise ImportFormatError(
                "communicate_info must be a list of strings (what the user must be told), or "
                "null (nothing)",
                file=str(path),
                where=f"{where}.evaluation_criteria.communicate_info",
            )
        metadata: dict[str, Any] = {"source_id": str(task["id"])}
        metadata.update({k: v for k, v in task.items() if k not in ("id", "evaluation_criteria")})
        metadata["evaluation_criteria"] = {k: v for k, v in criteria.items() if k != "actions"}
        if not isinstance(task.get("initial_state") or {}, Mapping):
            raise ImportFormatError(
                "must be an object", file=str(path), where=f"{where}.initial_state"
            )
        unscored = _unscored(task, criteria)
        if unscored:
            metadata.update(scored=False, unscored_reason=UNSCORED[unscored])
        rows.append(
            task_row(
                id=f"tau2-{domain}-{task['id']}",
                env=f"tau2-{domain}",
                kind="tau2",
                split=(splits or {}).get(str(task["id"]), "test"),
                harness_id=harness.id,
                turns=[],
                ground_truth={"actions": [dict(a) for a in actions]},
                metadata=metadata,
            )
        )
    return rows


def _unscored(task: Mapping[str, Any], criteria: Mapping[str, Any]) -> str | None:
    """Which of ``UNSCORED`` keeps ``task`` from being scored, or None."""
    if "ENV_ASSERTION" in (criteria.get("reward_basis") or ()) and criteria.get("env_assertions"):
        return "env_assertion"
    basis = criteria.get("reward_basis")
    if (
        basis is not None
        and "NL_ASSERTION" in basis
        and criteria.get("nl_assertions")
        and not {"DB", "ACTION", "COMMUNICATE"} & set(basis)
    ):
        return "nl_assertion"
    if any((task.get("initial_state") or {}).values()):
        return "initial_state"
    return None


def _unscored_notes(tasks: list[dict[str, Any]]) -> tuple[str, ...]:
    """What a user reads about the tasks imported unscored: how many, why, which."""
    ids: dict[str, list[str]] = {}
    for task in tasks:
        reason = task["metadata"].get("unscored_reason")
        if reason:
            ids.setdefault(reason, []).append(str(task["metadata"]["source_id"]))
    return tuple(
        f"{len(which)} task(s) imported unscored ({first_few(which, 20)}): {reason}"
        for reason, which in ids.items()
    )


def _newlines(text: str) -> str:
    """``text`` with its CRLF and lone CR line endings read as LF, as Python's text mode
    reads them."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
