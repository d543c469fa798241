"""Previews: the harness as the YAML text a reader diffs."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import make_harness

from hsa.augment.preview import harness_text, preview
from hsa.augment.registry import get
from hsa.errors import RuleError
from hsa.harness.model import Protocol


def test_a_sub_schema_tools_share_is_written_at_each_not_as_an_alias():
    # livestream's tools share sub-schema dicts: a rewrite that copies one of them would
    # show the anchor and its aliases (&id001, *id001) as changes where there are none
    harness = make_harness()
    shared = {"type": "string", "description": "The order id."}
    tools = [
        dataclasses.replace(t, parameters={"type": "object", "properties": {"order_id": shared}})
        for t in harness.tools[:2]
    ]
    harness = harness.replace(tools=[*tools, *harness.tools[2:]])
    text = harness_text(harness)
    assert "&id" not in text and "*id" not in text
    assert text.count("description: The order id.") == 2
    shown = preview(get("tools.rename"), harness, seed=1, params={"style": "camel"})
    assert "id00" not in shown.harness_diff


def test_a_rule_that_breaks_the_prompt_is_named_with_the_harness():
    # the template reads a section the api protocol leaves empty (and so out of ``sections``)
    harness = make_harness(Protocol("text", "hermes", doc_format="json"))
    count = len(harness.prompt.sections)
    template = "{{ sections[0] }}\n\n{{ sections[" + str(count - 1) + "] }}"
    harness = harness.replace(prompt=dataclasses.replace(harness.prompt, template=template))
    rule = get("protocol.switch")
    with pytest.raises(RuleError) as caught:
        preview(rule, harness, params={"target": "api"})
    assert caught.value.where == "rule 'protocol.switch'"
    assert caught.value.message.startswith(
        f"made the prompt of harness {harness.id!r} fail to render: $.prompt.template: "
    )
