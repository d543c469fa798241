"""Flags that set config settings take their help and default from the config."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from hsa.cli import app
from hsa.cli.flags import JsonObject, Setting
from hsa.config import cli_help, default_of, settings_of

COMMANDS = ["augment", "build", "teach", "eval run"]


def _command(command: str) -> click.Command:
    found: click.Command = app
    for part in command.split():
        found = found.commands[part]  # type: ignore[attr-defined]
    return found


def _settings(command: str) -> list[Setting]:
    return [p for p in _command(command).params if isinstance(p, Setting)]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_setting_flag_names_a_setting_and_leaves_its_default_to_the_config(command):
    flags = _settings(command)
    assert flags
    for flag in flags:
        config = flag.config_class()
        assert flag.setting in {f.name for f in settings_of(config)}, flag.name
        assert flag.default is None, f"--{flag.name} restates a default the config holds"
        default_of(config, flag.setting)  # every flag's setting has a default


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_each_settings_help_and_default(command):
    shown = CliRunner().invoke(app, [*command.split(), "--help"], terminal_width=10_000)
    assert shown.exit_code == 0, shown.output
    text = _flat(shown.output)
    for flag in _settings(command):
        assert _flat(cli_help(flag.config_class(), flag.setting)) in text, flag.name


def test_a_setting_flag_refuses_a_default_of_its_own():
    with pytest.raises(ValueError, match="defaults to None"):

        @click.command()
        @click.option("--seed", type=int, default=3, cls=Setting, config="x:Y")
        def command(seed):  # pragma: no cover - never built
            pass


def test_the_teach_command_has_a_flag_for_every_scalar_setting():
    flagged = {flag.setting for flag in _settings("teach")}
    # not flags: env_options (--env-seed and --env-path set it) and the key (read from the
    # variable --api-key-env names)
    assert flagged == {f.name for f in settings_of(default_config())} - {"env_options", "api_key"}


def default_config():
    from hsa.teachers.config import TeachConfig

    return TeachConfig


def test_the_eval_command_has_a_flag_for_every_scalar_setting():
    from hsa.eval.config import EvalConfig

    flagged = {flag.setting for flag in _settings("eval run")}
    # not flags: env_options (--env-seed and --env-path set it) and the key (--api-key-env)
    assert flagged == {f.name for f in settings_of(EvalConfig)} - {"env_options", "api_key"}


def test_backend_and_policy_choices_are_the_backends():
    from hsa.teachers.config import BACKENDS

    for command, name in (("teach", "backend"), ("eval run", "policy")):
        (option,) = [p for p in _command(command).params if p.name == name]
        assert tuple(option.type.choices) == BACKENDS, command  # type: ignore[attr-defined]


def test_every_path_flag_expands_a_tilde_as_a_config_does():
    from hsa.cli.flags import UserPath

    def params(command: click.Command):
        yield from command.params
        for sub in getattr(command, "commands", {}).values():
            yield from params(sub)

    # click.Path left `--out=~/x` as it was: hsa made a folder named `~`, PyArrow wrote home
    paths = [p for p in params(app) if isinstance(p.type, click.Path)]
    assert paths and all(isinstance(p.type, UserPath) for p in paths)


def test_a_tilde_in_out_is_the_home_folder(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HSA_PLUGINS": ""}
    command = [sys.executable, "-c", "from hsa.cli import main; main()"]
    command += ["teach", "--tasks", "2", "--out=~/teach"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (home / "teach" / "teach.json").is_file() and not (tmp_path / "~").exists()


def test_a_json_flag_refuses_a_key_given_twice_naming_the_flag():
    # '{"a": 1, "a": 2}' was {"a": 2}: the first value dropped without a word
    flag = click.Option(["--chat-template-kwargs"], type=JsonObject())
    assert JsonObject().convert('{"a": 1, "b": {"a": 2}}', flag, None) == {"a": 1, "b": {"a": 2}}
    for text in ('{"a": 1, "a": 2}', '{"b": {"a": 1, "a": 1}}'):
        with pytest.raises(click.BadParameter, match="the key 'a' is given twice") as err:
            JsonObject().convert(text, flag, None)
        assert "'--chat-template-kwargs'" in err.value.format_message()
