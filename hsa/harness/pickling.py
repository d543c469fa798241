"""Quick pickling for the frozen dataclasses that travel between processes.

A ``@dataclass(slots=True)`` class pickles through the ``__getstate__``/``__setstate__`` that
``dataclasses`` writes, which call ``dataclasses.fields()`` for every object: most of the time
it takes to unpickle the variants a worker process plans (thousands of tools, steps and
mappings a second). ``by_fields`` gives a class the same state, the values of its fields in
order, with the field names looked up once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_C = TypeVar("_C", bound=type)


def by_fields(cls: _C) -> _C:
    """Pickle the slots dataclass ``cls`` by its fields' values, the names looked up once.
    Apply it above ``@dataclass``; a class that defines ``__reduce__`` does not need it.

    Fields left out of ``__init__`` with a ``default_factory`` (values kept on the object,
    derived from the others) are not pickled: an unpickled object starts them afresh."""
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields if f.init or f.default_factory is dataclasses.MISSING)
    fresh = tuple(
        (f.name, f.default_factory)
        for f in fields
        if not f.init and f.default_factory is not dataclasses.MISSING
    )

    def __getstate__(self: Any) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in names])

    def __setstate__(self: Any, state: tuple[Any, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)
        for name, factory in fresh:
            object.__setattr__(self, name, factory())

    setattr(cls, "__getstate__", __getstate__)  # noqa: B010 (a method, set on the class)
    setattr(cls, "__setstate__", __setstate__)  # noqa: B010
    return cls
