"""Every built-in rule: deterministic for a seed, varying across seeds, task-preserving on the
fixture harness under every protocol, and at least 25 of them over all five families."""

from __future__ import annotations

import pytest
from conftest import make_events, make_harness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsa.augment import Context, all_rules, apply_chain
from hsa.augment.checks import check_rewrite
from hsa.augment.registry import BUILTIN_MODULE
from hsa.augment.rule import FAMILIES
from hsa.harness import Protocol

RULES = all_rules()
# by module: a plugin may register a rule in a built-in family
BUILTIN = [r for r in RULES if r.fn.__module__.startswith(BUILTIN_MODULE + ".")]
# Rules that only act under an in-prompt protocol are exercised on one.
TEXT = Protocol("text", "hermes", True, "json")
TEXT_ONLY = {"protocol.call_format", "protocol.doc_format"}


def _harness_for(rule):
    return make_harness(TEXT if rule.name in TEXT_ONLY else None)


def _apply(rule, seed):
    events = make_events()
    rewrite, _ = apply_chain(
        _harness_for(rule), [(rule, {})], seed=seed, context=Context.of(events)
    )
    return rewrite.harness.to_json(), rewrite.mapping.to_json()


def test_at_least_25_rules_cover_every_family():
    assert len(BUILTIN) >= 25
    assert {r.family for r in BUILTIN} == set(FAMILIES)
    assert all(r.summary and r.version for r in BUILTIN)


@pytest.mark.parametrize("rule", BUILTIN, ids=lambda r: r.name)
@settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(seed=st.integers(min_value=0, max_value=2**63 - 1))
def test_rule_is_deterministic_for_a_seed(rule, seed):
    assert _apply(rule, seed) == _apply(rule, seed)


@pytest.mark.parametrize("rule", BUILTIN, ids=lambda r: r.name)
@settings(
    max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(start=st.integers(min_value=0, max_value=2**40))
def test_rule_varies_across_seeds(rule, start):
    canonical = (_harness_for(rule).to_json(), "")
    outcomes = {_apply(rule, start + k) for k in range(12)}
    assert len(outcomes) >= 2, f"{rule.name} gives one outcome for 12 seeds"
    assert all(o[0] != canonical[0] for o in outcomes), f"{rule.name} left the harness unchanged"


PROTOCOLS = [
    Protocol(),
    Protocol("text", "hermes", True, "json"),
    Protocol("text", "python", True, "python"),
    Protocol("text", "json", False, "markdown"),
    Protocol("text", "xml_verbose", True, "xml"),
    Protocol("text", "xml_concise", False, "json"),
]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
@pytest.mark.parametrize("rule", BUILTIN, ids=lambda r: r.name)
def test_rule_preserves_the_task_under_every_protocol(rule, protocol):
    harness = make_harness(protocol)
    events = make_events()
    for seed in range(2):
        rewrite, _ = apply_chain(harness, [(rule, {})], seed=seed, context=Context.of(events))
        report = check_rewrite(harness, rewrite, events)
        assert report.ok, [str(f) for f in report.failures]
        assert set(report.outcomes.values()) == {"pass"}


def test_a_protocol_switch_draws_evenly_among_the_protocols_that_fit_the_names():
    from collections import Counter

    from hsa.augment.free_text import protocol_fits
    from hsa.augment.rules.protocol import text_protocols
    from hsa.harness.model import Tool

    harness = make_harness()
    kebab = Tool("get-order-total", "Sum an order.", {"type": "object", "properties": {}})
    harness = harness.replace(tools=(*harness.tools, kebab))
    fitting = [p for p in text_protocols(harness) if protocol_fits(harness, p)]
    unfit = {(p.call_format, p.call_tag) for p in text_protocols(harness)} - {
        (p.call_format, p.call_tag) for p in fitting
    }
    assert fitting and unfit  # Python call syntax cannot call get-order-total
    switch = next(r for r in RULES if r.name == "protocol.switch")
    drawn = Counter(
        apply_chain(harness, [(switch, {"target": "text"})], seed=seed)[0].harness.protocol
        for seed in range(40 * len(fitting))
    )
    assert set(drawn) == set(fitting)  # every fitting one, none that does not fit
    assert min(drawn.values()) >= 15 and max(drawn.values()) <= 70  # 40 each, evenly


def test_a_name_one_rule_hyphenates_is_renamed_in_prose_by_the_next():
    # tools.rename's kebab style makes `handoff-to-human` of `handoff_to_human`, which the
    # livestream policy names unmarked; tools.namespace must rename it there too, or the
    # prompt names a tool the variant does not have
    from hsa.augment.registry import get
    from hsa.envs.livestream.harness import harness as livestream

    harness = livestream()
    chain = [
        (get("tools.rename"), {"style": "kebab", "fraction": 1.0}),
        (get("tools.namespace"), {"prefix": "mcp", "separator": "_"}),
    ]
    rewrite, _ = apply_chain(harness, chain, seed=0)
    policy = next(s.body for s in rewrite.harness.prompt.sections if "human with" in s.body)
    assert "human with mcp_handoff-to-human;" in " ".join(policy.split())
    assert "handoff_to_human" not in rewrite.harness.to_json()
