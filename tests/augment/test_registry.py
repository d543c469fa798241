"""The registry: decorator registration, lookup with suggestions, entry points loaded lazily,
broken plugins recorded rather than raised."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass, field
from importlib import metadata

import pytest

from hsa.augment import Rewrite, all_rules, get_rule, registry, rule
from hsa.augment.registry import broken_plugins
from hsa.errors import RuleError


def test_builtin_rules_are_listed_by_family(plugins):
    names = [r.name for r in all_rules()]
    assert "tools.rename" in names
    families = [r.family for r in all_rules()]
    assert families == sorted(families, key=list(registry.FAMILIES).index)


def test_plugin_families_come_after_the_builtin_ones(plugins):
    plugins(metadata.EntryPoint(name="fake", value="fake_rules:RULES", group="hsa.rules"))
    families = [r.family for r in all_rules()]
    assert families[-1] == "fake" and families.index("fake") > families.index("protocol")


def test_get_suggests_close_names(plugins):
    with pytest.raises(RuleError, match=r"did you mean tools\.rename") as caught:
        get_rule("tools.renam")
    assert "plugin" not in str(caught.value)


def test_decorator_registers_and_refuses_duplicates(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @rule("tests.noop", version="3")
    def noop(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)

    assert get_rule("tests.noop") is noop
    assert noop.version == "3" and noop.summary == "Change nothing."
    with pytest.raises(RuleError, match="already registered"):

        @rule("tests.noop")
        def other(harness, rng, params, context):
            """Another."""
            return Rewrite(harness)


def test_a_rule_defined_again_replaces_the_old_one_and_a_built_in_name_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    def define(body: str, name: str = "shout", module: str = __name__, rule_name="tests.shout"):
        def fn(harness, rng, params, context):
            return Rewrite(harness)

        fn.__doc__, fn.__name__, fn.__qualname__, fn.__module__ = body, name, name, module
        return rule(rule_name)(fn)

    first = define("First.")
    again = define("Again.")  # the same function, defined again (a reload)
    assert get_rule("tests.shout") is again and again is not first
    with pytest.raises(RuleError, match="already registered"):
        define("Other.", name="other")  # another function of the module: a clash
    define("Cell.", module="__main__", rule_name="tests.cell")
    renamed = define("Renamed.", name="shout_v2", module="__main__", rule_name="tests.cell")
    assert get_rule("tests.cell") is renamed  # a notebook cell run again, its function renamed
    with pytest.raises(RuleError, match="already registered"):
        rule("tools.rename")(renamed.fn)  # refused where it is defined, built-ins intact
    assert get_rule("tools.rename").fn.__module__.startswith("hsa.augment.rules")


def test_entry_points_register_rules(plugins):
    plugins(metadata.EntryPoint(name="fake", value="fake_rules:RULES", group="hsa.rules"))
    names = {r.name for r in all_rules()}
    assert "fake.upper" in names and "tools.rename" in names
    assert get_rule("fake.upper").name == "fake.upper" and broken_plugins() == []


def test_hsa_plugins_picks_the_plugins_loaded_and_says_a_missing_one(plugins, monkeypatch):
    # a build that must use named plugins alone, or none (the suite: HSA_PLUGINS="")
    ep = _CountingEntryPoint()
    plugins(ep, metadata.EntryPoint(name="fake", value="fake_rules:RULES", group="hsa.rules"))
    monkeypatch.setenv("HSA_PLUGINS", "fake, gone")
    names = {r.name for r in all_rules()}
    assert "fake.upper" in names and ep.loads == []  # "counted" not chosen: never imported
    [missing] = broken_plugins()
    assert missing.name == "gone" and "HSA_PLUGINS names it, and no installed" in missing.error
    plugins(ep, metadata.EntryPoint(name="fake", value="fake_rules:RULES", group="hsa.rules"))
    monkeypatch.setenv("HSA_PLUGINS", "")
    assert "fake.upper" not in {r.name for r in all_rules()} and ep.loads == []
    assert broken_plugins() == []
    # a rule of a plugin it leaves out: the error says why it is not there
    with pytest.raises(
        RuleError, match=r"HSA_PLUGINS leaves out the installed plugin\(s\) counted, fake"
    ):
        get_rule("fake.upper")


@dataclass
class _CountingEntryPoint:
    """An entry point that records every load, to prove when the registry loads plugins."""

    name: str = "counted"
    value: str = "counted_rules"
    loads: list[str] = field(default_factory=list)

    def load(self):
        self.loads.append(self.name)
        raise ImportError("should not have been loaded")


def test_builtin_lookups_never_load_plugins(plugins):
    ep = _CountingEntryPoint()
    plugins(ep)
    assert get_rule("tools.rename").name == "tools.rename"
    assert ep.loads == []
    with pytest.raises(RuleError):
        get_rule("acme.nope")
    assert ep.loads == ["counted"]


def test_a_broken_plugin_is_recorded_not_raised(plugins):
    plugins(metadata.EntryPoint(name="bad", value="no_such_module_xyz", group="hsa.rules"))
    names = {r.name for r in all_rules()}
    assert "tools.rename" in names
    (broken,) = broken_plugins()
    assert (broken.name, broken.value) == ("bad", "no_such_module_xyz")
    assert broken.error == "ModuleNotFoundError: No module named 'no_such_module_xyz'"
    assert str(broken) == (
        "entry point hsa.rules:bad = no_such_module_xyz: "
        "ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )
    assert get_rule("tools.rename").name == "tools.rename"
    # an unknown name may be a rule of the plugin that did not load: the error says so
    with pytest.raises(RuleError, match="may live in a plugin that failed to load") as caught:
        get_rule("acme.noun_first")
    assert "entry point hsa.rules:bad = no_such_module_xyz: ModuleNotFoundError" in str(
        caught.value
    )
    assert caught.value.where == "rule 'acme.noun_first'"


HALF = '''
    """Registers one rule, then fails on a missing dependency."""
    from hsa.augment import Rewrite, rule


    @rule("half.ok")
    def ok(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)


    import no_such_dependency_xyz  # noqa: E402,F401
'''


def test_rules_of_a_plugin_that_fails_halfway_are_withdrawn(plugins, tmp_path, monkeypatch):
    (tmp_path / "half_rules.py").write_text(textwrap.dedent(HALF))
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins(metadata.EntryPoint(name="half", value="half_rules", group="hsa.rules"))
    assert "half.ok" not in {r.name for r in all_rules()}
    (broken,) = broken_plugins()
    assert broken.rules == ("half.ok",)
    with pytest.raises(RuleError, match="comes from the plugin 'half_rules'") as caught:
        get_rule("half.ok")
    assert "No module named 'no_such_dependency_xyz'" in str(caught.value)


def test_an_entry_point_of_the_wrong_kind_or_a_taken_name_is_broken(plugins, monkeypatch):
    import fake_rules

    clash = registry.Rule("tools.rename", "1", fake_rules._upper, doc="Clash.")
    monkeypatch.setattr(fake_rules, "CLASH", clash, raising=False)
    plugins(
        metadata.EntryPoint(name="clash", value="fake_rules:CLASH", group="hsa.rules"),
        metadata.EntryPoint(name="function", value="fake_rules:_upper", group="hsa.rules"),
        metadata.EntryPoint(name="fine", value="fake_rules:RULES", group="hsa.rules"),
    )
    assert "fake.upper" in {r.name for r in all_rules()}
    assert get_rule("tools.rename").fn is not fake_rules._upper
    broken = {b.name: b.error for b in broken_plugins()}
    assert broken["clash"].startswith("rule 'tools.rename': the name is already registered")
    assert broken["function"] == (
        "it is a function; it must name a module, a Rule or a list of Rules"
    )
    assert set(broken) == {"clash", "function"}


def test_a_name_two_plugins_claim_is_neither_plugins(plugins, monkeypatch):
    # the first to load (by entry point name) is no more right than the other: a recipe
    # naming it would run whichever sorted first, and checks would pass the wrong code
    import fake_rules

    def _lower(harness, rng, params, context):
        return fake_rules._upper(harness, rng, params, context)

    dup = registry.Rule("fake.upper", "1", _lower, doc="Dup.")
    monkeypatch.setattr(fake_rules, "DUP", dup, raising=False)
    plugins(
        metadata.EntryPoint(name="a_dup", value="fake_rules:DUP", group="hsa.rules"),
        metadata.EntryPoint(name="real", value="fake_rules:RULES", group="hsa.rules"),
    )
    assert "fake.upper" not in {r.name for r in all_rules()}
    (broken,) = broken_plugins()
    assert broken.name == "real" and broken.rules == ("fake.upper",)
    assert "entry point hsa.rules:a_dup claims it too" in broken.error
    with pytest.raises(RuleError, match="comes from the plugin 'fake_rules:RULES'") as caught:
        get_rule("fake.upper")
    assert "a_dup claims it too" in str(caught.value)


SHOUT = '''
    """Registers x.shout, a name another plugin claims too."""
    from hsa.augment import Rewrite, rule


    @rule("x.shout")
    def shout(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)
'''

MORE = '''
    """A submodule of the package, with a rule of its own."""
    from hsa.augment import Rewrite, rule


    @rule("x.more")
    def more(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)
'''


def test_a_contested_name_stays_withdrawn_when_another_entry_point_imports_its_package(
    plugins, tmp_path, monkeypatch
):
    # the losing package's import failed, so importing its submodule runs its __init__ again:
    # the name must not register then under the second entry point
    (tmp_path / "shout_first.py").write_text(textwrap.dedent(SHOUT))
    (tmp_path / "shout_pkg").mkdir()
    (tmp_path / "shout_pkg" / "__init__.py").write_text(textwrap.dedent(SHOUT))
    (tmp_path / "shout_pkg" / "extra.py").write_text(textwrap.dedent(MORE))
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("shout_first", "shout_pkg", "shout_pkg.extra"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    plugins(
        metadata.EntryPoint(name="a0", value="shout_first", group="hsa.rules"),
        metadata.EntryPoint(name="p1", value="shout_pkg", group="hsa.rules"),
        metadata.EntryPoint(name="p1x", value="shout_pkg.extra", group="hsa.rules"),
    )
    assert not {"x.shout", "x.more"} & {r.name for r in all_rules()}
    broken = {b.name: b for b in broken_plugins()}
    assert set(broken) == {"p1", "p1x"}
    assert broken["p1x"].error == (
        "rule 'x.shout': the name is withdrawn: entry points hsa.rules:a0 and hsa.rules:p1 claim it"
    )
    with pytest.raises(RuleError, match="a0 claims it too"):
        get_rule("x.shout")


REUSE = '''
    """Reuses the built-in tools.shuffle (imported, not redefined) inside a rule of its own."""
    from hsa.augment import Rewrite, rule
    from hsa.augment.rules.tool_set import shuffle


    @rule("reuse.shuffle_twice")
    def shuffle_twice(harness, rng, params, context):
        """Shuffle the tools twice."""
        once = shuffle.fn(harness, rng, shuffle.resolve_params({}), context).harness
        return shuffle.fn(once, rng, shuffle.resolve_params({}), context)
'''

CLASH = '''
    """Claims the name of a built-in rule."""
    from hsa.augment import Rewrite, rule


    @rule("tools.shuffle")
    def shuffle(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)
'''


def test_a_plugin_that_imports_a_built_in_rule_does_not_claim_it(plugins, tmp_path, monkeypatch):
    # (the importer loads first, by entry point name: it used to take the built-in's name as
    # its own, and the clash then withdrew the built-in as a name two plugins claim)
    (tmp_path / "reuse_rules.py").write_text(textwrap.dedent(REUSE))
    (tmp_path / "clash_rules.py").write_text(textwrap.dedent(CLASH))
    monkeypatch.syspath_prepend(str(tmp_path))
    builtin = get_rule("tools.shuffle")
    plugins(
        metadata.EntryPoint(name="a_reuse", value="reuse_rules", group="hsa.rules"),
        metadata.EntryPoint(name="b_clash", value="clash_rules", group="hsa.rules"),
    )
    names = {r.name for r in all_rules()}
    assert {"tools.shuffle", "reuse.shuffle_twice"} <= names
    assert get_rule("tools.shuffle") is builtin
    (broken,) = broken_plugins()
    assert broken.name == "b_clash" and broken.rules == ()
    assert broken.error.startswith("rule 'tools.shuffle': the name is already registered")
    assert "a_reuse" not in broken.error


def test_rule_applied_twice_is_refused():
    from hsa.augment import Rewrite, rule

    def noop(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)

    once = registry.Rule("tests.once", "1", noop, doc="Change nothing.")
    with pytest.raises(RuleError, match=r"@rule applied to the rule 'tests\.once'"):
        rule("tests.twice")(once)


def test_threads_that_first_ask_together_all_find_the_built_in_rules(plugins, monkeypatch):
    # the first thread marked the built-ins loaded before loading them: the others found an
    # empty registry and were told 'skill_ids.rename' does not exist
    import threading
    import time

    plugins()
    monkeypatch.setattr(registry, "_RULES", {})
    monkeypatch.setattr(registry, "_BUILTINS_LOADED", False)
    monkeypatch.setattr(registry, "_BUILTINS_READY", False)
    slow = registry._register_module

    def register_slowly(module):
        time.sleep(0.01)  # widen the window
        slow(module)

    monkeypatch.setattr(registry, "_register_module", register_slowly)
    found: list[object] = []

    def ask() -> None:
        try:
            found.append(get_rule("skill_ids.rename").name)
        except RuleError as exc:
            found.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == ["skill_ids.rename"] * 8


def test_a_plugin_imported_in_one_thread_while_another_loads_the_rules_does_not_hang(
    plugins, monkeypatch, tmp_path
):
    # the thread loading the rules held one lock through ep.load(), which waited on the other
    # thread's import of the plugin, whose @rule waited on that lock: both hung
    import sys
    import threading
    import time

    (tmp_path / "slowplug_rules.py").write_text(
        textwrap.dedent(
            '''
            from hsa.augment import Rewrite, rule

            @rule("slowplug.noop")
            def noop(harness, rng, params, context):
                """Change nothing."""
                return Rewrite(harness)
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slowplug_rules", raising=False)
    plugins(metadata.EntryPoint(name="slowplug", value="slowplug_rules", group="hsa.rules"))
    monkeypatch.setattr(registry, "_RULES", {})
    monkeypatch.setattr(registry, "_BUILTINS_LOADED", False)
    monkeypatch.setattr(registry, "_BUILTINS_READY", False)
    slow = registry._register_module

    def register_slowly(module):
        time.sleep(0.05)
        slow(module)

    monkeypatch.setattr(registry, "_register_module", register_slowly)
    found: list[object] = []
    loader = threading.Thread(target=lambda: found.append(len(all_rules())), daemon=True)
    importer = threading.Thread(target=lambda: __import__("slowplug_rules"), daemon=True)
    loader.start()
    time.sleep(0.1)  # while the built-ins load
    importer.start()
    loader.join(30)
    importer.join(30)
    assert not loader.is_alive() and not importer.is_alive()
    assert found and get_rule("slowplug.noop").name == "slowplug.noop"
    sys.modules.pop("slowplug_rules", None)


def test_rule_without_its_name_is_refused_at_once():
    with pytest.raises(
        RuleError, match=r"@rule takes the rule's name first: @rule\('family.verb'\)"
    ):

        @rule  # type: ignore[arg-type]
        def shout(harness, rng, params, context):
            """Shout."""


EXITS = {
    "exits_rules": "import sys\nsys.stderr.writelines(['bye', '!'])\nsys.exit(0)\n",
    "argparse_rules": "import argparse\nargparse.ArgumentParser(prog='acme').parse_args(['-x'])\n",
    "interrupted_rules": "raise KeyboardInterrupt\n",
}


def test_a_plugin_that_exits_at_import_is_broken_and_the_command_goes_on(
    plugins, tmp_path, monkeypatch, capsys
):
    for module, text in EXITS.items():
        (tmp_path / f"{module}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins(
        metadata.EntryPoint(name="argp", value="argparse_rules", group="hsa.rules"),
        metadata.EntryPoint(name="exits", value="exits_rules", group="hsa.rules"),
    )
    assert "tools.rename" in {r.name for r in all_rules()}
    argp, exits = broken_plugins()
    assert exits.error == "SystemExit: 0 while importing (it wrote: bye!)"
    # argparse's usage line is the plugin's, told as its error and not printed as if hsa's
    assert argp.error.startswith("SystemExit: 2 while importing (it wrote: usage: acme")
    assert "unrecognized arguments: -x" in argp.error
    assert capsys.readouterr().err == ""
    # a Ctrl-C while a plugin loads still stops the command
    plugins(metadata.EntryPoint(name="int", value="interrupted_rules", group="hsa.rules"))
    with pytest.raises(KeyboardInterrupt):
        all_rules()
    for module in EXITS:
        sys.modules.pop(module, None)


def test_params_that_are_not_a_schema_are_refused_naming_the_rule():
    with pytest.raises(RuleError, match="params must be a JSON Schema") as caught:

        @rule("acme.strparams", params="share")  # type: ignore[arg-type]
        def strparams(harness, rng, params, context):
            """Params given as a string by mistake."""
            return Rewrite(harness)

    assert caught.value.where == "rule 'acme.strparams'"


LOGS_AT_IMPORT = """
import logging

from hsa.augment import Rewrite, rule

log = logging.getLogger("acme.logs")
log.addHandler(logging.StreamHandler())  # made at import: it keeps the sys.stderr of then


@rule("acme.logs")
def logs(harness, rng, params, context):
    \"\"\"Log a warning and change nothing.\"\"\"
    log.warning("acme.logs: looked")
    return Rewrite(harness)
"""


def test_a_handler_a_plugin_makes_at_import_still_writes_to_stderr(
    plugins, tmp_path, monkeypatch, capsys
):
    # stderr is held while the plugin imports (in case it exits); what holds it must pass
    # later writes on, or every log line of the plugin vanishes
    (tmp_path / "logs_rules.py").write_text(LOGS_AT_IMPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins(metadata.EntryPoint(name="logs", value="logs_rules", group="hsa.rules"))
    try:
        found = get_rule("acme.logs")
        assert broken_plugins() == []
        handler = sys.modules["logs_rules"].log.handlers[0]
        assert handler.stream.isatty() == sys.stderr.isatty()  # attributes are the real one's
        handler.stream.flush()
        found.fn(None, None, {}, None)
        assert capsys.readouterr().err == "acme.logs: looked\n"
    finally:
        sys.modules.pop("logs_rules", None)


@pytest.mark.parametrize("stderr", ["none", "closed"])
def test_a_plugin_loads_when_stderr_is_missing_or_closed(plugins, tmp_path, monkeypatch, stderr):
    # hsa run with 2>&- (sys.stderr None) or a stderr closed under it: a plugin that wrote
    # nothing at import loads, and one that wrote something loads too, its words lost
    import io

    (tmp_path / "quiet_rules.py").write_text(textwrap.dedent(SHOUT).replace("x.", "quiet."))
    loud = "import sys\nprint('loading', file=sys.stderr)\n" + textwrap.dedent(SHOUT)
    (tmp_path / "loud_rules.py").write_text(loud.replace("x.", "loud."))
    monkeypatch.syspath_prepend(str(tmp_path))
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", None if stderr == "none" else closed)
    plugins(
        metadata.EntryPoint(name="quiet", value="quiet_rules", group="hsa.rules"),
        metadata.EntryPoint(name="loud", value="loud_rules", group="hsa.rules"),
    )
    try:
        assert {"quiet.shout", "loud.shout"} <= {r.name for r in all_rules()}
        assert broken_plugins() == []
    finally:
        sys.modules.pop("quiet_rules", None)
        sys.modules.pop("loud_rules", None)
