"""End to end: ``hsa serve oracle`` with faults, ``hsa teach`` through the real openai client,
SIGKILL and resume, and one-line errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest

HSA = [sys.executable, "-c", "from hsa.cli import main; main()"]
SECRET = "sk-test-SECRET-never-written"


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_API_KEY"] = SECRET
    return env


@contextmanager
def oracle_server(*args: str, port: int = 0):
    """``hsa serve oracle`` on ``port`` (a free one if 0); yields (base URL, process)."""
    process = subprocess.Popen(
        [*HSA, "serve", "oracle", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(),
    )
    try:
        line = process.stdout.readline()
        assert "http://127.0.0.1:" in line, line + process.stderr.read()
        yield line.strip().split(" on ")[-1], process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def teach_args(url: str, out: Path, *extra: str) -> list[str]:
    return [
        *HSA,
        "teach",
        "--backend",
        "openai",
        "--base-url",
        url,
        "--model",
        "hsa-oracle",
        "--backoff",
        "0.01",
        "--out",
        str(out),
        *extra,
    ]


def teach(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        teach_args(url, out, *extra), capture_output=True, text=True, env=environ(), timeout=300
    )


def rows(out: Path) -> list[dict]:
    found = []
    for shard in sorted((out / "data").rglob("*.parquet")):
        found.extend(pq.read_table(shard, columns=["id", "verified", "reason"]).to_pylist())
    return found


def logged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def cached_keys(out: Path) -> set[str]:
    with sqlite3.connect(out / "cache.sqlite") as db:
        return {key for (key,) in db.execute("SELECT key FROM responses")}


def test_a_thousand_rollouts_with_faults_are_all_accounted_for(tmp_path):
    out = tmp_path / "out"
    with oracle_server("--fail-rate", "0.05", "--malformed-rate", "0.02") as (url, _):
        done = teach(url, out, "--tasks", "500", "--variants-per-task", "2", "--concurrency", "128")
    assert done.returncode == 0, done.stderr
    written = rows(out)
    ids = Counter(r["id"] for r in written)
    assert len(written) == 1000 and max(ids.values()) == 1  # none lost, none twice
    reasons = Counter(r["reason"].split(":")[0] for r in written)
    assert reasons["ok"] >= 950 and reasons["format"] > 0  # the malformed calls, with reasons
    assert all(r["verified"] == (r["reason"] == "ok") for r in written)
    assert "retries:" in done.stdout and "http 429" in done.stdout and "http 500" in done.stdout
    # the default recipe's rules that need a trajectory, which a teacher's variants leave out
    assert (
        "left out: the recipe's rules that depend on a trajectory (tools.distractors, "
        "tools.drop_unused, skill_content.drop_unused): a teacher's variants are planned "
        "before there is a trajectory;" in done.stdout
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == 1000
    # the API key went to the server only: not to the output, the logs or the terminal
    assert SECRET not in done.stdout + done.stderr
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_sigkill_then_rerun_repeats_no_finished_request(tmp_path):
    out = tmp_path / "out"
    log = tmp_path / "requests.jsonl"
    job = ("--tasks", "200", "--variants-per-task", "2", "--shard-size", "40")
    with oracle_server("--latency-ms", "20", "--log", str(log)) as (url, _):
        running = subprocess.Popen(
            teach_args(url, out, *job, "--concurrency", "16"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=environ(),
        )
        deadline = time.monotonic() + 120
        staged = out / ".hsa" / "staging" / "data"  # (data/ only once every shard is written)
        while not list(staged.rglob("*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.05)
        running.send_signal(signal.SIGKILL)
        running.wait(timeout=30)
        assert running.returncode == -signal.SIGKILL
        finished_before = cached_keys(out)
        shards_before = len(list(staged.rglob("*.parquet")))
        assert finished_before and 0 < shards_before < 10  # killed mid-way
        assert not (out / "data").exists()
        sent_before = len(logged(log))

        resumed = teach(url, out, *job, "--concurrency", "64")
        assert resumed.returncode == 0, resumed.stderr
        after_kill = logged(log)[sent_before:]
        repeated = {e["key"] for e in after_kill} & finished_before
        assert repeated == set()  # no request that had finished was sent again
        hits = int(resumed.stdout.split("cache hits: ")[1].split(",")[0])
        assert hits > 0  # rollouts cut short by the kill replayed their answers from the cache
        written = rows(out)
        assert len(written) == 400 and len({r["id"] for r in written}) == 400

        sent_before = len(logged(log))
        again = teach(url, out, *job)
        assert again.returncode == 0, again.stderr
        assert "requests: 0 answered, cache hits: 0" in again.stdout
        assert len(logged(log)) == sent_before  # a finished job makes no request at all


def test_a_key_read_with_its_line_end_is_sent_without_it(tmp_path):
    # a key file saved with Windows line endings: the spaces around a key are no part of it
    log = tmp_path / "requests.jsonl"
    with oracle_server("--log", str(log)) as (url, _):
        done = subprocess.run(
            teach_args(url, tmp_path / "out", "--tasks", "1", "--variants-per-task", "0"),
            capture_output=True,
            text=True,
            env={**environ(), "OPENAI_API_KEY": SECRET + "\r\n"},
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_an_endpoint_that_is_down_fails_the_run_and_the_rerun_retries(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on, until the server starts
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "out"
    log = tmp_path / "requests.jsonl"
    job = ("--tasks", "5", "--variants-per-task", "0", "--max-retries", "1")

    down = teach(url, out, *job)
    assert down.returncode == 1
    [line] = down.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("hsa: error: ") and f"connection refused to {url}" in line
    assert "timeout" not in line and SECRET not in down.stdout + down.stderr
    # found before any rollout: at once, not after every request's retries
    assert "nothing answers there (tried 2 times); start the server" in line
    assert not out.exists()  # nothing written, no failure as a row

    with oracle_server("--log", str(log), port=port) as (served, _):
        assert served == url
        up = teach(url, out, *job)
    assert up.returncode == 0, up.stderr
    assert "0 already written; this run verified 5, rejected 0" in up.stdout
    assert "need a retry" not in up.stdout
    assert "left out" not in up.stdout  # no variants: the recipe's rules are not drawn at all
    assert len({e["key"] for e in logged(log)}) >= 5  # the rerun asked again for every rollout
    written = rows(out)
    assert len(written) == 5 and all(r["verified"] for r in written)
    assert json.loads((out / "manifest.json").read_text())["verified"] == 5


def test_a_build_config_runs_its_own_teacher_job(tmp_path, refused):
    # the build's source (environment, tasks) and seed come with its teach section
    config = tmp_path / "build.yaml"
    config.write_text(
        "source: {env: livestream, tasks: 3}\nseed: 7\nout: data\nteach: {backend: oracle}\n"
    )
    out = tmp_path / "t"
    done = subprocess.run(
        [*HSA, "teach", "--config", str(config), "--tasks", "2", "--out", str(out)],
        capture_output=True, text=True, env=environ(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    job = json.loads((out / "teach.json").read_text())["config"]
    assert (job["env"], job["tasks"], job["seed"]) == ("livestream", 2, 7)  # the flag beats it
    assert (job["variants_per_task"], job["include_canonical"]) == (0, True)
    # flags complete a build config's teach section (its base URL here)
    config.write_text("source: {env: livestream, tasks: 1}\nout: d\nteach: {backend: openai}\n")
    flags = ["--base-url", f"{refused}/v1", "--model", "m", "--backoff", "0.01"]
    completed = subprocess.run(
        [*HSA, "teach", "--config", str(config), *flags, "--out", str(tmp_path / "t2")],
        capture_output=True, text=True, env=environ(), timeout=120,
    )  # fmt: skip
    assert f"connection refused to {refused}/v1" in completed.stderr, completed.stderr
    recorded = tmp_path / "recorded.yaml"
    recorded.write_text("source: {trajectories: x.jsonl}\nout: data\n")
    refused = subprocess.run(
        [*HSA, "teach", "--config", str(recorded), "--out", str(tmp_path / "r")],
        capture_output=True, text=True, env=environ(), timeout=120,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "$.source: its source is recorded trajectories" in refused.stderr


def test_a_config_files_base_url_beats_openai_base_url_and_a_flag_beats_both(tmp_path, refused):
    # flag, then config, then the environment: the request goes to the file's endpoint
    config = tmp_path / "teach.yaml"
    config.write_text(
        f"teach: {{backend: openai, base_url: '{refused}/file/v1', model: m, "
        "tasks: 1, max_retries: 0, backoff_s: 0.01}\n"
    )
    env = {**environ(), "OPENAI_BASE_URL": f"{refused}/env/v1"}

    def refused_at(*extra: str) -> str:
        done = subprocess.run(
            [*HSA, "teach", "--config", str(config), "--out", str(tmp_path / "o"), *extra],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout
        return done.stderr

    assert f"connection refused to {refused}/file/v1" in refused_at()
    flag = refused_at("--base-url", f"{refused}/flag/v1")
    assert f"connection refused to {refused}/flag/v1" in flag
    config.write_text(
        "teach: {backend: openai, model: m, tasks: 1, max_retries: 0, backoff_s: 0.01}\n"
    )
    assert f"connection refused to {refused}/env/v1" in refused_at()  # else the variable


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--backend", "openai", "--out", "OUT"],
            "--base-url: the openai backend needs a base URL",
        ),
        (
            ["--backend", "openai", "--model", "m", "--out", "OUT", "--base-url", "http://h/v1 "],
            "--base-url: 'http://h/v1 ' holds a space",
        ),
        (["--env", "nowhere", "--out", "OUT"], "unknown environment 'nowhere'"),
        (["--tasks", "0", "--out", "OUT"], "tasks: must be at least 1"),
    ],
)
def test_bad_teach_settings_are_one_line_errors(tmp_path, args, message):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    done = subprocess.run([*HSA, "teach", *args], capture_output=True, text=True, env=environ())
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()  # one line, no progress bar, no traceback
    assert line.startswith("hsa: error: ") and message in line
    assert not (tmp_path / "out").exists()  # refused before the job made anything


def test_a_busy_port_is_a_one_line_error():
    with oracle_server() as (url, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        done = subprocess.run(
            [*HSA, "serve", "oracle", "--port", port], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("hsa: error: cannot listen on 127.0.0.1:")


@pytest.mark.parametrize(
    ("flag", "value", "bounds"),
    [
        ("--port", "-1", "0<=x<=65535"),
        ("--port", "70000", "0<=x<=65535"),
        ("--latency-ms", "inf", "0<=x<=600000"),  # it would answer nothing, never failing
        ("--latency-ms", "nan", "0<=x<=600000"),
    ],
)
def test_a_setting_out_of_range_is_refused_without_a_traceback(flag, value, bounds):
    done = subprocess.run(
        [*HSA, "serve", "oracle", flag, value], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"Invalid value for '{flag}': {value} is not in the range {bounds}" in done.stderr


def test_teach_builds_its_environment_from_env_path(tmp_path, external):
    """The corpus reaches the environment: a tau2 domain is read, then refused for what it
    is (no recorded tool outputs for a teacher to run), no longer for a missing ``path``."""
    out = tmp_path / "out"
    retail = external / "tau2" / "retail"
    args = ["--env", "tau2", "--env-path", str(retail), "--tasks", "2", "--backend", "oracle"]
    done = subprocess.run(
        [*HSA, "teach", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=300,
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("hsa: error: env 'tau2': the tau2 corpus records no tool outputs")
    missing = subprocess.run(
        [*HSA, "teach", *args[:2], "--env-path", str(tmp_path / "nowhere"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=environ(),
    )
    assert missing.returncode == 1
    assert missing.stderr == f"hsa: error: {tmp_path / 'nowhere'}: no such file or directory\n"


def test_serve_oracle_builds_its_environment_from_env_path(tmp_path, external):
    """A model served by the oracle of a tau2 domain passes that domain's tasks."""
    airline = str(external / "tau2" / "airline")
    out = tmp_path / "eval"
    with oracle_server("--env", "tau2", "--env-path", airline) as (url, _):
        model = ["--policy", "openai", "--base-url", url, "--model", "hsa-oracle"]
        tasks = ["--env", "tau2", "--env-path", airline, "--suite", "canonical", "--tasks", "3"]
        done = subprocess.run(
            [*HSA, "eval", "run", *model, *tasks, "--out", str(out)],
            capture_output=True,
            text=True,
            env=environ(),
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "tau2" and summary["suites"]["canonical"]["n"] == 3
    assert summary["suites"]["canonical"]["success"] == 1.0


def test_serve_oracle_refuses_an_environment_of_many_harnesses_saying_what_to_use(external):
    bfcl = str(external / "bfcl" / "BFCL_v4_multiple.json")
    done = subprocess.run(
        [*HSA, "serve", "oracle", "--env", "bfcl", "--env-path", bfcl, "--port", "0"],
        capture_output=True,
        text=True,
        env=environ(),
        timeout=120,
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("hsa: error: --env bfcl: bfcl has ")
    assert line.endswith(
        "evaluate or teach this one with the in-process oracle (--policy oracle, --backend oracle)"
    )


def test_a_terminated_teach_says_so_once_with_no_traceback(tmp_path):
    # the oracle keeps the event loop busy, so the signal lands inside a running task
    out = tmp_path / "out"
    args = [*HSA, "teach", "--variants-per-task", "3", "--out", str(out)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / "teach.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # rollouts are under way once the job's record is written
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "hsa: terminated" in err and "Traceback" not in err


def test_the_summary_says_how_many_retries_were_refused_and_how_many_unanswered():
    from types import SimpleNamespace

    from hsa.cli.teach import _retry_why

    assert _retry_why(SimpleNamespace(retry=8, refused=0)) == "no answer from the backend"
    assert _retry_why(SimpleNamespace(retry=8, refused=8)) == "refused by the backend"
    mixed = _retry_why(SimpleNamespace(retry=8, refused=1))
    assert mixed == "1 refused by the backend, 7 no answer"


def test_serve_says_as_it_stops_which_answers_were_never_sent():
    from hsa.cli.teach import served_summary
    from hsa.teachers.server import ServerStats

    plain = ServerStats(requests=3, statuses=Counter({200: 2, 400: 1}), malformed=1)
    assert served_summary(plain) == ("received 3 requests (200: 2, 400: 1); 1 malformed on purpose")
    cut = ServerStats(requests=4, statuses=Counter({200: 1}), cut=2, cut_sending=1)
    assert served_summary(cut) == (
        "received 4 requests (200: 1, cut before sent: 2, cut while sending: 1); "
        "0 malformed on purpose"
    )
    assert served_summary(ServerStats()).startswith("received 0 requests (none);")


def test_teach_says_how_many_tasks_ran_under_fewer_variants_than_asked(capsys, tmp_path):
    from hsa.cli.teach import _summary
    from hsa.pipelines.teach import TeachReport

    _summary(TeachReport(out=tmp_path, total=6, variants_per_task=3, short=6))
    said = capsys.readouterr().out
    assert "under fewer than 3 variants: 6 tasks (too few of the recipe's variants" in said
    _summary(TeachReport(out=tmp_path, total=18, variants_per_task=3))
    assert "under fewer than" not in capsys.readouterr().out
