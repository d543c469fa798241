"""The output-folder lock: a live holder in another process refuses a second run; a stale lock
(dead pid on this host, or empty and old) is taken over, by exactly one of several racers."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hsa.datasets import open_source
from hsa.datasets.lock import acquire, hold, lock_path, process_start, release
from hsa.errors import DatasetError
from hsa.pipelines import augment
from hsa.pipelines.teach import teach
from hsa.teachers.config import TeachConfig
from tests.pipelines.test_augment import config

HOLD = """
import sys, time
from hsa.datasets.lock import hold
with hold(sys.argv[1], command="test holder"):
    print("held", flush=True)
    time.sleep(60)
"""

RACE = """
import sys, time
from pathlib import Path
from hsa.datasets.lock import acquire
from hsa.errors import DatasetError
print("ready", flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.001)
try:
    acquire(sys.argv[1])
except DatasetError:
    print("refused", flush=True)
else:
    print("got", flush=True)
    time.sleep(3)  # hold it while the others try
"""


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_lock(folder: Path, **holder) -> Path:
    path = lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(holder))
    return path


def test_a_live_holder_in_another_process_refuses_a_second_run(tmp_path: Path, shards) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DatasetError, match=rf"pid {holder.pid} on .*started .*test holder"):
            acquire(out)
        with pytest.raises(DatasetError, match=rf"another run is writing here: pid {holder.pid}"):
            augment(open_source(shards), out, config())
        with pytest.raises(DatasetError, match=rf"another run is writing here: pid {holder.pid}"):
            teach(TeachConfig(tasks=1), out)
        assert not (out / ".hsa" / "run.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # killed without releasing: its lock is stale now, and taken over
    assert lock_path(out).exists()
    report = augment(open_source(shards), out, config())
    assert report.trajectories == 48 and not lock_path(out).exists()


def test_a_stale_lock_is_taken_over(tmp_path: Path) -> None:
    host = socket.gethostname()
    write_lock(tmp_path, pid=dead_pid(), host=host, started="2020-01-01T00:00:00+00:00")
    token = acquire(tmp_path)
    found = json.loads(lock_path(tmp_path).read_text())
    assert found["pid"] == os.getpid() and found["token"] == token
    release(tmp_path, token)
    assert not lock_path(tmp_path).exists()
    assert not lock_path(tmp_path).parent.exists()  # the takeover left nothing behind
    # a lock file left empty by a run killed while creating it: stale once it is old
    empty = write_lock(tmp_path)
    empty.write_text("")
    with pytest.raises(DatasetError, match="starting"):
        acquire(tmp_path)
    os.utime(empty, (time.time() - 60, time.time() - 60))
    release(tmp_path, acquire(tmp_path))


def test_a_holder_that_ended_unreaped_is_dead(tmp_path: Path) -> None:
    # a killed run whose parent has not reaped it yet (a zombie) holds nothing
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while (Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0]) != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    write_lock(tmp_path, pid=child.pid, host=socket.gethostname(), started="x", token="t")
    release(tmp_path, acquire(tmp_path))
    child.wait()


def test_a_lock_of_another_host_or_a_live_pid_is_kept(tmp_path: Path) -> None:
    write_lock(tmp_path, pid=dead_pid(), host="elsewhere.invalid", started="x", token="t")
    with pytest.raises(DatasetError, match=r"elsewhere\.invalid.*delete .*lock"):
        acquire(tmp_path)
    write_lock(tmp_path, pid=os.getppid(), host=socket.gethostname(), started="x", token="t")
    with pytest.raises(DatasetError, match=f"pid {os.getppid()}"):
        acquire(tmp_path)
    # release leaves a lock it does not hold alone
    release(tmp_path, "another token")
    assert lock_path(tmp_path).exists()


@pytest.mark.skipif(process_start(os.getpid()) is None, reason="needs Linux's /proc")
def test_a_live_pid_that_is_another_process_now_holds_nothing(tmp_path: Path) -> None:
    # pids repeat (a restarted container's first process is pid 1 again): a holder is the
    # process that started when the lock says, not whichever has its pid now
    host = socket.gethostname()
    parent = os.getppid()
    write_lock(tmp_path, pid=parent, host=host, started="x", token="t", process_start="b:1")
    release(tmp_path, acquire(tmp_path))
    start = process_start(parent)
    write_lock(tmp_path, pid=parent, host=host, started="x", token="t", process_start=start)
    with pytest.raises(DatasetError, match=f"pid {parent}"):
        acquire(tmp_path)


def test_a_folder_the_run_cannot_write_is_one_error(tmp_path: Path, monkeypatch) -> None:
    real_open = os.open

    def read_only(path, flags, *args):
        if str(path).endswith("lock") and flags & os.O_CREAT:
            raise OSError(30, "Read-only file system")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(DatasetError, match="cannot write: Read-only file system") as err:
        acquire(tmp_path)
    assert err.value.file == str(lock_path(tmp_path))


def test_racers_for_a_stale_lock_let_exactly_one_in(tmp_path: Path) -> None:
    write_lock(tmp_path, pid=dead_pid(), host=socket.gethostname(), started="x", token="t")
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(tmp_path), str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    assert [r.stdout.readline().strip() for r in racers] == ["ready"] * 6
    go.touch()
    answers = sorted(r.communicate(timeout=60)[0].strip() for r in racers)
    assert answers == ["got"] + ["refused"] * 5


def test_hold_releases_on_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), hold(tmp_path):
        assert lock_path(tmp_path).exists()
        raise RuntimeError("boom")
    assert not lock_path(tmp_path).exists()


def test_a_folder_a_refused_run_created_is_removed_and_any_other_kept(tmp_path: Path) -> None:
    new = tmp_path / "new"
    with pytest.raises(RuntimeError), hold(new):
        raise RuntimeError("refused before writing anything")
    assert not new.exists()
    with hold(new):
        (new / "out.txt").write_text("written")
    assert (new / "out.txt").exists()  # a folder with something in it stays
    with pytest.raises(RuntimeError), hold(tmp_path):
        raise RuntimeError("refused")
    assert tmp_path.is_dir()  # a folder that was there before stays, empty or not


def test_the_parents_a_refused_run_created_are_removed_up_to_the_first_that_was_there(
    tmp_path: Path,
) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "keep.txt").write_text("mine")
    with pytest.raises(RuntimeError), hold(tmp_path / "runs" / "a" / "b" / "out"):
        raise RuntimeError("refused before writing anything")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["keep.txt"]
    # a parent the run made but that holds something else by the end stays
    with pytest.raises(RuntimeError), hold(tmp_path / "runs" / "c" / "out"):
        (tmp_path / "runs" / "c" / "other.txt").write_text("written meanwhile")
        raise RuntimeError("refused")
    assert sorted(p.name for p in (tmp_path / "runs" / "c").iterdir()) == ["other.txt"]


def test_a_file_where_the_output_folder_should_be_is_named(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        with pytest.raises(DatasetError, match="is a file, where the output folder") as caught:
            acquire(out)
        assert caught.value.file == str(tmp_path / "afile")


@pytest.mark.parametrize("call", ["write", "fsync"])
def test_a_full_disk_while_the_lock_is_written_leaves_no_lock(
    tmp_path: Path, monkeypatch, call: str
) -> None:
    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(os, call, full)
        with pytest.raises(DatasetError, match="cannot write: No space left on") as err, hold(out):
            pass
    assert err.value.file == str(lock_path(out))
    assert not out.exists()  # nor the folders made for it: the rerun finds nothing in its way
    with hold(out):
        assert lock_path(out).exists()


def test_a_dangling_symbolic_link_as_the_output_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to("nowhere/x")
    for out in (tmp_path / "dangling", tmp_path / "dangling" / "sub"):
        with pytest.raises(DatasetError) as caught, hold(out):
            pass
        assert caught.value.file == str(tmp_path / "dangling")
        assert caught.value.message == (
            "is a symbolic link to a path that does not exist (nowhere/x)"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]
    assert (tmp_path / "dangling").is_symlink()
