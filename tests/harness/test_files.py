"""Atomic, durable writes: the old content or the whole new one, fsynced, errors as ours."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hsa.errors import DatasetError, EnvError, HarnessError
from hsa.harness import files


def fsyncs(monkeypatch) -> list[str]:
    """Record what each ``os.fsync`` synced: a file's name, or ``dir:NAME`` for a folder."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        seen.append(f"dir:{path.name}" if is_dir else path.name)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_a_write_syncs_the_file_then_its_folder_after_the_rename(tmp_path, monkeypatch):
    seen = fsyncs(monkeypatch)
    target = tmp_path / "out" / "a.json"
    files.write_atomic(target, "ünï\n", error=DatasetError)
    assert target.read_bytes() == "ünï\n".encode()
    assert seen == [f".a.json.{os.getpid()}.tmp", "dir:out"]
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "a.txt"
    files.write_atomic(target, b"old", error=DatasetError)
    with pytest.raises(RuntimeError), files.replacing(target, error=DatasetError) as temporary:
        temporary.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_an_os_error_is_the_callers_error_naming_the_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(EnvError, match="cannot write") as caught:
        files.write_atomic(blocker / "a.txt", b"x", error=EnvError)
    assert caught.value.file == str(blocker / "a.txt")
    assert f"{blocker} is not a directory" in str(caught.value)  # not the OS's "File exists"
    with pytest.raises(EnvError, match=f"{blocker} is not a directory"):
        files.write_atomic(blocker / "deeper" / "a.txt", b"x", error=EnvError)


def test_a_dangling_symbolic_link_on_the_way_is_named(tmp_path):
    link = tmp_path / "link"
    link.symlink_to("nowhere/x")
    with pytest.raises(EnvError) as caught:
        files.write_atomic(link / "deeper" / "a.txt", b"x", error=EnvError)
    assert caught.value.message == (
        f"cannot write: {link} is a symbolic link to a path that does not exist (nowhere/x)"
    )


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "h"
    with files.replacing_directory(target, error=HarnessError) as staging:
        (staging / "one.txt").write_text("1")
    assert sorted(p.name for p in target.iterdir()) == ["one.txt"]
    with files.replacing_directory(target, error=HarnessError) as staging:
        (staging / "sub").mkdir()
        (staging / "sub" / "two.txt").write_text("2")
    assert sorted(p.name for p in target.rglob("*")) == ["sub", "two.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["h"]  # no staging or old folder left


def test_a_folder_behind_a_link_is_replaced_and_the_link_kept(tmp_path):
    # the link was moved aside, the new folder put in its place half-written, and the command
    # failed on removing a link with rmtree
    real = tmp_path / "real"
    with files.replacing_directory(real, error=HarnessError) as staging:
        (staging / "old.txt").write_text("0")
    (tmp_path / "link").symlink_to(real)
    with files.replacing_directory(tmp_path / "link", error=HarnessError) as staging:
        (staging / "new.txt").write_text("1")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "link").resolve() == real
    assert [p.name for p in real.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
    # a link to a folder that holds it: replacing the folder would remove the link
    (real / "self").symlink_to(".")
    with (
        pytest.raises(HarnessError, match="a folder that holds it"),
        files.replacing_directory(real / "self", error=HarnessError),
    ):
        pass
    assert (real / "new.txt").is_file() and (real / "self").is_symlink()


def test_a_failed_folder_write_keeps_the_old_folder(tmp_path):
    target = tmp_path / "h"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with (
        pytest.raises(RuntimeError),
        files.replacing_directory(target, error=HarnessError) as staging,
    ):
        (staging / "half.txt").write_text("half")
        raise RuntimeError("the writer failed")
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["h"]


def test_a_folder_is_synced_file_by_file_before_it_is_renamed(tmp_path, monkeypatch):
    seen = fsyncs(monkeypatch)
    with files.replacing_directory(tmp_path / "h", error=HarnessError) as staging:
        (staging / "one.txt").write_text("1")
    assert seen[0] == "one.txt" and seen[-1] == f"dir:{tmp_path.name}"
