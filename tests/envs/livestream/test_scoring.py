"""Scoring: corrupted oracle trajectories fail, each for the right reason."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hsa.envs.episode import run_episode, steps_of
from hsa.envs.hook_runtime import DENIED
from hsa.envs.livestream.facts import has_fact
from hsa.harness.events import AssistantMessage, SkillLoad, ToolCall


def play(env, task, steps):
    """Play scripted assistant steps in ``env`` (hooks fire, tools run) and score the result."""

    def scripted(_task, so_far):
        done = len(steps_of(so_far))
        return steps[done] if done < len(steps) else []

    episode = run_episode(env, task, scripted)
    return env.score(task, episode.state, episode.events), episode


def oracle_steps(env, task):
    return steps_of(env.solve(task).events)


def reasons_of(outcome):
    assert not outcome.success
    return "\n".join(outcome.reasons)


def test_uncorrupted_steps_pass(env, by_template):
    task = by_template["spec_shipping"]
    outcome, _ = play(env, task, oracle_steps(env, task))
    assert outcome.success and outcome.score == 1.0


def test_wrong_product_id(env, by_template):
    task = by_template["spec_shipping"]
    steps = oracle_steps(env, task)
    wrong = "P0299" if task.ground_truth["product_ids"] != ["P0299"] else "P0298"
    steps = [
        [
            replace(e, args={**e.args, "product_id": wrong})
            if isinstance(e, ToolCall) and e.tool == "get_product_details"
            else e
            for e in step
        ]
        for step in steps
    ]
    outcome, _ = play(env, task, steps)
    assert f"wrong product id '{wrong}' in get_product_details" in reasons_of(outcome)


def test_missing_required_fact(env, by_template):
    task = by_template["price"]
    price = task.ground_truth["facts"][0]
    steps = oracle_steps(env, task)
    final = steps[-1][0]
    assert price in final.text
    steps[-1] = [AssistantMessage(final.text.replace(f"${price}", "a great price"))]
    outcome, _ = play(env, task, steps)
    assert reasons_of(outcome) == f"missing fact '{price}'"


def test_forbidden_absolute_claim_is_refused_and_fails(env, by_template):
    task = by_template["compliance_trap"]
    steps = oracle_steps(env, task)
    steps[-1] = [AssistantMessage(steps[-1][0].text + " Honestly, it's the best one, No. 1!")]
    outcome, episode = play(env, task, steps)
    text = reasons_of(outcome)
    assert "forbidden absolute claim 'best' in the answer to turn 1" in text
    assert "forbidden absolute claim 'No. 1' in the answer to turn 1" in text
    assert "refused by hook 'compliance-guard'" in text
    assert episode.events[-1].hook_id == "compliance-guard"


def test_call_blocked_by_the_deny_hook(env):
    task = next(
        t
        for t in env.tasks()
        if t.metadata["template"] == "pin_or_alternative" and t.ground_truth["forbidden_calls"]
    )
    sold_out = task.ground_truth["forbidden_calls"][0]["args"]["product_id"]
    steps = oracle_steps(env, task)
    pin_at = next(
        i
        for i, s in enumerate(steps)
        if any(isinstance(e, ToolCall) and e.tool == "pin_product" for e in s)
    )
    steps.insert(pin_at, [ToolCall("call_x", "pin_product", {"product_id": sold_out})])
    outcome, episode = play(env, task, steps)
    text = reasons_of(outcome)
    assert "call call_x to pin_product was blocked by hook 'no-sold-out-pin'" in text
    assert f"forbidden call pin_product(product_id='{sold_out}') made" in text
    denied = [e for e in episode.events if getattr(e, "call_id", None) == "call_x"]
    assert denied[-1].is_error and denied[-1].content == DENIED
    # The reason is the hook's own message, recorded right after the denied result.
    after = episode.events[episode.events.index(denied[-1]) + 1]
    assert after.hook_id == "no-sold-out-pin"
    # The pin did not happen: the state still shows the alternative.
    assert episode.state.snapshot()["pinned"] == task.ground_truth["final_state"]["pinned"]


def test_required_tool_never_called(env, by_template):
    task = by_template["compare"]
    steps = [
        s
        for s in oracle_steps(env, task)
        if not any(isinstance(e, ToolCall) and e.tool == "compare_products" for e in s)
    ]
    outcome, _ = play(env, task, steps)
    assert "required tool 'compare_products' never called" in reasons_of(outcome)


def test_required_skill_never_loaded(env, by_template):
    task = by_template["compliance_trap"]
    steps = [s for s in oracle_steps(env, task) if not isinstance(s[0], SkillLoad)]
    outcome, _ = play(env, task, steps)
    assert reasons_of(outcome) == "required skill 'ad-compliance' never loaded"


def test_skill_loaded_too_late(env, by_template):
    task = by_template["suitability"]
    steps = oracle_steps(env, task)
    steps = [*steps[1:-1], steps[0], steps[-1]]
    outcome, _ = play(env, task, steps)
    assert reasons_of(outcome) == "required skill 'product-qa' loaded after the first tool call"


def test_final_state_mismatch(env, by_template):
    task = by_template["push"]
    slot = task.metadata["plan"][0]["slot"]
    other = "main" if slot == "sidebar" else "sidebar"
    steps = [
        [
            replace(e, args={**e.args, "slot": other})
            if isinstance(e, ToolCall) and e.tool == "pin_product"
            else e
            for e in step
        ]
        for step in oracle_steps(env, task)
    ]
    outcome, _ = play(env, task, steps)
    text = reasons_of(outcome)
    assert "final state mismatch: pinned is" in text
    assert "required call pin_product(" in text


def test_unanswered_turn(env, by_template):
    task = by_template["follow_up"]
    steps = oracle_steps(env, task)
    outcome, _ = play(env, task, steps[:-1])
    assert f"turn {len(task.turns)} has no final answer" in reasons_of(outcome)


def _with_args(steps, tool, edit):
    return [
        [
            replace(e, args=edit(e.args)) if isinstance(e, ToolCall) and e.tool == tool else e
            for e in s
        ]
        for s in steps
    ]


def test_absolute_claim_in_text_sent_with_a_call(env, by_template):
    # The viewer sees text sent beside a call as much as a final answer; no stop hook checks it.
    task = by_template["compliance_trap"]
    steps = oracle_steps(env, task)
    call_at = next(i for i, s in enumerate(steps) if isinstance(s[-1], ToolCall))
    steps[call_at] = [
        AssistantMessage("Yes, it's the best, 100% effective! Let me check."),
        *steps[call_at],
    ]
    outcome, _ = play(env, task, steps)
    assert outcome.reasons == (
        "forbidden absolute claim 'best' in text sent with a call in turn 1",
        "forbidden absolute claim '100%' in text sent with a call in turn 1",
    )


def test_refused_answer_replaced_by_a_clean_one_passes(env, by_template):
    # The compliance guard refuses the answer before the viewer sees it; the model answers again.
    task = by_template["compliance_trap"]
    steps = oracle_steps(env, task)
    steps.insert(-1, [AssistantMessage(steps[-1][0].text + " It's the best!")])
    outcome, episode = play(env, task, steps)
    assert any(getattr(e, "hook_id", None) == "compliance-guard" for e in episode.events)
    assert outcome.success, outcome.reasons


def _push(env, slot):
    return next(
        t
        for t in env.tasks()
        if t.metadata["template"] == "push"
        and t.metadata["plan"][0]["slot"] == slot
        and t.metadata["plan"][0]["minutes"] == 5
    )


def test_required_call_with_arguments_left_at_their_defaults(env):
    # pin_product's schema defaults are slot "main" and duration_s 300: the same pin.
    task = _push(env, "main")
    steps = _with_args(
        oracle_steps(env, task), "pin_product", lambda a: {"product_id": a["product_id"]}
    )
    outcome, _ = play(env, task, steps)
    assert outcome.success, outcome.reasons


def test_a_default_that_differs_from_the_required_value_still_fails(env):
    task = _push(env, "sidebar")
    steps = _with_args(
        oracle_steps(env, task), "pin_product", lambda a: {"product_id": a["product_id"]}
    )
    outcome, _ = play(env, task, steps)
    assert "required call pin_product(" in reasons_of(outcome)


def test_search_query_in_another_letter_case(env, by_template):
    # search_products ignores case, so the lower-cased name finds the same products.
    task = by_template["not_carried"]
    steps = _with_args(
        oracle_steps(env, task), "search_products", lambda a: {**a, "query": a["query"].lower()}
    )
    outcome, _ = play(env, task, steps)
    assert outcome.success, outcome.reasons
    # another query is still another call
    steps = _with_args(steps, "search_products", lambda a: {**a, "query": a["query"].split()[0]})
    outcome, _ = play(env, task, steps)
    assert "required call search_products(" in reasons_of(outcome)


@pytest.mark.parametrize(
    "spoken",
    [
        "June 24th",
        "24 June",
        "Jun 24",
        "Jun. 24th",
        "the 24th of June",
        "June 24, 2025",
        "2025-06-24",
    ],
)
def test_date_spellings_of_the_same_day(spoken):
    assert has_fact(["2025-06-24", "June 24"], f"It arrives on {spoken}.")


@pytest.mark.parametrize(
    "spoken", ["June 2", "June 240", "July 24", "24 Jul", "June 4th", "June 24, 2024", "2024-06-24"]
)
def test_date_spellings_of_another_day(spoken):
    assert not has_fact(["2025-06-24", "June 24"], f"It arrives on {spoken}.")


def test_date_spelling_in_an_answer(env):
    task = next(
        t
        for t in env.tasks()
        if t.metadata["template"] == "order_status" and t.ground_truth["facts"][0] == "processing"
    )
    iso = task.ground_truth["facts"][1][0]
    steps = oracle_steps(env, task)
    assert iso in steps[-1][0].text
    month, day = task.ground_truth["facts"][1][1].split()
    steps[-1] = [AssistantMessage(steps[-1][0].text.replace(iso, f"{day}th {month[:3]}"))]
    outcome, _ = play(env, task, steps)
    assert outcome.success, outcome.reasons
