"""Text protocols: how tool docs are printed and how calls are written as assistant text.

A call format is a pair of functions: ``format_calls(calls, tag) -> str`` and
``parse_calls(text, tag) -> (prefix, calls) | None`` where ``calls`` is a list of
``(tool_name, args)`` and ``prefix`` is the assistant text before the calls, or None when there
was none; ``parse_calls`` returns None when ``text`` is not a call message at all. Assistant text
and calls are joined by one newline (``join_prefix``); an empty text before calls is no text
(render writes the calls alone). A doc format is ``format_docs(tools) -> str``. Both are looked
up by the names in ``Protocol``.

The formats (see each module for its grammar and escaping):

- ``hermes`` (``hermes.py``): one ``<tool_call>`` JSON object per call, as Hermes and Qwen
  models write them; it has its own tag, so ``call_tag`` does not change it.
- ``json``, ``python``, ``xml_verbose``, ``xml_concise`` (``jsoncalls.py``, ``pycalls.py``,
  ``xmlcalls.py``): the four return formats of the BFCL v4 format-sensitivity study, each a
  single body listing every call of the turn, alone in its message or, with ``call_tag``, inside
  ``<TOOLCALL>...</TOOLCALL>`` after the assistant's text (``bfcl.py``).

Doc formats (``docs.py``): ``json``, ``xml`` and ``python`` as in BFCL v4, plus ``markdown``, and
``lines`` (one line per tool, for prompts that must be short). Rules that redraw a harness's doc
format draw among the ``DRAWN_DOC_FORMATS`` (``lines`` is not one: it drops descriptions).
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
    #: ``parse_calls`` for a model's reply that no server parsed (``hsa.teachers.backends.
    #: output``), more lenient, close to the server's own parser for the format but not the
    #: same (the format's module says where they differ); None: ``parse_calls``.
    #: Harness and training text is always read with ``parse_calls``, which must round-trip.
    parse_reply: Callable[[str, bool], tuple[str | None, list[Call]] | None] | None = None
    #: whether calls to a tool named so, with arguments named so, are written in the format's
    #: plain syntax, which other readers (vLLM's parsers, BFCL's decoder) read as hsa does;
    #: None: always. ``parse_calls`` may read back more than that.
    plain_names: Callable[[str, Sequence[str]], bool] | None = None
    #: how deep an argument value may nest (``literals.nesting``) for ``format_calls`` to
    #: write it: Python literals hold ``literals.MAX_DEPTH`` levels; None: as deep as JSON reads
    max_depth: int | None = None


def join_prefix(prefix: str | None, calls_text: str) -> str:
    """Assistant text followed by a calls block, as every call format writes them."""
    return calls_text if prefix is None else f"{prefix}\n{calls_text}"


def split_prefix(rest: str, calls: list[Call]) -> tuple[str | None, list[Call]] | None:
    """Finish a parse: ``rest`` is the text before the calls block, ``calls`` the calls in order.

    The inverse of ``join_prefix``; text glued to the block without the newline (as a model may
    write it) is kept whole.
    """
    if not calls:
        return None
    if rest == "":
        return None, calls
    return (rest[:-1] if rest.endswith("\n") else rest), calls


CALL_FORMATS: dict[str, CallFormat] = {}
DOC_FORMATS: dict[str, Callable[[Sequence[Tool]], str]] = {}
#: the doc formats that print everything a tool's schema says, which protocol rules draw among
DRAWN_DOC_FORMATS: set[str] = set()


def register_call_format(fmt: CallFormat) -> CallFormat:
    CALL_FORMATS[fmt.name] = fmt
    return fmt


def register_doc_format(name: str, *, drawn: bool = True):
    """Register a doc format; ``drawn=False`` keeps it out of the protocol rules' draws (a
    harness may still name it, and keeps it when a rule changes its call format)."""

    def decorate(fn: Callable[[Sequence[Tool]], str]) -> Callable[[Sequence[Tool]], str]:
        DOC_FORMATS[name] = fn
        if drawn:
            DRAWN_DOC_FORMATS.add(name)
        return fn

    return decorate


# Importing the format modules registers them.
from hsa.harness.protocols import docs as _docs  # noqa: E402,F401
from hsa.harness.protocols import hermes as _hermes  # noqa: E402,F401
from hsa.harness.protocols import jsoncalls as _jsoncalls  # noqa: E402,F401
from hsa.harness.protocols import pycalls as _pycalls  # noqa: E402,F401
from hsa.harness.protocols import xmlcalls as _xmlcalls  # noqa: E402,F401
