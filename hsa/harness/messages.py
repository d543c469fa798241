"""OpenAI chat messages as Arrow: the ``messages`` column of every row hsa writes.

A message is a struct whose absent keys are nulls; tool-call ``arguments`` are JSON text, as the
OpenAI API has them. The engine builds this column, teachers and datasets store it.
"""

from __future__ import annotations

import pyarrow as pa

TOOL_CALL = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("reasoning_content", pa.string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL)),
        pa.field("tool_call_id", pa.string()),
        pa.field("is_error", pa.bool_()),
    ]
)
MESSAGES = pa.list_(MESSAGE)
