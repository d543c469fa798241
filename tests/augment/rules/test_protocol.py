"""Protocol rules under a prompt template: a text protocol is drawn only where the system
prompt shows its tool docs and call instructions, with sections added as they need."""

from __future__ import annotations

import dataclasses

import pytest

from hsa.augment import apply_chain, get_rule
from hsa.augment.checks import prompt_problems
from hsa.augment.rules.protocol import unshown, with_protocol
from hsa.errors import TemplateError
from hsa.harness import Protocol
from hsa.harness.model import Harness, Prompt, Section, Tool
from hsa.harness.prompt import call_instructions, system_prompt, tool_docs

TEXT = Protocol("text", "json", False, "xml")
API = Protocol()


def _harness(template: str | None, protocol: Protocol = API) -> Harness:
    order = Tool(
        "get_order",
        "Look up an order.",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    )
    persona = Section("persona", "Persona", "You are a shop assistant.", "persona")
    prompt = Prompt(sections=(persona,), template=template)
    return Harness(id="shop", protocol=protocol, prompt=prompt, tools=(order,))


def _switch(harness: Harness, seed: int, target: str = "any") -> Harness:
    chain = [(get_rule("protocol.switch"), {"target": target})]
    return apply_chain(harness, chain, seed=seed)[0].harness


def _shows_everything(harness: Harness) -> bool:
    text = system_prompt(harness)
    return tool_docs(harness) in text and call_instructions(harness) in text


@pytest.mark.parametrize("template", [None, "{{ body }}", "{{ sections | join('\\n\\n') }}"])
def test_a_switch_to_text_shows_the_tools_whether_or_not_the_prompt_has_a_template(template):
    harness = _harness(template)
    for seed in range(4):
        variant = _switch(harness, seed, "text")
        assert not variant.protocol.is_api
        assert _shows_everything(variant) and unshown(variant) == []
        assert {s.kind for s in variant.prompt.sections} == {"persona", "tools", "output_format"}


def test_a_template_that_shows_the_tool_docs_itself_gets_only_the_call_instructions_added():
    harness = with_protocol(_harness("{{ body }}\n\n# Functions\n{{ tool_docs }}"), TEXT)
    assert [s.kind for s in harness.prompt.sections] == ["persona", "output_format"]
    assert system_prompt(harness).count(tool_docs(harness)) == 1
    assert _shows_everything(harness)


@pytest.mark.parametrize("target", ["text", "any"])
def test_a_template_that_leaves_out_its_sections_is_never_switched_to_text(target):
    harness = _harness("You are a shop assistant.")
    assert unshown(with_protocol(harness, TEXT)) == ["tools", "output_format"]
    for seed in range(4):
        assert _switch(harness, seed, target).to_json() == harness.to_json()  # nothing to pick


def test_a_text_protocol_the_template_hid_already_may_switch_to_any_protocol():
    # what the original prompt did not show is its author's choice, as check harness takes it;
    # no section is added that the template would hide too
    harness = _harness("You are a shop assistant.", TEXT)
    drawn = {_switch(harness, seed).protocol for seed in range(8)}
    assert len(drawn - {API}) >= 2
    for seed in range(8):
        variant = _switch(harness, seed)
        assert variant.prompt == harness.prompt and prompt_problems(harness, variant) == []


def _reworded(protocol: Protocol) -> Harness:
    """A harness whose template rewords its sections: under a text protocol, the Markdown
    tool docs are not in the prompt as generated, the call instructions are."""
    tools = Section("tools", "Tools", "", "tools")
    calls = Section("output_format", "Output format", "", "output_format")
    harness = _harness('{{ body | replace("Parameters:", "Arguments:") }}', protocol)
    prompt = dataclasses.replace(harness.prompt, sections=(*harness.prompt.sections, tools, calls))
    return harness.replace(prompt=prompt)


def test_a_call_format_change_under_a_template_that_rewords_the_tool_docs():
    harness = _reworded(Protocol("text", "python", True, "markdown"))
    assert unshown(harness) == ["tools"]
    drawn = set()
    for seed in range(8):
        variant = apply_chain(harness, [(get_rule("protocol.call_format"), {})], seed=seed)[0]
        variant = variant.harness
        drawn.add(variant.protocol)
        # the new call instructions shown, the docs (reworded) not shown twice
        assert variant.prompt == harness.prompt and unshown(variant) == ["tools"]
        assert call_instructions(variant) in system_prompt(variant)
        assert prompt_problems(harness, variant) == []
    assert harness.protocol not in drawn and len(drawn) >= 3


def test_a_template_that_rewords_the_tool_docs_is_not_switched_to_from_api():
    # under api the original shows no docs to excuse: Markdown docs are never drawn
    harness = _reworded(API)
    for seed in range(8):
        variant = _switch(harness, seed, "text")
        assert variant.protocol.doc_format != "markdown" and unshown(variant) == []


@pytest.mark.parametrize("name", ["protocol.call_format", "protocol.doc_format"])
def test_call_and_doc_format_changes_show_the_tools_under_a_body_template(name):
    harness = _harness("{{ body }}", TEXT)
    for seed in range(4):
        variant = apply_chain(harness, [(get_rule(name), {})], seed=seed)[0].harness
        assert variant.protocol != harness.protocol
        assert _shows_everything(variant)


def test_sections_added_for_a_text_protocol_take_ids_not_yet_used():
    harness = _harness(None)
    taken = Section("tools", "Notes", "Be brief.", "policy")  # an id, not the kind
    prompt = dataclasses.replace(harness.prompt, sections=(*harness.prompt.sections, taken))
    changed = with_protocol(harness.replace(prompt=prompt), TEXT)
    assert [(s.id, s.kind) for s in changed.prompt.sections][-2:] == [
        ("tools_2", "tools"),
        ("output_format", "output_format"),
    ]
    assert _shows_everything(changed)


def _unshown_by_search(harness: Harness) -> list[str]:
    """``unshown`` as it reads: each text looked for in the prompt as rendered."""
    text = system_prompt(harness)
    needed = {"tools": tool_docs(harness), "output_format": call_instructions(harness)}
    return [kind for kind, shown in needed.items() if shown.strip() not in text]


@pytest.mark.parametrize("style", ["markdown", "xml", "plain"])
@pytest.mark.parametrize("template", [None, "{{ body }}", "{{ sections[0] }}"])
@pytest.mark.parametrize(
    "bodies",
    [("", ""), ("", "Write calls as JSON."), ("{{ tool_docs | upper }}", ""), ("x", "y")],
)
@pytest.mark.parametrize("verbatim", [False, True])
def test_unshown_finds_what_the_prompt_shows_as_a_search_of_it_would(
    style, template, bodies, verbatim
):
    harness = _harness(template, TEXT)
    tools = Section("tools", "Tools", bodies[0], "tools", verbatim)
    calls = Section("output_format", "", bodies[1], "output_format", verbatim)
    prompt = dataclasses.replace(
        harness.prompt, heading_style=style, sections=(*harness.prompt.sections, tools, calls)
    )
    harness = harness.replace(prompt=prompt)
    assert unshown(harness) == _unshown_by_search(harness)


def test_unshown_raises_for_a_prompt_that_does_not_render_whatever_its_sections_show():
    harness = _harness(None, TEXT)
    broken = Section("policy", "Policy", "{{ missing.field }}", "policy")
    shown = (Section("tools", "Tools", "", "tools"), Section("calls", "", "", "output_format"))
    prompt = dataclasses.replace(harness.prompt, sections=(broken, *shown))
    with pytest.raises(TemplateError):
        unshown(harness.replace(prompt=prompt))


@pytest.mark.parametrize("param", ["from", "max-results", "class"])
@pytest.mark.parametrize("name", ["protocol.switch", "protocol.call_format"])
def test_python_calls_are_never_drawn_for_a_parameter_python_would_splat(name, param):
    # hsa writes such an argument as **{'from': ...}: vLLM's pythonic parser reads it as an
    # argument named "null", BFCL's decoder refuses it
    search = Tool(
        "search_mail",
        "Search mail.",
        {"type": "object", "properties": {"query": {"type": "string"}, param: {"type": "string"}}},
    )
    harness = dataclasses.replace(_harness(None, TEXT), tools=(search,))
    chain = [(get_rule(name), {"target": "text"} if name == "protocol.switch" else {})]
    drawn = {apply_chain(harness, chain, seed=seed)[0].harness.protocol for seed in range(60)}
    assert len({p.call_format for p in drawn}) > 2
    assert "python" not in {p.call_format for p in drawn}


@pytest.mark.parametrize(
    "schema",
    [
        {"allOf": [{"properties": {"from": {"type": "string"}}}]},
        {"$ref": "#/$defs/a", "$defs": {"a": {"properties": {"from": {"type": "string"}}}}},
        {"anyOf": [{"properties": {"from": {"type": "string"}}}, {"required": ["q"]}]},
    ],
)
def test_an_argument_named_through_allof_ref_or_anyof_keeps_python_calls_out_too(schema):
    search = Tool("search_mail", "Search mail.", {"type": "object", **schema})
    harness = dataclasses.replace(_harness(None, TEXT), tools=(search,))
    chain = [(get_rule("protocol.switch"), {"target": "text"})]
    drawn = {apply_chain(harness, chain, seed=seed)[0].harness.protocol for seed in range(60)}
    assert len({p.call_format for p in drawn}) > 2
    assert "python" not in {p.call_format for p in drawn}


def test_doc_format_varies_a_python_harness_it_would_not_switch_to():
    # how docs are printed does not change how calls are written: a harness whose author
    # chose python calls for a parameter named ``from`` still gets other doc formats
    search = Tool(
        "search_mail",
        "Search mail.",
        {"type": "object", "properties": {"from": {"type": "string"}}},
    )
    harness = dataclasses.replace(
        _harness(None, TEXT), tools=(search,), protocol=Protocol("text", "python", False, "json")
    )
    chain = [(get_rule("protocol.doc_format"), {})]
    drawn = {apply_chain(harness, chain, seed=seed)[0].harness.protocol for seed in range(20)}
    assert {p.call_format for p in drawn} == {"python"}
    assert len({p.doc_format for p in drawn}) > 2
