"""The environment registry: environments by name, built with keyword options."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hsa.config import files_hash
from hsa.envs.base import Environment
from hsa.errors import EnvError

# name -> "module:attribute" of a factory; imported only when the environment is asked for,
# so that ``import hsa.envs`` stays light.
_FACTORIES: dict[str, str] = {
    "livestream": "hsa.envs.livestream.env:LivestreamEnvironment",
    "bfcl": "hsa.envs.bfcl:BfclEnvironment.from_corpus",
    "tau2": "hsa.envs.tau2:Tau2Environment.from_corpus",
    "recorded": "hsa.envs.recorded:RecordedEnvironment.from_jsonl",
}


_BUILT_IN = dict(_FACTORIES)


def register(name: str, factory: str) -> None:
    """Register ``factory`` (``module:callable``, dotted attributes allowed) under ``name``."""
    _FACTORIES[name] = factory


def names() -> list[str]:
    """The registered environment names, sorted."""
    return sorted(_FACTORIES)


def _resolve(name: str) -> Callable[..., Environment]:
    module_name, _, attr = _FACTORIES[name].partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def get(name: str, **options: Any) -> Environment:
    """The environment registered as ``name``, built with ``options``.

    ``livestream`` takes ``seed`` (default 0), ``n_tasks`` (default: all tasks) and ``compact``
    (default false); ``bfcl``, ``tau2`` and ``recorded`` take ``path`` (a corpus file or
    directory).
    """
    if name not in _FACTORIES:
        raise EnvError(_unknown(name))
    factory = _resolve(name)
    params = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in options if k not in params and not takes_any]
    if unknown:
        accepted = [p for p, v in params.items() if v.kind is not inspect.Parameter.VAR_KEYWORD]
        raise EnvError(
            f"environment {name!r} takes no option(s) {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(accepted) or 'none'}"
        )
    missing = [p for p in required(name) if p not in options]
    if missing:
        flags = [f"--env-{m}" for m in missing if m in ("path", "seed")]
        hint = f" ({', '.join(flags)} on the command line)" if flags else ""
        raise EnvError(f"environment {name!r} needs option(s) {', '.join(missing)}{hint}")
    bad = _bad_path(name, options)
    if bad:
        raise EnvError(bad)
    return factory(**options)


#: hsa's environments of a corpus, whose ``path`` is one file or folder (a plugin's
#: environment may take another kind of path: a list of files, none)
_CORPORA = ("bfcl", "tau2", "recorded")


def score_version(name: str) -> int:
    """The ``score_version`` of environment ``name``, without building it: that of the class
    its factory is (or is a method of); 1 for a name not registered or a factory that does not
    import (the job says what is wrong when it builds the environment) or is of another kind."""
    version = getattr(_class_of(name), "score_version", 1)
    return version if isinstance(version, int) else 1


def task_version(name: str) -> int:
    """The ``task_version`` of environment ``name``, found as ``score_version`` is (1 where
    that finds no version)."""
    version = getattr(_class_of(name), "task_version", 1)
    return version if isinstance(version, int) else 1


def corpus_hash(name: str, path: Path) -> str:
    """The content of environment ``name``'s corpus at ``path`` as a hash, whatever the path
    it is named by: the files it reads, by name and content (``Environment.corpus_files`` of
    the class ``score_version`` finds, without building it; the default's for a name not
    registered or of another kind). ``OSError`` (``FileNotFoundError`` when ``path`` is not
    there, with the name of the file that could not be read)."""
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    owner = _class_of(name)
    if not issubclass(owner, Environment):
        owner = Environment
    return files_hash(owner.corpus_files(path))


def _class_of(name: str) -> type:
    """The class environment ``name``'s factory is (or is a method of); ``Environment`` when
    it is not registered, or does not import (building it says what is wrong), or is no
    class's."""
    if name not in _FACTORIES:
        return Environment
    try:
        factory: Any = _resolve(name)
    except Exception:  # a plugin's that does not import: building it says what is wrong
        return Environment
    owner = getattr(factory, "__self__", factory)  # a classmethod's class
    return owner if isinstance(owner, type) else Environment


def _bad_path(name: str, options: Mapping[str, Any]) -> str | None:
    """What is wrong with the ``path`` of one of hsa's corpus environments that is not a path
    (a number or a list would fail deep in the corpus's import), or None."""
    path = options.get("path", "-")
    if _FACTORIES.get(name) != _BUILT_IN.get(name) or name not in _CORPORA:
        return None
    if isinstance(path, (str, os.PathLike)) and str(path).strip():
        return None
    return f"path must name a corpus file or folder, got {path!r}"


def from_config(
    name: str, options: Mapping[str, Any], *, file: str | None, at: str = "$"
) -> Environment:
    """``get``, for an environment a config file names: a name it does not know is an error
    at ``{at}.env`` of ``file``, an option it does not take or lacks one at
    ``{at}.env_options`` (an error of the environment's own that names a file of its own, a
    corpus it cannot read, keeps it)."""
    if name not in _FACTORIES:
        raise EnvError(_unknown(name), file=file, where=f"{at}.env")
    missing = [p for p in required(name) if p not in options]
    if missing:  # (said as the config's keys: get names the command line's flags)
        raise EnvError(
            f"environment {name!r} needs option(s) {', '.join(missing)} here",
            file=file,
            where=f"{at}.env_options",
        )
    bad = _bad_path(name, options)
    if bad:
        raise EnvError(bad, file=file, where=f"{at}.env_options.path")
    try:
        return get(name, **options)
    except EnvError as exc:
        if exc.file is not None:
            raise
        raise EnvError(exc.message, file=file, where=f"{at}.env_options") from None


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, names(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown environment {name!r}{hint}; registered: {', '.join(names())}"


def required(name: str) -> list[str]:
    """The options environment ``name`` cannot be built without (``path`` for a corpus)."""
    if name not in _FACTORIES:
        raise EnvError(_unknown(name))
    return [
        p
        for p, v in inspect.signature(_resolve(name)).parameters.items()
        if v.default is inspect.Parameter.empty
        and v.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
