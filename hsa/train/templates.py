"""Whether the chat template a run renders its rows with keeps their API tool calls, tools and
reasoning.

Rows under the ``api`` protocol carry each call in an assistant message's ``tool_calls`` and
the tool schemas in ``tools``, beside the text. A chat template that reads only ``content``
renders such a call as an empty turn and shows no schema, and a run would train on that
without a word (its labelled completion ``<|im_end|>`` alone). ``check_renders_tools``
renders a probe conversation -- a user turn, then a call with one argument, under one tool
schema -- through the template the trainer will use, and refuses one whose rendering lost
any of them, before the model is loaded. Rows under the in-prompt protocols write their
calls and tool docs in the text, and need no such template.

Assistant turns may carry their reasoning in ``reasoning_content``, beside the text. Many
templates print none of it (Qwen2.5's, and TRL's training variant of it), some only in the turns
after the last user message (Qwen3's own): the rows then train on their answers without the
reasoning. That is a legitimate way to train, so ``drops_reasoning`` says what a template loses
(a probe conversation of two exchanges, each turn with its reasoning) rather than refusing it,
and the run counts the rows it concerns (``reasoning_rows``): with Qwen3's own, only those
with reasoning in a turn before their last user message.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.errors import TrainError, first_line

#: the probe's tool schema's name, the name of the tool it calls, and the call's argument:
#: distinct words, so that each found in the rendering is the part that put it there
PROBE_SCHEMA = "hsa_probe_schema_tool"
PROBE_CALL = "hsa_probe_called_tool"
PROBE_KEY = "hsa_probe_argument"
PROBE_VALUE = "hsa_probe_value"

_PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": PROBE_SCHEMA,
            "description": "A tool the probe offers.",
            "parameters": {
                "type": "object",
                "properties": {"hsa_probe_parameter": {"type": "string"}},
                "required": ["hsa_probe_parameter"],
            },
        },
    }
]
_PROBE_MESSAGES = [
    {"role": "user", "content": "Call the tool."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": PROBE_CALL, "arguments": {PROBE_KEY: PROBE_VALUE}},
            }
        ],
    },
]
#: the reasoning of the probe's two assistant turns: one before the last user message, one after
PROBE_EARLIER_REASONING = "hsa_probe_earlier_reasoning"
PROBE_LAST_REASONING = "hsa_probe_last_reasoning"
_REASONING_PROBE = [
    {"role": "user", "content": "Ask me."},
    {"role": "assistant", "content": "Asked.", "reasoning_content": PROBE_EARLIER_REASONING},
    {"role": "user", "content": "Answer me."},
    {"role": "assistant", "content": "Answered.", "reasoning_content": PROBE_LAST_REASONING},
]
#: the assistant turns whose reasoning is meant: every one's, or those before or after the
#: conversation's last user message
Turns = Literal["every", "before", "after"]
_PARTS = (
    (PROBE_CALL, "the called tool's name"),
    (PROBE_KEY, "the argument's name"),
    (PROBE_VALUE, "the argument's value"),
    (PROBE_SCHEMA, "the tool schema's name"),
)


def carries_api_calls(rows: Any) -> bool:
    """Whether any of ``rows`` (a ``datasets.Dataset`` of TRL's conversational rows: the
    ``messages``, or ``prompt`` and ``completion``, and ``tools`` columns) carries tool schemas
    in ``tools`` or a call in a message's ``tool_calls``, as rows under the api protocol do.
    Read in Arrow, a batch at a time: no row is decoded."""
    names = [n for n in ("tools", "messages", "prompt", "completion") if n in rows.column_names]
    # (in batches, as the rows are: a selection of a table reads through its indices)
    for batch in rows.select_columns(names).with_format("arrow").iter(batch_size=4096):
        for name in names:
            found = _has_tools if name == "tools" else _has_calls
            if any(found(chunk) for chunk in batch.column(name).chunks):
                return True
    return False


def reasoning_rows(rows: Any, turns: Turns = "every") -> tuple[bool, ...]:
    """Whether each of ``rows`` (TRL's conversational rows, as ``carries_api_calls`` reads them)
    has a message with reasoning (a ``reasoning_content`` that is not empty) among ``turns``:
    any message, or those before or after its last user message (``prompt`` then
    ``completion`` read as one conversation). Read in Arrow, a batch at a time."""
    names = [n for n in ("messages", "prompt", "completion") if n in rows.column_names]
    found: list[bool] = []
    for batch in rows.select_columns(names).with_format("arrow").iter(batch_size=4096):
        columns = [_reasoning_by_message(batch.column(n).combine_chunks()) for n in names]
        row_of = np.concatenate([c[0] for c in columns])
        # a message's place in its conversation: its column's rank, then its position in it
        place = np.concatenate([c[1] + (rank << 32) for rank, c in enumerate(columns)])
        said = np.concatenate([c[2] for c in columns])
        if turns != "every":
            last_user = np.full(batch.num_rows, -1, dtype=np.int64)
            users = np.concatenate([c[3] for c in columns])
            np.maximum.at(last_user, row_of[users], place[users])
            before = place < last_user[row_of]
            said &= before if turns == "before" else ~before
        found.extend((np.bincount(row_of[said], minlength=batch.num_rows) > 0).tolist())
    return tuple(found)


def _reasoning_by_message(
    messages: pa.Array,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of each message in ``messages`` (a list of them per row): its row, its position in the
    row, whether it has reasoning, and whether it is a user message."""
    sizes = pc.list_value_length(messages).fill_null(0).to_numpy(zero_copy_only=False)
    row_of = np.repeat(np.arange(len(messages)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    position = np.arange(len(row_of), dtype=np.int64) - np.repeat(starts, sizes)
    flat = pc.list_flatten(messages)
    said = np.zeros(len(row_of), dtype=bool)
    user = np.zeros(len(row_of), dtype=bool)
    if pa.types.is_struct(flat.type) and flat.type.get_field_index("role") >= 0:
        user = pc.equal(pc.struct_field(flat, "role"), "user").fill_null(False)
        user = user.to_numpy(zero_copy_only=False)
    if pa.types.is_struct(flat.type) and flat.type.get_field_index("reasoning_content") >= 0:
        reasoning = pc.struct_field(flat, "reasoning_content")
        if not pa.types.is_null(reasoning.type):  # (no row of the batch has any)
            lengths = pc.utf8_length(reasoning).fill_null(0)
            said = pc.greater(lengths, 0).to_numpy(zero_copy_only=False)
    return row_of, position, said, user


def _has_tools(chunk: pa.Array) -> bool:
    # the Json feature keeps each row's list as JSON text; null or an empty list is no tool
    text = chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk
    if pa.types.is_list(text.type) or pa.types.is_large_list(text.type):
        return bool(pc.any(pc.greater(pc.list_value_length(text), 0)).as_py())
    text = pc.utf8_trim_whitespace(text.cast(pa.string()))
    empty = pc.is_in(text, pa.array(["[]", "null", ""]))
    return bool(pc.any(pc.and_(pc.is_valid(text), pc.invert(empty))).as_py())


def _has_calls(chunk: pa.Array) -> bool:
    messages = pc.list_flatten(chunk)
    if not pa.types.is_struct(messages.type) or messages.type.get_field_index("tool_calls") < 0:
        return False
    calls = pc.struct_field(messages, "tool_calls")
    if not (pa.types.is_list(calls.type) or pa.types.is_large_list(calls.type)):
        return False
    return bool(pc.any(pc.greater(pc.list_value_length(calls), 0)).as_py())


def check_renders_tools(
    tokenizer: Any,
    template: str | None,
    *,
    named: str,
    file: str | None,
    where: str | None = None,
) -> None:
    """Refuse a chat template that renders API rows without their calls or tools: the
    ``template`` the trainer passes to ``apply_chat_template`` (None: ``tokenizer``'s own),
    ``named`` in the refusal (the model folder's, a ``chat_template_path``), which names
    ``file`` and ``where``."""
    problem = None
    try:
        rendered = tokenizer.apply_chat_template(
            copy.deepcopy(_PROBE_MESSAGES),
            tools=copy.deepcopy(_PROBE_TOOLS),
            chat_template=template,
            tokenize=False,
        )
    except Exception as exc:  # a Jinja error, a template that raises on tool calls
        problem = f"cannot render a tool call ({first_line(exc)})"
    else:
        lost = [what for word, what in _PARTS if word not in rendered]
        if lost:
            shown = lost[0] if len(lost) == 1 else f"{', '.join(lost[:-1])} and {lost[-1]}"
            problem = f"drops {shown}"
    if problem is None:
        return
    raise TrainError(
        f"{named} {problem} (rendering a probe: a tool call with one argument, under one tool "
        "schema), so the rows under the api protocol, with calls in tool_calls and schemas in "
        "tools, would train on empty call turns; use a chat template that renders tools and "
        "tool_calls (the model folder's chat_template.jinja, or hsa train sft's "
        "chat_template_path), or a dataset of in-prompt protocols",
        file=file,
        where=where,
    )


@dataclass(frozen=True, slots=True)
class ReasoningLoss:
    """The assistant turns whose reasoning a chat template does not render (``turns``, the
    rows to count with ``reasoning_rows``), and ``said``: the same in words."""

    turns: Turns
    said: str


def drops_reasoning(tokenizer: Any, template: str | None) -> ReasoningLoss | None:
    """What a chat template loses of the assistant turns' reasoning (``reasoning_content``):
    that of every turn, or of those before (or after) the last user message; None when it
    renders both of the probe's. ``template`` is the one the trainer passes to
    ``apply_chat_template`` (None: ``tokenizer``'s own)."""
    try:
        rendered = tokenizer.apply_chat_template(
            copy.deepcopy(_REASONING_PROBE), chat_template=template, tokenize=False
        )
    except Exception as exc:  # a Jinja error, a template that raises on reasoning_content
        said = f"cannot render an assistant turn with its reasoning ({first_line(exc)})"
        return ReasoningLoss("every", said)
    earlier, last = PROBE_EARLIER_REASONING in rendered, PROBE_LAST_REASONING in rendered
    if earlier and last:
        return None
    if earlier or last:
        turns: Turns = "before" if last else "after"
        said = f"renders no reasoning_content in the assistant turns {turns} the last user message"
        return ReasoningLoss(turns, said)
    return ReasoningLoss("every", "renders no reasoning_content")


def sft_template(tokenizer: Any, args: Any, file: str | None) -> tuple[Any, str | None]:
    """The tokenizer and template TRL 1.16's ``SFTTrainer`` renders rows with under ``args``
    (an ``SFTConfig``), for ``check_renders_tools``: the config's ``chat_template_path`` (a
    Jinja file, or a tokenizer whose template it clones) over the tokenizer's own, and with
    ``assistant_only_loss`` and a template without ``{% generation %}`` markers, the training
    template TRL swaps in (None: the tokenizer's own). ``tokenizer`` is left as it was. A
    ``chat_template_path`` tokenizer that cannot load is refused naming ``file``; a template
    TRL cannot make a training template of raises TRL's ``ValueError``, as its setup would."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    path = args.chat_template_path
    probe = tokenizer
    if path is not None:
        probe = copy.copy(tokenizer)  # (TRL sets the same template on the trainer's own)
        if path.endswith((".jinja", ".j2")):
            with open(path, encoding="utf-8") as handle:
                probe.chat_template = handle.read()
        else:
            from transformers import AutoTokenizer

            try:
                probe.chat_template = AutoTokenizer.from_pretrained(path).get_chat_template()
            except (OSError, ValueError) as exc:
                raise TrainError(
                    f"cannot load a chat template from {path!r}: {first_line(exc)}",
                    file=file,
                    where="$.chat_template_path",
                ) from None
    if not args.assistant_only_loss or has_generation_markers(probe.chat_template):
        return probe, None
    return probe, get_training_chat_template(probe)
