"""A local model's output text as an OpenAI assistant message (vllm and transformers backends).

An in-process model writes its answer, tool calls included, as plain text; a server would
have parsed it. Here a leading ``<think>`` block becomes ``reasoning_content`` and, under the
``api`` protocol, calls written in an hsa call format become ``tool_calls``. The block may
lack its opening tag: models whose chat template opens it in the generation prompt
(DeepSeek-R1's distills, QwQ, Qwen3's thinking models) write only ``</think>``, and vLLM's
reasoning parsers take what comes before it as reasoning too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hsa.errors import TeacherError
from hsa.harness.protocols import CALL_FORMATS
from hsa.teachers.request import ChatRequest, assistant_message

#: a leading reasoning block, its opening tag optional (the template may have written it); a
#: closing tag after text holding another opening tag closes that one, not a block
#: (``\s*+`` never gives back the space it took: a reply of many blank lines is read in linear
#: time, not tried again from each of them)
_THINK = re.compile(r"\A\s*+(?:<think>(.*?)|((?:(?!<think>).)*?))</think>\s*", re.DOTALL)


def parse_output(text: str, request: ChatRequest, call_format: str = "hermes") -> dict[str, Any]:
    """The assistant message for a model's raw output ``text``.

    A leading ``<think>`` block becomes ``reasoning_content``, and so does the text before a
    first ``</think>`` that has no opening tag. When the request carried tools
    (the ``api`` protocol), calls written in ``call_format`` become ``tool_calls`` with ids
    derived from the request, so they are stable across reruns. Calls are read with the
    format's ``CallFormat.parse_reply`` (a Hermes reply's last block may lack its closing tag,
    its arguments may be a JSON string: close to vLLM's server-side parser, not the same, as
    ``hsa.harness.protocols.hermes`` and docs/vllm.md say); text the parser does not accept
    stays content, and the rollout reports it as a format failure if it holds a call.
    """
    reasoning = None
    if (match := _THINK.match(text)) is not None:
        found = match.group(1) if match.group(1) is not None else match.group(2)
        reasoning, text = found.strip(), text[match.end() :]
    text = text.strip()
    message = assistant_message(text)
    if request.tools:
        fmt = CALL_FORMATS.get(call_format)
        if fmt is None:
            raise TeacherError(
                f"unknown call format {call_format!r}; known: {', '.join(sorted(CALL_FORMATS))}"
            )
        parsed = (fmt.parse_reply or fmt.parse_calls)(text, False)
        if parsed is not None:
            prefix, calls = parsed
            stem = request.key()[:12]
            message = assistant_message(
                prefix,
                [
                    {
                        "id": f"call_{stem}_{i}",
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(dict(args), ensure_ascii=False),
                        },
                    }
                    for i, (name, args) in enumerate(calls)
                ],
            )
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message
