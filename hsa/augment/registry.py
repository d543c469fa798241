"""The rule registry: the ``@rule`` decorator, the built-in rules and ``hsa.rules`` entry points.

A third-party package adds rules without touching hsa by declaring an entry point in the
``hsa.rules`` group whose object is a module (its ``@rule`` decorators register on import), a
``Rule``, or a list of ``Rule``s::

    [project.entry-points."hsa.rules"]
    acme = "acme_rules"
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from collections.abc import Mapping as MappingABC
from importlib import metadata
from types import ModuleType
from typing import Any

from hsa.augment.rule import EMPTY_PARAMS, FAMILIES, Rule, RuleFn
from hsa.errors import RuleError

ENTRY_POINT_GROUP = "hsa.rules"
BUILTIN_MODULE = "hsa.augment.rules"

_RULES: dict[str, Rule] = {}
_LOADED = False


def register(item: Rule) -> Rule:
    """Add ``item`` to the registry; a second rule with the same name is an error."""
    existing = _RULES.get(item.name)
    if existing is not None and existing is not item:
        if existing.fn is item.fn or _same_function(existing.fn, item.fn):
            return existing  # the same module imported twice (e.g. by path and by entry point)
        raise RuleError(
            f"rule {item.name!r} is already registered (from {existing.fn.__module__}); "
            "pick another name",
            where=f"rule {item.name!r}",
        )
    _RULES[item.name] = item
    return item


def _same_function(a: RuleFn, b: RuleFn) -> bool:
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def rule(
    name: str,
    *,
    version: str = "1",
    params: MappingABC[str, Any] | None = None,
    needs: Iterable[str] = (),
) -> Callable[[RuleFn], Rule]:
    """Decorator: turn ``fn(harness, rng, params, context) -> Rewrite`` into a registered rule.

    The function's docstring is the rule's documentation; its first line is the summary shown
    by ``hsa rules list``.
    """

    def decorate(fn: RuleFn) -> Rule:
        built = Rule(
            name=name,
            version=str(version),
            fn=fn,
            params=dict(params) if params is not None else dict(EMPTY_PARAMS),
            doc=inspect.cleandoc(fn.__doc__ or ""),
            needs=frozenset(needs),
        )
        return register(built)

    return decorate


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = importlib.import_module(BUILTIN_MODULE)
    for name in package.__all__:
        _register_module(getattr(package, name))
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party package must not take hsa down silently
            raise RuleError(
                f"cannot load entry point {ep.value!r}: {type(exc).__name__}: {exc}; "
                "fix or uninstall the package that declares it",
                where=f"entry point {ENTRY_POINT_GROUP}:{ep.name}",
            ) from None
        _register_object(obj, ep)


def _register_object(obj: Any, ep: metadata.EntryPoint) -> None:
    if isinstance(obj, Rule):
        register(obj)
    elif isinstance(obj, ModuleType):
        _register_module(obj)
    elif isinstance(obj, list | tuple) and all(isinstance(r, Rule) for r in obj):
        for item in obj:
            register(item)
    else:
        raise RuleError(
            f"entry point {ep.value!r} is a {type(obj).__name__}; it must name a module, a Rule "
            "or a list of Rules",
            where=f"entry point {ENTRY_POINT_GROUP}:{ep.name}",
        )


def _register_module(module: ModuleType) -> None:
    # Decorators register on first import; registering what the module holds also covers a
    # registry that was reset after the import.
    for value in vars(module).values():
        if isinstance(value, Rule):
            register(value)


def all_rules() -> list[Rule]:
    """Every registered rule (built-in and from entry points), by family then name."""
    _load()
    order = {family: i for i, family in enumerate(FAMILIES)}
    return sorted(_RULES.values(), key=lambda r: (order.get(r.family, len(order)), r.name))


def get(name: str) -> Rule:
    """The rule called ``name``; a ``RuleError`` listing close names when there is none."""
    _load()
    found = _RULES.get(name)
    if found is None:
        import difflib

        close = difflib.get_close_matches(name, list(_RULES), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `hsa rules list`"
        raise RuleError(f"no rule named {name!r}{hint}", where=f"rule {name!r}")
    return found
