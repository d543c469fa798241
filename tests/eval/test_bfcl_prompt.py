"""BFCL's format-sensitivity system prompts: each of the 26 configurations worded as BFCL words
it, so no two render alike, and the model's reply read under the configuration's protocol."""

from __future__ import annotations

import pytest

from hsa.envs.registry import get
from hsa.eval.suites import _configured
from hsa.harness.prompt import system_prompt


@pytest.fixture(scope="module")
def prompts(external) -> dict[str, str]:
    env = get("bfcl", path=str(external / "bfcl"))
    entry = ":simple_python_58"
    tasks = [t for t in env.tasks() if t.kind == "format_sensitivity" and t.id.endswith(entry)]
    return {
        t.id.split(":")[1]: system_prompt(_configured(env, t).spec.variant.harness) for t in tasks
    }


def test_every_configuration_renders_its_own_prompt(prompts):
    assert len(prompts) == 26 and len(set(prompts.values())) == 26


def test_the_default_configuration_is_worded_as_bfcl_words_it(prompts):
    default = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext"
    text = prompts[f"{default}&style=classic"]
    # persona and task joined with no space, as BFCL's plain-text template joins them
    assert text.startswith("You are an expert in composing functions.You are given a question")
    assert "you MUST put it in the format of [func_name1(params_name1=params_value1" in text
    assert "\n\nHere is a list of functions in json format that you can invoke.\n[\n" in text
    assert "cell_biology_function_lookup" in text and "## Task" not in text


def test_markdown_experimental_and_tagged_xml_configurations(prompts):
    base = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json"
    markdown = prompts[f"{base}&prompt_fmt=markdown&style=classic"]
    assert "\n\n## Task\n" in markdown and "\n\n## Available Tools\n" in markdown
    experimental = prompts[f"{base}&prompt_fmt=plaintext&style=experimental"]
    assert experimental.startswith("You are an expert in generating structured function calls.")
    assert "Below is a list of callable functions in the json style:\n" in experimental
    xml = prompts[
        "ret_fmt=concise_xml&tool_call_tag=True&func_doc_fmt=xml&prompt_fmt=plaintext&style=classic"
    ]
    assert '<TOOLCALL><functions><function name="func_name1"><param name="param1"' in xml
    assert "must be one of: string, integer, float, boolean, array, dict, or tuple." in xml
    assert "Here is a list of functions in xml format that you can invoke." in xml


def test_an_entrys_own_system_message_follows_bfcls_prompt(external):
    # BFCL's system_prompt_pre_processing_chat_model: its prompt, "\n\n", the entry's system
    # message, under every configuration
    import dataclasses
    import json

    from hsa.eval.suites import bfcl_variant
    from hsa.harness.model import Protocol

    root = external / "bfcl"
    entry = "live_multiple_125-47-1"
    with open(root / "BFCL_v4_live_multiple.json", encoding="utf-8") as lines:
        row = next(json.loads(line) for line in lines if f'"{entry}"' in line)
    own = "\n\n".join(m["content"] for m in row["question"][0] if m["role"] == "system")
    assert own
    env = get("bfcl", path=str(root))
    tasks = [t for t in env.tasks() if t.kind == "format_sensitivity" and t.id.endswith(entry)]
    assert len(tasks) == 26
    for task in tasks:
        text = system_prompt(_configured(env, task).spec.variant.harness)
        # the same configuration for the entry without its system message
        harness = env.harness_for(task)
        sections = tuple(s for s in harness.prompt.sections if s.id != "system")
        bare = harness.replace(prompt=dataclasses.replace(harness.prompt, sections=sections))
        found = task.metadata["format_sensitivity"]
        protocol = Protocol.from_dict(found["protocol"])
        alone = system_prompt(bfcl_variant(bare, protocol, found["config"]).harness)
        assert own not in alone
        assert text == alone + "\n\n" + own
