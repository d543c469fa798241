"""A batch of canonical trajectories as flat event columns, with the turn structure render uses.

``explode`` turns the ``events`` list column into one numpy/Arrow column per event field and
works out, without a Python loop, what ``render`` works out event by event: which calls join
the assistant message before them, which call starts a message of its own, where every chain
of calls ends, and the running call counter that names skill-load calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.jsontext import Scan, scan

KINDS = ("user", "assistant", "tool_call", "tool_result", "hook", "skill_load")
USER, ASSISTANT, CALL, RESULT, HOOK, SKILL = range(6)
#: fields an event of each kind must have (render reads them)
REQUIRED = {
    USER: ("text",),
    ASSISTANT: ("text",),
    CALL: ("call_id", "tool"),
    RESULT: ("call_id", "content"),
    HOOK: ("hook_id", "hook_event"),
    SKILL: ("skill_id",),
}


@dataclass(frozen=True, slots=True)
class Events:
    """The events of a batch, flat, in trajectory order (see the module docstring).

    ``start`` has one entry per trajectory plus one. Per event: ``traj`` (its trajectory),
    ``local`` (its index in the trajectory), ``kind`` (a code of ``KINDS``), ``head`` (a call
    that starts an assistant message), ``owner`` (for a call, the event whose message holds
    it; else the event itself), ``has_calls`` (an assistant event that calls follow),
    ``bare`` (one of those whose text is ""), ``counter`` (calls and skill loads before it in
    its trajectory), and the Arrow ``fields``.
    ``kind`` is -1 for a null event or an unknown kind.
    """

    start: np.ndarray
    traj: np.ndarray
    local: np.ndarray
    kind: np.ndarray
    head: np.ndarray
    owner: np.ndarray
    has_calls: np.ndarray
    bare: np.ndarray
    counter: np.ndarray
    fields: dict[str, pa.Array]
    scans: dict[str, tuple[np.ndarray, pa.Array, Scan]]

    def json_field(self, name: str, code: int) -> tuple[np.ndarray, pa.Array, Scan]:
        """The events of kind ``code``, their JSON-object field ``name``, and its ``Scan``.

        Computed once per batch: the checks and the renderers read the same scan.
        """
        found = self.scans.get(name)
        if found is None:
            at = np.flatnonzero(self.kind == code)
            texts = self.fields[name].take(pa.array(at))
            found = self.scans[name] = (at, texts, scan(texts))
        return found

    @property
    def count(self) -> np.ndarray:
        return np.diff(self.start)

    def __len__(self) -> int:
        return len(self.kind)


def _offsets(array: pa.ListArray) -> np.ndarray:
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets - offsets[0]


def explode(table: pa.Table) -> Events:
    """The events of ``table`` (rows of ``TRAJECTORY_SCHEMA``), structured (not checked)."""
    column = table.column("events").combine_chunks()
    start = _offsets(column)
    flat = column.flatten()
    children = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
    fields = {
        name: array.cast(pa.large_string()) if pa.types.is_string(array.type) else array
        for name, array in children.items()
        if name != "kind"
    }
    n = len(flat)
    count = np.diff(start)
    traj = np.repeat(np.arange(len(count), dtype=np.int64), count)
    local = np.arange(n, dtype=np.int64) - start[traj]

    # Unknown kinds and null events are -1; ``checks.refuse`` reports them before rendering.
    codes = pc.index_in(children["kind"], value_set=pa.array(KINDS))
    kind = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int8)

    is_call = (kind == CALL) | (kind == SKILL)
    first = local == 0
    prev = np.concatenate(([-1], kind[:-1])).astype(np.int8)
    prev[first] = -1
    joins = (prev == ASSISTANT) | (prev == CALL) | (prev == SKILL)
    head = is_call & ~joins
    starter = ~is_call | head
    owner = np.maximum.accumulate(np.where(starter, np.arange(n, dtype=np.int64), -1))
    last = local == (count[traj] - 1)
    nxt = np.concatenate((kind[1:], [-1])).astype(np.int8)
    nxt[last] = -1
    has_calls = ((kind == ASSISTANT) & ((nxt == CALL) | (nxt == SKILL))) | head
    # "" before calls is no text, as chat templates read it: the calls are the message
    empty = pc.fill_null(pc.equal(fields["text"], ""), False).to_numpy(zero_copy_only=False)
    bare = has_calls & (kind == ASSISTANT) & empty
    before = np.cumsum(is_call, dtype=np.int64) - is_call
    counter = before - before[start[traj]]
    return Events(start, traj, local, kind, head, owner, has_calls, bare, counter, fields, {})
