"""The system prompt: heading styles, placement, auto sections, custom templates."""

from __future__ import annotations

import hashlib
import json

import pytest

import hsa.harness.io
import hsa.harness.prompt
import hsa.harness.validate
from hsa.errors import HarnessValidationError, TemplateError
from hsa.harness import (
    Harness,
    Prompt,
    Protocol,
    Section,
    Skill,
    Tool,
    UserMessage,
    loads_harness,
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


@pytest.mark.parametrize("doc_format", sorted(DOC_FORMATS))
@pytest.mark.parametrize("verbatim", [False, True])
def test_an_auto_section_shows_what_its_template_renders(doc_format: str, verbatim: bool) -> None:
    # an empty auto section's body is taken without the template engine: the same text as
    # the section whose body is ``{{ tool_docs }}`` (and so on), odd characters included
    odd = Tool(
        "odd",
        "  {{ not a template }}\r\nends with a blank line\n\n",
        {"type": "object", "properties": {"x\r": {"type": "string", "description": " {% x %} "}}},
    )
    protocol = Protocol("text", "python", call_tag=True, doc_format=doc_format)
    for style in ("markdown", "xml", "plain"):
        auto = tuple(
            Section(s.id, s.title, "", s.kind, verbatim=verbatim) for s in (*SECTIONS, *AUTO)
        )
        spelled = tuple(
            Section(
                s.id,
                s.title,
                "{{ " + hsa.harness.prompt._AUTO_BODIES[s.kind] + " }}"
                if s.kind in hsa.harness.prompt._AUTO_BODIES
                else s.body,
                s.kind,
                verbatim=verbatim,
            )
            for s in auto
        )
        for proto in (API, protocol):
            changes = {"tools": (TOOL, odd), "skills": (SKILL,), "skill_tool": LOADER}
            a = _harness(Prompt(auto, heading_style=style), proto).replace(**changes)
            b = _harness(Prompt(spelled, heading_style=style), proto).replace(**changes)
            assert system_prompt(a) == system_prompt(b)


def test_an_auto_section_too_long_for_the_sandbox_is_refused_as_its_template_is() -> None:
    from hsa.harness.sandbox import MAX_OUTPUT_CHARS

    protocol = Protocol("text", "json", doc_format="markdown")
    long = Tool("long", "x" * MAX_OUTPUT_CHARS)
    auto = Prompt((Section("tools", "Tools", "", "tools"),))
    spelled = Prompt((Section("tools", "Tools", "{{ tool_docs }}", "tools"),))
    errors = []
    for prompt in (auto, spelled):
        with pytest.raises(TemplateError) as err:
            system_prompt(_harness(prompt, protocol).replace(tools=(long,)))
        errors.append((str(err.value), err.value.where))
    assert errors[0] == errors[1]
    assert errors[0][1] == "$.prompt.sections[0].body"
    # a text just within the cap is shown
    fits = Tool("f", "x" * (MAX_OUTPUT_CHARS - len("### f\n\n\n\nParameters: none.")))
    shown = system_prompt(_harness(auto, protocol).replace(tools=(fits,)))
    assert len(shown) == MAX_OUTPUT_CHARS + len("## Tools\n\n")


def test_a_skill_description_of_several_lines_is_one_line_of_the_catalogue() -> None:
    # a SKILL.md description may be a YAML block (`>` keeps a final newline, `|` its lines)
    folded = Skill("travel", "travel", "Plan trips\nand pack.\n", "Pack light.")
    listed = _harness(Prompt(AUTO), skills=(folded,), skill_tool=LOADER)
    assert "## Skills\n\n- travel: Plan trips and pack.\nLoad a skill" in system_prompt(listed)
    alone = _harness(Prompt(AUTO), skills=(folded,))
    assert system_prompt(alone) == "## Skills\n\ntravel: Plan trips and pack.\n\nPack light."


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


def test_invalid_harness_is_refused_where_it_is_made() -> None:
    bad = _harness(Prompt((Section("s", "S", "{% if %}"),)))
    with pytest.raises(HarnessValidationError, match="syntax error") as err:
        loads_harness(bad.to_json())
    assert err.value.where == "$.prompt.sections[0].body"
    # Rendering does not validate, but still refuses a template it cannot compile.
    with pytest.raises(TemplateError, match="syntax error") as err:
        system_prompt(bad)
    assert err.value.where == "$.prompt.sections[0].body"


def _livestream_separately() -> tuple[Harness, Harness]:
    """The livestream harness built twice from its document: equal, never the same object."""
    from hsa.envs.livestream.harness import harness

    doc = json.loads(harness().to_json())
    return Harness.from_dict(doc), Harness.from_dict(json.loads(json.dumps(doc)))


def test_rendering_never_validates(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("rendering validated the harness")

    for name in ("document_problems", "validate_document", "render_problems", "_validator"):
        monkeypatch.setattr(hsa.harness.validate, name, refuse)
    for name in ("loads", "document_problems", "render_problems"):
        monkeypatch.setattr(hsa.harness.io, name, refuse)
    text = Protocol("text", "python", call_tag=True, doc_format="xml")
    for protocol in (API, text):
        first, _ = _livestream_separately()
        # an id of its own, so that no prompt made by another test can be reused
        harness = first.replace(id="rendered-without-validation", protocol=protocol)
        events = [UserMessage("hi")]
        assert system_prompt(harness)
        assert parse(render(events, harness), harness) == events


def test_equal_harnesses_give_equal_prompts_documents_and_hashes() -> None:
    a, b = _livestream_separately()
    assert a is not b and a == b
    assert system_prompt(a) == system_prompt(b)
    assert a.to_json() == b.to_json()
    assert a.digest == b.digest == hashlib.sha256(a.to_json().encode()).hexdigest()
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    changed = a.replace(protocol=Protocol("text", "json"))
    assert changed != a and changed.digest != a.digest and changed.to_json() != a.to_json()
    assert system_prompt(changed) != system_prompt(a)  # tool docs are printed under text


def test_the_prompt_is_rendered_once_per_object(monkeypatch) -> None:
    calls: list[str] = []
    real = hsa.harness.prompt.render_template

    def counting(source, context, *, where="template"):
        calls.append(where)
        return real(source, context, where=where)

    monkeypatch.setattr(hsa.harness.prompt, "render_template", counting)
    harness = _harness(Prompt(SECTIONS))
    assert system_prompt(harness) is system_prompt(harness)
    assert len(calls) == len(SECTIONS)
    # An equal harness built separately renders its own, equal, prompt.
    again = _harness(Prompt(SECTIONS))
    assert system_prompt(again) == system_prompt(harness)
    assert len(calls) == 2 * len(SECTIONS)
    # So does a changed copy: what is kept on an object never leaks into its copies.
    changed = harness.replace(prompt=Prompt(SECTIONS[:1]))
    assert system_prompt(changed) == "## Persona\n\nYou help demo."


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


def test_the_prompt_imports_neither_loading_nor_validation() -> None:
    import grimp

    graph = grimp.build_graph("hsa", cache_dir=None)
    for module in ("hsa.harness.io", "hsa.harness.validate"):
        assert not graph.chain_exists(importer="hsa.harness.prompt", imported=module), module


def test_a_section_whose_body_is_none_renders_empty_as_before() -> None:
    # a harness made in code (Harness.from_dict does not validate): an empty body of a kind
    # with no generated text renders nothing, whether "" or None
    harness = Harness("h", prompt=Prompt(sections=(Section("x", "X", None, "custom"),)))  # type: ignore[arg-type]
    assert system_prompt(harness) == ""
