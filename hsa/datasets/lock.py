"""The output-folder lock: one run at a time writes into a folder.

``hold(folder)`` creates ``folder/.hsa/lock`` with ``O_CREAT | O_EXCL`` (atomic: of two runs,
exactly one creates it) holding the holder's pid, host and start time, and removes it when the
run ends. A second run refuses with a ``DatasetError`` naming the holder. A lock whose holder
is dead (its host is this host and its pid is not alive, or is another process's now: one that
started at another time, as after a restart of a container, where pids repeat), or an empty
lock file older than ``_GRACE_S`` (a run killed between creating and writing it), is stale
and taken over: the stale file is removed only under an ``flock`` on the ``folder/.hsa``
folder itself and only after reading it again there, so two runs that both found it stale
cannot both get in (the second finds the first one's live lock when it re-reads). The kernel
releases that ``flock`` when its holder dies, so a run killed while taking over never leaves
the folder stuck; and the takeover leaves no file behind. A holder that has ended but is not
reaped yet (a zombie) is dead. A lock file that cannot be written (a full disk) is removed
before the error is raised: left empty, it would refuse the rerun until it is old.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hsa.errors import DatasetError
from hsa.harness import files

LOCK = Path(".hsa") / "lock"
_GRACE_S = 10.0
_ATTEMPTS = 5


def lock_path(folder: str | Path) -> Path:
    return Path(folder) / LOCK


def _read(path: Path) -> dict[str, Any] | None:
    """The holder recorded in ``path``; None when the file is gone; {} when it is unreadable."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has ended and waits to be reaped (state ``Z`` in Linux's
    ``/proc/PID/stat``): a killed run whose parent has not reaped it yet holds nothing."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = text.rpartition(")")[2].split()
    return bool(fields) and fields[0] == "Z"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as this machine's boot and the clock tick since it
    (Linux's ``/proc``); None where that cannot be read. Two processes that have had the same
    pid have different starts."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # the stat fields after the command's name start at field 3: its start time is field 22
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def _stale(path: Path, holder: dict[str, Any]) -> bool:
    if not holder:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return False
        return age > _GRACE_S
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False  # a process on another machine cannot be checked: assume it runs
    if not process_alive(pid):
        return True
    recorded = holder.get("process_start")
    # alive, but another process than the holder when it started at another time
    return isinstance(recorded, str) and process_start(pid) not in (None, recorded)


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "a run that is starting (the lock file is still empty)"
    return f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}" + (
        f" ({holder['command']})" if holder.get("command") else ""
    )


def _create(path: Path, holder: dict[str, Any]) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError as exc:  # a read-only folder, one of another user's
        raise DatasetError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
    try:
        try:
            os.write(fd, (json.dumps(holder, sort_keys=True) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # a full disk: no empty lock is left to refuse the rerun
        with contextlib.suppress(OSError):
            path.unlink()
        raise DatasetError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
    return True


def _break_if_stale(path: Path) -> None:
    """Remove ``path`` if, read again under the ``flock`` of its folder, it is still stale."""
    try:
        breaker = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(breaker, fcntl.LOCK_EX)
            try:
                holder = _read(path)
                if holder is not None and _stale(path, holder):
                    path.unlink(missing_ok=True)
            finally:
                fcntl.flock(breaker, fcntl.LOCK_UN)
        finally:
            os.close(breaker)
    except OSError as exc:  # a read-only folder: the stale lock cannot be removed
        raise DatasetError(
            f"cannot take over the lock of a run that has ended: {exc.strerror or exc}",
            file=str(path),
        ) from None


def acquire(folder: str | Path, *, command: str | None = None) -> str:
    """Lock ``folder`` for this process; returns the token ``release`` needs.

    Raises ``DatasetError`` when a live run holds it.
    """
    path = lock_path(folder)
    blocked = files.blocked(path.parent)
    if blocked is not None:
        raise DatasetError("is a file, where the output folder should be", file=str(blocked))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        link = files.dangling(path.parent)
        if link is not None:  # the OS says "File exists"
            raise DatasetError(files.dangling_message(link), file=str(link)) from None
        raise DatasetError(f"cannot create: {exc.strerror or exc}", file=str(path.parent)) from None
    token = uuid.uuid4().hex
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "token": token,
    }
    start = process_start(os.getpid())
    if start is not None:
        holder["process_start"] = start
    if command:
        holder["command"] = command
    found: dict[str, Any] | None = None
    for _ in range(_ATTEMPTS):
        if _create(path, holder):
            return token
        found = _read(path)
        if found is None:
            continue  # released meanwhile: try again
        if not _stale(path, found):
            break
        _break_if_stale(path)
    raise DatasetError(
        f"another run is writing here: {_describe(found or {})}; wait for it to end, or use "
        f"another --out. If no such run is alive, delete {path}",
        file=str(folder),
    )


def release(folder: str | Path, token: str) -> None:
    """Unlock ``folder`` if this run still holds it."""
    path = lock_path(folder)
    found = _read(path)
    if found and found.get("token") == token:
        path.unlink(missing_ok=True)
        # a run refused before it wrote anything leaves no trace in a folder that is not ours
        with contextlib.suppress(OSError):
            path.parent.rmdir()


@contextlib.contextmanager
def hold(folder: str | Path, *, command: str | None = None) -> Iterator[None]:
    """Hold the lock of ``folder`` for the ``with`` block (see the module docstring). A
    folder the block created and left empty (a run refused before it wrote anything) is
    removed with the lock, and so are the parents made for it that are left empty."""
    created = _missing(Path(folder))
    try:
        token = acquire(folder, command=command)
    except DatasetError:  # refused, or the lock could not be written (a full disk)
        _remove_empty([lock_path(folder).parent, *created])
        raise
    try:
        yield
    finally:
        release(folder, token)
        _remove_empty(created)


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` in turn (a folder first, then its parents) up to the first that is
    not empty or not there."""
    for path in folders:
        try:
            path.rmdir()
        except OSError:
            break


def _missing(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, innermost first."""
    out: list[Path] = []
    path = folder.absolute()
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out
