"""Call styles: how a protocol writes one call, and the block that holds a turn's calls.

Under ``api`` a call's text is its ``arguments`` JSON. Under a text protocol the turn's calls
are one block, ``format_calls(calls, tag)``; the engine renders each call on its own and joins
them, which needs the block to decompose as ``prefix + sep.join(pieces) + suffix``. The parts
are found by probing the real call format with made-up calls and checked on a three-call
block; a format that does not decompose is rendered by the reference, row by row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hsa.errors import ProtocolError
from hsa.harness.model import Harness
from hsa.harness.prompt import call_format
from hsa.harness.protocols import CallFormat

_PROBES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("aprobe", {}),
    ("zprobe", {"a": 1}),
    ("mprobe", {"z": "q", "y": [True, None]}),
)


class NotDecomposable(Exception):
    """A call format whose turn block is not prefix + sep.join(calls) + suffix.

    Raised by ``_decompose`` while probing (the style is then marked not decomposable) and by
    ``CallStyle.one`` when a real call's block does not start and end as the probes' did;
    ``key`` is the style's. ``Engine.render`` catches the second kind: see its docstring.
    """

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


@dataclass(frozen=True, slots=True)
class CallStyle:
    """How calls appear under one protocol (see the module docstring)."""

    key: str
    api: bool
    fmt: CallFormat | None = None
    tag: bool = False
    prefix: str = ""
    sep: str = ""
    suffix: str = ""
    decomposable: bool = True

    @property
    def allows_prefix(self) -> bool:
        return True if self.fmt is None else self.fmt.allows_prefix(self.tag)  # None: api

    def one(self, name: str, args: Mapping[str, Any]) -> str:
        """One call's text: its arguments JSON (api) or its piece of the turn's block."""
        if self.fmt is None:  # the api style
            return json.dumps(args, ensure_ascii=False)
        text = self.fmt.format_calls([(name, args)], self.tag)
        end = len(text) - len(self.suffix)
        if not (text.startswith(self.prefix) and text.endswith(self.suffix)) or end < len(
            self.prefix
        ):
            raise NotDecomposable(self.key)
        return text[len(self.prefix) : end]


def style_of(harness: Harness) -> CallStyle:
    """The call style of ``harness``'s protocol."""
    protocol = harness.protocol
    if protocol.is_api:
        return CallStyle("api", True)
    fmt = call_format(harness)
    return _text_style(fmt, protocol.call_tag)


@lru_cache(maxsize=64)
def _text_style(fmt: CallFormat, tag: bool) -> CallStyle:
    key = f"text/{fmt.name}/{'tag' if tag else 'bare'}"
    try:
        prefix, sep, suffix = _decompose(fmt, tag)
    except (NotDecomposable, ProtocolError):
        # a format that refuses a made-up call cannot be taken apart by probing either
        return CallStyle(key, False, fmt, tag, decomposable=False)
    return CallStyle(key, False, fmt, tag, prefix, sep, suffix)


def _common_prefix(texts: list[str]) -> str:
    first = min(texts, key=len)
    for i, char in enumerate(first):
        if any(t[i] != char for t in texts):
            return first[:i]
    return first


def _decompose(fmt: CallFormat, tag: bool) -> tuple[str, str, str]:
    singles = [fmt.format_calls([probe], tag) for probe in _PROBES]
    prefix = _common_prefix(singles)
    suffix = _common_prefix([t[len(prefix) :][::-1] for t in singles])[::-1]
    pieces = [t[len(prefix) : len(t) - len(suffix)] for t in singles]
    pair = fmt.format_calls([_PROBES[0], _PROBES[1]], tag)
    head, tail = prefix + pieces[0], pieces[1] + suffix
    if not (pair.startswith(head) and pair.endswith(tail)) or len(pair) < len(head) + len(tail):
        raise NotDecomposable(fmt.name)
    sep = pair[len(head) : len(pair) - len(tail)]
    triple = fmt.format_calls([_PROBES[1], _PROBES[2], _PROBES[0]], tag)
    if triple != prefix + sep.join([pieces[1], pieces[2], pieces[0]]) + suffix:
        raise NotDecomposable(fmt.name)
    return prefix, sep, suffix
