"""The probe of a chat template's tool calls, tools and reasoning, and which rows need it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hsa.datasets.export import to_hf
from hsa.errors import TrainError
from hsa.train.data import COLUMNS, _firstcall_view
from hsa.train.templates import (
    carries_api_calls,
    check_renders_tools,
    drops_reasoning,
    reasoning_rows,
    sft_template,
)
from tests.tinymodels import NO_TOOLS_TEMPLATE, qwen_tokenizer

#: calls rendered, as Qwen's template writes them, but no tool schema anywhere
CALLS_ONLY = """\
{%- for message in messages %}<|im_start|>{{ message['role'] }}
{{ message['content'] or '' }}
{%- for call in message['tool_calls'] or [] %}<tool_call>{{ call['function'] | tojson }}</tool_call>
{%- endfor %}<|im_end|>
{% endfor %}"""


@pytest.fixture(scope="module")
def tokenizer():
    return qwen_tokenizer(["a tool call", "its arguments"], vocab_size=300)


def args(**given):
    return SimpleNamespace(**{"chat_template_path": None, "assistant_only_loss": True, **given})


def refusal(tokenizer, template):
    with pytest.raises(TrainError) as refused:
        check_renders_tools(tokenizer, template, named="its chat template", file="model")
    assert refused.value.file == "model"
    return refused.value.message


def test_trls_qwen_template_and_its_training_template_render_calls_and_tools(tokenizer):
    from trl.chat_template_utils import get_training_chat_template

    check_renders_tools(tokenizer, None, named="its chat template", file="model")
    training = get_training_chat_template(tokenizer)
    assert training is not None  # (TRL's Qwen2.5 template has no generation markers)
    check_renders_tools(tokenizer, training, named="its chat template", file="model")


def test_a_template_that_ignores_tools_and_calls_is_refused_saying_what_it_drops(tokenizer):
    said = refusal(tokenizer, NO_TOOLS_TEMPLATE)
    assert said.startswith(
        "its chat template drops the called tool's name, the argument's name, the argument's "
        "value and the tool schema's name"
    )
    assert "empty call turns" in said and "chat_template_path" in said


def test_a_template_that_renders_calls_but_no_schema_is_refused(tokenizer):
    assert refusal(tokenizer, CALLS_ONLY).startswith(
        "its chat template drops the tool schema's name ("
    )


def test_a_template_that_cannot_render_a_call_is_refused_in_one_line(tokenizer):
    raising = "{% for m in messages %}{{ m['tool_calls'][0]['function']['name'] }}{% endfor %}"
    said = refusal(tokenizer, raising)
    assert said.startswith("its chat template cannot render a tool call (") and "\n" not in said


def test_sfts_template_is_the_one_trl_renders_with(tokenizer, tmp_path):
    from trl.chat_template_utils import get_training_chat_template

    # TRL's Qwen2.5 template, no generation markers: the training template swapped in
    assert sft_template(tokenizer, args(), None)[1] == get_training_chat_template(tokenizer)
    probe, template = sft_template(tokenizer, args(assistant_only_loss=False), None)
    assert probe is tokenizer and template is None
    # a chat_template_path file replaces the tokenizer's template (left as it was); with
    # generation markers it is rendered as it is
    path = tmp_path / "no-tools.jinja"
    path.write_text(NO_TOOLS_TEMPLATE)
    probe, template = sft_template(tokenizer, args(chat_template_path=str(path)), None)
    assert probe.chat_template == NO_TOOLS_TEMPLATE and template is None
    assert tokenizer.chat_template != NO_TOOLS_TEMPLATE
    # or a tokenizer folder's
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    folder = args(chat_template_path=str(tmp_path / "tokenizer"))
    probe, template = sft_template(tokenizer, folder, None)
    assert probe.chat_template == tokenizer.chat_template


def test_rows_with_calls_or_tools_beside_their_text_carry_api_calls(text_dataset, tmp_path):
    # canonical rows under the api protocol, variants switched to a text protocol
    rows = to_hf(text_dataset, "train", cache_dir=tmp_path / "hf")
    api = rows.filter(lambda p: p == "api", input_columns="protocol")
    text = rows.filter(lambda p: p != "api", input_columns="protocol")
    assert len(api) and len(text)
    for view in ("conversation", "firstcall"):
        columns = list(COLUMNS[view])
        shown = (lambda r: _firstcall_view(r)) if view == "firstcall" else (lambda r: r)
        assert carries_api_calls(shown(api).select_columns(columns))
        assert not carries_api_calls(shown(text).select_columns(columns))
    # a call with no tools list is enough, and one such row among the text rows
    import datasets

    calls = api.select([0]).map(lambda _: {"tools": None}).select_columns(["messages", "tools"])
    assert carries_api_calls(calls)
    mixed = datasets.concatenate_datasets([text.select_columns(["messages", "tools"]), calls])
    assert carries_api_calls(mixed)


@pytest.mark.parametrize(
    "name, lost",
    [
        ("qwen2_5.jinja", "renders no reasoning_content"),
        ("qwen2_5_training.jinja", "renders no reasoning_content"),
        # Qwen3's own shows the reasoning of the turns after the last user message alone
        (
            "qwen3.jinja",
            "renders no reasoning_content in the assistant turns before the last user message",
        ),
        ("qwen3_training.jinja", None),
    ],
)
def test_what_a_template_loses_of_the_reasoning_is_said(tokenizer, name, lost):
    from importlib import resources

    template = resources.files("trl").joinpath(f"chat_templates/{name}").read_text("utf-8")
    found = drops_reasoning(tokenizer, template)
    assert (found and found.said) == lost


def test_rows_with_reasoning_are_told_apart_in_either_view():
    import datasets

    def message(role, content, reasoning=None):
        return {"role": role, "content": content, "reasoning_content": reasoning}

    rows = datasets.Dataset.from_dict(
        {
            "messages": [
                [message("user", "a"), message("assistant", "b", "because")],
                [message("user", "a"), message("assistant", "b", "")],
                [message("user", "a"), message("assistant", "b")],
                [],
            ]
        }
    )
    assert reasoning_rows(rows) == (True, False, False, False)
    cut = datasets.Dataset.from_dict(
        {
            "prompt": [[message("user", "a")]] * 2,
            "completion": [[message("assistant", "b")], [message("assistant", "b", "so")]],
        }
    )
    assert reasoning_rows(cut) == (False, True)


def test_rows_with_reasoning_before_or_after_their_last_user_message_are_told_apart():
    import datasets

    def message(role, content, reasoning=None):
        return {"role": role, "content": content, "reasoning_content": reasoning}

    rows = datasets.Dataset.from_dict(
        {
            "messages": [
                [message("user", "a"), message("assistant", "b", "late")],
                [message("user", "a"), message("assistant", "b", "early"), message("user", "c")],
                [
                    message("user", "a"),
                    message("assistant", "b", "early"),
                    message("user", "c"),
                    message("assistant", "d", "late"),
                ],
                [message("user", "a"), message("assistant", "b")],
            ]
        }
    )
    assert reasoning_rows(rows) == (True, True, True, False)
    assert reasoning_rows(rows, "before") == (False, True, True, False)
    assert reasoning_rows(rows, "after") == (True, False, True, False)
    # a firstcall row's prompt and completion are one conversation
    cut = datasets.Dataset.from_dict(
        {
            "prompt": [[message("user", "a")], [message("user", "a")]],
            "completion": [
                [message("assistant", "b", "late")],
                [message("assistant", "b", "early"), message("user", "c")],
            ],
        }
    )
    assert reasoning_rows(cut, "before") == (False, True)
    assert reasoning_rows(cut, "after") == (True, False)
