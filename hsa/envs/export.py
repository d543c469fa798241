"""Exporting an environment: its harness directory (or one per task harness) and tasks.jsonl."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hsa.envs.base import Environment, Task
from hsa.errors import EnvError, first_few
from hsa.harness.files import replacing
from hsa.harness.io import save
from hsa.harness.model import Harness

TASKS_FILE = "tasks.jsonl"


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What ``export_env`` wrote."""

    path: Path
    harnesses: tuple[Path, ...]
    tasks_file: Path
    tasks: int


def _harnesses(env: Environment, tasks: list[Task]) -> list[Harness]:
    seen: dict[str, Harness] = {}
    for task in tasks:
        harness = env.harness_for(task)
        seen.setdefault(harness.id, harness)
    if not seen:
        seen[env.harness().id] = env.harness()
    return list(seen.values())


def export_env(
    env: Environment, path: str | Path, tasks: Iterable[Task] | None = None
) -> ExportSummary:
    """Write ``env``'s harness and ``tasks`` (all when None) under ``path``.

    With one harness, ``path`` becomes that harness directory (``hsa.harness.save``) with
    ``tasks.jsonl`` beside ``harness.yaml``; with several (one per task, as in BFCL), each is
    written to ``path/<harness id>/`` and ``tasks.jsonl`` to ``path``. Rows are
    ``Task.to_dict()``, one per line, in task order.
    """
    path = Path(path)
    todo = list(env.tasks() if tasks is None else tasks)
    harnesses = _harnesses(env, todo)
    if len(harnesses) == 1:
        written: tuple[Path, ...] = (save(harnesses[0], path, beside=(TASKS_FILE,)),)
    else:
        _check_replaceable(path, {h.id for h in harnesses})
        written = tuple(save(h, path / h.id) for h in harnesses)
    tasks_file = path / TASKS_FILE
    _write_lines(tasks_file, (json.dumps(t.to_dict(), ensure_ascii=False) for t in todo))
    return ExportSummary(path, written, tasks_file, len(todo))


def _check_replaceable(path: Path, ids: set[str]) -> None:
    """Refuse ``path`` for an export of the harnesses ``ids`` unless it is new, empty, or an
    earlier export of them: ``tasks.jsonl`` and folders of those harnesses only (each of
    which ``save`` checks again). Writing over another export would leave its other harness
    folders beside a ``tasks.jsonl`` that no longer lists their tasks; over a user's own
    files, would replace them."""
    if not path.exists():
        return
    if not path.is_dir():
        raise EnvError("refusing to overwrite: it exists and is not a directory", file=str(path))
    entries = sorted(path.iterdir())
    if not entries:
        return
    foreign = [e.name for e in entries if e.name != TASKS_FILE and not e.is_dir()]
    others = [e.name for e in entries if e.is_dir() and e.name not in ids]
    if foreign:
        what = f"file(s) an export does not write ({first_few(foreign)})"
    elif others:
        what = f"harness folder(s) this export does not write ({first_few(others)})"
    elif not any(e.is_dir() for e in entries):
        what = f"a {TASKS_FILE} beside no harness folder"
    else:
        return
    raise EnvError(
        f"refusing to overwrite: it holds {what}, so it is not an earlier export of these "
        "harnesses; choose an empty or new folder",
        file=str(path),
    )


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with replacing(path, error=EnvError) as temporary, open(temporary, "wb") as fh:
        for line in lines:
            fh.write(line.encode("utf-8") + b"\n")


def read_tasks(path: str | Path) -> list[Task]:
    """The tasks of a ``tasks.jsonl`` file, each line checked."""
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise EnvError(f"cannot read: {exc}", file=str(path)) from None
    tasks = []
    # only "\n" ends a row: a JSON string may hold U+2028 or U+0085 unescaped
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.from_dict(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise EnvError(
                f"not a task row (invalid JSON: {exc.msg}); rows are Task.to_dict() objects",
                file=str(path),
                where=f"line {lineno}",
            ) from None
        except EnvError as exc:
            raise EnvError(exc.message, file=str(path), where=f"line {lineno}") from None
    return tasks
