"""The compact livestream harness (``get("livestream", compact=True)``): a short prompt over the
same tools, skills and hooks, under which the oracle still solves its tasks."""

from __future__ import annotations

import json

import pytest

from hsa.envs.livestream.harness import compact_harness, harness
from hsa.envs.reference_check import check
from hsa.envs.registry import get
from hsa.errors import EnvError
from hsa.harness import Protocol, load_harness, parse, problems, render, save_harness
from hsa.harness.protocols.docs import lines_docs


@pytest.fixture(scope="module")
def compact():
    return get("livestream", compact=True, n_tasks=16)


def test_the_option_serves_the_compact_harness(compact):
    assert compact.harness() is compact_harness()
    assert get("livestream", n_tasks=16).harness() is harness()
    assert get("livestream", compact=False, n_tasks=16).harness() is harness()


def test_compact_harness_is_short_text_over_the_same_tools():
    short, full = compact_harness(), harness()
    assert short.id == "livestream-compact"
    assert short.protocol == Protocol("text", "python", False, "lines")
    assert [s.kind for s in short.prompt.sections] == ["persona", "skills", "tools"]
    assert short.tools == full.tools and short.skill_tool == full.skill_tool
    assert short.skills == full.skills and short.hooks == full.hooks


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_compact_must_be_a_boolean(value):
    with pytest.raises(EnvError, match="compact must be true or false"):
        get("livestream", compact=value)


def test_compact_harness_exports_valid_and_loads_back(tmp_path):
    save_harness(compact_harness(), tmp_path / "compact")
    assert problems(tmp_path / "compact") == []
    assert load_harness(tmp_path / "compact") == compact_harness()


def test_compact_prompt_is_much_shorter(compact):
    events = compact.solve(compact.tasks()[0]).events
    short, full = compact_harness(), harness()
    prompt = render(events, short).messages[0]["content"]
    tools = [*short.tools, short.skill_tool]
    assert lines_docs(tools) in prompt
    # the full harness as a model reads it: tool schemas in the request (api) or printed in
    # the prompt under the compact harness's call format
    api = render(events, full)
    seen = len(api.messages[0]["content"]) + len(json.dumps(api.tools))
    assert len(prompt) < seen / 2
    text = full.replace(protocol=Protocol("text", "python", False, full.protocol.doc_format))
    assert len(prompt) < len(render(events, text).messages[0]["content"]) / 2


def test_oracle_solves_tasks_under_the_compact_harness(compact):
    report = check(compact)
    assert report.ok and report.total == 16


def test_oracle_trajectories_round_trip_and_match_the_full_harness(compact):
    full = get("livestream", n_tasks=16)
    short = compact.harness()
    for task in compact.tasks()[::3]:
        events = list(compact.solve(task).events)
        assert events == list(full.solve(task).events), task.id
        assert parse(render(events, short), short) == events, task.id
