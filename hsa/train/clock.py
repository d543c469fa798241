"""The wall time of a training run over all its parts, carried through TRL's checkpoints.

A run resumed with ``--resume`` is a new process. ``RunClock``, a transformers callback with
exportable state, gives the run's wall time so far to each checkpoint the Trainer writes (in
its ``trainer_state.json``, ``stateful_callbacks``, written with the checkpoint), and
``carried`` reads it back from the checkpoint a run resumes from. A run's wall time is so each
earlier part's time up to the checkpoint the next part resumed from (time after that
checkpoint, on steps the next part trains again, is not counted) plus the last part's time.
Imported only where a run trains: it imports transformers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

#: when this process's run began (the ``since`` of the last clock given one): a clock the
#: Trainer builds again from a checkpoint's state counts this part from there too
_began: float | None = None


class RunClock(TrainerCallback, ExportableState):
    """The run's wall time: ``earlier`` (the parts before this one) plus this part's, from
    ``since`` (``time.monotonic()``; when not given, when this process's run began, else
    now)."""

    def __init__(self, earlier: float = 0.0, since: float | None = None) -> None:
        global _began
        if since is not None:
            _began = since
        self.earlier = earlier
        self.since = since if since is not None else (_began or time.monotonic())

    def wall_s(self) -> float:
        return self.earlier + time.monotonic() - self.since

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # A Trainer resumed from a checkpoint takes that checkpoint's callback states, and at
        # each save reads this clock's entry there: one written before hsa kept the time has
        # none, so it gets this clock's.
        state.stateful_callbacks.setdefault(type(self).__name__, self.state())

    def state(self) -> dict[str, Any]:
        # the time as an argument: a Trainer that restores callback states from a checkpoint
        # (restore_callback_states_from_checkpoint) builds RunClock(earlier=...) again
        return {"args": {"earlier": round(self.wall_s(), 3)}, "attributes": {}}


def carried(checkpoint: str | Path | None) -> float:
    """The run's wall time when ``checkpoint`` was written: 0 without one, or for one whose
    trainer state holds no ``RunClock`` (written before hsa kept the time there)."""
    if checkpoint is None:
        return 0.0
    try:
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text("utf-8"))
        return float(state["stateful_callbacks"][RunClock.__name__]["args"]["earlier"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0
