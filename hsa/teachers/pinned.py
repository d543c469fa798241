"""Harnesses that serialise themselves once.

``render`` and ``parse`` look a harness's system prompt up by its JSON document, which they
compute from scratch on every call (a third of a millisecond for the livestream harness). A
rollout renders and parses under the same few variant harnesses thousands of times, so the
teacher pins them: same fields, same document, computed once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hsa.harness.model import Harness

_FIELDS = tuple(f.name for f in dataclasses.fields(Harness))


@dataclass(frozen=True, slots=True, eq=False)
class PinnedHarness(Harness):
    """A ``Harness`` whose ``to_json`` is computed on first use and kept.

    It equals any harness with the same document. ``replace`` returns a plain ``Harness``,
    since a changed copy must not inherit the kept document.
    """

    _json: str = field(default="", repr=False)

    def to_json(self) -> str:
        if not self._json:
            object.__setattr__(self, "_json", Harness.to_json(self))
        return self._json

    def replace(self, **changes: Any) -> Harness:
        return unpin(self).replace(**changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Harness):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = Harness.__hash__


def pin(harness: Harness) -> Harness:
    """``harness`` as a ``PinnedHarness`` (itself when it already is one)."""
    if isinstance(harness, PinnedHarness):
        return harness
    return PinnedHarness(**{name: getattr(harness, name) for name in _FIELDS})


def unpin(harness: Harness) -> Harness:
    """A plain ``Harness`` with the same fields."""
    if not isinstance(harness, PinnedHarness):
        return harness
    return Harness(**{name: getattr(harness, name) for name in _FIELDS})
