"""The canonical livestream harness: tools, skills, hooks and prompt, valid after export."""

from __future__ import annotations

from importlib import resources

from hsa.envs.hook_runtime import EFFECT_EVENTS, hook_problems
from hsa.envs.livestream.harness import SKILL_IDS, harness
from hsa.harness import load_harness, problems, save_harness, system_prompt
from hsa.harness.model import SECTION_KINDS


def test_exported_harness_validates_and_loads_back(tmp_path):
    h = harness()
    save_harness(h, tmp_path / "livestream")
    assert problems(tmp_path / "livestream") == []
    assert load_harness(tmp_path / "livestream") == h
    assert (tmp_path / "livestream" / "skills" / "after-sales" / "SKILL.md").is_file()


def test_tools_have_realistic_schemas():
    h = harness()
    assert len(h.tools) >= 10 and h.skill_tool is not None and h.skill_arg == "skill_id"

    def walk(node, seen):
        if isinstance(node, dict):
            seen.update(k for k in ("$ref", "$defs", "enum", "default", "items") if k in node)
            if node.get("type") == "object" and "properties" in node:
                seen.add("object")
            for value in node.values():
                walk(value, seen)
        elif isinstance(node, list):
            for value in node:
                walk(value, seen)
        return seen

    seen = set()
    for tool in h.tools:
        walk(dict(tool.parameters), seen)
    assert {"$ref", "$defs", "enum", "default", "items", "object"} <= seen
    nested = [
        t.name
        for t in h.tools
        if any(
            isinstance(p, dict) and p.get("type") == "object"
            for p in t.parameters["properties"].values()
        )
    ]
    assert "search_products" in nested and "get_order_status" in nested


def test_skills_ship_as_skill_md_files():
    h = harness()
    assert tuple(s.id for s in h.skills) == SKILL_IDS and len(SKILL_IDS) >= 6
    root = resources.files("hsa.envs.livestream").joinpath("skills")
    for skill in h.skills:
        text = root.joinpath(skill.id, "SKILL.md").read_text("utf-8")
        assert text.startswith("---\nname: ") and skill.content.strip() in text
    assert "No. 1" in h.skill("ad-compliance").content


def test_hooks_cover_every_effect_and_are_runnable():
    h = harness()
    assert {hook.effect for hook in h.hooks} == set(EFFECT_EVENTS)
    assert len(h.hooks) >= 4
    assert hook_problems(h) == []
    by_id = {hook.id: hook for hook in h.hooks}
    assert by_id["compliance-guard"].event == "stop"
    assert by_id["no-sold-out-pin"].effect == "deny"
    assert by_id["redact-internal"].params["remove"] == [
        "internal_cost",
        "supplier_code",
        "margin_pct",
    ]
    assert by_id["promotion-reminder"].matcher.every_n_turns == 2


def test_prompt_is_sectioned():
    h = harness()
    kinds = [s.kind for s in h.prompt.sections]
    assert kinds == ["persona", "policy", "skills", "tools", "output_format"]
    assert set(kinds) <= set(SECTION_KINDS)
    text = system_prompt(h)
    for title in ("## Persona", "## Policy", "## Skills", "## Output format"):
        assert title in text
    assert "load_skill" in text and "after-sales" in text
