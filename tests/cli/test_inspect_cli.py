"""``hsa inspect`` end to end: on ``hsa teach`` output and on an augmented dataset, in a pipe
at 80 columns, where long lines wrap and no word is cut."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

HSA = [sys.executable, "-c", "from hsa.cli import main; main()"]


def hsa(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["COLUMNS"] = str(columns)
    return subprocess.run([*HSA, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """Teacher output of three tasks (one variant each), and that output augmented."""
    root = tmp_path_factory.mktemp("inspect")
    teach, dataset = root / "teach", root / "dataset"
    done = hsa("teach", "--tasks", "3", "--variants-per-task", "1", "--out", str(teach))
    assert done.returncode == 0, done.stderr
    done = hsa("augment", "--input", str(teach), "--out", str(dataset))
    assert done.returncode == 0, done.stderr
    return teach, dataset


def first_row(root: Path) -> dict:
    """The first row ``hsa inspect`` shows: the first shard of the first split."""
    split = sorted(p.name for p in (root / "data").iterdir())[0]
    shard = sorted((root / "data" / split).glob("*.parquet"))[0]
    return pq.read_table(shard).to_pylist()[0]


def test_teacher_output_is_shown_like_a_dataset(made):
    teach, _ = made
    shown = hsa("inspect", str(teach), "-n", "2")
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr and shown.stderr == ""
    out = shown.stdout
    assert "teacher output" in out and "oracle/hsa-oracle" in out
    assert "verified" in out and "rows" in out and "shards" in out
    row = first_row(teach)
    assert row["id"] in out
    user = next(m["content"] for m in row["messages"] if m["role"] == "user")
    assert "user:" in out and "assistant:" in out and user in out


def test_an_unfinished_teacher_job_is_a_one_line_error(tmp_path):
    (tmp_path / "teach.json").write_text("{}")
    shown = hsa("inspect", str(tmp_path))
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith("hsa: error: ") and "not finished" in line and "hsa teach" in line


@pytest.mark.parametrize("which", ["teacher", "dataset"])
def test_long_lines_wrap_at_80_columns_and_no_word_is_cut(made, which):
    root = made[0] if which == "teacher" else made[1]
    shown = hsa("inspect", str(root), "-n", "1", "--width", "100000")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # the system prompt: long lines of prose, far wider than the terminal
    prompt = first_row(root)["messages"][0]["content"]
    words = prompt.split()
    assert len(words) > 100 and max(len(line) for line in prompt.splitlines()) > 80
    shown_words = {w for line in lines for w in line.strip("│ ").split()}
    missing = [w for w in words if w not in shown_words]
    assert missing == [], missing[:10]


def rows(root: Path) -> list[dict]:
    return [
        r for p in sorted((root / "data").rglob("*.parquet")) for r in pq.read_table(p).to_pylist()
    ]


def test_a_dataset_row_carries_its_teacher_rows_verification(made):
    """``verification`` means one thing in both row formats: the teacher's JSON object text."""
    teach, dataset = made
    teacher = {r["id"]: r for r in rows(teach)}
    augmented = rows(dataset)
    assert augmented
    for row in augmented:
        source = teacher[row["source_id"]]
        assert row["verification"] == source["verification"]
        assert json.loads(row["verification"])["reason"] == source["reason"] == "ok"
    shown = hsa("inspect", str(dataset), "-n", "1")
    assert shown.returncode == 0, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if "split=" in line)
    assert header.rstrip(" │").endswith("verified")  # the row's header says so


def test_a_rejected_dataset_row_shows_the_reason_in_its_verification(made, tmp_path):
    teach, _ = made
    table = pq.read_table(sorted((teach / "data").rglob("*.parquet"))[0])
    rejected = [{**r, "verified": False, "reason": "score: wrong total"} for r in table.to_pylist()]
    for row in rejected:
        row["verification"] = json.dumps(
            {**json.loads(row["verification"]), "verified": False, "reason": row["reason"]}
        )
    source = tmp_path / "rejected.parquet"
    pq.write_table(pa.Table.from_pylist(rejected, schema=table.schema), source)
    out = tmp_path / "dataset"
    done = hsa("augment", "--input", str(source), "--out", str(out), "--include-unverified")
    assert done.returncode == 0, done.stderr
    assert {json.loads(r["verification"])["reason"] for r in rows(out)} == {"score: wrong total"}
    shown = hsa("inspect", str(out), "-n", "1")
    assert shown.returncode == 0, shown.stderr
    assert "rejected: score: wrong total" in shown.stdout


@pytest.mark.parametrize(
    "args, least", [(["-n", "-1"], 0), (["--width", "-5"], 1), (["--width", "0"], 1)]
)
def test_counts_out_of_range_are_refused(made, args, least):
    shown = hsa("inspect", str(made[0]), *args)
    assert shown.returncode == 2 and shown.stdout == "" and "Traceback" not in shown.stderr
    assert f"{args[1]} is not in the range x>={least}" in shown.stderr


def test_no_rows_shows_the_summary_alone(made):
    shown = hsa("inspect", str(made[0]), "-n", "0")
    assert shown.returncode == 0 and "teacher output" in shown.stdout
    assert "protocol=" not in shown.stdout  # no row's header


def test_a_dataset_folder_that_also_holds_a_teach_json_is_shown_as_the_dataset(made, tmp_path):
    teach, dataset = made
    both = tmp_path / "both"
    shutil.copytree(dataset, both)
    shutil.copy(teach / "teach.json", both / "teach.json")
    shown = hsa("inspect", str(both), "-n", "1")
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr and "teacher output" not in shown.stdout
    assert "source trajectories" in shown.stdout and first_row(both)["id"] in shown.stdout


def test_a_teacher_manifest_not_as_written_is_refused_naming_the_key(made, tmp_path):
    # it was read as far as it was well formed, its numbers printed as they were, exit 0
    teach, _ = made
    odd = tmp_path / "odd"
    shutil.copytree(teach, odd)
    manifest = json.loads((odd / "manifest.json").read_text())
    manifest["rows"] = 99  # (the keys of the wrong type: tests/datasets/test_manifest.py)
    (odd / "manifest.json").write_text(json.dumps(manifest))
    shown = hsa("inspect", str(odd), "-n", "1")
    assert shown.returncode == 1 and shown.stdout == "" and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith(
        f"hsa: error: {odd / 'manifest.json'}: $.rows: says 99 rows, but the splits' shards hold 3;"
    )
    assert line.endswith("rerun the hsa teach command that wrote it to write it again")
    # a shard changed since (its rows as many): its numbers were printed beside the others'
    changed = tmp_path / "changed"
    shutil.copytree(teach, changed)
    [shard, *_] = sorted((changed / "data").glob("*/*.parquet"))
    pq.write_table(pq.read_table(shard), shard, compression="gzip")
    shown = hsa("inspect", str(changed), "-n", "1")
    assert shown.returncode == 1 and shown.stdout == "" and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith(f"hsa: error: {shard}: changed since the teacher wrote it")


#: hand edits of a dataset's manifest.json, each printed as it was, with exit 0 (these and
#: the others: tests/datasets/test_manifest.py)
EDITS = {
    "counts": (
        lambda m: (m["rows"].update(train=999, total=5), m.update(trajectories=7)),
        "$.rows.train: says 999 rows, but the shards of split 'train' hold 9",
    ),
    "rows a list": (lambda m: m.update(rows=[1]), "$.rows: expected an object"),
    "kind a teacher's": (lambda m: m.update(kind="hsa.teacher"), "$.kind: says 'hsa.teacher'"),
    "no files": (lambda m: m.pop("files"), "$.files: missing"),
}


@pytest.mark.parametrize("name", EDITS)
def test_a_dataset_manifest_not_as_written_is_refused_naming_the_key(made, tmp_path, name):
    change, said = EDITS[name]
    odd = tmp_path / "odd"
    shutil.copytree(made[1], odd)
    manifest = json.loads((odd / "manifest.json").read_text())
    change(manifest)
    (odd / "manifest.json").write_text(json.dumps(manifest))
    shown = hsa("inspect", str(odd), "-n", "0")
    assert shown.returncode == 1 and shown.stdout == "" and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith(f"hsa: error: {odd / 'manifest.json'}: {said}")
    assert "the manifest was edited or damaged: rerun the job that wrote" in line


def test_a_rerun_writes_an_edited_manifest_again(made, tmp_path):
    # it said "already complete" with the edited numbers, and left the manifest as edited
    teach, dataset = made
    odd = tmp_path / "odd"
    shutil.copytree(dataset, odd)
    manifest = json.loads((odd / "manifest.json").read_text())
    manifest["rows"].update(train=999, total=5)
    manifest["trajectories"] = 7
    (odd / "manifest.json").write_text(json.dumps(manifest))
    done = hsa("augment", "--input", str(teach), "--out", str(odd), columns=200)
    assert done.returncode == 0, done.stderr
    assert "already complete" not in done.stdout and "999" not in done.stdout
    for name in ("manifest.json", "README.md", "variants.parquet"):
        assert (odd / name).read_bytes() == (dataset / name).read_bytes(), name


def test_a_teacher_summary_says_how_many_tasks_ran_under_fewer_variants(made, tmp_path):
    teach, _ = made
    short = tmp_path / "short"
    shutil.copytree(teach, short)
    manifest = json.loads((short / "manifest.json").read_text())
    manifest["variants_per_task"] = {"asked": 3, "short": 2}
    (short / "manifest.json").write_text(json.dumps(manifest))
    shown = hsa("inspect", str(short), "-n", "0", columns=200)
    assert shown.returncode == 0, shown.stderr
    assert "under fewer than 3 variants" in shown.stdout and "2 tasks" in shown.stdout


@pytest.mark.parametrize("which", ["teacher", "dataset"])
def test_a_manifest_that_is_not_an_object_is_a_one_line_error(made, tmp_path, which):
    copy = tmp_path / which
    shutil.copytree(made[0] if which == "teacher" else made[1], copy)
    (copy / "manifest.json").write_text("[1, 2]")
    shown = hsa("inspect", str(copy))
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert line.startswith(f"hsa: error: {copy / 'manifest.json'}: not a")


def test_an_import_folder_is_pointed_to_what_makes_a_dataset_of_it(tmp_path):
    (tmp_path / "import.json").write_text("{}")  # tasks and harnesses only (BFCL, tau2)
    shown = hsa("inspect", str(tmp_path))
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    [line] = shown.stderr.strip().splitlines()
    assert "with no conversations to augment: `hsa build` with an `env:` source" in line
    (tmp_path / "trajectories.parquet").write_bytes(b"")  # conversations (a chat JSONL's)
    [line] = hsa("inspect", str(tmp_path)).stderr.strip().splitlines()
    assert line.endswith(
        "it is an `hsa harness import` folder: `hsa augment --input` it to make a dataset"
    )


def test_the_summary_says_what_the_run_left_out_or_fell_short_of(tmp_path):
    tools = [{"type": "function", "function": {"name": "ping", "description": "Ping."}}]
    rows = [
        {
            "id": f"c{i}",
            "tools": tools,
            "messages": [
                {"role": "user", "content": f"ping {i}"},
                {"role": "assistant", "content": "pong"},
            ],
        }
        for i in range(3)
    ]
    unlisted = {"id": "c", "type": "function", "function": {"name": "nope", "arguments": "{}"}}
    rows.append(  # a call to a tool the row does not list: left out, with a note
        {
            "id": "bad",
            "tools": tools,
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [unlisted]},
            ],
        }
    )
    source = tmp_path / "chats.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    recipe = tmp_path / "recipe.yaml"  # prompt rules: nothing these rows show (no system)
    recipe.write_text(
        "variants_per_harness: 4\nmin_rules: 1\nrules:\n  - {rule: prompt.heading_style}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    made = hsa(
        "augment",
        "--input",
        str(source),
        "--out",
        str(out),
        "--recipe",
        str(recipe),
        "--variants-per-trajectory",
        "2",
    )
    assert made.returncode == 0, made.stderr
    shown = hsa("inspect", str(out), "-n", "0", columns=200)
    assert shown.returncode == 0, shown.stderr
    assert "under fewer than 2 variants" in shown.stdout and "3 trajectories" in shown.stdout
    assert "note" in shown.stdout and "line(s) 4" in shown.stdout


def test_a_path_that_does_not_exist_is_said_so(tmp_path):
    # it read "not a dataset directory: no manifest.json"
    shown = hsa("inspect", str(tmp_path / "missing"))
    assert shown.returncode == 1
    assert shown.stderr.strip() == f"hsa: error: {tmp_path / 'missing'}: no such dataset directory"


def test_a_path_with_brackets_is_printed_as_it_is(tmp_path):
    # read as rich markup, '[/]' raised MarkupError after hsa teach had written its rows
    out = tmp_path / "t[/]x [red]y"
    done = hsa("teach", "--tasks", "1", "--variants-per-task", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"verified rows in {out} (" in done.stdout
    shown = hsa("inspect", str(out), "-n", "1", columns=200)
    assert shown.returncode == 0, shown.stderr
    assert f"teacher output │ {out} │" in shown.stdout
