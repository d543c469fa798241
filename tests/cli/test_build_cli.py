"""``hsa build`` and ``hsa inspect`` end to end: a build killed with SIGKILL and rerun ends
byte-identical to an uninterrupted one, two builds give the same shards, bad configs get one
line."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from hsa.datasets.shards import sha256_file

CODE = "from hsa.cli import main; main()"


def hsa(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE, *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def config(tmp_path: Path, **changes) -> Path:
    data = {
        "name": "livestream-mini",
        "seed": 0,
        "source": {"env": "livestream", "tasks": 160},
        "augment": {"variants_per_trajectory": 2, "batch_size": 4},
        **changes,
    }
    path = tmp_path / "mini.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".hsa" not in p.relative_to(root).parts
    }


def state(root: Path) -> dict[str, str]:
    """The digests of the files of ``root``'s run state (``.hsa/``: run file, marks)."""
    return {
        str(p.relative_to(root)): sha256_file(p)
        for p in sorted((root / ".hsa").rglob("*"))
        if p.is_file()
    }


def test_killed_build_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    path = config(tmp_path)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = hsa("build", str(path), "--out", str(whole))
    assert done.returncode == 0, done.stderr
    assert "hsa build: done" in done.stdout

    process = subprocess.Popen(
        [sys.executable, "-c", CODE, "build", str(path), "--out", str(killed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mark = killed / ".hsa" / "done" / "00003.json"
    deadline = time.monotonic() + 120
    while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "manifest.json").exists(), "the build finished before it was killed"
    assert mark.exists()
    # the shards of the unfinished run are staged in its state folder: datasets.load_dataset,
    # Polars and DuckDB, which read data/*/*.parquet manifest or not, find none to count
    assert not list(killed.glob("data/**/*.parquet"))
    assert list((killed / ".hsa" / "staging" / "data").glob("*/*.parquet"))
    # what a kill while writing leaves: temporaries, which the rerun removes
    (killed / ".hsa" / "source" / "data" / ".part-00000.parquet.999999.tmp").write_bytes(b"half")
    # (the teacher's shards come split by split)
    split = sorted((killed / ".hsa" / "staging" / "data").iterdir())[0]
    (split / ".part-00099.parquet.999999.tmp").write_bytes(b"half")

    rerun = hsa("build", str(path), "--out", str(killed))
    assert rerun.returncode == 0, rerun.stderr
    assert "skipped" in rerun.stdout
    assert digests(killed) == digests(whole)
    assert not list(killed.rglob("*.tmp"))
    # the run state too: the completion marks list the shards where the manifest does
    assert state(killed) == state(whole)

    again = hsa("build", str(path), "--out", str(whole))  # a finished build: nothing to do
    assert again.returncode == 0 and "complete already: nothing to do" in again.stdout
    assert "batches skipped" not in again.stdout and digests(whole) == digests(killed)

    # two builds of one config: the same checksum for every shard
    shards = [json.loads((d / "manifest.json").read_text())["shards"] for d in (whole, killed)]
    assert shards[0] == shards[1] and len(shards[0]) > 10

    shown = hsa("inspect", str(whole), "-n", "2")
    assert shown.returncode == 0, shown.stderr
    assert "hsa inspect" in shown.stdout and "livestream" in shown.stdout
    assert "assistant" in shown.stdout and "user" in shown.stdout

    # a shard copied in beside the dataset's own: every glob of data/*/*.parquet would read it
    stray = whole / "data" / "train" / "part-00099.parquet"
    stray.write_bytes(next((whole / "data" / "train").glob("*.parquet")).read_bytes())
    for command in (("build", str(path), "--out", str(whole)), ("inspect", str(whole))):
        refused = hsa(*command)
        assert refused.returncode == 1, refused.stdout
        assert refused.stderr.strip() == (
            f"hsa: error: {whole}: 1 file(s) under data/ are not this dataset's (its manifest "
            "does not list data/train/part-00099.parquet): readers of data/*/*.parquet would "
            "take them for rows; move them out"
        )
    assert stray.exists()  # not hsa's to delete
    stray.unlink()
    (whole / "data" / "train" / ".DS_Store").write_bytes(b"x")  # no reader's row: left be
    assert hsa("build", str(path), "--out", str(whole)).returncode == 0


def test_a_build_whose_teacher_ran_tasks_under_fewer_variants_says_so(tmp_path: Path) -> None:
    # one rule at one setting: a task has one variant of its harness, however many are asked
    (tmp_path / "one.yaml").write_text(
        "seed: 0\nvariants_per_harness: 4\nrules:\n"
        "  - {rule: prompt.heading_style, probability: 1.0, params: {style: xml}}\n"
    )
    teach = {"backend": "oracle", "variants_per_task": 3, "recipe": "one.yaml"}
    short = config(tmp_path, source={"env": "livestream", "tasks": 2}, teach=teach)
    from click.testing import CliRunner

    from hsa.cli import app

    # (in process, as the summary is all this checks: the stages are test_build's)
    done = CliRunner().invoke(app, ["build", str(short), "--out", str(tmp_path / "ds")])
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    assert "under fewer than 3 variants │ 2 tasks" in said
    assert "note: the teacher ran 2 task(s) under fewer than 3 harness variants each" in said
    shown = CliRunner().invoke(app, ["inspect", str(tmp_path / "ds"), "-n", "0"])
    assert "note │ the teacher ran 2 task(s)" in " ".join(shown.output.split())


def test_bad_configs_and_directories_get_one_line(tmp_path: Path) -> None:
    bad = config(tmp_path, augment={"recipe": {"rules": [{"rule": "tools.teleport"}]}})
    done = hsa("build", str(bad), "--out", str(tmp_path / "x"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hsa: error: ")
    assert "mini.yaml" in lines[0] and "tools.teleport" in lines[0]

    missing = hsa("build", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "nope.yaml" in missing.stderr
    assert "Traceback" not in missing.stderr

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("x")
    refused = hsa("build", str(config(tmp_path)), "--out", str(taken))
    assert refused.returncode == 1 and "not an hsa dataset directory" in refused.stderr

    not_a_dataset = hsa("inspect", str(tmp_path))
    assert not_a_dataset.returncode == 1 and "no manifest.json" in not_a_dataset.stderr


def test_a_source_the_config_names_wrongly_is_named_at_its_key(tmp_path: Path) -> None:
    cases = [
        (
            {"env": "livestreem"},
            "$.source.env: unknown environment 'livestreem' (did you mean 'livestream'?)",
        ),
        (
            {"env": "livestream", "env_options": {"sed": 3}},
            "$.source.env_options: environment 'livestream' takes no option(s) 'sed'",
        ),
        (
            {"trajectories": "nothere.jsonl"},
            f"$.source.trajectories: {tmp_path / 'nothere.jsonl'}: no such file or directory",
        ),
        (  # (the environment's own error named the path alone)
            {"env": "bfcl", "env_options": {"path": "nothere"}},
            f"$.source.env_options.path: {tmp_path / 'nothere'}: no such file or directory",
        ),
    ]
    for source, said in cases:
        path = config(tmp_path, source=source)
        done = hsa("build", str(path), "--out", str(tmp_path / "x"))
        assert done.returncode == 1 and not (tmp_path / "x").exists()
        assert done.stderr.startswith(f"hsa: error: {path}: {said}"), done.stderr
    teach = tmp_path / "teach.yaml"
    teach.write_text(yaml.safe_dump({"tasks": 2, "env_options": {"sed": 3}}))
    done = hsa("teach", "--config", str(teach), "--out", str(tmp_path / "t"))
    assert done.returncode == 1 and not (tmp_path / "t").exists()
    assert done.stderr.startswith(f"hsa: error: {teach}: $.env_options: environment "), done.stderr
    # a flag's mistake is not the file's
    flagged = hsa(
        "teach", "--config", str(teach), "--env", "livestreem", "--out", str(tmp_path / "t")
    )
    assert flagged.returncode == 1 and str(teach) not in flagged.stderr, flagged.stderr
    assert "unknown environment 'livestreem'" in flagged.stderr
    # a corpus environment without its path: said as the config's key, not a flag
    bfcl = config(tmp_path, source={"env": "bfcl"})
    done = hsa("build", str(bfcl), "--out", str(tmp_path / "x"))
    assert done.stderr.strip() == (
        f"hsa: error: {bfcl}: $.source.env_options: environment 'bfcl' needs option(s) path here"
    )


#: ``hsa`` with every read of a file called ``BFCL_v4_mem.json`` failing, as one on a failing
#: disk or a device (/proc/self/mem) does, wherever the test runs
FAILING_READS = """
import errno, hsa.config
real = hsa.config.file_hash  # (the one content hash: a build's input, a job's corpus)
def failing(path):
    if path.name == "BFCL_v4_mem.json":
        raise OSError(errno.EIO, "Input/output error", str(path))
    return real(path)
hsa.config.file_hash = failing
from hsa.cli import main; main()
"""


def test_a_corpus_folder_with_a_file_that_cannot_be_read_gets_one_line(
    tmp_path: Path, external: Path
) -> None:
    # (a traceback: OSError from hashing the folder to identify the dataset)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = (external / "bfcl" / "BFCL_v4_simple_python.json").read_text("utf-8").splitlines()
    (corpus / "BFCL_v4_simple_python.json").write_text("\n".join(lines[:3]) + "\n", "utf-8")
    (corpus / "BFCL_v4_mem.json").write_text(lines[3] + "\n", "utf-8")  # (read, then hashed)
    path = config(tmp_path, source={"env": "bfcl", "env_options": {"path": "corpus"}})
    done = subprocess.run(
        [sys.executable, "-c", FAILING_READS, "build", str(path), "--out", str(tmp_path / "x")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and not (tmp_path / "x").exists()
    assert done.stderr.strip() == (
        f"hsa: error: {path}: $.source.env_options.path: cannot read "
        f"{corpus / 'BFCL_v4_mem.json'}: Input/output error; the build identifies its input by "
        "the content of the files it reads"
    )


HOLD = """
import sys, time
from hsa.datasets.lock import hold
with hold(sys.argv[1], command="hsa build"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_folder_in_use_and_an_empty_input_get_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = hsa("build", str(config(tmp_path)), "--out", str(out))
    finally:
        holder.kill()
        holder.wait()
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert f"another run is writing here: pid {holder.pid} on " in lines[0]
    assert not (out / ".hsa" / "run.json").exists()

    import pyarrow as pa
    import pyarrow.parquet as pq

    from hsa.datasets.source import INPUT_SCHEMA

    pq.write_table(INPUT_SCHEMA.empty_table(), tmp_path / "empty.parquet")
    path = tmp_path / "empty.yaml"
    path.write_text(yaml.safe_dump({"source": {"trajectories": "empty.parquet"}}))
    empty = hsa("build", str(path), "--out", str(tmp_path / "ds"))
    lines = empty.stderr.strip().splitlines()
    assert empty.returncode == 1 and len(lines) == 1, empty.stderr
    assert "empty.parquet: holds no trajectories" in lines[0]
    assert not (tmp_path / "ds").exists()

    # the corrected input into the same folder; a flag over the config over the recipe
    from hsa.envs import get_env

    env = get_env("livestream")
    rows = []
    for task in env.tasks()[:3]:
        row = env.solve(task).trajectory.to_row()
        rows.append({**row, "task_id": task.id, "split": task.split, "verified": True})
    pq.write_table(pa.Table.from_pylist(rows, schema=INPUT_SCHEMA), tmp_path / "empty.parquet")
    recipe = {"seed": 7, "rules": [{"rule": "tools.rename"}]}
    path.write_text(
        yaml.safe_dump(
            {"seed": 3, "source": {"trajectories": "empty.parquet"}, "augment": {"recipe": recipe}}
        )
    )
    seeded = hsa("build", str(path), "--out", str(tmp_path / "ds"), "--seed", "5")
    assert seeded.returncode == 0, seeded.stderr
    assert json.loads((tmp_path / "ds" / "manifest.json").read_text())["seed"] == 5


class _KeyedEndpoint(http.server.BaseHTTPRequestHandler):
    """Refuses a request without the bearer key ``SECRET``; refuses every chat request with
    it too (the test needs only to see the key arrive)."""

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer SECRET":
            self._answer(401, {"error": {"message": "invalid API key"}})
        else:
            self._answer(200, {"data": []})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(400, {"error": {"message": "the key arrived"}})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def keyed_teacher():
    """The teach settings of an openai teacher served by ``_KeyedEndpoint``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeyedEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield {"backend": "openai", "base_url": url, "model": "m", "max_retries": 0}
    server.shutdown()


def test_an_openai_teacher_gets_its_key_from_the_environment_as_hsa_teach_does(
    tmp_path: Path, keyed_teacher
):
    path = config(tmp_path, teach=keyed_teacher)
    args = [sys.executable, "-c", CODE, "build", str(path), "--out", str(tmp_path / "o")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    refused = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert refused.returncode == 1 and "refuses the API key" in refused.stderr
    env["OPENAI_API_KEY"] = "SECRET\n"
    sent = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert sent.returncode == 1 and "the key arrived" in sent.stderr, sent.stderr
    assert "SECRET" not in sent.stderr + sent.stdout


def test_a_key_in_the_config_file_is_sent_by_build_and_teach_alike(tmp_path: Path, keyed_teacher):
    # hsa teach read a config file's api_key and then replaced it by the environment's
    build = config(tmp_path, teach={**keyed_teacher, "api_key": "SECRET"})
    alone = tmp_path / "teach.yaml"
    alone.write_text(yaml.safe_dump({**keyed_teacher, "api_key": "SECRET", "tasks": 2}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    for command in (
        ["build", str(build), "--out", str(tmp_path / "b")],
        ["teach", "--config", str(alone), "--out", str(tmp_path / "t")],
    ):
        sent = subprocess.run(
            [sys.executable, "-c", CODE, *command], capture_output=True, text=True, env=env
        )
        assert sent.returncode == 1 and "the key arrived" in sent.stderr, sent.stderr
        assert "SECRET" not in sent.stderr + sent.stdout


def test_an_api_key_env_named_on_the_command_line_beats_the_config_files_key(
    tmp_path: Path, keyed_teacher
):
    # the file's key won over an explicit --api-key-env (a flag, then the config)
    build = config(tmp_path, teach={**keyed_teacher, "api_key": "STALE"})
    alone = tmp_path / "teach.yaml"
    alone.write_text(yaml.safe_dump({**keyed_teacher, "api_key": "STALE", "tasks": 2}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_API_KEY"] = "WRONG"  # the default variable does not beat the file
    env["MY_KEY"] = "SECRET"
    for command in (
        ["build", str(build), "--out", str(tmp_path / "b")],
        ["teach", "--config", str(alone), "--out", str(tmp_path / "t")],
    ):
        for flags, expected in (
            ([], "refuses the API key"),
            (["--api-key-env", "MY_KEY"], "the key arrived"),
        ):
            sent = subprocess.run(
                [sys.executable, "-c", CODE, *command, *flags],
                capture_output=True,
                text=True,
                env=env,
            )
            assert sent.returncode == 1 and expected in sent.stderr, (command, flags, sent.stderr)


def test_a_config_files_api_key_that_is_no_string_is_refused(tmp_path: Path, keyed_teacher):
    alone = tmp_path / "teach.yaml"
    alone.write_text(yaml.safe_dump({**keyed_teacher, "api_key": ["a", "b"], "tasks": 2}))
    done = subprocess.run(
        [sys.executable, "-c", CODE, "teach", "--config", str(alone), "--out", str(tmp_path / "t")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "api_key: expected a string or null" in done.stderr


def test_a_tokenizer_without_a_chat_template_is_refused_before_the_teacher_runs(
    tmp_path: Path,
) -> None:
    # the card, which counts with it, is written last: the teacher ran, every shard was
    # written, and the card then counted message contents alone under "its chat template"
    from tests.tinymodels import qwen_tokenizer

    folder = tmp_path / "base"
    tokenizer = qwen_tokenizer(["find the weather in Paris, then book a table"])
    tokenizer.chat_template = None
    tokenizer.save_pretrained(folder)
    out = tmp_path / "out"
    done = hsa("build", str(config(tmp_path)), "--out", str(out), "--tokenizer", str(folder))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"hsa: error: {folder}: the tokenizer has no chat template")
    assert not out.exists()


def test_a_summary_folds_a_long_path_rather_than_cut_it(monkeypatch):
    # (on 40 columns the build's summary said "config │ /work/main/exam…")
    import io

    from rich.console import Console

    from hsa.cli import data

    text = io.StringIO()
    monkeypatch.setattr(data, "console", lambda: Console(file=text, width=40))
    path = "/work/main/examples/configs/a-long-build-config-name.yaml"
    data._summary("hsa build: done", [("config", path)])
    cells = [line.split("│")[2].strip() for line in text.getvalue().splitlines() if "│" in line]
    assert "".join(cells) == path
