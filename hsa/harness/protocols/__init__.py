"""Text protocols: how tool docs are printed and how calls are written as assistant text.

A call format is a pair of functions: ``format_calls(calls, tag) -> str`` and
``parse_calls(text, tag) -> (prefix, calls) | None`` where ``calls`` is a list of
``(tool_name, args)`` and ``prefix`` is the assistant text before the calls, or None when there
was none. Assistant text and calls are joined by one newline (``join_prefix``), so an empty
text (``"\n<calls>"``) and no text (``"<calls>"``) stay distinct. A doc format
is ``format_docs(tools) -> str``. Both are looked up by the names in ``Protocol``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsa.harness.model import Tool

Call = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class CallFormat:
    """One way of writing tool calls in assistant text."""

    name: str
    format_calls: Callable[[Sequence[Call], bool], str]
    parse_calls: Callable[[str, bool], tuple[str | None, list[Call]] | None]
    instructions: Callable[[bool], str]
    #: whether assistant text can share a message with calls (tagged formats can)
    allows_prefix: Callable[[bool], bool]


def join_prefix(prefix: str | None, calls_text: str) -> str:
    """Assistant text followed by a calls block, as every call format writes them."""
    return calls_text if prefix is None else f"{prefix}\n{calls_text}"


def split_prefix(rest: str, calls: list[Call]) -> tuple[str | None, list[Call]] | None:
    """Finish a parse: ``rest`` is what precedes the calls block (parsed back to front)."""
    if not calls:
        return None
    if rest == "":
        return None, calls[::-1]
    if rest.endswith("\n"):
        return rest[:-1], calls[::-1]
    return None


CALL_FORMATS: dict[str, CallFormat] = {}
DOC_FORMATS: dict[str, Callable[[Sequence[Tool]], str]] = {}


def register_call_format(fmt: CallFormat) -> CallFormat:
    CALL_FORMATS[fmt.name] = fmt
    return fmt


def register_doc_format(name: str):
    def decorate(fn: Callable[[Sequence[Tool]], str]) -> Callable[[Sequence[Tool]], str]:
        DOC_FORMATS[name] = fn
        return fn

    return decorate


from hsa.harness.protocols import calls as _calls  # noqa: E402,F401  (registers formats)
from hsa.harness.protocols import docs as _docs  # noqa: E402,F401
