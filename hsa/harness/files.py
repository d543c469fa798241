"""Atomic, durable file writes: the one way hsa puts a file or a folder in place.

A file is written under a temporary name beside its destination (``.NAME.PID.tmp``, which
``hsa.datasets.manifest.remove_temporaries`` recognises), flushed and fsynced, renamed over the
destination, and then the folder is fsynced so the rename itself survives a power cut. A reader
therefore sees the old file or the whole new one, never a part; a crash leaves at most a
temporary file. A folder (a harness directory) is written the same way as a whole: into a
staging folder beside it, every file and folder in it fsynced, renamed into place.

This is the lowest layer every writer imports (``datasets`` imports ``harness``); errors are
raised as the caller's ``HsaError`` subclass, naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from hsa.errors import HsaError


def temporary_name(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def sync_file(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def sync_directory(path: Path) -> None:
    """fsync a folder, so the renames and new names in it are on disk."""
    if os.name == "nt":  # Windows cannot open a folder as a file; NTFS journals the rename
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems (and some network ones) do not sync folders: nothing more to do.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: str | Path, *, error: type[HsaError]) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; put in place when the block ends.

    On a normal exit the temporary file is fsynced, renamed over ``path`` and the folder
    fsynced. If the block raises, the temporary file is removed and ``path`` is untouched. An
    ``OSError`` (in the block or while putting the file in place) is raised as ``error``
    naming ``path``; any other exception passes through.
    """
    path = Path(path)
    temporary = temporary_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield temporary
        sync_file(temporary)
        os.replace(temporary, path)
        sync_directory(path.parent)
    except OSError as exc:
        _discard(temporary)
        raise error(_cannot_write(exc, path), file=str(path)) from None
    except BaseException:
        _discard(temporary)
        raise


def blocked(path: str | Path) -> Path | None:
    """The file that stands where a folder of ``path`` would be (so ``path`` cannot be
    written), or None."""
    for folder in Path(path).parents:
        if folder.exists():
            return None if folder.is_dir() else folder
    return None


def dangling(path: str | Path) -> Path | None:
    """The symbolic link to a path that does not exist that ``path`` is or lies under (so a
    folder cannot be made there: the OS says "File exists"), or None."""
    for found in (Path(path), *Path(path).parents):
        if found.is_symlink() and not found.exists():
            return found
    return None


def dangling_message(link: Path) -> str:
    """What to say of ``link``, a symbolic link to a path that does not exist."""
    try:
        target = os.readlink(link)
    except OSError:  # removed meanwhile
        return "is a symbolic link to a path that does not exist"
    return f"is a symbolic link to a path that does not exist ({target})"


def _cannot_write(exc: OSError, path: Path) -> str:
    found = blocked(path)
    if found is not None:  # the OS says "File exists" or "Not a directory": say which file
        return f"cannot write: {found} is not a directory"
    link = dangling(path.parent)
    if link is not None:  # the OS says "File exists" here too
        return f"cannot write: {link} {dangling_message(link)}"
    return f"cannot write: {exc.strerror or exc}"


def _discard(temporary: Path) -> None:
    # Cleaning up must not hide why the write failed (the folder may not even exist).
    with contextlib.suppress(OSError):
        temporary.unlink(missing_ok=True)


def write_atomic(path: str | Path, data: bytes | str, *, error: type[HsaError]) -> None:
    """Write ``data`` (text as UTF-8, newlines untranslated) to ``path`` atomically and
    durably; an ``OSError`` is raised as ``error`` naming ``path``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with replacing(path, error=error) as temporary, open(temporary, "wb") as fh:
        fh.write(data)


def sync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (folders after their contents) and
    ``root`` itself."""
    for folder, _, names in os.walk(root, topdown=False):
        for name in names:
            sync_file(Path(folder, name))
        sync_directory(Path(folder))


@contextlib.contextmanager
def replacing_directory(path: str | Path, *, error: type[HsaError]) -> Iterator[Path]:
    """An empty staging folder to fill with ``path``'s new content; put in place when the
    block ends.

    On a normal exit every file and folder in it is fsynced, it replaces ``path`` (an existing
    folder is moved aside first and removed after) and the parent folder is fsynced. If
    the block raises, the staging folder is removed and ``path`` is untouched. ``OSError`` is
    raised as ``error`` naming ``path``. The caller decides whether ``path`` may be replaced.
    The folder is made by ``mkdir`` (the umask's mode, a setgid parent's group), not with
    ``mkdtemp``'s 0700. A ``path`` that is a symbolic link is written through: the folder it
    points to is replaced, and the link stays.
    """
    path = Path(path)
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if path.parent.resolve().is_relative_to(target):  # replacing it would remove the link
            raise error(
                f"is a link to {target}, a folder that holds it: name the folder itself",
                file=str(path),
            )
        path = target
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = _new_folder(path.parent, f".{path.name}.")
    except OSError as exc:
        raise error(_cannot_write(exc, path), file=str(path)) from None
    try:
        yield staging
        sync_tree(staging)
        if path.exists():
            trash = path.with_name(f".{path.name}.old-{secrets.token_hex(6)}")
            path.rename(trash)
            try:
                staging.rename(path)
            except BaseException:
                trash.rename(path)
                raise
            sync_directory(path.parent)
            shutil.rmtree(trash, ignore_errors=True)  # the new content is in place already
        else:
            staging.rename(path)
            sync_directory(path.parent)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise error(_cannot_write(exc, path), file=str(path)) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _new_folder(parent: Path, prefix: str) -> Path:
    """A new folder in ``parent`` named ``prefix`` and a random suffix, made by ``mkdir``."""
    while True:
        folder = parent / f"{prefix}{secrets.token_hex(6)}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
