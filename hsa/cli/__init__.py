"""The ``hsa`` command: wires command groups to library functions and turns errors into lines."""

from __future__ import annotations

import signal
import sys
import threading
from typing import NoReturn

import click

from hsa._version import __version__
from hsa.errors import (
    HsaError,
    Terminated,
    clear_stop,
    on_sigint,
    on_sigterm,
    quiet_stops,
    stop_requested,
)


class _Group(click.Group):
    """Lists commands in the order they were added."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hsa")
@click.option("--debug", is_flag=True, help="Show a traceback for errors.")
@click.pass_context
def app(ctx: click.Context, debug: bool) -> None:
    """hsa: harness-aware training data engine."""
    ctx.obj = {"debug": debug}


def _register() -> None:
    # The main job first, then the areas in the order data flows through them.
    from hsa.cli import data, env, evaluation, experiment, harness, rules, teach, train

    for command in (
        data.build_command,
        data.inspect_command,
        data.augment_command,
        harness.group,
        env.group,
        rules.group,
        teach.teach_command,
        teach.serve_command,
        train.group,
        evaluation.group,
        experiment.group,
    ):
        app.add_command(command)


_register()


#: optional packages, and the extra of hsa that installs each
_EXTRAS = {
    "torch": "train",
    "transformers": "train",
    "trl": "train",
    "datasets": "train",
    "vllm": "vllm",
    "ray": "ray",
}


#: what the running command says to do after it is interrupted (``when_interrupted``)
_NEXT: list[str] = []


def when_interrupted(hint: str) -> None:
    """Say ``hint`` (what to do next, say how to resume) if this command is interrupted."""
    _NEXT[:] = [hint]


def _stopped(word: str) -> str:
    return f"hsa: {word}" + (f" ({_NEXT[0]})" if _NEXT else "")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run ``hsa`` and report ``HsaError`` as one line per problem, exit 1.
    SIGTERM stops a run as Ctrl-C does (``Terminated``), with exit status 143; a stop's
    exception Python could not raise (``quiet_stops``) prints no traceback."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    clear_stop()
    unraisable = sys.unraisablehook
    sys.unraisablehook = quiet_stops(unraisable)
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
    try:
        try:
            _run(argv, debug)
        except SystemExit as done:
            if stop_requested() is None or done.code in (130, 143):
                raise
            _report_stop()  # an error a stop caused, or work that ended as the stop came
        except BaseException:
            if stop_requested() is None or debug:
                raise
            _report_stop()  # a stop raised where a library wrapped it in an error of its own
        if stop_requested() is not None:
            _report_stop()
    finally:  # a process that runs main() (a test, a driver script) gets its own back
        for number, handler in handlers.items():
            signal.signal(number, handler)
        sys.unraisablehook = unraisable
        clear_stop()


def _report_stop() -> NoReturn:
    if stop_requested() is Terminated:
        click.echo(_stopped("terminated"), err=True)
        sys.exit(143)
    click.echo(_stopped("aborted"), err=True)
    sys.exit(130)


def _run(argv: list[str] | None, debug: bool) -> None:
    """``hsa`` with its arguments, each kind of failure reported as ``main`` says."""
    try:
        app.main(args=argv, prog_name="hsa", standalone_mode=False)
    except HsaError as exc:
        if debug:
            raise
        if stop_requested() is not None:
            _report_stop()  # an error the stop caused (a plugin's rule interrupted part way)
        for line in str(exc).splitlines() or [type(exc).__name__]:
            click.echo(f"hsa: error: {line}", err=True)
        sys.exit(1)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        if debug or extra is None:
            raise
        click.echo(
            f"hsa: error: this command needs {exc.name}, which is not installed: "
            f"python -m pip install -e '.[{extra}]' (or 'hsa[{extra}]')",
            err=True,
        )
        sys.exit(1)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, Terminated):
            click.echo(_stopped("terminated"), err=True)
            sys.exit(143)
        click.echo(_stopped("aborted"), err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Terminated:
        click.echo(_stopped("terminated"), err=True)
        sys.exit(143)
    except KeyboardInterrupt:
        click.echo(_stopped("interrupted"), err=True)
        sys.exit(130)
    except RecursionError:  # a value read past where a reader says which file it came from
        if debug:
            raise
        click.echo(
            "hsa: error: an input is nested too deeply to read (a JSON or YAML value thousands "
            "of levels deep)",
            err=True,
        )
        sys.exit(1)
