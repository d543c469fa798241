"""The rule registry: the ``@rule`` decorator, the built-in rules and ``hsa.rules`` entry points.

A third-party package adds rules without touching hsa by declaring an entry point in the
``hsa.rules`` group whose object is a module (its ``@rule`` decorators register on import), a
``Rule``, or a list of ``Rule``s::

    [project.entry-points."hsa.rules"]
    acme = "acme_rules"

Entry points are loaded lazily: looking up a built-in rule never imports a plugin, and a plugin
that fails to load is recorded as a ``BrokenPlugin`` instead of failing every command. Only a
command that needs one of its rules (or a name no loaded rule has) fails, and says why.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import io
import os
import sys
import threading
from collections.abc import Callable, Iterable
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from hsa.augment.rule import EMPTY_PARAMS, FAMILIES, Rule, RuleFn, one_line
from hsa.errors import RuleError

ENTRY_POINT_GROUP = "hsa.rules"
BUILTIN_MODULE = "hsa.augment.rules"


@dataclass(frozen=True, slots=True)
class BrokenPlugin:
    """An ``hsa.rules`` entry point that failed to load, and the rules it named before failing.

    ``rules`` holds what its module registered before the error (a module that fails halfway
    through its imports may have run some ``@rule`` decorators); those rules are withdrawn.
    """

    name: str
    value: str
    error: str
    rules: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"entry point {ENTRY_POINT_GROUP}:{self.name}"

    def __str__(self) -> str:
        return f"{self.where}{f' = {self.value}' if self.value else ''}: {self.error}"


_RULES: dict[str, Rule] = {}
_BUILTINS_LOADED = False  # set when loading starts (so a decorator's register returns)
_BUILTINS_READY = False  # set when they are loaded: the path without the lock after that
_PLUGINS_LOADED = False
#: the installed plugins ``HSA_PLUGINS`` left out, by entry point name
_SKIPPED: list[str] = []
#: one thread loads the built-in rules; another that asks meanwhile waits for it rather than
#: finding the registry empty (re-entrant: a loading module's decorators call ``register``)
_LOADING_LOCK = threading.RLock()
#: the same for the entry points' rules (re-entrant: ``ep.load()`` imports modules that register)
_PLUGINS_LOCK = threading.RLock()
_BROKEN: dict[str, BrokenPlugin] = {}
_LOADING: list[str] = []  # rules registered while an entry point loads, to withdraw on failure
_PLUGIN_OF: dict[str, str] = {}  # the entry point that registered each plugin rule, by rule
#: the rules withdrawn (a name two plugins claim, a broken plugin's rules), and why, by rule:
#: withdrawn for the process, since a module whose import failed runs again when imported
#: again (another entry point of its package, ``p1x = "p1.extra"``, imports ``p1`` first)
_WITHDRAWN: dict[str, str] = {}


class _NameTaken(RuleError):
    """A rule's name is registered already, by another rule."""

    def __init__(self, message: str, *, name: str):
        super().__init__(message, where=f"rule {name!r}")
        self.name = name


def register(item: Rule) -> Rule:
    """Add ``item`` to the registry; a second rule with the same name is an error, unless it
    is the same function defined again (a module reloaded, a notebook cell run again): the
    new definition replaces the old one."""
    if not item.fn.__module__.startswith(BUILTIN_MODULE):
        _load_builtins()  # a rule named like a built-in is refused here, not at first use
    existing = _RULES.get(item.name)
    if existing is None and item.name in _WITHDRAWN:
        raise RuleError(
            f"the name is withdrawn: {_WITHDRAWN[item.name]}", where=f"rule {item.name!r}"
        )
    if existing is item:
        # reached again: a module that imports (re-exports) a rule registered already, a
        # built-in one say, claims nothing (``_LOADING`` is what an entry point adds)
        return item
    if existing is not None:
        if existing.fn is item.fn:
            return existing  # the same rule, reached twice (e.g. by path and by entry point)
        if (
            _same_function(existing.fn, item.fn)
            or existing.fn.__module__ == item.fn.__module__ == "__main__"
        ):
            # defined again: a module reloaded, a notebook cell run again (its function
            # renamed, perhaps): the new definition replaces the old one
            _RULES[item.name] = item
            return item
        raise _NameTaken(
            f"the name is already registered (from {existing.fn.__module__}); pick another name",
            name=item.name,
        )
    _RULES[item.name] = item
    _LOADING.append(item.name)
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
    if not isinstance(name, str):  # ``@rule`` without its name: the function came as the name
        raise RuleError(
            f"@rule takes the rule's name first: @rule('family.verb'), got {name!r}",
            where=f"rule {getattr(name, '__name__', name)!r}",
        )

    def decorate(fn: RuleFn) -> Rule:
        if isinstance(fn, Rule):
            raise RuleError(
                f"@rule applied to the rule {fn.name!r}: a function is one rule, under one "
                "name (@rule once)",
                where=f"rule {name!r}",
            )
        if params is not None and not isinstance(params, MappingABC):
            raise RuleError(
                f"params must be a JSON Schema (a dict), got {type(params).__name__} "
                f"{params!r:.80}",
                where=f"rule {name!r}",
            )
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


def _load_builtins() -> None:
    global _BUILTINS_LOADED, _BUILTINS_READY
    if _BUILTINS_READY:
        return
    with _LOADING_LOCK:
        if _BUILTINS_LOADED:  # loaded, or being loaded by this thread
            return
        _BUILTINS_LOADED = True  # (first: their decorators call ``register``, which calls this)
        try:
            package = importlib.import_module(BUILTIN_MODULE)
            for name in package.__all__:
                _register_module(getattr(package, name))
        except BaseException:
            _BUILTINS_LOADED = False  # never left half loaded and taken as done
            raise
        _BUILTINS_READY = True


#: the environment variable that picks the installed plugins to load, by entry point name
#: (comma-separated; empty: none); unset, every one is loaded
PLUGINS_VARIABLE = "HSA_PLUGINS"


def plugins_chosen() -> set[str] | None:
    """The entry point names ``HSA_PLUGINS`` picks (None when it is unset: all of them)."""
    value = os.environ.get(PLUGINS_VARIABLE)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


def _load_plugins() -> None:
    # the built-ins first, under their own lock: a plugin module another thread is importing
    # meanwhile registers its rules without waiting on this thread, which would wait on that
    # import in ep.load() (two locks Python's import deadlock check cannot see)
    _load_builtins()
    with _PLUGINS_LOCK:  # (not a hot path: a rule not built in, every rule, broken plugins)
        _load_plugins_locked()


def _load_plugins_locked() -> None:
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    chosen = plugins_chosen()
    found = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    for name in sorted((chosen or set()) - {ep.name for ep in found}):
        error = f"{PLUGINS_VARIABLE} names it, and no installed package has this entry point"
        _BROKEN[name] = BrokenPlugin(name, "", error, ())
    for ep in found:
        if chosen is not None and ep.name not in chosen:
            _SKIPPED.append(ep.name)
            continue
        _LOADING.clear()
        label = f"{ENTRY_POINT_GROUP}:{ep.name}"
        try:
            _register_object(_load_entry_point(ep), ep)
        except (Exception, SystemExit) as exc:  # one broken package must not take hsa down
            # (a module that calls sys.exit() or an argparse parser's parse_args() when
            # imported would otherwise end the command, with its status and no word why)
            error = str(exc) if isinstance(exc, _ExitAtImport) else one_line(exc)
            if isinstance(exc, RuleError):  # named by the rule at fault, not the entry point
                own = exc.where and not exc.where.startswith("entry point ")
                error = f"{exc.where}: {exc.message}" if own else exc.message
            withdrawn = tuple(dict.fromkeys(_LOADING))
            why = dict.fromkeys(withdrawn, f"the plugin {ep.value!r} ({label}) failed to load")
            if isinstance(exc, _NameTaken) and exc.name in _PLUGIN_OF:
                # Two plugins claim one name: which one a recipe means cannot be told, and the
                # first to load (by entry point name) is no more right than the other.
                other = _PLUGIN_OF.pop(exc.name)
                _RULES.pop(exc.name, None)
                withdrawn += (exc.name,)
                error = f"{error}; entry point {ENTRY_POINT_GROUP}:{other} claims it too"
                why[exc.name] = f"entry points {ENTRY_POINT_GROUP}:{other} and {label} claim it"
            for name in withdrawn:
                _RULES.pop(name, None)
            _WITHDRAWN.update(why)
            _BROKEN[ep.name] = BrokenPlugin(ep.name, ep.value, error, withdrawn)
        else:
            _PLUGIN_OF.update(dict.fromkeys(_LOADING, ep.name))
        finally:
            _LOADING.clear()


class _ExitAtImport(SystemExit):
    """A plugin's ``SystemExit`` at import, with what it wrote to stderr before exiting."""

    def __init__(self, code: Any, output: str):
        super().__init__(code)
        self.output = output

    def __str__(self) -> str:
        said = " ".join(self.output.split())
        said = said if len(said) <= 200 else said[:197] + "..."
        return f"SystemExit: {self.code} while importing" + (f" (it wrote: {said})" if said else "")


def _load_entry_point(ep: metadata.EntryPoint) -> Any:
    """``ep.load()``, holding back what the import writes to stderr until it is known not to
    exit: a plugin that exits at import (argparse's usage line, say) would otherwise print
    its own program's error as if it were hsa's. What an import writes that does not exit (a
    warning, a traceback's prelude) is written on."""
    real = sys.stderr
    held = _HeldStderr(real)
    try:
        with contextlib.redirect_stderr(held):
            loaded = ep.load()
    except SystemExit as exc:
        raise _ExitAtImport(exc.code, held.release()) from exc
    except BaseException:
        _write_on(real, held.release())
        raise
    _write_on(real, held.release())
    return loaded


class _HeldStderr:
    """``sys.stderr`` while a plugin imports: holds what is written until ``release``, then
    passes every write on to the stderr it stood in for. A logging handler the plugin makes
    at import (``logging.StreamHandler()``, ``logging.basicConfig()``) keeps this object, and
    its later output must still reach the terminal."""

    def __init__(self, real: Any):
        self._real = real
        self._held: io.StringIO | None = io.StringIO()

    def release(self) -> str:
        """Stop holding; what was written meanwhile."""
        held, self._held = self._held, None
        return held.getvalue() if held is not None else ""

    def write(self, text: str) -> int:
        held = self._held  # (read once: another thread may release it meanwhile)
        if held is not None:
            return held.write(text)
        if self._real is None:  # (no stderr: pythonw, a daemon) what is written is lost
            return len(text)
        return int(self._real.write(text))

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._held is None and self._real is not None:
            self._real.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, ...
        return getattr(self._real, name)


def _write_on(stream: Any, text: str) -> None:
    """Write what an import wrote to ``stream``, if anything and if there is one: a closed or
    missing stderr (``2>&-``) does not make a plugin that loaded fine a broken one."""
    if not text or stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write(text)


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
            f"it is a {type(obj).__name__}; it must name a module, a Rule or a list of Rules",
            where=f"entry point {ENTRY_POINT_GROUP}:{ep.name}",
        )


def _register_module(module: ModuleType) -> None:
    # Decorators register on first import; registering what the module holds also covers a
    # registry that was reset after the import.
    for value in vars(module).values():
        if isinstance(value, Rule):
            register(value)


def all_rules() -> list[Rule]:
    """Every rule that loaded (built-in and from entry points), by family then name.

    Rules of plugins that failed to load are not among them; see ``broken_plugins``.
    """
    _load_plugins()
    order = {family: i for i, family in enumerate(FAMILIES)}
    return sorted(_RULES.values(), key=lambda r: (order.get(r.family, len(order)), r.name))


def broken_plugins() -> list[BrokenPlugin]:
    """The ``hsa.rules`` entry points that failed to load, by name."""
    _load_plugins()
    return [_BROKEN[name] for name in sorted(_BROKEN)]


def get(name: str) -> Rule:
    """The rule called ``name``; a ``RuleError`` listing close names when there is none.

    Entry points are loaded only when ``name`` is not a built-in rule. When the rule may come
    from a plugin that failed to load, the error names that plugin and its error.
    """
    _load_builtins()
    found = _RULES.get(name)
    if found is None:
        _load_plugins()
        found = _RULES.get(name)
    if found is not None:
        return found
    for broken in _BROKEN.values():
        if name in broken.rules:
            raise RuleError(
                f"it comes from the plugin {broken.value!r} ({broken.where}), which failed to "
                f"load: {broken.error}; fix or uninstall the package that declares it",
                where=f"rule {name!r}",
            )
    close = difflib.get_close_matches(name, list(_RULES), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `hsa rules list`"
    if _BROKEN:
        failed = "; ".join(str(b) for b in broken_plugins())
        hint += f" (it may live in a plugin that failed to load: {failed})"
    if _SKIPPED:
        hint += f" ({PLUGINS_VARIABLE} leaves out the installed plugin(s) {', '.join(_SKIPPED)})"
    raise RuleError(f"no rule named {name!r}{hint}", where=f"rule {name!r}")
