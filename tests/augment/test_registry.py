"""The registry: decorator registration, lookup with suggestions, entry points."""

from __future__ import annotations

from importlib import metadata

import pytest

from hsa.augment import Rewrite, all_rules, get, registry, rule
from hsa.errors import RuleError


def test_builtin_rules_are_listed_by_family():
    names = [r.name for r in all_rules()]
    assert "tools.rename" in names
    families = [r.family for r in all_rules()]
    assert families == sorted(families, key=list(registry.FAMILIES).index)


def test_get_suggests_close_names():
    with pytest.raises(RuleError, match=r"did you mean tools\.rename"):
        get("tools.renam")


def test_decorator_registers_and_refuses_duplicates(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @rule("tests.noop", version="3")
    def noop(harness, rng, params, context):
        """Change nothing."""
        return Rewrite(harness)

    assert get("tests.noop") is noop
    assert noop.version == "3" and noop.summary == "Change nothing."
    with pytest.raises(RuleError, match="already registered"):

        @rule("tests.noop")
        def other(harness, rng, params, context):
            """Another."""
            return Rewrite(harness)


def test_entry_points_register_rules(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", {})
    monkeypatch.setattr(registry, "_LOADED", False)
    ep = metadata.EntryPoint(name="fake", value="fake_rules:RULES", group="hsa.rules")
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: [ep])
    names = {r.name for r in all_rules()}
    assert "fake.upper" in names and "tools.rename" in names


def test_broken_entry_point_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", {})
    monkeypatch.setattr(registry, "_LOADED", False)
    ep = metadata.EntryPoint(name="bad", value="no_such_module_xyz", group="hsa.rules")
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: [ep])
    with pytest.raises(RuleError, match="cannot load entry point 'no_such_module_xyz'"):
        all_rules()
