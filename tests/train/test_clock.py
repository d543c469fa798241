"""The run's wall time carried through a checkpoint."""

import json

from hsa.train.clock import RunClock, carried


def test_a_checkpoint_carries_the_runs_time_and_an_older_one_none(tmp_path):
    clock = RunClock(12.5, since=0.0)
    state = {"stateful_callbacks": {"RunClock": clock.state()}}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert carried(tmp_path) >= 12.5
    assert RunClock(**clock.state()["args"]).earlier == carried(tmp_path)  # as restored
    (tmp_path / "trainer_state.json").write_text(json.dumps({"stateful_callbacks": {}}))
    assert carried(tmp_path) == 0.0 and carried(None) == 0.0
    assert carried(tmp_path / "missing") == 0.0
