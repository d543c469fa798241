"""The row of an augmented dataset, and conversions of its ``messages`` to chat and TRL form.

A row is one canonical trajectory rendered under one harness variant: OpenAI chat ``messages``
and ``tools`` (the request's tools list), plus lineage -- the source trajectory and task, the
harness and variant, the rules and their parameters, the split, the teacher and its
verification (``verified``, and ``verification``: the teacher row's JSON object text, the same
in both row formats). In Parquet a message is a struct whose absent keys are nulls;
``chat_messages`` drops them again.

``tools`` and each tool call's ``arguments`` are JSON text in Parquet (plain strings, so
PyArrow, Polars and DuckDB read them as text, and the writer stores each variant's tools once per
shard through its dictionary). They are JSON *values* to a trainer: ``JSON_FIELDS`` names them,
the dataset card declares them as ``json`` features (``card_features``), and Hugging Face
``datasets`` then decodes them -- ``datasets.load_dataset(DIR)`` gives ``tools`` as a list of
tool dicts and ``arguments`` as dicts holding exactly each call's keys, which is what chat
templates and TRL expect. A JSON text column is used rather than an Arrow struct because a
struct column would merge every tool's and call's keys into one type (absent keys as nulls).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hsa.harness.events import TRAJECTORY_SCHEMA
from hsa.harness.messages import MESSAGES
from hsa.harness.render import Conversation

#: the version of every row format here (augmented and teacher rows) and of their manifests
SCHEMA_VERSION = 2


#: the columns, and fields inside them, that hold JSON text a trainer reads as JSON values
JSON_FIELDS = (("tools",), ("messages", "tool_calls", "function", "arguments"))

#: what a model saw under one variant, and where the row goes: columns of both row schemas
SURFACE_FIELDS = (
    pa.field("variant_id", pa.string(), nullable=False),
    pa.field("canonical", pa.bool_(), nullable=False),
    pa.field("rules", pa.list_(pa.string()), nullable=False),
    pa.field("rule_params", pa.string(), nullable=False),  # JSON: [{name, version, params}]
    pa.field("protocol", pa.string(), nullable=False),
    pa.field("messages", MESSAGES, nullable=False),
    pa.field("tools", pa.string()),  # JSON: OpenAI tools list; null: no tools sent
    pa.field("split", pa.string(), nullable=False),
)

ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("harness_id", pa.string()),
        *SURFACE_FIELDS,
        pa.field("source", pa.string()),
        pa.field("teacher", pa.string()),
        pa.field("verified", pa.bool_()),
        pa.field("verification", pa.string()),  # JSON: the teacher row's verification, as it is
        pa.field("metadata", pa.string()),  # JSON: the source trajectory's metadata
    ]
)


#: A teacher row (``hsa teach``'s shards): a canonical trajectory (the columns of
#: ``TRAJECTORY_SCHEMA``) plus the lineage and surface columns of a dataset row (variant, rules,
#: protocol, the ``messages`` the model saw and the ``tools`` it was offered, split, teacher,
#: ``verified``) and the verification in full: ``reason`` (``ok`` when verified), the
#: environment's ``score`` and ``verification`` (JSON object text: verified, reason, every
#: check, score; a dataset row made from this one carries it as it is). A teacher row is its own
#: source trajectory (``source_id`` is its id).
TEACHER_SCHEMA = pa.schema(
    [
        *TRAJECTORY_SCHEMA,
        pa.field("source_id", pa.string(), nullable=False),
        *SURFACE_FIELDS,
        pa.field("teacher", pa.string(), nullable=False),
        pa.field("verified", pa.bool_(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("verification", pa.string(), nullable=False),  # JSON: verified, reason, checks
    ]
)


def card_features() -> list[dict[str, Any]]:
    """``ROW_SCHEMA`` as the ``features`` list of a dataset card's ``dataset_info`` (the YAML
    form Hugging Face ``datasets`` reads), with ``JSON_FIELDS`` as ``json``."""

    def feature(name: str, type_: pa.DataType, path: tuple[str, ...]) -> dict[str, Any]:
        return {"name": name, **kind(type_, (*path, name))}

    def kind(type_: pa.DataType, path: tuple[str, ...]) -> dict[str, Any]:
        if path in JSON_FIELDS:
            return {"dtype": "json"}
        if pa.types.is_list(type_):
            inner = kind(type_.value_type, path)
            return {"list": inner.get("dtype", inner.get("struct"))}
        if pa.types.is_struct(type_):
            return {"struct": [feature(f.name, f.type, path) for f in type_]}
        return {"dtype": {pa.string(): "string", pa.bool_(): "bool"}[type_]}

    return [feature(f.name, f.type, ()) for f in ROW_SCHEMA]


#: message keys render always writes; the others are written only when set
_ALWAYS = ("role", "content")


def chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Parquet message structs as OpenAI chat messages (null optional keys dropped)."""
    out = []
    for message in messages:
        item: dict[str, Any] = {}
        for key, value in message.items():
            if value is None and key not in _ALWAYS:
                continue
            if key == "tool_calls":
                value = [
                    {
                        "id": call["id"],
                        "type": call["type"],
                        "function": dict(call["function"]),
                    }
                    for call in value
                ]
            item[key] = value
        out.append(item)
    return out


def conversation(row: Mapping[str, Any]) -> Conversation:
    """A dataset row (as a dict) as the ``Conversation`` render produced for it."""
    tools = row.get("tools")
    return Conversation(chat_messages(row["messages"]), json.loads(tools) if tools else [])


def trl_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages in TRL's conversational form: tool-call arguments as dicts.

    Chat templates (``tokenizer.apply_chat_template(messages, tools=...)``) read
    ``tool_calls[i].function.arguments`` as a mapping; OpenAI's wire format has it as JSON text.
    """
    out = []
    for message in chat_messages(messages):
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [
                {
                    **call,
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": json.loads(call["function"]["arguments"] or "{}"),
                    },
                }
                for call in calls
            ]
        out.append(message)
    return out
