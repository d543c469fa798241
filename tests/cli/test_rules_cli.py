"""End to end: `hsa rules` in a subprocess, as a user runs it; the example rule package
installed and checked; docs/rules.md previews re-run and compared."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "rule-package" / "demo-harness"
FAMILIES = ["skill_ids", "skill_content", "tools", "prompt", "hooks", "protocol"]


def builtin_rules() -> list[str]:
    """The names of hsa's own rules, whatever plugins are installed beside it."""
    from hsa.augment.registry import BUILTIN_MODULE, all_rules

    return [r.name for r in all_rules() if r.fn.__module__.startswith(BUILTIN_MODULE + ".")]


def hsa(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run this interpreter's hsa (not whichever is first on PATH) with the rule plugins of
    the folders ``env`` puts on PYTHONPATH, and none other installed on the machine."""
    cmd = [sys.executable, "-c", "from hsa.cli import main; main()", *args]
    merged = {**os.environ, **(env or {}), "HSA_PLUGINS": ",".join(_plugins(env or {}))}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=merged, cwd=ROOT)


def _plugins(env: dict) -> list[str]:
    """The ``hsa.rules`` entry point names of the distributions on ``env``'s PYTHONPATH."""
    names = []
    for folder in filter(None, env.get("PYTHONPATH", "").split(os.pathsep)):
        for listed in sorted(Path(folder).glob("*.dist-info/entry_points.txt")):
            parser = configparser.ConfigParser(delimiters=("=",))
            parser.read(listed)
            if parser.has_section("hsa.rules"):
                names += list(parser["hsa.rules"])
    return names


def test_list_shows_at_least_25_rules_over_every_family():
    out = hsa("rules", "list")
    assert out.returncode == 0, out.stderr
    rows = [line.split()[0] for line in out.stdout.splitlines()[:-1]]
    assert len(rows) >= 25 and len(set(rows)) == len(rows)
    assert {r.split(".")[0] for r in rows} >= set(FAMILIES)
    assert re.search(r"^\d+ rules in \d+ families$", out.stdout.splitlines()[-1])
    only = hsa("rules", "list", "--family", "hooks")
    assert only.returncode == 0 and all(
        line.startswith("hooks.") for line in only.stdout.splitlines()[:-1]
    )


def test_show_prints_doc_and_parameter_schema():
    out = hsa("rules", "show", "tools.drop_unused")
    assert out.returncode == 0, out.stderr
    assert "needs used_tools" in out.stdout and '"fraction"' in out.stdout
    assert "parameters (JSON Schema)" in out.stdout


def test_unknown_rule_is_one_error_line():
    out = hsa("rules", "show", "tools.renam")
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("hsa: error: rule 'tools.renam': no rule named 'tools.renam'; ")
    assert "did you mean tools.rename," in line


def test_preview_diffs_harness_and_trajectory():
    out = hsa(
        "rules",
        "preview",
        "tools.rename",
        "--harness",
        str(DEMO),
        "--seed",
        "1",
        "--params",
        '{"style": "camel"}',
    )
    assert out.returncode == 0, out.stderr
    assert "-- name: get_order\n-  description: Get an order by id. Call get_order" in out.stdout
    assert "+- name: getOrder\n+  description: Get an order by id. Call getOrder" in out.stdout
    assert "+[tool_call call_1] getOrder(" in out.stdout
    bad = hsa("rules", "preview", "tools.rename", "--harness", str(DEMO), "--params", "[1]")
    assert bad.returncode == 1 and "must be a JSON object" in bad.stderr


def test_preview_of_a_rule_with_nothing_to_change_says_so():
    out = hsa("rules", "preview", "tools.flatten_args", "--harness", str(DEMO))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        '# tools.flatten_args (seed 0, params {"join": "any"})',
        "",
        "tools.flatten_args changes nothing on this harness with seed 0 (a variant drawing it "
        "here would leave it out of its rules)",
    ]


def test_preview_on_an_environment_a_corpus_and_a_chat_file(external):
    # The first task of each, under its own harness: no harness folder exported first.
    env = hsa(
        "rules", "preview", "tools.rename", "--env", "livestream", "--params", '{"style": "camel"}'
    )
    assert env.returncode == 0, env.stderr
    assert "-- name: search_products\n+- name: searchProducts" in env.stdout
    assert "## rendered trajectory" in env.stdout and "searchProducts(" in env.stdout
    corpus = hsa(
        "rules",
        "preview",
        "tools.rename_params",
        "--source",
        str(external / "tau2" / "retail"),
        "--params",
        '{"style": "camel"}',
    )
    assert corpus.returncode == 0, corpus.stderr
    assert "-      order_id:\n" in corpus.stdout and "+      orderId:\n" in corpus.stdout
    chat = ROOT / "examples" / "chat" / "support.jsonl"
    first = json.loads(chat.read_text("utf-8").splitlines()[0])
    called = first["messages"][2]["tool_calls"][0]["function"]["name"]
    rows = hsa("rules", "preview", "tools.rename", "--trajectories", str(chat))
    assert rows.returncode == 0, rows.stderr
    assert f"-- name: {called}\n" in rows.stdout and f"] {called}(" in rows.stdout


def test_preview_needs_one_place_to_read_a_harness_from(external):
    for args in [(), ("--env", "livestream", "--harness", str(DEMO))]:
        out = hsa("rules", "preview", "tools.rename", *args)
        assert out.returncode == 1
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith("hsa: error: give one of --harness (with or without --trajectories)")
    corpus = hsa("rules", "preview", "tools.rename", "--env", "bfcl")
    assert corpus.returncode == 1 and "give its file or folder with --source PATH" in corpus.stderr
    unknown = hsa("rules", "preview", "tools.rename", "--env", "nope")
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1
    assert "nope" in unknown.stderr
    # parameters are refused before a corpus is read
    bad = hsa(
        "rules",
        "preview",
        "tools.rename",
        "--source",
        str(external / "nope"),
        "--params",
        '{"style": 3}',
    )
    assert bad.returncode == 1 and "style" in bad.stderr and "nope" not in bad.stderr


def test_check_every_rule_on_a_harness_and_a_corpus(external):
    out = hsa("rules", "check", "--harness", str(DEMO), "--seeds", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 trajectories x 2 seeds" in out.stdout
    # Plugins installed beside hsa (the guide's example package, say) are checked too.
    checked = int(re.search(r"ok: (\d+) rules passed every check", out.stdout)[1])
    builtin = builtin_rules()
    assert len(builtin) == 32 and checked >= 32
    assert all(f" {name} " in out.stdout for name in builtin)
    bfcl = external / "bfcl" / "BFCL_v4_parallel_multiple.json"
    out = hsa(
        "rules",
        "check",
        "--rule",
        "tools.rename_params",
        "--rule",
        "protocol.switch",
        "--source",
        str(bfcl),
        "--limit",
        "3",
        "--seeds",
        "1",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"protocol\.switch\s+3/3\s+3/3\s+3/3\s+3/3\s+3/3", out.stdout)


def test_check_says_a_rule_that_changed_nothing_tested_nothing():
    # flatten_args finds no nested object to flatten in the demo harness: every check passes
    # on a rewrite that is the harness as it was
    out = hsa("rules", "check", "--rule", "tools.flatten_args", "--harness", str(DEMO))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "note: tools.flatten_args changed nothing on any of these trajectories" in out.stdout
    assert "ok: 1 rule passed every check (1 changed nothing)" in out.stdout
    out = hsa("rules", "check", "--rule", "tools.rename", "--harness", str(DEMO), "--seeds", "1")
    assert out.returncode == 0 and "note:" not in out.stdout, out.stdout + out.stderr
    assert "ok: 1 rule passed every check\n" in out.stdout


def test_check_says_a_check_skipped_everywhere_tested_nothing(tmp_path):
    # no example value fits the pattern: the synthetic call fails the canonical schema, so the
    # schema check is skipped on every seed, and "ok" alone said it passed
    harness = tmp_path / "rooms"
    harness.mkdir()
    (harness / "harness.yaml").write_text("id: rooms\n")
    room = {"type": "string", "pattern": "^R[0-9]+$"}
    tool = {
        "name": "book",
        "description": "Book a room.",
        "parameters": {"type": "object", "properties": {"room": room}, "required": ["room"]},
    }
    (harness / "tools.json").write_text(json.dumps([{"type": "function", "function": tool}]))
    out = hsa("rules", "check", "--rule", "tools.rename", "--harness", str(harness))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "note: the schema check was skipped on every trajectory and seed for 1 rule" in (
        out.stdout
    )
    assert "ok: 1 rule passed every check (schema check untested for 1)" in out.stdout


def test_check_on_livestream_by_default():
    out = hsa("rules", "check", "--rule", "skill_ids.rename", "--limit", "2", "--seeds", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 trajectories x 1 seeds" in out.stdout


def test_check_refuses_invalid_params_up_front():
    # one line, as `hsa rules preview` gives, before any trajectory is checked
    out = hsa(
        "rules", "check", "--rule", "tools.rename", "--params", '{"style": 3}', "--limit", "2"
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "hsa: error: rule 'tools.rename': params.style: 3 is not valid under any of the given "
        "schemas"
    ]
    preview = hsa(
        "rules", "preview", "tools.rename", "--harness", str(DEMO), "--params", '{"style": 3}'
    )
    assert preview.returncode == 1 and preview.stderr == out.stderr


def test_params_giving_a_key_twice_are_refused_naming_the_option():
    # '{"fraction": 1, "fraction": 0}' previewed and checked fraction 0, the 1 dropped unsaid
    twice = '{"style": "camel", "fraction": 1, "fraction": 0}'
    check = hsa("rules", "check", "--rule", "tools.rename", "--params", twice, "--limit", "1")
    preview = hsa("rules", "preview", "tools.rename", "--harness", str(DEMO), "--params", twice)
    for out in (check, preview):
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.splitlines() == [
            "hsa: error: --params: the key 'fraction' is given twice in one object (JSON readers "
            "keep only the last, dropping the other without a word): keep one"
        ]


def test_params_past_what_python_reads_are_one_line():
    # an integer of 5,000 digits was a ValueError's traceback
    from hsa.cli.rules import _params
    from hsa.errors import HsaError

    with pytest.raises(HsaError, match=r"^--params: an integer of more than 4,300 digits"):
        _params('{"fraction": 1' + "0" * 5000 + "}")


BROKEN = '''
    """Deliberately broken rules, found through an hsa.rules entry point."""
    import dataclasses

    from hsa.augment import Rewrite, rule


    @rule("broken.rename_tool_only")
    def rename_tool_only(harness, rng, params, context):
        """Rename the first tool but not its calls."""
        first, *rest = harness.tools
        return Rewrite(harness.replace(tools=[dataclasses.replace(first, name="renamed"), *rest]))


    @rule("broken.crash")
    def crash(harness, rng, params, context):
        """Crash."""
        return {}["missing"]
'''


def _fake_distribution(root: Path) -> None:
    (root / "broken_rules.py").write_text(textwrap.dedent(BROKEN))
    info = root / "broken_rules-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-rules\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hsa.rules]\nbroken = broken_rules\n")


def test_a_rule_that_changed_nothing_is_said_beside_another_rules_failure(tmp_path):
    # the note came after the failure's exit, so a rule that tested nothing showed passed
    _fake_distribution(tmp_path)
    out = hsa(
        "rules", "check", "--rule", "tools.flatten_args", "--rule", "broken.rename_tool_only",
        "--harness", str(DEMO), "--seeds", "1", env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 1
    assert "note: tools.flatten_args changed nothing on any of these trajectories" in out.stdout
    assert "note: broken.rename_tool_only" not in out.stdout  # (its failure is said)
    assert "failed a task-preservation check: broken.rename_tool_only" in out.stderr


def test_check_fails_with_exit_1_on_a_broken_rule(tmp_path):
    _fake_distribution(tmp_path)
    env = {"PYTHONPATH": str(tmp_path)}
    out = hsa(
        "rules",
        "check",
        "--rule",
        "broken.rename_tool_only",
        "--harness",
        str(DEMO),
        "--seeds",
        "1",
        env=env,
    )
    assert out.returncode == 1
    assert "has no tool 'get_order' and the mapping gives it no other name" in out.stderr
    assert "hsa: error: 1 rule(s) failed a task-preservation check: broken.rename_tool_only" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr
    crashed = hsa(
        "rules", "check", "--rule", "broken.crash", "--harness", str(DEMO), "--seeds", "1", env=env
    )
    assert crashed.returncode == 1
    assert "rule 'broken.crash': raised KeyError: 'missing' (in broken_rules:crash)" in (
        crashed.stderr
    )
    assert "Traceback" not in crashed.stderr
    # --debug shows where in the rule it raised, as preview, augment and build do (the CLI's
    # own traceback alone before, ending at "rule(s) failed")
    debugged = hsa(
        "--debug",
        "rules",
        "check",
        "--rule",
        "broken.crash",
        "--harness",
        str(DEMO),
        "--seeds",
        "2",
        env=env,
    )
    assert debugged.returncode == 1
    assert debugged.stderr.count(f'{tmp_path / "broken_rules.py"}", line') == 1, debugged.stderr


def test_list_of_an_unknown_family_names_the_plugins_families_too(tmp_path):
    _fake_distribution(tmp_path)
    out = hsa("rules", "list", "--family", "nope", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 1
    # (the built-in families alone before)
    assert out.stderr.strip() == (
        f"hsa: error: no rules in family 'nope'; families: {', '.join([*FAMILIES, 'broken'])}"
    )


def test_a_rule_that_raises_is_one_line_in_preview_and_augment(tmp_path):
    _fake_distribution(tmp_path)
    env = {"PYTHONPATH": str(tmp_path)}
    expected = (
        "hsa: error: rule 'broken.crash': raised KeyError: 'missing' (in broken_rules:crash); "
        "fix the rule or leave it out"
    )
    previewed = hsa("rules", "preview", "broken.crash", "--harness", str(DEMO), env=env)
    assert previewed.returncode == 1
    assert previewed.stderr.strip().splitlines() == [expected]
    recipe = tmp_path / "crash.yaml"
    recipe.write_text("variants_per_harness: 1\nrules: [{rule: broken.crash}]\n")
    augmented = hsa(
        "augment",
        "--input",
        str(ROOT / "examples" / "chat" / "support.jsonl"),
        "--recipe",
        str(recipe),
        "--out",
        str(tmp_path / "out"),
        env=env,
    )
    assert augmented.returncode == 1
    chats = ROOT / "examples" / "chat" / "support.jsonl"
    assert augmented.stderr.strip().splitlines()[-1] == expected.replace(
        "error: rule 'broken.crash': ",
        f"error: {chats}: line 1 (id 'support-0001'): planning the variants of its harness: "
        "rule 'broken.crash': ",
    )
    assert "Traceback" not in augmented.stderr
    # --debug shows where in the rule it raised, whichever process planned it
    for workers in ("1", "2"):
        debugged = hsa(
            "--debug",
            "augment",
            "--input",
            str(chats),
            "--recipe",
            str(recipe),
            "--out",
            str(tmp_path / f"debug-{workers}"),
            "--workers",
            workers,
            env=env,
        )
        assert debugged.returncode == 1
        assert f'{tmp_path / "broken_rules.py"}", line' in debugged.stderr, debugged.stderr


UNIMPORTABLE = '''
    """Rules that need a dependency this environment lacks."""
    import no_such_dependency_xyz  # noqa: F401
'''
MISSING = (
    "entry point hsa.rules:acme_missing = acme_missing_rules: "
    "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"
)


def _unimportable_distribution(root: Path) -> None:
    (root / "acme_missing_rules.py").write_text(textwrap.dedent(UNIMPORTABLE))
    info = root / "acme_missing_rules-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-missing\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hsa.rules]\nacme_missing = acme_missing_rules\n")


BADLY_NAMED = '''
    from hsa.augment import Rewrite, rule


    @rule("acme.fine")
    def fine(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)


    @rule("Acme-Shout")
    def shout(harness, rng, params, context):
        """Shout."""
        return Rewrite(harness)
'''


def test_a_broken_plugin_names_its_rule_at_fault_and_is_said_beside_failing_rules(tmp_path):
    _fake_distribution(tmp_path)
    (tmp_path / "acme_named.py").write_text(textwrap.dedent(BADLY_NAMED))
    info = tmp_path / "acme_named-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-named\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hsa.rules]\nacme = acme_named\n")
    env = {"PYTHONPATH": str(tmp_path)}
    listed = hsa("rules", "list", env=env)
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("acme ")]
    assert "rule 'Acme-Shout': a rule name is 'family.verb'" in row
    every = hsa("rules", "check", "--harness", str(DEMO), "--seeds", "1", env=env)
    assert every.returncode == 1
    errors = [x for x in every.stderr.splitlines() if x.startswith("hsa: error: ")]
    assert len(errors) == 2, every.stderr
    assert "rule(s) failed a task-preservation check: broken.crash, " in errors[0]
    assert "1 plugin failed to load; their rules were not checked: " in errors[1]
    assert "rule 'Acme-Shout'" in errors[1]


def _build_config(path: Path, recipe) -> Path:
    import yaml

    data = {
        "name": "mini",
        "source": {"env": "livestream", "tasks": 4},
        "augment": {"variants_per_trajectory": 1, "recipe": recipe},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plugin_that_fails_to_load_breaks_only_what_uses_it(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _unimportable_distribution(site)
    env = {"PYTHONPATH": str(site)}

    listed = hsa("rules", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("acme_missing ")]
    assert row.split()[:3] == ["acme_missing", "broken", "plugin"] and row.endswith(MISSING)
    assert re.search(
        r"^\d+ rules in \d+ families; \d+ plugins? failed to load$", listed.stdout.splitlines()[-1]
    )

    previewed = hsa("rules", "preview", "tools.rename", "--harness", str(DEMO), env=env)
    assert previewed.returncode == 0, previewed.stderr
    unknown = hsa("rules", "preview", "acme.noun_first", "--harness", str(DEMO), env=env)
    assert unknown.returncode == 1
    (line,) = unknown.stderr.strip().splitlines()
    assert line.startswith("hsa: error: rule 'acme.noun_first': no rule named 'acme.noun_first'")
    assert f"may live in a plugin that failed to load: {MISSING}" in line

    checked = hsa("rules", "check", "--rule", "tools.rename", "--harness", str(DEMO), env=env)
    assert checked.returncode == 0, checked.stderr
    # checking every rule cannot check the broken plugin's: that is a failure, said in one line
    every = hsa("rules", "check", "--harness", str(DEMO), "--seeds", "1", env=env)
    assert every.returncode == 1 and "ok:" not in every.stdout
    (line,) = [x for x in every.stderr.splitlines() if x.startswith("hsa: error: ")]
    assert "failed to load; their rules were not checked: " in line and MISSING in line

    recipe = {"variants_per_harness": 1, "rules": [{"rule": "tools.rename"}]}
    config = _build_config(tmp_path / "mini.yaml", recipe)
    built = hsa("build", str(config), "--out", str(tmp_path / "out"), env=env)
    assert built.returncode == 0, built.stderr

    # a recipe that names a rule the broken plugin may hold: the error names the path in the
    # file it was written in, the build config's own or the recipe file's
    recipe["rules"].append({"rule": "acme.noun_first"})
    config = _build_config(tmp_path / "mini.yaml", recipe)
    failed = hsa("build", str(config), "--out", str(tmp_path / "out2"), env=env)
    assert failed.returncode == 1
    (line,) = failed.stderr.strip().splitlines()
    assert line.startswith(
        f"hsa: error: {config}: $.augment.recipe.rules[1]: rule 'acme.noun_first': no rule named"
    )
    assert MISSING in line
    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text(yaml_dump(recipe))
    config = _build_config(tmp_path / "mini.yaml", str(recipe_file))
    failed = hsa("build", str(config), "--out", str(tmp_path / "out3"), env=env)
    assert failed.returncode == 1
    (line,) = failed.stderr.strip().splitlines()
    assert line.startswith(f"hsa: error: {recipe_file}: $.rules[1]: rule 'acme.noun_first': ")


def yaml_dump(data) -> str:
    import yaml

    return yaml.safe_dump(data)


def test_a_source_of_unknown_format_is_one_line_without_harness_imports_advice(tmp_path, capsys):
    # it said "pass --format", a flag hsa rules does not have
    from tests.cli.test_harness_cli import cli, one_error

    (tmp_path / "empty").mkdir()
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n{"b": 2}\n')
    for args in (
        ["preview", "tools.rename", "--source"],
        ["check", "--rule", "tools.rename", "--source"],
        ["check", "--rule", "tools.rename", "--trajectories"],
    ):
        for src in (tmp_path / "empty", rows):
            line = one_error(cli(capsys, "rules", *args, str(src)))
            assert line.startswith(f"hsa: error: {src}: cannot tell the format of this ")
            assert "--format" not in line


def test_parquet_trajectories_need_a_harness(tmp_path):
    out = hsa("rules", "check", "--trajectories", str(tmp_path / "t.parquet"))
    assert out.returncode == 1 and "(Parquet) needs --harness" in out.stderr


def test_a_folder_of_shards_holds_trajectories_and_a_missing_file_is_named(tmp_path):
    # hsa teach's output (data/<split>/part-*.parquet), as hsa augment --input takes it
    teach = hsa("teach", "--env", "livestream", "--tasks", "3", "--out", str(tmp_path / "t"))
    assert teach.returncode == 0, teach.stderr
    harness = tmp_path / "h"
    shown = hsa("env", "export", "livestream", str(harness), "--n-tasks", "3")
    assert shown.returncode == 0, shown.stderr
    args = ["rules", "check", "--rule", "tools.rename", "--harness", str(harness), "--seeds", "1"]
    out = hsa(*args, "--trajectories", str(tmp_path / "t"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"^\s*3 trajectories x 1 seeds", out.stdout, re.MULTILINE)
    missing = hsa(*args, "--trajectories", str(tmp_path / "nope.parquet"))
    assert missing.returncode == 1
    assert f"{tmp_path / 'nope.parquet'}: no such file or folder" in missing.stderr
    # a dataset of rows (and its variants file) is no trajectories: one line saying so
    made = hsa("augment", "--input", str(tmp_path / "t"), "--out", str(tmp_path / "d"))
    assert made.returncode == 0, made.stderr
    rows = hsa(*args, "--trajectories", str(tmp_path / "d"))
    assert rows.returncode == 1 and len(rows.stderr.strip().splitlines()) == 1
    assert "holds no canonical trajectories (no events column" in rows.stderr


def test_chat_jsonl_trajectories_carry_their_own_harnesses():
    # As `hsa augment` does, each row's tools make its harness: no --harness needed.
    chat = ROOT / "examples" / "chat" / "support.jsonl"
    rows = len(chat.read_text("utf-8").splitlines())
    out = hsa(
        "rules", "check", "--rule", "tools.rename", "--trajectories", str(chat), "--seeds", "1"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(rf"^\s*{rows} trajectories x 1 seeds", out.stdout, re.MULTILINE)
    assert re.search(rf"^ tools\.rename\s+{rows}/{rows}\s", out.stdout, re.MULTILINE)


def _pip_install(package: Path, target: Path) -> None:
    # Without `wheel` (or setuptools >= 70.1) in this environment, pip must build in isolation.
    import setuptools

    local = importlib.util.find_spec("wheel") is not None or tuple(
        int(x) for x in setuptools.__version__.split(".")[:2]
    ) >= (70, 1)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        str(target),
        str(package),
    ]
    if local:
        cmd.insert(4, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_example_rule_package_installs_registers_and_passes_its_checks(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(
        ROOT / "examples" / "rule-package",
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "demo-harness"),
    )
    target = tmp_path / "site"
    _pip_install(source, target)
    env = {"PYTHONPATH": str(target)}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlib.metadata import entry_points; "
            "print([e.value for e in entry_points(group='hsa.rules')])",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert "'hsa_acme_rules'" in probe.stdout, probe.stderr
    listed = hsa("rules", "list", "--family", "acme", env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("acme.noun_first"), listed.stderr
    checked = hsa(
        "rules",
        "check",
        "--rule",
        "acme.noun_first",
        "--harness",
        str(DEMO),
        "--seeds",
        "2",
        env=env,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    live = hsa(
        "rules",
        "check",
        "--rule",
        "acme.noun_first",
        "--env",
        "livestream",
        "--limit",
        "3",
        "--seeds",
        "1",
        env=env,
    )
    assert live.returncode == 0, live.stdout + live.stderr
    assert "ok: 1 rule passed every check" in live.stdout


def _stripped(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


def test_docs_show_real_preview_and_check_output():
    text = (ROOT / "docs" / "rules.md").read_text("utf-8")
    blocks = re.findall(r"```text\n\$ hsa rules (preview|check) (.+?)\n(.*?)```", text, re.DOTALL)
    previewed = {args.split()[0].split(".")[0] for cmd, args, _ in blocks if cmd == "preview"}
    assert previewed == set(FAMILIES)
    assert any(cmd == "check" for cmd, _, _ in blocks)
    for cmd, args, expected in blocks:
        out = hsa("rules", cmd, *args.split())
        assert out.returncode == 0, out.stderr
        assert _stripped(out.stdout) == expected, f"docs/rules.md is stale for `hsa rules {cmd}`"


def test_docs_rule_is_the_example_package_rule_and_under_30_lines():
    text = (ROOT / "docs" / "rules.md").read_text("utf-8")
    source = ROOT / "examples" / "rule-package" / "src" / "hsa_acme_rules" / "__init__.py"
    code = source.read_text("utf-8")
    assert f"```python\n{code}```" in text
    rule_lines = code[code.index("@rule(") :].strip().splitlines()
    assert len(rule_lines) < 30
