"""The shape shared by the BFCL v4 return formats: one body listing every call of a turn.

BFCL's format-sensitivity study (``bfcl_eval/constants/default_prompts.py`` and
``model_handler/utils.py`` in ShishirPatil/gorilla) varies the return format (``python``,
``json``, ``verbose_xml``, ``concise_xml``) and whether the calls sit inside a
``<TOOLCALL>...</TOOLCALL>`` tag. Here:

- untagged, the body is the whole assistant message, so assistant text cannot share the message
  (``allows_prefix`` is False; render puts the text in a message of its own);
- tagged, the message is ``text + "\\n" + "<TOOLCALL>" + body + "</TOOLCALL>"`` (or the tagged
  body alone). Every format escapes ``<`` inside the body (JSON ``\\u003c``, Python ``\\x3c``,
  XML ``&lt;``), so the body never contains ``<TOOLCALL>`` and the last one in a message starts
  the block: any assistant text, even text that quotes tags or calls, is recovered exactly.

The call-format instructions say the same as BFCL's ``tool_call_with_tag`` and
``tool_call_no_tag`` prompts in our own words, except that tagged formats allow text before the
block. Parsing is lenient where models are: whitespace around the body or after the closing
tag and a Markdown code fence around the body are accepted. It is stricter than BFCL's own
decoder, as parsing training data back must be (text around an untagged body would be lost);
the eval's bfcl suite reads BFCL's entries with a port of that decoder (``hsa.eval.bfcl_decode``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hsa.harness.protocols import Call, CallFormat, register_call_format, split_prefix

TAG_OPEN = "<TOOLCALL>"
TAG_CLOSE = "</TOOLCALL>"


def register_bfcl_format(
    name: str,
    write_body: Callable[[Sequence[Call], bool], str],
    read_body: Callable[[str], list[Call] | None],
    instructions: Callable[[bool], str],
    plain_names: Callable[[str, Sequence[str]], bool] | None = None,
    max_depth: int | None = None,
) -> CallFormat:
    """Register a BFCL-style format from its body writer and reader.

    ``write_body(calls, tagged)`` must not put ``<`` in the body when ``tagged`` except in its
    own markup (never ``<TOOLCALL>``); ``read_body(body)`` returns the calls, or None when the
    body is not a non-empty list of calls in the format. ``plain_names`` and ``max_depth``: as
    ``CallFormat`` takes them.
    """

    def format_calls(calls: Sequence[Call], tag: bool) -> str:
        body = write_body(calls, tag)
        return f"{TAG_OPEN}{body}{TAG_CLOSE}" if tag else body

    def parse_calls(text: str, tag: bool) -> tuple[str | None, list[Call]] | None:
        if not tag:
            calls = read_body(text)
            return (None, calls) if calls else None
        end = text.rstrip()
        if not end.endswith(TAG_CLOSE):
            return None
        start = end.rfind(TAG_OPEN)
        if start == -1:
            return None
        calls = read_body(end[start + len(TAG_OPEN) : -len(TAG_CLOSE)])
        return split_prefix(text[:start], calls) if calls else None

    return register_call_format(
        CallFormat(
            name=name,
            format_calls=format_calls,
            parse_calls=parse_calls,
            instructions=instructions,
            allows_prefix=lambda tag: tag,
            plain_names=plain_names,
            max_depth=max_depth,
        )
    )


def call_instructions(example: str, tag: bool, notes: str = "") -> str:
    """The call-format section shared by the BFCL formats; ``example`` is the body's shape."""
    notes = f" {notes}" if notes else ""
    if tag:
        return (
            "To call functions, end your reply with one block listing every call in this "
            f"format: {TAG_OPEN}{example}{TAG_CLOSE}{notes} Any other text goes before the "
            "block."
        )
    return (
        "To call functions, reply with only the calls, listed in this format: "
        f"{example}{notes} Do not add any other text to a reply that calls functions."
    )
