"""The run's wall time carried through a checkpoint."""

import json
import time

from hsa.train.clock import RunClock, carried


def test_a_checkpoint_carries_the_runs_time_and_an_older_one_none(tmp_path):
    saved = RunClock(12.5, since=time.monotonic()).state()  # read once: the clock runs on
    (tmp_path / "trainer_state.json").write_text(
        json.dumps({"stateful_callbacks": {"RunClock": saved}})
    )
    assert 12.5 <= carried(tmp_path) < 12.5 + 60
    assert RunClock(**saved["args"]).earlier == carried(tmp_path)  # as the Trainer restores it
    (tmp_path / "trainer_state.json").write_text(json.dumps({"stateful_callbacks": {}}))
    assert carried(tmp_path) == 0.0 and carried(None) == 0.0
    assert carried(tmp_path / "missing") == 0.0
