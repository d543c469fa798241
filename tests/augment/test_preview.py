"""Previews: the harness as the YAML text a reader diffs."""

from __future__ import annotations

import dataclasses

from conftest import make_harness

from hsa.augment.preview import harness_text, preview
from hsa.augment.registry import get


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
