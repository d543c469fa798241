"""Flags that set a config's settings: their help and default come from the config.

``@click.option("--batch-size", type=int, cls=Setting, config=AUGMENT)`` declares a flag for
``AugmentConfig.batch_size``. The flag defaults to None -- not given -- so the config's own
default applies, written once in the config (``hsa.config.setting``); its help is the setting's
help line with that default (``hsa.config.cli_help``). The config module is imported only when
help is shown, so ``hsa`` starts fast.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

import click
from click.core import ParameterSource

from hsa.errors import HsaError

AUGMENT = "hsa.pipelines.augment:AugmentConfig"
TEACH = "hsa.teachers.config:TeachConfig"
EVAL = "hsa.eval.config:EvalConfig"


class Span(click.FloatRange):
    """A number within bounds; NaN, which compares false with any bound, is refused too."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value} is not in the range {self._describe_range()}.", param, ctx)
        return number


class UserPath(click.Path):
    """A path, ``~`` expanded as a config file's paths are: a shell leaves it as it is in
    ``--out=~/x`` or in quotes, and a folder named ``~`` was made here while PyArrow wrote
    under the home folder."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and value.startswith("~"):
            value = os.path.expanduser(value)
        return super().convert(value, param, ctx)


class JsonObject(click.ParamType):
    """A JSON object given as text (``'{"enable_thinking": false}'``); a key given twice is
    refused (JSON readers keep the last without a word)."""

    name = "JSON"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, dict):
            return value
        from hsa.config import KeyGivenTwice, loads_written_json

        def refuse(text: str) -> Any:
            raise ValueError(text)

        try:
            found = loads_written_json(value, parse_constant=refuse)
        except KeyGivenTwice as exc:
            self.fail(str(exc), param, ctx)
        except (RecursionError, ValueError) as exc:
            from hsa.errors import unreadable

            self.fail(unreadable(exc) or f"not JSON: {getattr(exc, 'msg', exc)}", param, ctx)
        if not isinstance(found, dict):
            self.fail(f"must be a JSON object, got {type(found).__name__}", param, ctx)
        return found


class Setting(click.Option):
    """A flag for setting ``setting`` (default: the flag's name) of the config ``config``
    (``module:Class``)."""

    def __init__(self, *args: Any, config: str, setting: str | None = None, **kwargs: Any):
        kwargs.setdefault("default", None)
        if kwargs["default"] is not None:
            raise ValueError("a setting's flag defaults to None: the config holds its default")
        super().__init__(*args, **kwargs)
        self.config = config
        self.setting = setting or self.name or ""

    def config_class(self) -> type:
        module, _, name = self.config.partition(":")
        found: type = getattr(importlib.import_module(module), name)
        return found

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if self.help is None:
            from hsa.config import cli_help

            self.help = cli_help(self.config_class(), self.setting)
        return super().get_help_record(ctx)


@contextlib.contextmanager
def said_as_flags() -> Iterator[None]:
    """An ``HsaError`` raised in the block about a setting the command has a flag for names
    the flag (``--max-steps``) rather than the setting (``max_steps_per_turn``); one about a
    config file's setting (the error names the file) keeps the setting's name."""
    try:
        yield
    except HsaError as exc:
        ctx = click.get_current_context(silent=True)
        if ctx is not None and exc.file is None and exc.where:
            for param in ctx.command.params:
                if isinstance(param, Setting) and param.setting == exc.where:
                    exc.where = max(param.opts, key=len)
                    break
        raise


def given(flags: dict[str, Any], file: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The flags given on the command line (None is 'not given'). A flag's value that came
    from an environment variable (``--base-url`` from ``OPENAI_BASE_URL``) is not one: the
    config ``file``'s setting beats it, as the precedence reads (flag, config, environment)."""
    ctx = click.get_current_context(silent=True)

    def from_environment(name: str) -> bool:
        return ctx is not None and ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT

    return {
        name: value
        for name, value in flags.items()
        if value is not None
        and not (file and file.get(name) is not None and from_environment(name))
    }


#: where the API key is read from unless --api-key-env names another variable
DEFAULT_KEY_ENV = "OPENAI_API_KEY"

#: ``--api-key-env``: the variable the key of an OpenAI-compatible endpoint is read from
api_key_env_option = click.option(
    "--api-key-env",
    default=DEFAULT_KEY_ENV,
    show_default=True,
    help="Environment variable holding the API key (never written anywhere); named here, it "
    "beats a config file's api_key.",
)


def env_api_key(api_key_env: str, file_key: Any = None) -> Any:
    """The API key a command sends: the config file's ``file_key`` when it gives one, unless
    ``--api-key-env`` was given on the command line (a flag, then the config) and its variable
    holds a key; otherwise the key in that variable (``OPENAI_API_KEY`` by default)."""
    key = (os.environ.get(api_key_env) or "").strip() or None
    context = click.get_current_context(silent=True)
    named = context is not None and (
        context.get_parameter_source("api_key_env") is click.core.ParameterSource.COMMANDLINE
    )
    if file_key is not None and not (named and key):
        return file_key  # as the file has it: the config checks that it is a string
    return key
