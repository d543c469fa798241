"""The row of an augmented dataset, and conversions of its ``messages`` to chat and TRL form.

A row is one canonical trajectory rendered under one harness variant: OpenAI chat ``messages``
(tool-call arguments as JSON text, as the OpenAI API has them) and ``tools`` (JSON text of the
request's tools list), plus lineage -- the source trajectory and task, the harness and variant,
the rules and their parameters, the split, the teacher and its verification. In Parquet a
message is a struct whose absent keys are nulls; ``chat_messages`` drops them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hsa.augment.engine import MESSAGES
from hsa.harness.render import Conversation

SCHEMA_VERSION = 1

ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("harness_id", pa.string()),
        pa.field("variant_id", pa.string(), nullable=False),
        pa.field("canonical", pa.bool_(), nullable=False),
        pa.field("rules", pa.list_(pa.string()), nullable=False),
        pa.field("rule_params", pa.string(), nullable=False),  # JSON: [{name, version, params}]
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("messages", MESSAGES, nullable=False),
        pa.field("tools", pa.string(), nullable=False),  # JSON: OpenAI tools list
        pa.field("split", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("teacher", pa.string()),
        pa.field("verified", pa.bool_()),
        pa.field("verification", pa.string()),
        pa.field("metadata", pa.string()),  # JSON: the source trajectory's metadata
    ]
)

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
