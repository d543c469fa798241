"""The collector settings long jobs change: put back when the last job out is done, whatever
order jobs in threads end in; garbage collected before a freeze; a caller's freeze kept."""

from __future__ import annotations

import gc
import weakref

import pytest

from hsa import collect


def test_jobs_ending_out_of_order_leave_the_threshold_the_process_had():
    # QA: two augment jobs in two threads left full passes off for good (the first restored
    # the original, the second the first's change)
    before = gc.get_threshold()
    first, second = collect.no_full_passes(), collect.no_full_passes()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold() == (*before[:2], collect._NEVER)
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (*before[:2], collect._NEVER)  # (the second still runs)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


@pytest.mark.parametrize("order", ["FfYy", "FYfy", "FYyf", "YFfy", "YFyf", "YyFf"])
def test_settings_of_two_generations_given_back_in_any_order_leave_what_the_process_had(order):
    # augment's full passes off (F in, f out) and --tune-gc's rarer young passes (Y, y), held
    # by two jobs of one process: a job that put back all three thresholds as it found them
    # undid the other's setting, or left its own in place for good
    before = gc.get_threshold()
    blocks = {"f": collect.no_full_passes(), "y": collect.fewer_young_passes()}
    inside = set()
    for step in order:
        block = blocks[step.lower()]
        if step.isupper():
            block.__enter__()
            inside.add(step.lower())
        else:
            block.__exit__(None, None, None)
            inside.discard(step)
        assert gc.get_threshold() == (
            collect.YOUNG_THRESHOLD if "y" in inside else before[0],
            before[1],
            collect._NEVER if "f" in inside else before[2],
        )
    assert gc.get_threshold() == before


def test_garbage_is_collected_before_the_freeze_and_a_callers_freeze_is_kept():
    class Node:
        pass

    node = Node()
    node.me = node  # a cycle: only a full collection frees it
    gone = weakref.ref(node)
    del node
    assert gc.get_freeze_count() == 0
    with collect.frozen():
        # QA: a job's freeze kept the garbage of the job before it (its closed figures)
        assert gone() is None and gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    gc.freeze()  # the caller's own
    try:
        held = gc.get_freeze_count()
        with collect.frozen():
            pass
        assert gc.get_freeze_count() == held  # (a job unfroze everything)
    finally:
        gc.unfreeze()
