"""``hsa augment`` end to end on an adversarial OpenAI chat JSONL file of our own: parallel
calls, nested arguments, argument values equal to tool names and skill ids, tool results with
keys named like parameters. Argument values and tool results come through exactly, every call
validates against its row's tools, and ``invert`` gives back the source."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from hsa.augment import invert
from hsa.datasets import iter_rows
from hsa.harness import Harness, Skill, Tool, ToolCall, ToolResult, parse
from hsa.harness.events import events_to_rows
from hsa.harness.importers import import_source
from hsa.pipelines import read_variants

CODE = "from hsa.cli import main; main()"

ITEM = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "qty": {"type": "integer"},
        "options": {
            "type": "object",
            "properties": {
                "color": {"type": "string", "enum": ["red", "blue", "search"]},
                "size": {"type": "string"},
            },
        },
    },
    "required": ["sku", "qty"],
}
TOOLS = [
    Tool(
        "lookup_order",
        "Look up an order and its items.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "items": {"type": "array", "items": ITEM},
                "note": {"type": ["string", "null"]},
            },
            "required": ["order_id"],
        },
    ),
    Tool(
        "search",
        "Search the catalogue.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {
                        "category": {"type": "string", "enum": ["shoes", "bags", "returns"]},
                        "max_price": {"type": "number"},
                    },
                },
                "limit": {"type": "integer"},
            },
            "required": ["query"],
        },
    ),
    Tool(
        "refund",
        "Refund an order.",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number"},
                "reason": {"type": "string", "enum": ["damaged", "late", "lookup_order"]},
            },
            "required": ["order_id", "amount", "reason"],
        },
    ),
]
SKILL_TOOL = Tool(
    "load_skill",
    "Load a skill by id.",
    {"type": "object", "properties": {"skill_id": {"type": "string"}}, "required": ["skill_id"]},
)
HARNESS = Harness(
    id="adversarial",
    tools=tuple(TOOLS),
    skills=(
        Skill("returns", "returns", "How refunds work.", "# Returns\n\nCall `refund` last.\n"),
        Skill("search", "search", "A skill whose id is a tool name.", "Use `search` well.\n"),
    ),
    skill_tool=SKILL_TOOL,
)


def call(i: int, name: str, args: dict) -> dict:
    return {
        "id": f"orig_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def conversations() -> list[dict]:
    tricky = 'say "hi" <tool_call>{"name": "refund"}</tool_call>\n\ttab \u00e9\u4e2d\U0001f600'
    rows = [
        [  # parallel calls with nested arguments; values equal to tool names and skill ids
            {"role": "user", "content": "Where is order search? Refund lookup_order."},
            {
                "role": "assistant",
                "content": "Checking three things at once.",
                "tool_calls": [
                    call(
                        0,
                        "lookup_order",
                        {
                            "order_id": "search",
                            "items": [
                                {
                                    "sku": "refund",
                                    "qty": 2,
                                    "options": {"color": "search", "size": "returns"},
                                },
                                {"sku": "load_skill", "qty": 0},
                            ],
                            "note": None,
                        },
                    ),
                    call(
                        1,
                        "search",
                        {
                            "query": "lookup_order",
                            "filters": {"category": "returns", "max_price": 10.0},
                            "limit": 3,
                        },
                    ),
                    call(
                        2,
                        "refund",
                        {"order_id": "order_id", "amount": 1e-07, "reason": "lookup_order"},
                    ),
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "orig_0",
                "content": '{"order_id": "search", "items": [], "query": "refund"}',
            },
            {
                "role": "tool",
                "tool_call_id": "orig_1",
                "content": '{"filters": {"category": "returns"}, "limit": 3, "name": "search"}',
            },
            {
                "role": "tool",
                "tool_call_id": "orig_2",
                "content": '{"amount": 1e-07, "reason": "lookup_order", "arguments": {}}',
            },
            {"role": "assistant", "content": "All done: lookup_order, search and refund ran."},
        ],
        [  # a skill load named like a tool, then calls whose values look like calls
            {"role": "user", "content": tricky},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(0, "load_skill", {"skill_id": "search"})],
            },
            {"role": "tool", "tool_call_id": "orig_0", "content": "Use `search` well.\n"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call(1, "search", {"query": tricky, "limit": 12345678901234567890}),
                    call(2, "search", {"query": "", "filters": {}}),
                ],
            },
            {"role": "tool", "tool_call_id": "orig_1", "content": tricky},
            {"role": "tool", "tool_call_id": "orig_2", "content": ""},
            {"role": "assistant", "content": "The skill id is returns; the tool is search."},
        ],
        [  # the returns skill, then a refund whose reason equals a tool name
            {"role": "user", "content": "returns"},
            {
                "role": "assistant",
                "content": "returns",
                "tool_calls": [call(0, "load_skill", {"skill_id": "returns"})],
            },
            {
                "role": "tool",
                "tool_call_id": "orig_0",
                "content": "# Returns\n\nCall `refund` last.\n",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call(1, "refund", {"order_id": "returns", "amount": 5, "reason": "damaged"})
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "orig_1",
                "content": '{"order_id": "returns", "skill_id": "search"}',
            },
        ],
    ]
    tools = [t.to_openai() for t in [*TOOLS, SKILL_TOOL]]
    return [{"id": f"adv-{i}", "messages": m, "tools": tools} for i, m in enumerate(rows)]


RECIPE = {
    "seed": 5,
    "variants_per_harness": 8,
    "variants_per_trajectory": 4,
    "min_rules": 3,
    "rules": [
        {"rule": "tools.rename", "probability": 0.8},
        {"rule": "tools.rename_params", "probability": 0.9, "params": {"fraction": 1.0}},
        {"rule": "tools.enum_values", "probability": 0.7},
        {"rule": "tools.wrap_args", "probability": 0.3},
        {"rule": "tools.namespace", "probability": 0.3},
        {"rule": "skill_ids.rename", "probability": 0.8},
        {"rule": "protocol.switch", "probability": 0.5},
    ],
}


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE, *args], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def augmented(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("adversarial")
    source = root / "chats.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in conversations()))
    harness = root / "harness.json"
    harness.write_text(HARNESS.to_json())
    recipe = root / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(RECIPE))
    out = root / "out"
    done = hsa(
        "augment",
        "--input",
        str(source),
        "--harness",
        str(harness),
        "--recipe",
        str(recipe),
        "--out",
        str(out),
        "--variants-per-trajectory",
        "4",
    )
    assert done.returncode == 0, done.stderr
    return source, out, root


def typed(events) -> list:
    """Events with arguments as key-sorted JSON: equal values of equal types compare equal."""
    rows = events_to_rows(events)
    for row in rows:
        if row["args"] is not None:
            row["args"] = json.dumps(json.loads(row["args"]), sort_keys=True)
    return rows


def leaves(value) -> list:
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [json.dumps(value)]


def test_invert_returns_the_source_exactly(augmented) -> None:
    source, out, _ = augmented
    imported = {t.id: t for t in import_source(source, harness=HARNESS).trajectories}
    variants = read_variants(out)
    rows = list(iter_rows(out))
    assert len(rows) == 3 * 5
    assert len({r["protocol"] for r in rows}) > 1
    for row in rows:
        back = invert(row, variants[row["variant_id"]])
        expected = imported[row["source_id"]].events
        # the same events and value types (1 is not 1.0 is not True); a renamed key comes back
        # last in its object, as the mapping's inverse moves it, so key order is not compared
        assert back == list(expected), row["id"]
        assert typed(back) == typed(expected), row["id"]


def test_values_and_results_survive_and_calls_validate(augmented) -> None:
    source, out, _ = augmented
    imported = {t.id: t for t in import_source(source, harness=HARNESS).trajectories}
    variants = read_variants(out)
    enums = {"red", "blue", "search", "shoes", "bags", "returns", "damaged", "late", "lookup_order"}
    checked = 0
    for row in iter_rows(out):
        variant = variants[row["variant_id"]]
        canonical = imported[row["source_id"]].events
        # the row's calls, as the model sees them (parsed back under the variant's harness)
        surface = parse({"messages": [dict(m) for m in _chat(row)]}, variant.harness)
        # (null tools: the prompt lists them, the harness has them)
        tools = json.loads(row["tools"] or "[]") or [t.to_openai() for t in variant.harness.tools]
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        calls = [e for e in surface if isinstance(e, ToolCall)]
        originals = [e for e in canonical if isinstance(e, ToolCall)]
        assert len(calls) == len(originals)
        for got, want in zip(calls, originals, strict=True):
            assert not list(Draft202012Validator(schemas[got.tool]).iter_errors(dict(got.args)))
            # values are data: every value that is not an enum member comes through as is
            kept = [v for v in leaves(want.args) if json.loads(v) not in enums]
            assert sorted(kept) == sorted(v for v in leaves(got.args) if v in kept)
            checked += 1
        results = [e.content for e in surface if isinstance(e, ToolResult)]
        assert results == [e.content for e in canonical if isinstance(e, ToolResult)]
    assert checked > 20


def _chat(row: dict) -> list[dict]:
    from hsa.datasets import chat_messages

    return chat_messages(row["messages"])


def test_bad_input_gets_one_line(augmented, tmp_path: Path) -> None:
    source, out, root = augmented
    again = hsa(
        "augment",
        "--input",
        str(source),
        "--harness",
        str(root / "harness.json"),
        "--out",
        str(out),
        "--seed",
        "77",
    )
    assert again.returncode == 1
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds another dataset" in lines[0]

    truncated = tmp_path / "shards"
    truncated.mkdir()
    (truncated / "part-00000.parquet").write_bytes(b"PAR1 not really")
    broken = hsa("augment", "--input", str(truncated), "--out", str(tmp_path / "o"))
    assert broken.returncode == 1 and "part-00000.parquet" in broken.stderr
    assert "Traceback" not in broken.stderr

    recipe = tmp_path / "r.yaml"
    recipe.write_text("rules:\n  - {rule: tools.rename, params: {style: loud}}\n")
    bad = hsa(
        "augment", "--input", str(source), "--recipe", str(recipe), "--out", str(tmp_path / "p")
    )
    assert bad.returncode == 1
    assert "r.yaml" in bad.stderr and "tools.rename" in bad.stderr and "style" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

    lines = source.read_text().splitlines()
    row = json.loads(lines[0])
    row["messages"][1]["tool_calls"][0]["id"] = 7  # a call id must be a string
    junk = tmp_path / "junk.jsonl"
    junk.write_text(json.dumps(row) + "\n")
    failed = hsa("augment", "--input", str(junk), "--out", str(tmp_path / "q"))
    assert failed.returncode == 1 and "junk.jsonl" in failed.stderr and "line 1" in failed.stderr


def test_a_chat_file_without_a_harness_gets_derived_ones(tmp_path: Path) -> None:
    # its suffix in capitals, as `hsa harness import` reads it (augment refused it)
    source = tmp_path / "Support.JSONL"
    shutil.copyfile(Path(__file__).resolve().parents[2] / "examples/chat/support.jsonl", source)
    out = tmp_path / "out"
    done = hsa(
        "augment", "--input", str(source), "--out", str(out), "--variants-per-trajectory", "2"
    )
    assert done.returncode == 0, done.stderr
    rows = list(iter_rows(out))
    imported = {t.id: t for t in import_source(source).trajectories}
    variants = read_variants(out)
    assert {r["source_id"] for r in rows} == set(imported)
    for row in rows:
        assert invert(row, variants[row["variant_id"]]) == list(imported[row["source_id"]].events)


def test_a_row_whose_arguments_python_literals_cannot_hold_gets_its_other_variants(
    tmp_path: Path,
) -> None:
    # an argument nested 150 levels deep imports, but the python and XML call formats cannot
    # write it: a variant drawing one of them stopped the whole run, the valid rows lost too
    nested: object = 1
    for _ in range(150):
        nested = [nested]
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}
    call["function"]["arguments"] = json.dumps({"x": nested})
    deep = {
        "id": "deeparg",
        "messages": [
            {"role": "user", "content": "do"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": [tool],
    }
    source = tmp_path / "mix.jsonl"
    chat = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    source.write_text(chat.read_text() + json.dumps(deep) + "\n")
    out = tmp_path / "out"
    done = hsa(
        "augment", "--input", str(source), "--out", str(out), "--variants-per-trajectory", "8"
    )
    assert done.returncode == 0, done.stderr
    variants = read_variants(out)
    formats: dict[str, list[str | None]] = {}
    for row in iter_rows(out):
        protocol = variants[row["variant_id"]].harness.protocol
        shown = None if protocol.is_api else protocol.call_format
        formats.setdefault(row["source_id"], []).append(shown)
    literal = {"python", "xml_verbose", "xml_concise"}
    assert len(formats) == 17 and len(formats["deeparg"]) > 1  # the canonical and others
    assert not set(formats["deeparg"]) & literal
    assert any(set(f) & literal for f in formats.values())
    assert "under fewer than 8 variants" in done.stdout


def test_an_import_folder_augments_under_its_own_harnesses(tmp_path: Path) -> None:
    # `hsa harness import` then `hsa augment --input` that folder: the same rows as augmenting
    # the chat file itself, with no --harness per harness folder.
    source = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    imported = tmp_path / "imported"
    assert hsa("harness", "import", str(source), "--out", str(imported)).returncode == 0
    for name, given in [("folder", imported), ("file", imported / "trajectories.parquet")]:
        done = hsa("augment", "--input", str(given), "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
    direct = hsa("augment", "--input", str(source), "--out", str(tmp_path / "direct"))
    assert direct.returncode == 0, direct.stderr
    rows = list(iter_rows(tmp_path / "direct"))
    assert rows and list(iter_rows(tmp_path / "folder")) == rows
    assert list(iter_rows(tmp_path / "file")) == rows


def test_a_chat_file_augments_under_an_import_folder_of_one_harness(tmp_path: Path) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Get an order.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
    (tmp_path / "tools.json").write_text(json.dumps([tool]))
    imported = tmp_path / "imported"
    done = hsa("harness", "import", str(tmp_path / "tools.json"), "--out", str(imported))
    assert done.returncode == 0, done.stderr
    alone = hsa("augment", "--input", str(imported), "--out", str(tmp_path / "alone"))
    assert alone.returncode == 1
    assert "this import holds harnesses only" in alone.stderr
    assert f"--harness {imported})" in alone.stderr
    call = {"id": "c", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}
    row = {
        "messages": [
            {"role": "user", "content": "where is my order?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": "shipped"},
            {"role": "assistant", "content": "It shipped."},
        ]
    }
    (tmp_path / "chat.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "out"
    done = hsa(
        "augment", "--input", str(tmp_path / "chat.jsonl"), "--harness", str(imported),
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {r["harness_id"] for r in iter_rows(out)} == {"tools"}
    # an import of several harnesses: which one a chat file is read under is not said
    several = tmp_path / "several"
    source = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    assert hsa("harness", "import", str(source), "--out", str(several)).returncode == 0
    done = hsa("augment", "--input", str(source), "--harness", str(several), "--out", str(out))
    assert done.returncode == 2
    assert f"{several} holds several: name one of its folders" in done.stderr


def test_a_teachers_rows_augment_under_an_import_folders_harnesses(
    external, tmp_path: Path
) -> None:
    # BFCL taught by hsa teach: each row names its entry's harness, and the import of the same
    # file holds them all
    corpus = external / "bfcl" / "BFCL_v4_parallel.json"
    taught, imported = tmp_path / "taught", tmp_path / "imported"
    args = ["--env", "bfcl", "--env-path", str(corpus), "--backend", "oracle", "--tasks", "4"]
    assert hsa("teach", *args, "--out", str(taught)).returncode == 0
    # without them, the refusal says how to get them (it named a harness directory or JSON
    # file only, though there is one harness per entry)
    refused = hsa("augment", "--input", str(taught), "--out", str(tmp_path / "none"))
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert "no harness 'parallel_0' for this trajectory: pass it with --harness" in lines[0]
    assert f"`hsa harness import {corpus} --out FOLDER`" in lines[0]
    assert hsa("harness", "import", str(corpus), "--out", str(imported)).returncode == 0
    out = tmp_path / "out"
    done = hsa("augment", "--input", str(taught), "--harness", str(imported), "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = list(iter_rows(out))
    assert len({r["source_id"] for r in rows}) == 4 and len(rows) == 4 * 3


def test_a_teach_folder_with_a_lost_shard_inside_the_input_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "runs"
    taught = parent / "t1"
    assert hsa("teach", "--backend", "oracle", "--tasks", "4", "--out", str(taught)).returncode == 0
    sorted((taught / "data").rglob("*.parquet"))[0].unlink()
    done = hsa("augment", "--input", str(parent), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hsa: error: {taught}: 1 shard(s) the teacher")


def test_teacher_output_of_older_splits_beside_today_s_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    # (an older hsa's livestream output, of the splits before task version 2, beside today's:
    # augmented into one dataset with 960 tasks in two splits, exit 0)
    mixed = tmp_path / "mixin"
    teach = ("teach", "--env", "livestream", "--backend", "oracle", "--tasks", "30", "--out")
    assert hsa(*teach, str(mixed / "old")).returncode == 0
    assert hsa(*teach, str(mixed / "new"), "--seed", "7").returncode == 0
    # two of today's jobs side by side are one input: their tasks' splits agree
    done = hsa("augment", "--input", str(mixed), "--out", str(tmp_path / "today"))
    assert done.returncode == 0, done.stderr
    manifest = mixed / "old" / "manifest.json"
    found = json.loads(manifest.read_text())
    found.pop("task_version", None)  # as an hsa before the change wrote it
    manifest.write_text(json.dumps(found))
    for given in (mixed, mixed / "old"):
        done = hsa("augment", "--input", str(given), "--out", str(tmp_path / "out"))
        assert done.returncode == 1 and not (tmp_path / "out").exists()
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"hsa: error: {mixed / 'old'}: teacher output of livestream ")
        assert "teach again with this hsa" in lines[0]


def test_a_task_in_two_splits_is_refused_in_one_line(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    taught = tmp_path / "taught"
    assert hsa("teach", "--backend", "oracle", "--tasks", "6", "--out", str(taught)).returncode == 0
    folder = tmp_path / "rows"
    folder.mkdir()
    shard = next((taught / "data" / "train").glob("*.parquet"))
    table = pq.read_table(shard)
    pq.write_table(table, folder / "a.parquet")
    # the same task's rows again, as another job's in another split
    moved = table.slice(0, 1).to_pylist()
    moved[0].update(id=f"{moved[0]['id']}-again", split="test")
    pq.write_table(pa.Table.from_pylist(moved, schema=table.schema), folder / "b.parquet")
    done = hsa("augment", "--input", str(folder), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    task = table.column("task_id")[0].as_py()
    assert lines[0].startswith(
        f"hsa: error: {folder / 'b.parquet'}: row 0: task {task!r} has rows in split 'test' "
        f"here and in split 'train' ({folder / 'a.parquet'}, row 0): "
    )


def _files(root: Path) -> dict[str, str]:
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file() and ".hsa" not in f.relative_to(root).parts
    }


def test_a_finished_dataset_with_a_lost_or_changed_file_is_repaired(
    augmented, tmp_path: Path
) -> None:
    source, out, root = augmented
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = next((copy / "data").rglob("*.parquet"))
    shard.unlink()
    plot = next((copy / "plots").iterdir())
    plot.write_bytes(b"not a plot")
    seen = hsa("inspect", str(copy), "-n", "0")
    assert seen.returncode == 1 and "Traceback" not in seen.stderr
    assert "missing" in seen.stderr and str(shard.relative_to(copy)) in seen.stderr
    args = ["--input", str(source), "--harness", str(root / "harness.json")]
    args += ["--recipe", str(root / "recipe.yaml"), "--variants-per-trajectory", "4"]
    done = hsa("augment", *args, "--out", str(copy))
    assert done.returncode == 0, done.stderr
    assert "complete already" not in done.stdout  # it did the work again
    assert _files(copy) == _files(out)
    again = hsa("augment", *args, "--out", str(copy))
    assert again.returncode == 0 and "complete already" in again.stdout


def test_rows_recorded_under_another_harness_are_refused(augmented, tmp_path: Path) -> None:
    source, _, root = augmented
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    rows[1]["harness_id"] = "elsewhere"
    rows[1]["id"] = "second"
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["augment", "--input", str(chats), "--out", str(tmp_path / "o")]
    refused = hsa(*args, "--harness", str(root / "harness.json"))
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert "chats.jsonl: line 2 (id 'second'): recorded under harness 'elsewhere'" in lines[0]
    assert "'adversarial'" in lines[0]
    assert not (tmp_path / "o").exists()


def test_more_variants_per_trajectory_than_the_recipe_plans(augmented, tmp_path: Path) -> None:
    source, _, root = augmented
    out = tmp_path / "out"
    done = hsa(
        "augment",
        "--input",
        str(source),
        "--harness",
        str(root / "harness.json"),
        "--recipe",
        str(root / "recipe.yaml"),
        "--out",
        str(out),
        "--variants-per-trajectory",
        str(RECIPE["variants_per_harness"] + 3),
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    asked = RECIPE["variants_per_harness"] + 3
    short = manifest["variants_per_trajectory"]["short"]
    assert manifest["variants_per_trajectory"]["asked"] == asked
    rendered: dict[str, int] = {}
    for row in iter_rows(out):
        rendered[row["source_id"]] = rendered.get(row["source_id"], 0) + (not row["canonical"])
    assert short == sum(n < asked for n in rendered.values())
    assert short == 0 or "under fewer than" in done.stdout
    assert max(rendered.values()) > RECIPE["variants_per_harness"]


def test_the_card_counts_tokens_with_a_given_tokenizer(augmented, tmp_path: Path) -> None:
    from tests.tinymodels import qwen_tokenizer

    source, _, root = augmented
    folder = tmp_path / "tok"
    qwen_tokenizer([source.read_text()]).save_pretrained(folder)
    common = ["augment", "--input", str(source), "--harness", str(root / "harness.json")]
    missing = hsa(*common, "--out", str(tmp_path / "none"), "--tokenizer", str(tmp_path / "nope"))
    # refused before anything is rendered, not after every shard is written
    assert missing.returncode != 0 and "no such tokenizer folder" in missing.stderr
    assert "Traceback" not in missing.stderr and not (tmp_path / "none" / "data").exists()
    done = hsa(*common, "--out", str(tmp_path / "out"), "--tokenizer", str(folder))
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "out" / "README.md").read_text()
    assert "counted with the tokenizer `tok`" in card and "| all |" in card
    # a finished dataset is not written again: the rerun says the tokenizer was not applied,
    # and how to apply it
    plain = tmp_path / "plain"
    assert hsa(*common, "--out", str(plain)).returncode == 0
    again = hsa(*common, "--out", str(plain), "--tokenizer", str(folder))
    assert again.returncode == 0 and "card is not written again" in " ".join(again.stdout.split())
    (plain / "README.md").unlink()
    assert hsa(*common, "--out", str(plain), "--tokenizer", str(folder)).returncode == 0
    assert "counted with the tokenizer `tok`" in (plain / "README.md").read_text()


def test_a_tokenizer_without_a_chat_template_is_refused_before_anything_is_written(
    augmented, tmp_path: Path
) -> None:
    # the card counted such a tokenizer's tokens of the message contents alone (no calls), under
    # a label saying its chat template was applied; TRL cannot train the rows with it at all
    from tests.tinymodels import qwen_tokenizer

    source, _, root = augmented
    folder = tmp_path / "base"
    tokenizer = qwen_tokenizer([source.read_text()])
    tokenizer.chat_template = None
    tokenizer.save_pretrained(folder)
    out = tmp_path / "out"
    done = hsa(
        "augment",
        *("--input", str(source), "--harness", str(root / "harness.json")),
        *("--out", str(out), "--tokenizer", str(folder)),
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"hsa: error: {folder}: the tokenizer has no chat template")
    assert "give the tokenizer of a chat model (--tokenizer" in lines[0] and not out.exists()


def _chat_row(i: int) -> dict:
    name = f"find_item_{i % 997}"  # many distinct harnesses: planning goes to the workers
    arguments = json.dumps({"q": f"x{i}", "mode": "fast"})
    return {
        "id": f"r{i}",
        "messages": [
            {"role": "user", "content": f"Q{i}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": f"r{i}"},
            {"role": "assistant", "content": f"done {i}"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"Finds item {i % 997}.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "q": {"type": "string"},
                            "mode": {"type": "string", "enum": ["fast", "slow"]},
                        },
                        "required": ["q"],
                    },
                },
            }
        ],
    }


@pytest.mark.parametrize(("stop", "delay"), [("SIGINT", 0.0), ("SIGINT", 0.5), ("SIGTERM", 0.5)])
def test_ctrl_c_with_planning_workers_ends_the_run_at_once_in_one_line(
    tmp_path, stop, delay
) -> None:
    """Ctrl-C (or a scheduler's SIGTERM) reaches every process of the group, the planning
    workers included: the run still ends promptly with ``hsa: aborted`` (exit 130) or ``hsa:
    terminated`` (143), no traceback, no worker left behind, its lock and scratch removed,
    whenever it comes (while the workers are forked, or while they plan)."""
    import os
    import signal
    import time

    corpus = tmp_path / "chats.jsonl"
    corpus.write_text("".join(json.dumps(_chat_row(i)) + "\n" for i in range(3000)), "utf-8")
    command = [sys.executable, "-c", CODE, "augment", "--input", str(corpus)]
    command += ["--out", str(tmp_path / "out"), "--workers", "2", "--batch-size", "500"]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    run = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    children = Path(f"/proc/{run.pid}/task/{run.pid}/children")
    started = time.monotonic()
    while run.poll() is None and not children.read_text().split():
        assert time.monotonic() - started < 60, "no worker process started"
        time.sleep(0.002)
    time.sleep(delay)
    os.killpg(run.pid, getattr(signal, stop))
    try:
        _, err = run.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        raise AssertionError(f"the run did not end after {stop}") from None
    text = err.decode()
    status, said = (130, "hsa: aborted") if stop == "SIGINT" else (143, "hsa: terminated")
    assert run.returncode == status and "Traceback" not in text, text
    assert text.strip().splitlines()[-1] == said
    with pytest.raises(ProcessLookupError):  # nothing of the run's group is left
        os.killpg(run.pid, 0)
    assert not (tmp_path / "out" / ".hsa" / "lock").exists() and not list(scratch.iterdir())


def test_a_rule_that_breaks_a_valid_prompt_template_names_itself_in_one_line(
    tmp_path: Path,
) -> None:
    # the demo harness under a text protocol, its template taking the output format section
    # by position: protocol.switch to api leaves that section empty, and out of `sections`
    from hsa import load_harness
    from hsa.harness.prompt import system_prompt

    harness = tmp_path / "h"
    shutil.copytree(
        Path(__file__).parents[2] / "examples" / "rule-package" / "demo-harness", harness
    )
    document = yaml.safe_load((harness / "harness.yaml").read_text())
    document["protocol"] = {"name": "text", "call_format": "hermes", "doc_format": "json"}
    document["prompt"]["template"] = "{{ sections[0] }}\n\n{{ sections[4] }}"
    (harness / "harness.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    call = {"name": "get_order", "arguments": json.dumps({"order_id": "#W1"})}
    messages = [
        {"role": "system", "content": system_prompt(load_harness(harness))},  # (valid)
        {"role": "user", "content": "Where is order #W1?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It has shipped."},
    ]
    rows = tmp_path / "rows.jsonl"
    # after a blank line: the row is named by its line, as the reader's own errors name rows
    rows.write_text("\n" + json.dumps({"id": "r0", "messages": messages}) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "variants_per_harness: 4\nrules:\n"
        "  - {rule: protocol.switch, probability: 1.0, params: {target: api}}\n"
    )
    out = tmp_path / "out"
    args = ["--input", str(rows), "--harness", str(harness), "--recipe", str(recipe)]
    refused = hsa("augment", *args, "--out", str(out))
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert lines[0].startswith(
        f"hsa: error: {rows}: line 2 (id 'r0'): planning the variants of its harness: rule "
        "'protocol.switch': made the prompt of harness 'acme-demo' fail to render: "
        "$.prompt.template: template uses an undefined value at line 3: list object has no "
        "element 4; every draw of rules that changed it did (16 dropped)"
    )
    assert not (out / "data").exists()


#: ``hsa`` whose JSONL reader replaces the file it read (by the one named after it) once done
CHANGING = """
import os, sys
from hsa.harness.importers import openai_jsonl
from hsa.cli import main
read, replacement = openai_jsonl.read_openai_jsonl, sys.argv.pop(1)
def then_changed(path, **kwargs):
    yield from read(path, **kwargs)
    os.replace(replacement, path)
openai_jsonl.read_openai_jsonl = then_changed
main()
"""


def test_a_jsonl_input_changed_while_read_fails_in_one_line_leaving_nothing(
    augmented, tmp_path: Path
) -> None:
    source, _, root = augmented
    lines = source.read_text().splitlines(keepends=True)
    chats, edited = tmp_path / "chats.jsonl", tmp_path / "edited.jsonl"
    chats.write_text("".join(lines[:2]))
    edited.write_text("".join(lines[:3]))
    out = tmp_path / "o"
    args = ["augment", "--input", str(chats), "--out", str(out), "--harness"]
    args += [str(root / "harness.json"), "--variants-per-trajectory", "1"]
    changed = subprocess.run(
        [sys.executable, "-c", CHANGING, str(edited), *args], capture_output=True, text=True
    )
    said = changed.stderr.strip().splitlines()
    assert changed.returncode == 1 and len(said) == 1, changed.stderr
    assert said[0].endswith(f"{chats}: changed while this run read it; run again")
    assert not out.exists()  # nothing a rerun could take as done: it reads the file anew


#: ``hsa`` whose JSONL reader takes a second longer to read the file into scratch
SLOW_READ = """
import time
from hsa.harness.importers import openai_jsonl
from hsa.cli import main
read = openai_jsonl.read_openai_jsonl
def slowly(path, **kwargs):
    time.sleep(1.0)
    yield from read(path, **kwargs)
openai_jsonl.read_openai_jsonl = slowly
main()
"""


def test_the_summary_counts_reading_a_jsonl_input_as_read(augmented, tmp_path: Path) -> None:
    # the file is read into scratch before the batches: the summary's parts left it out
    source, _, root = augmented
    args = ["augment", "--input", str(source), "--out", str(tmp_path / "o"), "--harness"]
    args += [str(root / "harness.json"), "--variants-per-trajectory", "1"]
    done = subprocess.run(
        [sys.executable, "-c", SLOW_READ, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    read = re.search(r"of which\W+read (\d+\.\d) s", done.stdout)
    assert read is not None and float(read.group(1)) >= 1.0, done.stdout


def test_an_argument_the_schema_does_not_declare_is_never_a_rules_new_parameter(
    tmp_path: Path,
) -> None:
    # the QA repro: a call's `args`, undeclared, and a recipe wrapping into `args`
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "lookup", "arguments": json.dumps({"city": "Paris", "args": 7})}
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    chat = {
        "messages": [
            {"role": "user", "content": "Look up Paris."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
        ],
        "tools": [
            {"type": "function", "function": {"name": "lookup", "parameters": schema}},
        ],
    }
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps(chat) + "\n")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "seed": 0,
                "variants_per_harness": 2,
                "variants_per_trajectory": 1,
                "min_rules": 1,
                "rules": [
                    {"rule": "tools.wrap_args", "probability": 1, "params": {"wrapper": "args"}}
                ],
            }
        )
    )
    out = tmp_path / "out"
    done = hsa("augment", "--input", str(source), "--out", str(out), "--recipe", str(recipe))
    assert done.returncode == 0, done.stderr
    rows = list(iter_rows(out))
    variants = read_variants(out)
    imported = {t.id: t for t in import_source(source).trajectories}
    wrapped = [r for r in rows if r["rules"]]
    assert wrapped
    for row in rows:
        calls = [c for m in row["messages"] for c in m.get("tool_calls") or ()]
        assert json.loads(calls[0]["function"]["arguments"])["args"] == 7
        assert invert(row, variants[row["variant_id"]]) == list(imported[row["source_id"]].events)
