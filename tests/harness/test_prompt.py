"""The system prompt: heading styles, placement, auto sections, custom templates."""

from __future__ import annotations

import pytest

from hsa.errors import HarnessValidationError, TemplateError
from hsa.harness import (
    Harness,
    Prompt,
    Protocol,
    Section,
    Skill,
    Tool,
    UserMessage,
    parse,
    render,
    system_prompt,
)
from hsa.harness.protocols import CALL_FORMATS, DOC_FORMATS

TOOL = Tool(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SKILL = Skill("travel", "travel", "Plan trips.", "Pack light.")
LOADER = Tool(
    "load_skill",
    "Load a skill.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
SECTIONS = (
    Section("persona", "Persona", "You help {{ harness_id }}.", "persona"),
    Section("empty", "Empty", "", "custom"),
    Section("policy", "Policy", "Be brief.", "policy"),
)


API = Protocol("api")


def _harness(prompt: Prompt, protocol: Protocol = API, **changes) -> Harness:
    return Harness("demo", protocol=protocol, prompt=prompt, tools=(TOOL,), **changes)


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("markdown", "## Persona\n\nYou help demo.\n\n## Policy\n\nBe brief."),
        ("xml", "<persona>\nYou help demo.\n</persona>\n\n<policy>\nBe brief.\n</policy>"),
        ("plain", "Persona:\nYou help demo.\n\nPolicy:\nBe brief."),
    ],
)
def test_heading_styles(style: str, expected: str) -> None:
    assert system_prompt(_harness(Prompt(SECTIONS, heading_style=style))) == expected


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("markdown", "You help demo.\n\n## Policy\n\nBe brief."),
        ("plain", "You help demo.\n\nPolicy:\nBe brief."),
        ("xml", "<persona>\nYou help demo.\n</persona>\n\n<policy>\nBe brief.\n</policy>"),
    ],
)
def test_untitled_sections_have_no_heading(style: str, expected: str) -> None:
    sections = (Section("persona", "", SECTIONS[0].body, "persona"), SECTIONS[2])
    assert system_prompt(_harness(Prompt(sections, heading_style=style))) == expected


def test_bfcl_plaintext_and_markdown_prompts_map_onto_heading_styles() -> None:
    """BFCL v4 plaintext = plain style, untitled sections; markdown = titled markdown sections."""
    bodies = ("You are an expert in composing functions.", "Solve the task.")
    protocol = Protocol("text", "python", call_tag=False, doc_format="json")
    titles = ("", "Task", "Tool Call Format", "Available Tools")
    kinds = ("persona", "policy", "output_format", "tools")
    plain = tuple(
        Section(f"s{i}", "", bodies[i] if i < 2 else "", kind) for i, kind in enumerate(kinds)
    )
    titled = tuple(
        Section(f"s{i}", titles[i], bodies[i] if i < 2 else "", kind)
        for i, kind in enumerate(kinds)
    )
    instructions = CALL_FORMATS["python"].instructions(False)
    docs = DOC_FORMATS["json"]([TOOL])
    assert system_prompt(_harness(Prompt(plain, heading_style="plain"), protocol)) == (
        f"{bodies[0]}\n\n{bodies[1]}\n\n{instructions}\n\n{docs}"
    )
    assert system_prompt(_harness(Prompt(titled, heading_style="markdown"), protocol)) == (
        f"{bodies[0]}\n\n## Task\n\n{bodies[1]}\n\n## Tool Call Format\n\n{instructions}"
        f"\n\n## Available Tools\n\n{docs}"
    )


AUTO = (
    Section("tools", "Tools", "", "tools"),
    Section("skills", "Skills", "", "skills"),
    Section("format", "Format", "", "output_format"),
)


def test_auto_sections_are_empty_under_api_except_skills() -> None:
    harness = _harness(Prompt(AUTO), skills=(SKILL,))
    assert system_prompt(harness) == "## Skills\n\ntravel: Plan trips.\n\nPack light."


def test_auto_sections_under_a_text_protocol() -> None:
    protocol = Protocol("text", "xml_concise", call_tag=True, doc_format="python")
    harness = _harness(Prompt(AUTO), protocol, skills=(SKILL,), skill_tool=LOADER)
    docs = DOC_FORMATS["python"]([TOOL, LOADER])  # the skill tool is documented last
    catalog = "- travel: Plan trips.\nLoad a skill with the `load_skill` tool before following it."
    instructions = CALL_FORMATS["xml_concise"].instructions(True)
    assert system_prompt(harness) == (
        f"## Tools\n\n{docs}\n\n## Skills\n\n{catalog}\n\n## Format\n\n{instructions}"
    )


def test_sections_see_the_harness() -> None:
    body = (
        "{% for t in tools %}{{ t.name }}{% endfor %}|{{ protocol.call_format }}"
        "|{{ skills | length }}"
    )
    protocol = Protocol("text", "json")
    harness = _harness(Prompt((Section("s", "S", body),)), protocol, skills=(SKILL,))
    assert system_prompt(harness) == "## S\n\nget_weather|json|1"


def test_custom_prompt_template() -> None:
    template = (
        "{{ sections | length }} sections for {{ harness_id }}:\n{{ body }}\n--\n{{ sections[1] }}"
    )
    harness = _harness(Prompt(SECTIONS, template=template))
    assert system_prompt(harness) == (
        "2 sections for demo:\n## Persona\n\nYou help demo.\n\n## Policy\n\nBe brief.\n--\n"
        "## Policy\n\nBe brief."
    )


def test_template_errors_name_the_section() -> None:
    harness = _harness(Prompt((Section("s", "S", "{{ nope }}"),)))
    with pytest.raises(TemplateError, match="undefined value") as err:
        system_prompt(harness)
    assert err.value.where == "$.prompt.sections[0].body"
    unsafe = _harness(Prompt(SECTIONS, template="{{ tools.__class__ }}"))
    with pytest.raises(TemplateError, match="unsafe template") as err:
        system_prompt(unsafe)
    assert err.value.where == "$.prompt.template"


def test_invalid_harness_is_refused() -> None:
    bad = _harness(Prompt((Section("s", "S", "{% if %}"),)))
    with pytest.raises(HarnessValidationError, match="syntax error"):
        system_prompt(bad)


def test_placement_system_and_user() -> None:
    events = [UserMessage("hi"), UserMessage("again")]
    system = _harness(Prompt(SECTIONS, placement="system"))
    messages = render(events, system).messages
    assert messages[0] == {"role": "system", "content": system_prompt(system)}
    assert messages[1] == {"role": "user", "content": "hi"}

    user = _harness(Prompt(SECTIONS, placement="user"))
    messages = render(events, user).messages
    assert messages[0] == {"role": "user", "content": f"{system_prompt(user)}\n\nhi"}
    assert messages[1] == {"role": "user", "content": "again"}
    assert parse(render(events, user), user) == events


def test_an_empty_prompt_adds_no_message() -> None:
    harness = _harness(Prompt((Section("empty", "Empty", ""),)))
    assert system_prompt(harness) == ""
    assert render([UserMessage("hi")], harness).messages == [{"role": "user", "content": "hi"}]
