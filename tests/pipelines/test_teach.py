"""The teach job: shards in job order, byte-identical reruns, resume from cache, no secrets."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hsa._version import __version__
from hsa.datasets import conversation, open_source
from hsa.datasets.schema import SCHEMA_VERSION, TEACHER_SCHEMA
from hsa.datasets.shards import write_shard
from hsa.errors import HsaError, TeacherError
from hsa.harness.events import Trajectory
from hsa.harness.parse import parse
from hsa.pipelines.teach import TeachConfig, TeachIncomplete, TeachReport, teach
from hsa.teachers.backends.base import Backend
from hsa.teachers.config import public_url
from hsa.teachers.oracle import OracleBackend, OracleResponder
from hsa.teachers.rollout import TASK_KEY
from tests.fakes import Unloadable

SECRET = "sk-test-SECRET-do-not-write"
#: the refusal of a folder of another teacher job: the input (a corpus) counts by its content
OTHER_JOB = "holds a teacher job with other input content or other settings"


def config(**changes) -> TeachConfig:
    settings = {
        "tasks": 6,
        "variants_per_task": 2,
        "include_canonical": True,
        "shard_size": 5,
        "api_key": SECRET,
        **changes,
    }
    return TeachConfig(**settings)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "cache.sqlite" and not p.name.startswith("cache.sqlite-")
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory, env):
    out = tmp_path_factory.mktemp("teach") / "out"
    report = teach(config(), out, env=env)
    return out, report


def test_every_rollout_is_one_row_with_a_verdict(finished, env):
    out, report = finished
    assert (report.total, report.written, report.skipped) == (18, 18, 0)
    assert report.verified == 18 and report.reasons == {"ok": 18}
    rows = [
        r for p in sorted((out / "data").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()
    ]
    assert len(rows) == len({r["id"] for r in rows}) == 18
    for row in rows:
        assert row["verified"] and row["reason"] == "ok" and row["teacher"] == "oracle/hsa-oracle"
        assert row["source_id"] == row["id"] and row["split"] in ("train", "dev", "test")
        trajectory = Trajectory.from_row(row)
        assert trajectory.task_id == row["task_id"] and trajectory.events
        assert json.loads(row["verification"])["checks"]["score"]
        meta = json.loads(row["metadata"])
        assert meta["ended"] == "answered" and meta["requests"] >= 1
    canonical = [r for r in rows if r["canonical"]]
    assert len(canonical) == 6 and all(r["rules"] == [] for r in canonical)
    assert all(r["rules"] for r in rows if not r["canonical"])


def test_rows_carry_the_surface_conversation(finished, env):
    out, _ = finished
    from hsa.teachers.task_variants import VariantPool, recipe_from

    pool = VariantPool(env.harness(), recipe_from(None), seed=0, max_size=8)
    for path in sorted((out / "data").rglob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            harness = pool(row["variant_id"]).harness
            events = parse(conversation(row), harness)
            assert events  # the stored messages parse under the row's harness
            assert row["protocol"] == harness.protocol.label


def test_the_manifest_lists_every_shard_with_its_checksum(finished):
    out, report = finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == 18 and manifest["verified"] == 18
    listed = [s for split in manifest["splits"].values() for s in split["shards"]]
    assert len(listed) == report.shards
    for shard in listed:
        assert (out / shard["path"]).exists() and len(shard["sha256"]) == 64
    assert manifest["config"]["variants_per_task"] == 2 and "api_key" not in manifest["config"]
    assert "concurrency" not in manifest["config"]  # how fast it ran is not what it wrote


#: what a job with the default recipe says of the rules its variants leave out
TRAJECTORY_RULES = (
    "the recipe's rules that depend on a trajectory (tools.distractors, tools.drop_unused, "
    "skill_content.drop_unused): a teacher's variants are planned before there is a "
    "trajectory; these rules are applied where trajectories are augmented: hsa augment, "
    "hsa build"
)


def test_the_recipes_rules_that_need_a_trajectory_are_said_to_be_left_out(finished, tmp_path, env):
    # a teacher plans its variants with no trajectory, so the planner leaves these rules out
    # (a refusal must get no distractor that answers it): said, not silent
    out, report = finished
    assert report.left_out == (TRAJECTORY_RULES,)
    assert json.loads((out / "manifest.json").read_text())["left_out"] == [TRAJECTORY_RULES]
    rows = [
        r for p in sorted((out / "data").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()
    ]
    assert not {"tools.distractors", "tools.drop_unused"} & {n for r in rows for n in r["rules"]}
    # and go on to the dataset made of the output (hsa build's, hsa augment's)
    assert open_source(out).notes == (f"the teacher left out {TRAJECTORY_RULES}",)
    # a job without variants draws no rule, so it leaves none out
    canonical = teach(config(tasks=1, variants_per_task=0), tmp_path / "canonical", env=env)
    assert canonical.left_out == ()


def test_tasks_run_under_fewer_variants_than_asked_are_counted_not_silent(finished, tmp_path, env):
    # one rule at one setting: a task has one variant of its harness, however many are asked
    recipe = tmp_path / "one.yaml"
    recipe.write_text(
        "seed: 0\nvariants_per_harness: 4\nrules:\n"
        "  - {rule: prompt.heading_style, probability: 1.0, params: {style: xml}}\n"
    )
    job = config(tasks=2, variants_per_task=3, include_canonical=False, recipe=str(recipe))
    report = teach(job, tmp_path / "out", env=env)
    assert (report.total, report.variants_per_task, report.short) == (2, 3, 2)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["variants_per_task"] == {"asked": 3, "short": 2}
    # a job that got as many as it asked says nothing (its manifest is what it was)
    out, report = finished
    assert report.short == 0
    assert "variants_per_task" not in json.loads((out / "manifest.json").read_text())


def test_same_job_gives_the_same_bytes(finished, tmp_path, env):
    out, _ = finished
    again = tmp_path / "again"
    teach(config(concurrency=3), again, env=env)  # other concurrency, other timing
    # every shard, the manifest and the job file, byte for byte
    assert files(out) == files(again)


def test_a_job_called_while_an_event_loop_runs_writes_the_same_bytes(finished, tmp_path, env):
    # as in a notebook's cell, where ipykernel's loop runs: asyncio.run refused to start
    # the job's own loop there (RuntimeError), so hsa.teach and hsa.build failed
    out, _ = finished
    called = tmp_path / "called"
    progress: list[tuple[int, int, int]] = []

    async def cell() -> TeachReport:
        return teach(config(), called, env=env, progress=lambda *a: progress.append(a))

    assert asyncio.run(cell()).written == 18
    assert files(out) == files(called)
    assert progress[-1] == (18, 18, 18)  # told as it ran, to the end


def test_a_job_resumed_under_other_speed_settings_ends_with_the_same_bytes(finished, tmp_path, env):
    # stopped under settings that decide nothing written (workers, concurrency, timeouts,
    # retries, the request's max_tokens field), then finished under the first job's: its
    # job file is the uninterrupted job's too, not the stopped one's
    out = tmp_path / "out"
    down = [env.tasks()[1].id]
    fast = {"workers": 2, "concurrency": 3, "timeout_s": 5.0, "max_retries": 1, "ramp_s": 1.0}
    stopped = config(**fast, backoff_s=0.1, max_tokens_field="max_completion_tokens")
    with pytest.raises(TeachIncomplete):
        teach(stopped, out, env=env, backend=Unreachable(env, down=down))
    teach(config(), out, env=env, backend=Unreachable(env))
    assert files(out) == files(finished[0])
    recorded = json.loads((out / "teach.json").read_text())["config"]
    assert not {"workers", "concurrency", "timeout_s", "max_tokens_field"} & set(recorded)


def test_the_manifest_records_the_hsa_that_wrote_it_outside_the_job_s_identity(
    finished, tmp_path, env, monkeypatch
):
    # (hsa build's manifest recorded its version, hsa teach's none: a rebuild could not tell
    # which hsa had made the trajectories; the job is identified by the versions of what
    # decides its rows, so a newer hsa goes on with its rows, and records itself)
    out, _ = finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hsa"] == __version__ and "hsa" not in manifest["config"]
    again = tmp_path / "again"
    shutil.copytree(out, again)
    monkeypatch.setattr("hsa._version.__version__", "99.0")
    report = teach(config(), again, env=env)
    assert report.skipped == report.total and report.requests == 0
    # a rerun that wrote nothing leaves the manifest as it was: it rewrote it, relabelling
    # the old rows as the newer hsa's
    assert (again / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()
    # one that writes a shard writes the manifest, and records itself
    next((again / "data").rglob("*.parquet")).unlink()
    assert teach(config(), again, env=env).written > 0
    rewritten = json.loads((again / "manifest.json").read_text())
    assert rewritten["hsa"] == "99.0" and rewritten["config_hash"] == manifest["config_hash"]


def test_the_manifest_records_the_version_of_the_environment_s_tasks(finished, env):
    # (livestream's splits changed with its task_version 2: the manifest says which
    # assignment its rows' splits are of, so that hsa augment can refuse an older one)
    out, _ = finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["task_version"] == env.task_version == 2


def test_shards_are_written_by_the_one_shard_writer(finished, tmp_path):
    """Teacher shards go through ``hsa.datasets.shards.write_shard`` (pinned options), and the
    manifest is the datasets' one, of kind ``hsa.teacher``."""
    out, _ = finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "hsa.teacher" and manifest["schema_version"] == SCHEMA_VERSION
    listed = [s for split in manifest["splits"].values() for s in split["shards"]]
    for i, shard in enumerate(listed):
        table = pq.read_table(out / shard["path"]).cast(TEACHER_SCHEMA)
        assert write_shard(tmp_path / f"{i}.parquet", table)["sha256"] == shard["sha256"]


def test_worker_processes_write_the_same_bytes(finished, tmp_path):
    out, _ = finished
    shared = tmp_path / "shared"
    report = teach(config(workers=2), shared)  # two spawned processes, three shards each
    assert report.written == 18 and report.requests > 0 and report.verified == 18
    # the job file too: how many processes ran the job decides nothing written
    assert files(out) == files(shared)


def test_a_rerun_of_a_finished_job_makes_no_request(finished, env):
    out, _ = finished
    before = files(out)
    report = teach(config(), out, env=env)
    assert report.skipped == report.total == 18
    assert report.requests == 0 and report.cache_hits == 0 and report.written == 0
    assert files(out) == before


def test_a_lost_shard_is_rewritten_the_same(finished, env):
    out, _ = finished
    shard = sorted((out / "data").rglob("*.parquet"))[0]
    kept = shard.read_bytes()
    rows = pq.read_table(shard).num_rows
    shard.unlink()
    report = teach(config(), out, env=env)
    # the in-process oracle keeps no request cache (asking it costs less than a lookup)
    assert report.written == rows and report.requests > 0 and report.cache_hits == 0
    assert shard.read_bytes() == kept and not (out / "cache.sqlite").exists()


def test_a_lost_shard_is_rewritten_from_the_cache(tmp_path, env):
    out, cache = tmp_path / "out", str(tmp_path / "requests.sqlite")
    teach(config(cache=cache), out, env=env)
    shard = sorted((out / "data").rglob("*.parquet"))[0]
    kept = shard.read_bytes()
    rows = pq.read_table(shard).num_rows
    shard.unlink()
    report = teach(config(cache=cache), out, env=env)
    assert report.written == rows and report.requests == 0 and report.cache_hits > 0
    assert shard.read_bytes() == kept


def test_a_teacher_folder_is_read_as_its_manifest_lists_it(finished, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(finished[0], out)
    assert open_source(out).total == 18
    # a manifest that gives no checksums (an older hsa's) is read by the shards it lists
    manifest = json.loads((out / "manifest.json").read_text())
    for split in manifest["splits"].values():
        for entry in split["shards"]:
            del entry["sha256"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert open_source(out).total == 18
    shutil.rmtree(out)
    shutil.copytree(finished[0], out)
    first, second = sorted((out / "data").rglob("*.parquet"))[:2]
    stray = out / "data" / "train" / "extra.parquet"
    stray.write_bytes(first.read_bytes())
    with pytest.raises(HsaError, match=r"1 Parquet file\(s\) here are not the teacher's"):
        open_source(out)
    stray.unlink()
    second.write_bytes(second.read_bytes()[:100])
    with pytest.raises(HsaError, match="changed since the teacher wrote it") as changed:
        open_source(out)
    assert changed.value.file == str(second)
    first.unlink()
    with pytest.raises(HsaError, match=r"1 shard\(s\) the teacher's manifest lists are missing"):
        open_source(out)
    (out / "manifest.json").write_text("{not json")  # which shards are the teacher's?
    with pytest.raises(HsaError, match="not readable as an hsa teach manifest") as unreadable:
        open_source(out)
    assert unreadable.value.file == str(out / "manifest.json")


def test_secrets_are_never_written(finished):
    out, _ = finished
    assert SECRET not in repr(config())
    for name, data in files(out).items():
        assert SECRET.encode() not in data, name
    assert not (out / "cache.sqlite").exists()  # the oracle's requests are not cached


def test_a_directory_of_another_job_is_refused(finished, env):
    out, _ = finished
    with pytest.raises(TeacherError, match=OTHER_JOB):
        teach(config(variants_per_task=1), out, env=env)


@pytest.mark.parametrize(
    "marker, what", [("manifest.json", "a dataset"), ("summary.json", "an evaluation")]
)
def test_a_directory_of_something_else_is_refused_untouched(tmp_path, env, marker, what):
    out = tmp_path / "other"
    out.mkdir()
    (out / marker).write_text("{}")
    with pytest.raises(TeacherError, match=f"holds {what} \\({marker}\\), not a teacher job"):
        teach(config(tasks=2), out, env=env)
    assert sorted(p.name for p in out.iterdir()) == [marker]


def test_a_directory_of_files_hsa_did_not_write_is_refused_untouched(tmp_path, env):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.md").write_text("mine")
    with pytest.raises(TeacherError, match=r"what hsa did not write there \(todo\.md\)"):
        teach(config(tasks=2), out, env=env)
    assert sorted(p.name for p in out.iterdir()) == ["todo.md"]
    # a folder named as a job's output, with no job recorded here, is the user's too
    (out / "todo.md").unlink()
    (out / "data").mkdir()
    (out / "data" / "keep.txt").write_text("mine")
    with pytest.raises(TeacherError, match=r"holds data, named as a teacher job's files are"):
        teach(config(tasks=2), out, env=env)
    assert sorted(p.name for p in out.iterdir()) == ["data"]


def test_a_backend_that_cannot_start_leaves_nothing_and_the_fixed_job_runs(tmp_path, env):
    out = tmp_path / "out"
    small = config(tasks=2, variants_per_task=0)
    with pytest.raises(TeacherError, match="no model folder"):
        teach(small, out, env=env, backend=Unloadable())
    assert not out.exists()  # no job file, no cache, no folder
    report = teach(small, out, env=env)
    assert report.written == 2 and (out / "teach.json").exists()


def test_a_job_that_plans_nothing_is_refused_saying_why(tmp_path, env):
    recipe = tmp_path / "none.yaml"
    recipe.write_text("rules: []\n")
    out = tmp_path / "out"
    with pytest.raises(TeacherError, match="plans no rollouts: the recipe draws no variants"):
        teach(config(tasks=2, include_canonical=False, recipe=str(recipe)), out, env=env)
    assert not out.exists()


def test_a_corpus_without_tool_outputs_is_refused_before_anything_runs(tmp_path, external):
    from hsa.envs.registry import get

    tau2 = get("tau2", path=str(external / "tau2" / "retail"))
    assert not tau2.runs_tools
    with pytest.raises(TeacherError, match="records no tool outputs") as found:
        teach(config(env="tau2", tasks=2), tmp_path / "out", env=tau2)
    assert "hsa eval run" in str(found.value) and not (tmp_path / "out").exists()
    assert "by their actions" not in str(found.value)


def test_tasks_that_run_their_calls_on_a_corpus_without_outputs_are_left_out(tmp_path, external):
    # BFCL's web_search entries run their searches, whose results no corpus records: they are
    # left out and said, and the entries scored on their calls as made are taught
    import shutil

    corpus = tmp_path / "bfcl"
    (corpus / "possible_answer").mkdir(parents=True)
    shutil.copytree(external / "bfcl" / "multi_turn_func_doc", corpus / "multi_turn_func_doc")
    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines()
        (corpus / name).write_text("\n".join(lines[:2]) + "\n")
    question = [[{"role": "user", "content": "Who won the 2024 Tour de France?"}]]
    entry = {"id": "web_search_0", "question": question, "involved_classes": ["WebSearchAPI"]}
    (corpus / "BFCL_v4_web_search.json").write_text(json.dumps(entry) + "\n")
    answer = {"id": "web_search_0", "ground_truth": ["Tadej Pogacar"]}
    (corpus / "possible_answer" / "BFCL_v4_web_search.json").write_text(json.dumps(answer) + "\n")

    settings = TeachConfig(env="bfcl", env_options={"path": str(corpus)})
    report = teach(settings, tmp_path / "out")
    assert report.total == report.written == report.verified == 2  # the simple entries
    # the web_search entry, as BFCL plays it: with and without snippets; then the recipe's rules
    note, rules = report.left_out
    assert rules == TRAJECTORY_RULES
    assert note.startswith(
        "1 web_search_base, 1 web_search_no_snippet task(s) that run their calls (e.g. web_search_"
    )
    assert "records no tool outputs" in note and "hsa eval run" in note
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["left_out"] == [note, rules]
    # a corpus of such tasks alone has nothing to teach
    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        (corpus / name).unlink()
    with pytest.raises(TeacherError, match=r"every one of its 2 tasks runs its calls"):
        teach(settings, tmp_path / "alone")
    assert not (tmp_path / "alone").exists()


def test_a_job_whose_out_is_inside_its_corpus_folder_resumes(tmp_path, external):
    # (the corpus's every file was its identity: the job's own output inside the folder made
    # the rerun another job, refused: "this directory holds a teacher job with other settings")
    corpus = tmp_path / "bfD"
    (corpus / "possible_answer").mkdir(parents=True)
    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines()
        (corpus / name).write_text("\n".join(lines[:2]) + "\n")
    settings = TeachConfig(env="bfcl", env_options={"path": str(corpus)})
    assert teach(settings, corpus / "run1").written == 2
    again = teach(settings, corpus / "run1")
    assert (again.skipped, again.written) == (2, 0)


def test_only_marked_shards_are_done_and_the_rest_are_written_again(tmp_path, env):
    """A shard is done when its completion mark lists it with its sha256 and the file matches:
    a foreign file, a half-written one and one without its mark are all written again."""
    out = tmp_path / "out"
    small = config(tasks=4, variants_per_task=0, include_canonical=False, shard_size=1)
    teach(small, out, env=env)
    before = files(out)
    shards = sorted((out / "data").rglob("*.parquet"))
    marks = sorted((out / ".hsa" / "done").glob("*.json"))
    assert len(shards) == len(marks) == 4
    shards[0].write_bytes(shards[1].read_bytes())  # another shard's rows
    shards[1].write_bytes(shards[1].read_bytes()[:100])  # cut short
    marks[2].unlink()  # written, but its mark was never made
    (out / "data" / "train" / ".part-00000.parquet.4242.tmp").write_bytes(b"half")
    report = teach(small, out, env=env)
    assert report.skipped == 1 and report.written == 3
    assert files(out) == before  # the same bytes, marks included, no temporary left


def test_a_mark_listing_other_rollouts_is_refused(tmp_path, env):
    out = tmp_path / "out"
    small = config(tasks=2, variants_per_task=0, include_canonical=False, shard_size=1)
    teach(small, out, env=env)
    mark = sorted((out / ".hsa" / "done").glob("*.json"))[0]
    found = json.loads(mark.read_text())
    mark.write_text(json.dumps({**found, "ids": "0" * 64}))
    with pytest.raises(TeacherError, match="lists other rollouts than the job plans") as refused:
        teach(small, out, env=env)
    assert refused.value.file == str(out / "data" / "train" / "part-00000.parquet")


def test_a_mark_listing_other_rollouts_names_the_shard_where_it_is_staged(tmp_path, env):
    # an unfinished job's shards wait in .hsa/staging/: the refusal named the data/ path, where
    # no file was
    out = tmp_path / "out"
    small = config(tasks=2, variants_per_task=0, include_canonical=False, shard_size=1)
    with pytest.raises(TeachIncomplete):
        teach(small, out, env=env, backend=Unreachable(env, down=[env.tasks()[1].id]))
    mark = sorted((out / ".hsa" / "done").glob("*.json"))[0]
    found = json.loads(mark.read_text())
    mark.write_text(json.dumps({**found, "ids": "0" * 64}))
    with pytest.raises(TeacherError, match="lists other rollouts than the job plans") as refused:
        teach(small, out, env=env, backend=Unreachable(env))
    staged = out / ".hsa" / "staging" / found["shards"][0]["path"]
    assert refused.value.file == str(staged) and staged.is_file()


def test_a_killed_job_resumes_to_the_same_bytes(tmp_path):
    """``hsa teach`` killed with SIGKILL mid-run, then rerun, ends byte-identical to a run
    that was never interrupted, with no temporary file left."""
    hsa = [sys.executable, "-c", "from hsa.cli import main; main()", "teach"]
    job = [
        "--tasks",
        "200",
        "--variants-per-task",
        "1",
        "--include-canonical",
        "--shard-size",
        "20",
    ]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = subprocess.run([*hsa, *job, "--out", str(whole)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    process = subprocess.Popen(
        [*hsa, *job, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    # shards finish in any order (each is written in a thread of its own): wait for four
    # marks, whichever they are
    marks = killed / ".hsa" / "done"
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if len(list(marks.glob("*.json"))) >= 4:
            break
        time.sleep(0.002)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done_marks = len(list(marks.glob("*.json")))
    assert done_marks >= 4 and not (killed / "manifest.json").exists(), "not killed mid-run"
    # its shards are staged: readers of data/ (load_dataset, Polars) find no rows to take
    # for the whole output
    staged = sorted((killed / ".hsa" / "staging" / "data").rglob("*.parquet"))
    assert not (killed / "data").exists() and len(staged) >= done_marks
    # what a kill while writing leaves: a temporary file, which the rerun removes
    (staged[0].parent / ".part-00099.parquet.999999.tmp").write_bytes(b"half")

    rerun = subprocess.run([*hsa, *job, "--out", str(killed)], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    # all but the lock's bookkeeping (the rerun took over the killed run's lock)
    kept = {k: v for k, v in files(killed).items() if not k.startswith(".hsa/lock")}
    assert kept == files(whole) and any(k.startswith(".hsa/done/") for k in kept)
    assert not list(killed.rglob("*.tmp"))


def test_progress_is_reported_as_rollouts_finish(tmp_path, env):
    seen = []
    teach(
        config(tasks=3, variants_per_task=0, include_canonical=False),
        tmp_path / "out",
        env=env,
        progress=lambda done, total, verified: seen.append((done, total, verified)),
    )
    assert seen[0] == (0, 3, 0) and seen[-1] == (3, 3, 3)


@pytest.mark.parametrize(
    "changes, where",
    [
        ({"backend": "openai"}, "base_url"),
        ({"backend": "openai", "base_url": "http://x"}, "model"),
        ({"backend": "nope"}, "backend"),
        ({"concurrency": 0}, "concurrency"),
        ({"split": "holdout"}, "split"),
        ({"variants_per_task": -1}, "variants_per_task"),
    ],
)
def test_bad_settings_name_the_setting(changes, where):
    with pytest.raises(TeacherError) as caught:
        TeachConfig(**changes)
    assert caught.value.where == where


def test_config_from_a_mapping_refuses_unknown_keys():
    assert TeachConfig.from_dict({"tasks": 3}).tasks == 3
    with pytest.raises(TeacherError, match="unknown setting 'taskz'; did you mean 'tasks'"):
        TeachConfig.from_dict({"taskz": 3}, file="build.yaml")


def test_urls_lose_credentials_before_they_are_written():
    assert public_url("http://user:pw@host:8000/v1?key=abc#x") == "http://host:8000/v1"
    assert public_url(None) is None


def test_a_worker_that_fails_stops_the_job_with_its_reason(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache's folder should be")
    settings = {"tasks": 2, "variants_per_task": 0, "workers": 2, "shard_size": 1}
    with pytest.raises(TeacherError, match=r"a teacher worker failed: .*cannot open the request"):
        teach(config(cache=str(blocker / "cache.sqlite"), **settings), tmp_path / "out")


REFUSED = "connection refused to http://127.0.0.1:9/v1 (no answer after 3 attempts)"


class Unreachable(Backend):
    """The oracle, except that requests for the tasks in ``down`` fail as a refused
    connection does after its retries; counts the requests it answers, by task."""

    name = "oracle"

    def __init__(self, env, down=()):
        from hsa.teachers.task_variants import VariantPool, recipe_from

        pool = VariantPool(env.harness(), recipe_from(None), seed=0, max_size=8)
        self.inner = OracleBackend(OracleResponder(env, variants=pool))
        self.stats = self.inner.stats
        self.down = set(down)
        self.answered: Counter = Counter()

    async def chat(self, request):
        task = request.metadata[TASK_KEY]
        if task in self.down:
            raise TeacherError(REFUSED)
        self.answered[task] += 1
        return await self.inner.chat(request)


def test_an_incomplete_job_names_every_reason_it_got_no_answer(tmp_path):
    from collections import Counter

    from hsa.pipelines.teach import RETRY, TeachReport

    report = TeachReport(out=tmp_path, total=9, reasons=Counter({RETRY: 6, "ok": 3}))
    report.retry_reasons = Counter({"http 500": 4, "timed out": 1, "not JSON": 1})
    message = TeachIncomplete(report).message
    assert "6 of 9 rollouts got no answer from the backend" in message
    assert "http 500 (4 rollouts); also timed out (1), not JSON (1);" in message


def test_rollouts_the_backend_did_not_answer_are_not_written_and_rerun(finished, tmp_path, env):
    out = tmp_path / "out"
    down = env.tasks()[1].id
    with pytest.raises(TeachIncomplete, match="3 of 18 rollouts got no answer") as failed:
        teach(config(), out, env=env, backend=Unreachable(env, down=[down]))
    report = failed.value.report
    assert report.retry == 3 and report.reasons["ok"] == 15
    assert report.retry_reasons == {REFUSED: 3}
    assert "connection refused to http://127.0.0.1:9/v1" in str(failed.value)
    # the shards written are staged, out of readers' sight, until the job is finished
    assert not (out / "data").exists()
    staged = (out / ".hsa" / "staging" / "data").rglob("*.parquet")
    written = [r for p in staged for r in pq.read_table(p).to_pylist()]
    assert written and all(r["verified"] for r in written)  # no backend failure as a row
    assert down not in {r["task_id"] for r in written}
    assert len(written) == report.written < 18 and not (out / "manifest.json").exists()
    # its shards are not the job's trajectories yet: augmenting them is refused, not partial
    with pytest.raises(HsaError, match="an unfinished hsa teach run"):
        open_source(out)
    # verified rollouts of the failed ones' shards are held back, counted, and said
    assert report.written + report.held == report.reasons["ok"] and report.held > 0
    assert f"(nor {report.held} that finished in their shards" in str(failed.value)

    healthy = Unreachable(env)
    rerun = teach(config(), out, env=env, backend=healthy)
    assert rerun.retry == 0 and rerun.skipped == report.written
    assert set(healthy.answered) == {down}  # the others' answers came from the cache
    assert files(out) == files(finished[0])  # as if the endpoint had never been down
    assert not (out / ".hsa" / "staging").exists()


NOT_SERVED = (
    "http://127.0.0.1:9/v1: the endpoint refused the request: HTTP 404: The model `m` does not "
    "exist.; check --base-url and --model"
)


class Refusing(Unreachable):
    """``Unreachable``, whose tasks in ``down`` are refused as an endpoint refuses a model
    it does not serve."""

    async def chat(self, request):
        if request.metadata[TASK_KEY] in self.down:
            raise TeacherError(NOT_SERVED)
        return await super().chat(request)


def test_a_job_refused_before_its_first_row_gives_its_folder_to_the_corrected_one(tmp_path, env):
    # a model the endpoint does not serve: the job recorded its settings, then got refused
    out = tmp_path / "out"
    small = {"tasks": 2, "variants_per_task": 0}
    every = [t.id for t in env.tasks()]
    with pytest.raises(TeachIncomplete) as failed:
        teach(config(seed=1, **small), out, env=env, backend=Refusing(env, down=every))
    message = str(failed.value)
    assert "2 of 2 rollouts were refused by the backend and were not written" in message
    assert "got no answer" not in message and "once that is corrected, rerun (" in message
    assert failed.value.report.refused == 2 and (out / "teach.json").exists()
    # refused after some answers (a max_tokens too large for longer conversations): still
    # no row, since the shard holds a refused rollout
    with pytest.raises(TeachIncomplete, match="once that is corrected, rerun \\(this --out"):
        teach(config(seed=2, **small), out, env=env, backend=Refusing(env, down=every[1:2]))
    # the corrected settings, as the error advised, into the same folder
    report = teach(config(**small), out, env=env)
    assert report.written == 2
    recorded = json.loads((out / "teach.json").read_text())["config"]
    assert recorded["seed"] == config(**small).seed
    # a folder that holds rows of other settings is still refused
    with pytest.raises(TeacherError, match=OTHER_JOB):
        teach(config(seed=1, **small), out, env=env, backend=Refusing(env, down=every))


def test_a_job_refused_after_writing_rows_keeps_its_folder_and_says_so(tmp_path, env):
    out = tmp_path / "out"
    small = {"tasks": 2, "variants_per_task": 0, "shard_size": 1}
    refusing = Refusing(env, down=[env.tasks()[1].id])
    with pytest.raises(TeachIncomplete, match=r"a changed setting .* needs a new --out") as failed:
        teach(config(**small), out, env=env, backend=refusing)
    assert failed.value.report.refused == 1 and failed.value.report.written == 1
    assert "the same command resumes where the fix is outside" in str(failed.value)
    with pytest.raises(TeacherError, match=OTHER_JOB):
        teach(config(seed=1, **small), out, env=env)
    # the fix outside the settings (the endpoint serves the model now): the same folder resumes
    again = teach(config(**small), out, env=env)
    assert (again.skipped, again.written) == (1, 1)


def test_a_corpus_with_a_harness_per_task_teaches_each_task_under_its_own(
    tmp_path, external
) -> None:
    # BFCL: every entry its own harness, and its calls are scored as made, never run
    path = external / "bfcl" / "BFCL_v4_parallel_multiple.json"
    config = TeachConfig(env="bfcl", env_options={"path": str(path)}, tasks=6)
    report = teach(config, tmp_path / "out")
    shards = (tmp_path / "out" / "data").rglob("*.parquet")
    rows = [r for shard in shards for r in pq.read_table(shard).to_pylist()]
    assert report.verified == len(rows) == 6
    assert {r["harness_id"] for r in rows} == {r["task_id"] for r in rows}  # one each
    for r in rows:
        kinds = [e["kind"] for e in r["events"]]
        assert kinds[0] == "user" and set(kinds[1:]) == {"tool_call"}


def test_tasks_that_ask_another_again_are_left_out_and_counted(tmp_path, external) -> None:
    # BFCL's format-sensitivity entries are other entries under 26 prompt formats: taught
    # under their harness they would be copies of those entries' rows
    config = TeachConfig(env="bfcl", env_options={"path": str(external / "bfcl")}, tasks=3)
    report = teach(config, tmp_path / "out")
    assert report.restated == 5200 and report.total == 3
    # and the entries it cannot score are said, not dropped silently; then the recipe's rules
    note, rules = report.left_out
    assert note.startswith("200 multi_turn_base task(s) imported unscored")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["left_out"] == [
        "5200 task(s) that ask another task again in another form (BFCL's format-sensitivity "
        "entries: augmentation varies the form itself)",
        note,
        rules,
    ]
    # and they go on to the dataset made of the output (hsa build's, hsa augment's)
    source = open_source(tmp_path / "out")
    assert source.notes == tuple(f"the teacher left out {n}" for n in manifest["left_out"])
    only = TeachConfig(env="bfcl", env_options={"path": str(external / "bfcl" / MULTI_TURN)})
    with pytest.raises(TeacherError, match="has no tasks: 200 multi_turn_base task"):
        teach(only, tmp_path / "multi")


MULTI_TURN = "BFCL_v4_multi_turn_base.json"


def test_a_corpus_of_restated_tasks_only_says_so(external, tmp_path):
    from hsa.envs.registry import get

    env = get("bfcl", path=external / "bfcl" / "BFCL_v4_format_sensitivity.json")
    with pytest.raises(TeacherError, match=r"each ask another task again in another form"):
        teach(TeachConfig(env="bfcl"), tmp_path / "out", env=env)
    assert not (tmp_path / "out").exists()
