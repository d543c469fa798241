"""Stages 1-3 of a batch: entries, hook sites, and the layout of every message.

An *entry* is one (output row, event) pair. Under its row's variant an entry makes 0, 1 or 2
messages, exactly as ``render`` makes them event by event: a call joins the assistant message
before it or starts one of its own, a skill load adds its result message, an assistant turn
whose calls a text format keeps apart is split in two, a hook injected into a tool result joins
the tool message before it. Counting them gives every message its *slot* (its index among the
batch's messages) and its role; the later stages only fill in what each slot contains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from hsa.augment.engine import records as rec
from hsa.augment.engine.events import ASSISTANT, CALL, HOOK, RESULT, SKILL, USER, Events
from hsa.augment.engine.plans import HookPlan
from hsa.augment.engine.records import distinct, exclusive
from hsa.errors import ProtocolError

if TYPE_CHECKING:
    from hsa.augment.engine.batch import Batch

# Per (kind, case) -- case: 1 for a call that starts a message, the injection position (an
# index of ``variants.INJECT``) for a hook, else 0 -- how many messages an entry makes (a
# split assistant turn makes one more) and the role of the last (-1: it makes none).
_MESSAGES = np.zeros(18, dtype=np.int64)
_LAST_ROLE = np.full(18, -1, dtype=np.int8)
for _kind, _case, _n, _role in (
    (USER, 0, 1, rec.USER),
    (ASSISTANT, 0, 1, rec.ASSISTANT),
    (CALL, 1, 1, rec.ASSISTANT),
    (RESULT, 0, 1, rec.TOOL),
    (HOOK, 0, 1, rec.SYSTEM),
    (HOOK, 1, 1, rec.USER),
    (SKILL, 0, 1, rec.TOOL),
    (SKILL, 1, 2, rec.TOOL),
):
    _MESSAGES[_kind * 3 + _case] = _n
    _LAST_ROLE[_kind * 3 + _case] = _role
#: a hook injected into the tool result (it joins the tool message before it, if any)
_TO_RESULT = HOOK * 3 + 2


@dataclass(frozen=True, slots=True)
class Entries:
    """Stage 1: one entry per (output row, event), rows in order, events in trajectory order.

    Per entry: its output ``row``, canonical ``event``, ``variant`` and event ``kind``.
    ``row_start`` (one more than the rows) is where each output row's entries begin.
    """

    row: np.ndarray
    event: np.ndarray
    variant: np.ndarray
    kind: np.ndarray
    row_start: np.ndarray

    def __len__(self) -> int:
        return len(self.event)


def entries(ev: Events, out_traj: np.ndarray, out_variant: np.ndarray) -> Entries:
    """The entries of output rows (``out_traj[i]``, ``out_variant[i]``)."""
    count = ev.count[out_traj]
    row_start = exclusive(count)
    m = int(row_start[-1])
    row = np.repeat(np.arange(len(out_traj), dtype=np.int64), count)
    event = ev.start[out_traj][row] + (np.arange(m, dtype=np.int64) - row_start[row])
    return Entries(row, event, out_variant[row], ev.kind[event], row_start)


@dataclass(frozen=True, slots=True)
class HookSites:
    """Stage 2: the hook firings among the entries and how each variant places them.

    ``at`` are the entries that are hook firings; ``code`` their canonical hook id as an index
    of ``names``; ``plans`` the surface hook per (variant, code) met; ``inject`` per entry (0
    for entries that are not hooks) an index of ``variants.INJECT``.
    """

    at: np.ndarray
    code: np.ndarray
    names: list[str]
    plans: dict[tuple[int, int], HookPlan]
    inject: np.ndarray


def hook_sites(batch: Batch, ent: Entries) -> HookSites:
    """Where each hook firing's text goes; an unknown hook fails as ``render`` fails."""
    at = np.flatnonzero(ent.kind == HOOK)
    inject = np.zeros(len(ent), dtype=np.int8)
    if not len(at):
        return HookSites(at, np.zeros(0, dtype=np.int64), [], {}, inject)
    e, v = ent.event, ent.variant
    encoded = batch.ev.fields["hook_id"].take(pa.array(e[at])).dictionary_encode()
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    names = encoded.dictionary.to_pylist()
    pair = v[at] * len(names) + code
    uniq, first, inverse = distinct(pair, first=True)
    plans: dict[tuple[int, int], HookPlan] = {}
    injects = np.zeros(len(uniq), dtype=np.int8)
    for j, p in enumerate(uniq.tolist()):
        vi, hi = divmod(p, len(names))
        try:
            plan = batch.plans[vi].hook(names[hi])
        except ProtocolError as exc:
            raise batch.fail(exc, int(e[at[first[j]]])) from None
        plans[(vi, hi)] = plan
        injects[j] = plan.inject
    inject[at] = injects[inverse]
    return HookSites(at, code, names, plans, inject)


def _joining(ent: Entries, case: np.ndarray) -> np.ndarray:
    """Per entry, whether it is a tool_result hook joining the tool message before it.

    Hooks joining are transparent, so each looks back to the last entry with a fixed role in
    the same row: it joins where that one's last message is a tool message."""
    m = len(ent)
    merged = np.zeros(m, dtype=bool)
    to_result = np.flatnonzero(case == _TO_RESULT)
    if len(to_result):
        last_role = _LAST_ROLE[case]
        fixed = np.where(last_role >= 0, np.arange(m, dtype=np.int64), -1)
        last = np.maximum.accumulate(fixed)
        before = np.where(to_result > 0, last[to_result - 1], -1)
        in_row = before >= ent.row_start[ent.row[to_result]]
        joins = in_row & (last_role[before] == rec.TOOL)
        merged[to_result[joins]] = True
    return merged


def place_notes(batch: Batch, ent: Entries, hooks: HookSites) -> tuple[Entries, HookSites]:
    """Stage 2b: the entries in the order ``render`` shows them (``shown_order``).

    In a run of tool results and hook firings, a firing that makes a message of its own (as
    fired: not a tool_result hook joining a tool message) before the run's last result moves
    to after that result and the hooks joining it, the moved ones in firing order. Entries
    only move inside a row, and no call moves, so the later stages see a row as ``render``
    walks it."""
    k = ent.kind
    m = len(ent)
    hook = k == HOOK
    if not hook.any():
        return ent, hooks
    idx = np.arange(m, dtype=np.int64)
    run = (k == RESULT) | hook
    # a run starts at a result or firing after another kind of entry, or at a row's start
    before = np.concatenate(([False], run[:-1]))
    firsts = ent.row_start[:-1]
    before[firsts[firsts < m]] = False
    run_id = np.cumsum(run & ~before) - 1
    is_result = k == RESULT
    last = np.full(max(int(run_id[-1]) + 1, 1), -1, dtype=np.int64)
    np.maximum.at(last, run_id[is_result], idx[is_result])
    case = k * 3 + batch.ev.head[ent.event] + hooks.inject
    joins = _joining(ent, case)
    moves = hook & ~joins & run & (idx < last[run_id])
    if not moves.any():
        return ent, hooks
    # after the run's last result and the hooks joining it (they never cross a row)
    after = np.where(joins, m, idx)
    next_other = np.minimum.accumulate(after[::-1])[::-1]
    anchor_of = np.append(next_other, m)[last[run_id[moves]] + 1] - 1
    key = 2 * idx
    key[moves] = 2 * anchor_of + 1
    order = np.argsort(key, kind="stable")
    code = np.full(m, -1, dtype=np.int64)
    code[hooks.at] = hooks.code
    moved = Entries(ent.row[order], ent.event[order], ent.variant[order], k[order], ent.row_start)
    at = np.flatnonzero(moved.kind == HOOK)
    sites = HookSites(at, code[order][at], hooks.names, hooks.plans, hooks.inject[order])
    return moved, sites


@dataclass(frozen=True, slots=True)
class Layout:
    """Stage 3: every message of the batch, by slot.

    Per output row: ``per_row`` messages starting at ``row_start``; ``prefix`` lists the rows
    that open with the prompt message (the system prompt, or the prompt as a user turn of its
    own when the trajectory has no user message), whose role is in ``role``. Per entry:
    ``slot`` of its first message; ``head``, a call that starts an assistant message;
    ``split``, an assistant turn whose text and calls go in two messages; ``merged``, a hook
    that joins the tool message before it; ``api``, whether its variant uses the ``api``
    protocol. Per message: ``role`` (a code of ``records.ROLES``).
    """

    per_row: np.ndarray
    row_start: np.ndarray
    prefix: np.ndarray
    slot: np.ndarray
    head: np.ndarray
    split: np.ndarray
    merged: np.ndarray
    api: np.ndarray
    role: np.ndarray

    @property
    def size(self) -> int:
        return int(self.row_start[-1])


def lay_out(
    batch: Batch, ent: Entries, hooks: HookSites, out_traj: np.ndarray, out_variant: np.ndarray
) -> Layout:
    """How many messages each entry makes under its row's variant, their slots and roles."""
    ev, plans = batch.ev, batch.plans
    api_of = np.array([p.style.api for p in plans])
    prefix_ok = np.array([p.style.api or p.style.allows_prefix for p in plans])
    sysmsg_of = np.array([p.system_message for p in plans])
    in_user_of = np.array([p.prompt_in_user for p in plans])
    e, v, k = ent.event, ent.variant, ent.kind
    api = api_of[v]
    head = ev.head[e]
    split = (k == ASSISTANT) & ev.has_calls[e] & ~ev.bare[e] & ~prefix_ok[v]

    # how many messages each entry makes, and the role of its last one, by kind and case
    case = k * 3 + head + hooks.inject
    n_msg = _MESSAGES[case] + split
    last_role = _LAST_ROLE[case]
    merged = _joining(ent, case)
    alone = (case == _TO_RESULT) & ~merged
    n_msg[alone] = 1
    last_role[alone] = rec.SYSTEM

    # slots: each row's prompt message, if any, then its entries' messages in order
    has_user = np.bincount(ev.traj[ev.kind == USER], minlength=len(ev.start) - 1) > 0
    pre_sys = sysmsg_of[out_variant]
    pre = pre_sys | (in_user_of[out_variant] & ~has_user[out_traj])
    before_entry = exclusive(n_msg)
    per_row = pre + np.diff(before_entry[ent.row_start])
    row_start = exclusive(per_row)
    slot = before_entry[:-1] + np.cumsum(pre)[ent.row]

    # roles: each entry's messages take its last one's role, except a call starting a
    # message before its skill result (a split turn is the assistant's twice)
    role = np.empty(int(row_start[-1]), dtype=np.int8)
    prefix = np.flatnonzero(pre)
    body = np.ones(len(role), dtype=bool)
    body[row_start[prefix]] = False
    role[row_start[prefix]] = np.where(pre_sys[prefix], rec.SYSTEM, rec.USER)
    role[body] = np.repeat(last_role, n_msg)
    role[slot[head & (k == SKILL)]] = rec.ASSISTANT
    return Layout(per_row, row_start, prefix, slot, head, split, merged, api, role)
