"""Tool documentation printed into the system prompt: JSON, XML, Python signatures, Markdown."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hsa.harness.model import Tool
from hsa.harness.protocols import register_doc_format


@register_doc_format("json")
def json_docs(tools: Sequence[Tool]) -> str:
    return "\n".join(json.dumps(t.to_dict(), ensure_ascii=False) for t in tools)
