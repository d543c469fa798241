"""The mutable state of one livestream episode: the clock, pinned cards and hand-off tickets."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hsa.envs.livestream.world import World


def ticket_id(task_id: str, number: int) -> str:
    """The id of the ``number``-th hand-off ticket (0-based) opened in the episode of a task.

    Derived from the task id so that ground truth can name the ticket before the episode runs.
    """
    base = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % 900_000 + 100_000
    return f"HD-{base + number}"


@dataclass(slots=True)
class LiveState:
    """What an episode can change: the card pinned in each slot, and hand-off tickets."""

    world: World
    now: datetime
    task_id: str = ""
    pinned: dict[str, dict[str, Any]] = field(default_factory=dict)
    handoffs: list[dict[str, Any]] = field(default_factory=list)

    def snapshot(self) -> dict[str, Any]:
        """The comparable final state: which product each slot shows, and hand-off reasons."""
        return {
            "pinned": {slot: card["product_id"] for slot, card in sorted(self.pinned.items())},
            "handoffs": [h["reason"] for h in self.handoffs],
        }
