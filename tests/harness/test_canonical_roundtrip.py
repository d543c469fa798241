"""Canonical rows give the source conversation back byte for byte: an OpenAI chat JSONL file
imported and rendered under its own (unchanged) harness, by the library and by ``hsa augment``,
keeps every message's text, whitespace at the ends included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hsa.harness import load_harness, render, save_harness
from hsa.harness.importers import import_source

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look up an order.",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}

# Whitespace at the ends of every kind of text: trailing newlines, a blank line, leading spaces.
SYSTEMS = ["You are a support agent.\n", "Policy:\n- be brief\n\n", "   Indented persona."]


def _call(call_id: str, q: str) -> dict:
    # Arguments as ``json.dumps`` writes them, which is how hsa renders them back.
    arguments = json.dumps({"q": q})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup", "arguments": arguments},
    }


def _rows() -> list[dict]:
    rows = []
    for i, system in enumerate(SYSTEMS):
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"  where is order {i}?\n"},
            {"role": "assistant", "content": None, "tool_calls": [_call(f"call_{i}a", str(i))]},
            {"role": "tool", "tool_call_id": f"call_{i}a", "content": "\nshipped\n"},
            {"role": "assistant", "content": "\n It shipped. \n\n"},
        ]
        rows.append({"id": f"row-{i}", "messages": messages, "tools": [LOOKUP]})
    return rows


def _renumbered(messages: list[dict]) -> list[dict]:
    """``messages`` with call ids renamed as the importer documents: ``call_0``, ... in order."""
    latest: dict[str, str] = {}
    out = []
    counter = 0
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                latest[call["id"]] = f"call_{counter}"
                calls.append({**call, "id": f"call_{counter}"})
                counter += 1
            message["tool_calls"] = calls
        if message["role"] == "tool":
            message["tool_call_id"] = latest[message["tool_call_id"]]
        out.append(message)
    return out


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in _rows()), "utf-8")
    return path


def test_rendering_an_import_under_its_harness_gives_back_the_source_bytes(source, tmp_path):
    result = import_source(source)
    harnesses = {h.id: h for h in result.harnesses}
    for row, trajectory in zip(_rows(), result.trajectories, strict=True):
        harness = harnesses[trajectory.harness_id]
        # through a saved and reloaded harness too, as `hsa augment --harness DIR` reads it
        reloaded = load_harness(save_harness(harness, tmp_path / "h" / harness.id))
        for under in (harness, reloaded):
            conversation = render(trajectory.events, under)
            assert json.dumps(conversation.messages) == json.dumps(_renumbered(row["messages"]))
            assert conversation.tools == row["tools"]


def _present(message: dict) -> dict:
    """A stored message without the struct fields it does not have (Parquet stores them null)."""
    return {k: v for k, v in message.items() if v is not None}


def test_augment_canonical_rows_give_back_the_source_bytes(source, tmp_path):
    out = tmp_path / "out"
    code = "from hsa.cli import main; main()"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "augment",
            "--input",
            str(source),
            "--out",
            str(out),
            "--variants-per-trajectory",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    stored = [
        row
        for shard in sorted((out / "data").rglob("*.parquet"))
        for row in pq.read_table(shard).to_pylist()
    ]
    by_source = {row["source_id"]: row for row in stored}
    assert all(row["canonical"] for row in stored)
    assert sorted(by_source) == [row["id"] for row in _rows()]
    for row in _rows():
        canonical = by_source[row["id"]]
        got = [_present(m) for m in canonical["messages"]]
        want = [_present(m) for m in _renumbered(row["messages"])]
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        assert got[0]["content"] == row["messages"][0]["content"]
        assert json.loads(canonical["tools"]) == row["tools"]
