"""``hsa augment`` refuses a batch the reference renderer would refuse: one line naming the file,
the row and the problem, exit status 1, and no shard for that batch.

Which defects reach the engine depends on the input: a Parquet file carries any text in
``metadata``, ``args`` and ``payload``; an OpenAI chat JSONL file is read by an importer that
only writes JSON objects, so what reaches the engine from it is what render itself refuses
(here: ``NaN`` arguments, which Python's json reads, under the python call format).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hsa.harness import TRAJECTORY_SCHEMA, Protocol, Trajectory, trajectories_to_table
from tests.augment.conftest import make_events, make_harness

CODE = "from hsa.cli import main; main()"


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE, *args], capture_output=True, text=True, check=False
    )


def shards(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "data").rglob("*.parquet")) if out.exists() else []


def write_input(tmp_path: Path, field: str, value: str, row: int) -> tuple[Path, Path]:
    """Three trajectories as a Parquet file, row ``row`` with ``field`` set to ``value``
    (``metadata``, or ``payload`` of its first event, a hook firing), and the harness."""
    harness = make_harness()
    table = trajectories_to_table(
        [Trajectory(f"t{i}", make_events(), harness_id=harness.id) for i in range(3)]
    )
    rows = table.to_pylist()
    if field == "metadata":
        rows[row]["metadata"] = value
    else:
        rows[row]["events"][0][field] = value
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), source)
    path = tmp_path / "harness.json"
    path.write_text(harness.to_json())
    return source, path


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("metadata", "[1, 2]", "metadata: malformed metadata"),
        ("metadata", '{"a": ', "metadata: malformed metadata"),
        ("payload", '{"tier": 1}', "events[0]: malformed hook event"),
        ("payload", '{"tier": null}', "events[0]: malformed hook event"),
    ],
)
def test_a_bad_row_stops_its_batch_with_one_line(
    tmp_path: Path, field: str, value: str, problem: str
) -> None:
    source, harness = write_input(tmp_path, field, value, row=2)
    out = tmp_path / "out"
    done = hsa(
        "augment", "--input", str(source), "--harness", str(harness), "--out", str(out),
        "--batch-size", "2",
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"hsa: error: {source}: row 2 (id 't2').{problem}"), lines[0]
    # the first batch (rows 0 and 1) is written, kept for the rerun in the run's staging
    # folder (no reader takes it for the dataset), and the second is not
    staged = sorted(p.name for p in (out / ".hsa" / "staging").rglob("*.parquet"))
    assert staged and all(name == "part-00000.parquet" for name in staged)
    assert shards(out) == []


def test_a_good_input_with_the_same_values_as_text_is_accepted(tmp_path: Path) -> None:
    source, harness = write_input(tmp_path, "payload", '{"tier": "1"}', row=2)
    out = tmp_path / "out"
    done = hsa("augment", "--input", str(source), "--harness", str(harness), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert shards(out)


def test_a_chat_file_value_no_row_can_hold_is_refused_naming_its_line(tmp_path: Path) -> None:
    # NaN in the row's JSON (the Python call format could not write it either) is refused as
    # the file is read; in a call's arguments text it leaves that row out (test_importers_openai)
    harness = make_harness(Protocol("text", "python", False, "json"))
    (tmp_path / "harness.json").write_text(harness.to_json())
    call = {"id": "c1", "type": "function", "function": {"name": "search"}}
    good = {
        "messages": [
            {"role": "user", "content": "find a mug"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "[]"},
        ]
    }
    lines = []
    for arguments in ({"query": "mug"}, {"query": float("nan")}):
        call["function"]["arguments"] = arguments
        lines.append(json.dumps(good))
    source = tmp_path / "chats.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    done = hsa(
        "augment", "--input", str(source), "--harness", str(tmp_path / "harness.json"),
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1, done.stderr
    where = "line 2: $.messages[1].tool_calls[0].function.arguments.query"
    assert errors[0].startswith(f"hsa: error: {source}: {where}: NaN or Infinity"), errors[0]
    assert shards(out) == []
