"""Every rule passes every check on real data: livestream oracle trajectories (replayed through
the environment), tau2 retail and airline reference actions, and BFCL simple, multiple,
parallel and parallel_multiple ground truth (replayed against the recording). Samples keep it
fast; ``hsa rules check --source ...`` runs the full corpora."""

from __future__ import annotations

import dataclasses

import pytest

from hsa.augment import Rewrite, all_rules
from hsa.augment.checks import SKIP, Replay
from hsa.augment.suite import (
    Job,
    Subject,
    describe,
    run,
    spread,
    subjects_from_env,
    subjects_from_files,
    subjects_from_source,
)
from hsa.errors import HsaError
from hsa.harness import ToolCall

BFCL = ["simple_python", "multiple", "parallel", "parallel_multiple"]


def _assert_all_pass(subjects, seeds=(0,)):
    jobs = [Job(r) for r in all_rules()]
    reports = list(run(jobs, subjects, seeds=seeds))
    assert len(reports) == len(jobs) * len(subjects) * len(seeds)
    failed = [describe(r) for r in reports if not r.ok]
    assert not failed, "\n".join(failed[:10])
    return reports


def test_every_rule_passes_on_livestream_oracle_trajectories():
    from hsa.envs import get_env
    from hsa.envs.livestream import solve

    env = get_env("livestream")
    tasks = spread(env.tasks(), 4)
    subjects = [
        Subject(env.harness(), solve(env, t).trajectory, Replay(env, t), "livestream")
        for t in tasks
    ]
    reports = _assert_all_pass(subjects)
    assert all(r.outcomes["replay"] == "pass" for r in reports)


def test_subjects_from_env_records_oracle_trajectories():
    from hsa.envs import get_env
    from hsa.envs.livestream import solve

    env = get_env("livestream")
    subjects = subjects_from_env(env, lambda e, t: solve(e, t).trajectory, limit=2)
    assert len(subjects) == 2
    assert all(s.replay.env is env and s.replay.task is not None for s in subjects)


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_every_rule_passes_on_tau2_reference_actions(external, domain):
    subjects = subjects_from_source(external / "tau2" / domain)
    assert len(subjects) > 40
    with_calls = [s for s in subjects if any(e.kind == "tool_call" for e in s.trajectory.events)]
    reports = _assert_all_pass(spread(with_calls, 4))
    assert all(r.outcomes["replay"] == "pass" for r in reports)


@pytest.mark.parametrize("category", BFCL)
def test_every_rule_passes_on_bfcl_ground_truth(external, category):
    subjects = subjects_from_source(external / "bfcl" / f"BFCL_v4_{category}.json")
    assert len(subjects) >= 200
    reports = _assert_all_pass(spread(subjects, 4))
    # Only reference calls that break their own schema (a few BFCL answers do) are skipped.
    assert sum(r.outcomes["schema"] == SKIP for r in reports) <= len(reports) // 4


def test_tau2_subjects_replay_the_reference_actions_in_order(external):
    subjects = subjects_from_source(external / "tau2" / "retail", limit=5)
    for subject in subjects:
        task = subject.replay.task
        calls = [
            (e.tool, dict(e.args)) for e in subject.trajectory.events if isinstance(e, ToolCall)
        ]
        assert calls == [(a["name"], a["arguments"]) for a in task.ground_truth["actions"]]
        assert subject.replay.env.score(task, None, subject.trajectory.events).success


def test_openai_jsonl_and_parquet_trajectories_replay_on_their_recording(tmp_path):
    from pathlib import Path

    import pyarrow.parquet as pq

    from hsa.harness import trajectories_to_table
    from hsa.harness.importers import import_source

    chat = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    subjects = subjects_from_source(chat)
    assert subjects and all(s.replay.env is not None for s in subjects)
    _assert_all_pass(subjects[:2])

    result = import_source(chat)
    harness = result.harnesses[0]
    rows = [t for t in result.trajectories if t.harness_id == harness.id]
    pq.write_table(trajectories_to_table(rows), tmp_path / "t.parquet")
    from_parquet = subjects_from_files(harness, tmp_path / "t.parquet")
    assert len(from_parquet) == len(rows)
    _assert_all_pass(from_parquet[:2])
    # under another harness they are not checked (the rules would be blamed for the mismatch)
    with pytest.raises(HsaError, match="recorded under the given harness 'other'"):
        subjects_from_files(harness.replace(id="other"), tmp_path / "t.parquet")


def _check_one(fn):
    from conftest import make_events, make_harness

    from hsa.augment import Rule
    from hsa.harness import Trajectory

    rule = Rule("broken.rule", "1", fn, doc="A deliberately broken rule.")
    subject = Subject(make_harness(), Trajectory("t", tuple(make_events())), Replay(), "test")
    (report,) = run([Job(rule)], [subject], seeds=(0,))
    return report


def test_a_rule_that_edits_the_harness_it_is_given_fails():
    def mutate(harness, rng, params, context):
        for tool in harness.tools:
            for schema in tool.parameters.get("properties", {}).values():
                schema["description"] = "MUTATED"
        return Rewrite(harness)

    report = _check_one(mutate)
    assert report.outcomes == {"harness": "fail"}
    assert "changed the harness it was given in place" in describe(report)


def test_a_rule_that_draws_from_anything_but_rng_fails():
    draws = iter(range(100))

    def clock(harness, rng, params, context):
        tools = [
            dataclasses.replace(t, description=f"{t.description} ({next(draws)})")
            for t in harness.tools
        ]
        return Rewrite(harness.replace(tools=tools))

    report = _check_one(clock)
    assert report.outcomes == {"harness": "fail"}
    assert "gave two different rewrites from one seed" in describe(report)
    assert "draw everything from rng" in describe(report)


def test_a_rule_that_reads_the_trajectory_without_declaring_the_need_is_checked_as_it_runs():
    # Planning gives such a rule no trajectory; checked with one, it used to pass every check
    # and then write rows whose calls name tools their harness no longer lists.
    def keep_used(harness, rng, params, context):
        used = context.used_tools or frozenset()
        return Rewrite(harness.replace(tools=[t for t in harness.tools if t.name in used]))

    report = _check_one(keep_used)
    assert not report.ok
    # planning refuses it: the rewrite drops a tool the trajectory calls
    assert report.outcomes == {"harness": "fail"}
    assert "has no tool 'get_order' and the mapping gives it no other name" in describe(report)


def test_a_rewrite_whose_mapping_and_harness_disagree_is_refused_as_it_is_planned():
    # a rename recorded but not made: rows would call tools their own harness lacks
    from hsa.augment import RewriteMapping, ToolMap

    def wrong_map(harness, rng, params, context):
        return Rewrite(harness, RewriteMapping(tools={"get_order": ToolMap("get_order_y")}))

    report = _check_one(wrong_map)
    assert report.outcomes == {"harness": "fail"}
    assert "renames tool 'get_order' to 'get_order_y', which the rewritten harness" in describe(
        report
    )


def test_a_draw_planning_gives_up_is_checked_as_one_that_changes_nothing(harness, events):
    # hooks.wrapper may give two hooks told apart by their wrappers alone one tag: planning
    # draws again (HooksAlike), so the check must not fail the rule for that draw
    from hsa.augment import get_rule
    from hsa.harness import Hook, Trajectory

    twins = tuple(
        Hook(hook_id, "stop", "add_context", "Note: {{ text }}", wrapper=tag)
        for hook_id, tag in (("a", "first"), ("b", "second"))
    )
    subject = Subject(harness.replace(hooks=(*harness.hooks, *twins)), Trajectory("t", events))
    job = Job(get_rule("hooks.wrapper"), {"allow_none": False})
    reports = list(run([job], [subject], seeds=range(4)))
    assert all(r.ok for r in reports), "\n".join(describe(r) for r in reports if not r.ok)
    given_up = [r.trajectory_id for r in reports if not r.changed]
    assert given_up == ["t@seed0", "t@seed2"]  # (the draws that make them alike)
    assert all(set(r.outcomes.values()) == {"pass"} for r in reports if not r.changed)


def test_a_corpus_whose_entries_are_all_unscored_says_why_nothing_is_checked(external):
    from hsa.errors import HsaError

    path = external / "bfcl" / "BFCL_v4_multi_turn_base.json"
    with pytest.raises(HsaError, match=r"nothing to check on: 200 multi_turn_base task\(s\)"):
        subjects_from_source(path)


def _demo_parquet(tmp_path, keep=lambda event: True):
    # the docs' demo harness: its hooks' payloads come from nowhere the harness records
    from pathlib import Path

    import pyarrow.parquet as pq

    from hsa.augment.synthetic import sample_trajectory
    from hsa.harness import load_harness, trajectories_to_table

    demo = Path(__file__).resolve().parents[2] / "examples" / "rule-package" / "demo-harness"
    harness = load_harness(demo)
    trajectory = sample_trajectory(harness)
    trajectory = dataclasses.replace(
        trajectory, events=tuple(e for e in trajectory.events if keep(e))
    )
    pq.write_table(trajectories_to_table([trajectory]), tmp_path / "t.parquet")
    return subjects_from_files(harness, tmp_path / "t.parquet")


def test_parquet_trajectories_replay_with_the_hook_payloads_they_recorded(tmp_path):
    from hsa.augment import get_rule

    subjects = _demo_parquet(tmp_path)
    (report,) = run([Job(get_rule("tools.shuffle"))], subjects, seeds=(0,))
    assert report.ok, describe(report)
    assert report.outcomes["replay"] == "pass"


def test_a_canonical_trajectory_that_does_not_replay_skips_the_replay_check(tmp_path):
    # without its recorded firings the demo's hooks have no payload: the canonical calls
    # themselves do not replay, which is no evidence about the rule
    from hsa.augment import get_rule
    from hsa.harness import HookFired

    subjects = _demo_parquet(tmp_path, keep=lambda e: not isinstance(e, HookFired))
    (report,) = run([Job(get_rule("tools.shuffle"))], subjects, seeds=(0,))
    assert report.ok, describe(report)
    assert report.outcomes["replay"] == SKIP


def test_a_rewrite_dropping_a_hook_is_refused_where_it_fires_whatever_the_order(harness, events):
    # the rewrite of a rule that needs no trajectory is reused across trajectories; one that
    # fires the dropped hook got the rewrite planned for one that does not (hooks: fail, and
    # roundtrip's "hook 'nudge' is not in harness" naming no rule)
    from hsa.augment import Rule
    from hsa.augment.checks import FAIL
    from hsa.harness import HookFired, Trajectory

    def drop(h, rng, params, context):
        return Rewrite(h.replace(hooks=[k for k in h.hooks if k.id != "nudge"]))

    dropper = Job(Rule("tests.drop_hook", "1", drop, doc="Drop the nudge hook."))
    fires = Subject(harness, Trajectory("fires", tuple(events)))
    quiet_events = tuple(
        e for e in events if not (isinstance(e, HookFired) and e.hook_id == "nudge")
    )
    quiet = Subject(harness, Trajectory("quiet", quiet_events))
    seen = []
    for order in ([quiet, fires], [fires, quiet]):
        reports = {r.trajectory_id: r for r in run([dropper], order, seeds=(0,))}
        refused = reports["fires@seed0"]
        assert refused.outcomes == {"harness": FAIL}, describe(refused)
        (failure,) = refused.failures
        assert "no hook 'nudge'" in failure.message
        assert "tests.drop_hook" in failure.message
        # (the hooks check still fails a dropped hook where it does not fire)
        assert reports["quiet@seed0"].outcomes["harness"] != FAIL
        seen.append({t: describe(r) for t, r in sorted(reports.items())})
    assert seen[0] == seen[1]


SET_ORDER = '''
import dataclasses

from hsa.augment import Rewrite, rule


@rule("hashy.set_order")
def set_order(harness, rng, params, context):
    """Append the harness's words in a set's order (string hashes) to each description."""
    said = " ".join({w for t in harness.tools for w in t.description.split()})
    tools = [dataclasses.replace(t, description=t.description + said) for t in harness.tools]
    return Rewrite(harness.replace(tools=tools))
'''


@pytest.fixture
def one_other_process(monkeypatch):
    """The check across processes in one other process (not this one's hash seed), as it was
    before it took several: for the tests of what happens to that process's answer, each
    other process costs an interpreter start and hsa's import."""
    from hsa.augment import suite

    ours = __import__("os").environ.get("PYTHONHASHSEED")
    monkeypatch.setattr(suite, "ELSEWHERE_HASH_SEEDS", ("2",) if ours == "1" else ("1",))


def test_a_rule_choosing_by_a_sets_order_fails_in_another_process(
    plugins, tmp_path, monkeypatch, one_other_process
):
    # the same twice in one process (string hashes are salted per process): only another
    # process, under another PYTHONHASHSEED, tells it; one process for all of a rule's cases
    import sys

    from conftest import make_events, make_harness

    from hsa.augment import get_rule
    from hsa.harness import Trajectory

    (tmp_path / "hashy_rules.py").write_text(SET_ORDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HSA_PLUGINS", "")
    import hashy_rules  # noqa: F401

    subject = Subject(make_harness(), Trajectory("t", tuple(make_events())), Replay(), "test")
    jobs = [Job(get_rule("hashy.set_order"))]
    assert all(r.ok for r in run(jobs, [subject], seeds=(0, 1)))
    reports = list(run(jobs, [subject], seeds=(0, 1), across_processes=True))
    assert len(reports) == 2
    for report in reports:
        assert report.outcomes["harness"] == "fail"
        assert "the rewrite differs across processes, so one variant id" in describe(report)
        assert "gave another rewrite in another process (PYTHONHASHSEED=" in describe(report)
    sys.modules.pop("hashy_rules", None)


#: a rule whose rewrite depends on the process's hash seed as a set of two names' order does:
#: one way under some seeds, the other under the rest (here: by the seed's parity)
SEED_PARITY = '''
import os

from hsa.augment import Rewrite, rule


@rule("hashy.set_order")
def set_order(harness, rng, params, context):
    """The tools reversed where the hash seed is even."""
    even = int(os.environ.get("PYTHONHASHSEED") or 0) % 2 == 0
    return Rewrite(harness.replace(tools=harness.tools[::-1] if even else list(harness.tools)))
'''


def test_a_set_order_that_agrees_with_one_other_process_fails_in_the_next(
    plugins, tmp_path, monkeypatch
):
    # a set of two or three names often orders alike under two hash seeds: this process's
    # (3) and the one other process's (1) agreed, and the rule passed; the check runs the
    # rule under several seeds, which do not all agree with this one
    from hsa.augment import suite

    monkeypatch.setenv("PYTHONHASHSEED", "3")  # what the rule reads as this process's seed
    monkeypatch.setattr(suite, "ELSEWHERE_HASH_SEEDS", ("1", "4"))  # (two processes suffice)
    reports = _hashy(tmp_path, monkeypatch, "hashy_parity_rules", SEED_PARITY)
    assert [r.outcomes["harness"] for r in reports] == ["fail", "fail"]
    for report in reports:
        assert "the rewrite differs across processes, so one variant id" in describe(report)


#: sets of two or three tool names: the demo harness's, each pair of them, and a few more
FEW_NAMES = [
    ["get_order", "return_items", "search_products"],
    ["get_order", "return_items"],
    ["get_order", "search_products"],
    ["return_items", "search_products"],
    ["lookup_customer", "get_order"],
    ["cancel_order", "track_shipment"],
    ["read", "write"],
    ["ls", "cd"],
]


def test_the_other_processes_order_each_set_of_two_or_three_names_more_than_one_way():
    # whatever order this process gives such a set, one of them gives another: a rule that
    # chooses by it fails, under any PYTHONHASHSEED here
    import os
    import subprocess
    import sys

    from hsa.augment.suite import ELSEWHERE_HASH_SEEDS

    code = f"print([list(set(names)) for names in {FEW_NAMES!r}])"
    seen = [
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ELSEWHERE_HASH_SEEDS
    ]
    orders = [{repr(eval(out)[i]) for out in seen} for i in range(len(FEW_NAMES))]
    alike = [names for names, found in zip(FEW_NAMES, orders, strict=True) if len(found) == 1]
    assert not alike


#: how a plugin module tells it runs in the other process: started with the answer file's
#: path as its one argument (a pytest-xdist worker is a ``python -c`` process too)
THERE = "sys.argv[1:] and sys.argv[1].endswith('answer.json')"


def _hashy(tmp_path, monkeypatch, module: str, text: str) -> list:
    """The reports of ``run(across_processes=True)`` for the rule ``text`` defines (as
    ``hashy.set_order``) in ``module``, on one trajectory and seeds 0 and 1."""
    import sys

    from conftest import make_events, make_harness

    from hsa.augment import get_rule
    from hsa.harness import Trajectory

    (tmp_path / f"{module}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HSA_PLUGINS", "")
    try:
        __import__(module)
        subject = Subject(make_harness(), Trajectory("t", tuple(make_events())), Replay(), "test")
        jobs = [Job(get_rule("hashy.set_order"))]
        return list(run(jobs, [subject], seeds=(0, 1), across_processes=True))
    finally:
        sys.modules.pop(module, None)


def test_what_the_other_process_prints_at_exit_does_not_hide_its_answer(
    plugins, tmp_path, monkeypatch, one_other_process
):
    # the answer has its own channel: a line printed after it (atexit) is not taken for it
    head = f"import atexit, sys\nif {THERE}:  # the other process\n"
    text = head + "    atexit.register(print, 'done.')\n" + SET_ORDER
    reports = _hashy(tmp_path, monkeypatch, "hashy_atexit_rules", text)
    assert [r.outcomes["harness"] for r in reports] == ["fail", "fail"]
    assert "the rewrite differs across processes, so one variant id" in describe(reports[0])


STEADY = SET_ORDER.replace("{w for", "sorted({w for").replace("split()})", "split()}))")


@pytest.mark.parametrize(
    ("there", "says"),
    [
        ("sys.exit(3)", "it exited with status 3"),
        ("os._exit(0)", "it exited without an answer"),
        ("raise ImportError('only here')", "it could not load the rule: ImportError: only here"),
        ("time.sleep(30)", "it gave no answer in 0.1 s"),
    ],
)
def test_a_rule_the_other_process_gives_no_answer_for_fails_unchecked(
    plugins, tmp_path, monkeypatch, there, says, one_other_process
):
    # a rule that cannot be compared there does not pass as if it had been
    from hsa.augment import suite

    if "sleep" in there:
        monkeypatch.setattr(suite, "ELSEWHERE_TIMEOUT_S", 0.1)
        monkeypatch.setattr(suite, "ELSEWHERE_EACH_S", 0.0)
    head = f"import os, sys, time\nif {THERE}:  # the other process\n    {there}\n"
    reports = _hashy(tmp_path, monkeypatch, "hashy_gone_rules", head + STEADY)
    assert [r.outcomes["harness"] for r in reports] == ["fail", "fail"]
    for seed, report in enumerate(reports):
        said = describe(report)
        assert f"harness: seed {seed}: not checked in another process (PYTHONHASHSEED=" in said
        assert says in said and "an unchecked rule does not pass" in said


def test_a_plugin_rule_whose_module_has_no_importable_name_is_checked_there(
    plugins, tmp_path, monkeypatch, one_other_process
):
    # a plugin that runs its rule files with runpy.run_path gives its rules the module name
    # '<run_path>': the other process could not import it, and the rule failed "unchecked"
    # though its entry point loads it there
    import sys

    from conftest import make_events, make_harness

    from hsa.augment import get_rule
    from hsa.harness import Trajectory

    package = tmp_path / "dynplug"
    package.mkdir()
    (package / "steady.py").write_text(STEADY)
    (package / "__init__.py").write_text(
        "import os, runpy\nrunpy.run_path(os.path.join(os.path.dirname(__file__), 'steady.py'))\n"
    )
    info = tmp_path / "dynplug-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dynplug\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[hsa.rules]\ndyn = dynplug\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HSA_PLUGINS", "dyn")
    try:
        __import__("dynplug")
        assert get_rule("hashy.set_order").fn.__module__ == "<run_path>"
        subject = Subject(make_harness(), Trajectory("t", tuple(make_events())), Replay(), "test")
        jobs = [Job(get_rule("hashy.set_order"))]
        reports = list(run(jobs, [subject], seeds=(0, 1), across_processes=True))
    finally:
        sys.modules.pop("dynplug", None)
    assert [r.outcomes["harness"] for r in reports] == ["pass", "pass"], describe(reports[0])


def test_a_schema_nested_past_the_recursion_is_checked_and_an_edit_of_it_caught():
    from conftest import make_events, make_harness

    from hsa.augment import Rule, get_rule
    from hsa.harness import Tool, Trajectory

    deep: dict = {"type": "string"}
    for _ in range(450):  # as deep as the importer reads
        deep = {"type": "object", "properties": {"a": deep}}
    harness = make_harness()
    harness = harness.replace(tools=[*harness.tools, Tool("deep", "Deep.", deep)])
    subject = Subject(harness, Trajectory("t", tuple(make_events())), Replay(), "test")
    (report,) = run([Job(get_rule("tools.descriptions"))], [subject], seeds=(0,))
    assert report.outcomes["harness"] == "pass", describe(report)

    def mutate(harness, rng, params, context):
        node = harness.tools[-1].parameters
        while "properties" in node:
            node = node["properties"]["a"]
        node["description"] = "MUTATED"
        return Rewrite(harness)

    rule = Rule("broken.rule", "1", mutate, doc="A deliberately broken rule.")
    (report,) = run([Job(rule)], [subject], seeds=(0,))
    assert "changed the harness it was given in place" in describe(report)
