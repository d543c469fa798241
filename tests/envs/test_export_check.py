"""Exporting an environment and checking it as library calls."""

from __future__ import annotations

from hsa.envs.export import export_env, read_tasks
from hsa.envs.livestream import LivestreamEnvironment
from hsa.envs.reference_check import check
from hsa.harness import load_harness, problems


def test_export_writes_a_valid_harness_and_tasks(tmp_path):
    env = LivestreamEnvironment(n_tasks=24)
    summary = export_env(env, tmp_path / "out")
    assert problems(tmp_path / "out") == []
    assert load_harness(tmp_path / "out") == env.harness()
    assert read_tasks(summary.tasks_file) == env.tasks()
    again = export_env(env, tmp_path / "out")  # re-export replaces the directory
    assert read_tasks(again.tasks_file) == env.tasks()


def test_export_of_a_multi_harness_corpus(tmp_path, external):
    from hsa.envs.bfcl import BfclEnvironment

    env = BfclEnvironment.from_corpus(external / "bfcl" / "BFCL_v4_parallel.json")
    summary = export_env(env, tmp_path / "bfcl", env.tasks()[:5])
    assert len(summary.harnesses) == 5
    assert all(problems(p) == [] for p in summary.harnesses)
    assert [t.id for t in read_tasks(summary.tasks_file)] == [t.id for t in env.tasks()[:5]]


def test_a_multi_harness_export_writes_over_its_own_earlier_export_only(tmp_path, external):
    import pytest

    from hsa.envs.bfcl import BfclEnvironment
    from hsa.errors import EnvError

    env = BfclEnvironment.from_corpus(external / "bfcl" / "BFCL_v4_parallel.json")
    out = tmp_path / "bfcl"
    export_env(env, out, env.tasks()[:5])
    again = export_env(env, out, env.tasks()[:5])  # the same export again: replaced
    assert len(read_tasks(again.tasks_file)) == 5
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # another set of harnesses would leave these folders beside a tasks.jsonl not listing them
    with pytest.raises(EnvError, match=r"harness folder\(s\) this export does not write"):
        export_env(env, out, env.tasks()[5:8])
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "tasks.jsonl").write_text("my own\n")  # a user's file is never replaced
    with pytest.raises(EnvError, match=r"a tasks\.jsonl beside no harness folder"):
        export_env(env, mine, env.tasks()[:5])
    single = tmp_path / "single"
    export_env(LivestreamEnvironment(n_tasks=2), single)
    with pytest.raises(EnvError, match=r"file\(s\) an export does not write \(harness.yaml"):
        export_env(env, single, env.tasks()[:5])
    assert (mine / "tasks.jsonl").read_text() == "my own\n"
    assert [p.name for p in mine.iterdir()] == ["tasks.jsonl"]


def test_check_reports_solved_counts():
    env = LivestreamEnvironment(n_tasks=16)
    seen = []
    report = check(env, on_task=lambda task, outcome: seen.append(outcome.success))
    assert report.ok and report.solved == report.total == 16 and all(seen)


def test_tasks_whose_turns_hold_unicode_line_separators_round_trip(tmp_path):
    from dataclasses import replace

    env = LivestreamEnvironment(n_tasks=3)
    tasks = [replace(t, turns=(f"{t.turns[0]}\u2028and\u0085more",)) for t in env.tasks()]
    summary = export_env(env, tmp_path / "out", tasks)
    assert "\u2028" in summary.tasks_file.read_text("utf-8")  # written raw, not escaped
    assert read_tasks(summary.tasks_file) == tasks
