"""End to end: `hsa env` in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest


def hsa(*args: str, cwd=None) -> subprocess.CompletedProcess:
    # this interpreter's hsa, not whichever is first on PATH
    cmd = [sys.executable, "-c", "from hsa.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)


def test_list_and_show():
    out = hsa("env", "list")
    assert out.returncode == 0
    assert [line.split()[0] for line in out.stdout.splitlines()].count("livestream") == 1
    shown = hsa("env", "show", "livestream")
    assert shown.returncode == 0, shown.stderr
    assert "tools (13)" in shown.stdout and "compliance-guard: stop -> deny" in shown.stdout
    assert "skills (6)" in shown.stdout


def test_tasks_split_and_limit():
    out = hsa("env", "tasks", "livestream", "--split", "test", "--limit", "5")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 5 and {r["split"] for r in rows} == {"test"}
    assert all(r["env"] == "livestream" and r["ground_truth"]["facts"] for r in rows)


def test_export_then_validate(tmp_path):
    out = hsa("env", "export", "livestream", str(tmp_path / "ls"), "--n-tasks", "30")
    assert out.returncode == 0, out.stderr
    assert "wrote 1 harness and 30 tasks" in out.stdout
    valid = hsa("harness", "validate", str(tmp_path / "ls"))
    assert valid.returncode == 0, valid.stderr
    assert len((tmp_path / "ls" / "tasks.jsonl").read_text().splitlines()) == 30


def test_a_path_with_brackets_is_printed_as_it_is(tmp_path):
    # read as rich markup, '[/]' raised MarkupError after the files were written
    dest = tmp_path / "o[/]y [red]z"
    out = hsa("env", "export", "livestream", str(dest), "--n-tasks", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"wrote 1 harness and 3 tasks to {dest}\n"


@pytest.mark.slow
def test_check_solves_every_livestream_task():
    out = hsa("env", "check", "livestream")
    assert out.returncode == 0, out.stderr
    solved, total = out.stdout.strip().splitlines()[-1].removeprefix("solved ").split("/")
    assert solved == total and int(total) >= 2000


def test_check_fails_with_exit_1_on_unsolved_tasks(external):
    path = external / "bfcl" / "BFCL_v4_live_simple.json"
    out = hsa("env", "check", "bfcl", "--path", str(path))
    assert out.returncode == 1
    assert "solved 256/258" in out.stdout
    assert "hsa: error: 2 of 258 bfcl tasks not solved" in out.stderr
    assert "Traceback" not in out.stderr


def test_check_a_tau2_domain(external):
    out = hsa("env", "check", "tau2", "--path", str(external / "tau2" / "airline"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("solved 50/50")


def test_a_tau2_split_file_read_otherwise_than_written_is_said(external, tmp_path):
    domain = tmp_path / "airline"
    shutil.copytree(external / "tau2" / "airline", domain)
    ids = [t["id"] for t in json.loads((domain / "tasks.json").read_text("utf-8"))]
    splits = {"train": [*ids[:20], "999"], "test": ids[20:40]}  # 10 tasks in no split
    (domain / "split_tasks.json").write_text(json.dumps(splits), "utf-8")
    out = hsa("env", "show", "tau2", "--path", str(domain))
    assert out.returncode == 0, out.stderr
    assert "tasks: 50 (test 30, train 20)" in out.stdout
    assert "note: 1 task id(s) in split_tasks.json are not in tasks.json: 999" in out.stderr
    assert "note: 10 task(s) are in no split of split_tasks.json, so test tasks:" in out.stderr


def test_errors_are_one_line():
    out = hsa("env", "show", "nope")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "hsa: error: unknown environment 'nope'; registered: bfcl, livestream, recorded, tau2"
    )
    missing = hsa("env", "tasks", "bfcl")
    assert missing.returncode == 1 and missing.stderr.startswith("hsa: error: environment 'bfcl'")


def test_what_a_corpus_leaves_out_is_said_and_nothing_to_check_fails(external):
    multi = external / "bfcl" / "BFCL_v4_multi_turn_base.json"
    for command in ("check", "show", "tasks"):
        done = hsa("env", command, "bfcl", "--path", str(multi))
        if command == "tasks":  # a listing may come out empty; it says why
            assert done.returncode == 0 and done.stdout == ""
            assert done.stderr.startswith("note: 200 multi_turn_base task(s) imported unscored")
            continue
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines() == [
            f"hsa: error: {multi}: bfcl offers no task here: 200 multi_turn_base task(s) imported "
            "unscored: BFCL scores multi-turn entries by executing its Python API backends and "
            "comparing their state and results turn by turn; hsa does not have those backends"
        ]
    missing = hsa("env", "show", "tau2")
    assert missing.stderr.strip() == (
        "hsa: error: environment 'tau2' reads a corpus: give its file or folder with --path"
    )
    negative = hsa("env", "check", "livestream", "--show", "-1")
    assert negative.returncode == 2 and "'--show': -1 is not in the range x>=0" in negative.stderr


def test_tasks_of_a_split_the_corpus_lacks_say_so(external):
    # the listing was empty and silent, where check and export said why
    source = str(external / "tau2" / "retail")
    listed = hsa("env", "tasks", "tau2", "--path", source, "--split", "train")
    assert listed.returncode == 0 and listed.stdout == ""
    assert listed.stderr == "note: tau2 offers no train task here\n"
    checked = hsa("env", "check", "tau2", "--path", source, "--split", "train")
    assert checked.returncode == 1 and "tau2 offers no train task here" in checked.stderr


def test_a_corpus_with_no_task_at_all_is_refused_by_tasks_as_by_check(tmp_path, capsys):
    # env tasks said "note: bfcl offers no task here" and exited 0 on an empty BFCL file
    from tests.cli.test_harness_cli import cli, one_error

    empty = tmp_path / "BFCL_v4_simple_python.json"
    empty.write_text("")
    for args in (["tasks"], ["tasks", "--split", "test"], ["check"], ["show"]):
        line = one_error(cli(capsys, "env", *args, "bfcl", "--path", str(empty)))
        assert line == f"hsa: error: {empty}: bfcl offers no task here"
