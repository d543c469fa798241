"""One batch through the vectorised path: a message slot for every (output row, event).

For each output row the events of its trajectory are laid out as numpy index columns; how
many messages each event makes under the row's variant (0, 1 or 2, hook merges included)
gives every message its slot and role. Contents are references into string pools: canonical
texts as they are, and what the call and hook renderers (``calls.py``, ``hooks.py``) and the
text-protocol blocks produce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine import calls as call_render
from hsa.augment.engine import hooks as hook_render
from hsa.augment.engine import records as rec
from hsa.augment.engine.events import ASSISTANT, CALL, HOOK, RESULT, SKILL, USER, Events
from hsa.augment.engine.fill import Leaves, fill
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.records import distinct, exclusive, first_seen
from hsa.errors import DatasetError, HsaError, ProtocolError

if TYPE_CHECKING:
    from hsa.augment.engine.core import Engine

#: (row of the batch) -> (file, how to name the row in an error)
Locate = Callable[[int], tuple[str | None, str]]


def default_locate(table: pa.Table, file: str | None) -> Locate:
    ids = table.column("id")

    def locate(row: int) -> tuple[str | None, str]:
        return file, f"row {row} (id {ids[row].as_py()!r})"

    return locate


@dataclass(slots=True)
class Layout:
    """The entries of a batch -- one per (output row, event) -- and the messages they make.

    Per entry: the canonical event ``e``, the variant ``v``, the event kind ``k``, the slot of
    its first message, whether it is a call starting its own message (``head``), an
    assistant turn whose text and calls go in two messages (``split``), a hook joining the
    tool message before it (``merged``). Per message: ``role``, and pool references for
    ``content`` and ``call_id`` (-1: none).
    """

    e: np.ndarray
    v: np.ndarray
    k: np.ndarray
    slot: np.ndarray
    head: np.ndarray
    split: np.ndarray
    merged: np.ndarray
    role: np.ndarray
    content: np.ndarray
    call_id: np.ndarray


@dataclass(slots=True)
class CallTexts:
    """Per call entry: aux-pool references of its text (arguments or piece), name and id."""

    piece: np.ndarray
    names: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, n: int) -> CallTexts:
        return cls(*(np.full(n, -1, dtype=np.int64) for _ in range(3)))


class Batch:
    """One batch rendered by the vectorised path; see ``Engine.render``."""

    def __init__(
        self,
        engine: Engine,
        table: pa.Table,
        events: Events,
        text: rec.Pool,
        aux: rec.Pool,
        locate: Locate,
    ):
        self.engine = engine
        self.plans = engine.plans
        self.table = table
        self.ev = events
        self.text = text
        self.aux = aux
        self.locate = locate

    def fail(self, exc: HsaError, event: int) -> DatasetError:
        file, row = self.locate(int(self.ev.traj[event]))
        where = f"{row}.events[{int(self.ev.local[event])}]"
        return DatasetError(exc.message, file=file, where=where)

    def fill(
        self,
        tid: np.ndarray,
        item: np.ndarray,
        leaf_start: np.ndarray,
        leaves: Leaves,
        pool: rec.Pool,
    ) -> np.ndarray:
        """Pool references of template ``tid`` filled with canonical item ``item``'s leaves.

        Variants that render an item alike share one template, so each distinct (item,
        template) pair is filled once.
        """
        width = max(len(self.engine.book.templates), 1)
        pairs, _, inverse = first_seen(item * width + tid)
        items, tids = np.divmod(pairs, width)
        texts = fill(self.engine.book, tids, leaf_start[items], leaves)
        return pool.add(texts) + inverse

    def render(self, out_traj: np.ndarray, out_variant: np.ndarray) -> rec.Records:
        ev = self.ev
        n_out = len(out_traj)
        if n_out == 0:
            return rec.Records.empty(self.text, self.aux)
        plans = self.plans
        api_of = np.array([p.style.api for p in plans])
        prefix_ok = np.array([p.style.api or p.style.allows_prefix for p in plans])
        sysmsg_of = np.array([p.system_message for p in plans])
        in_user_of = np.array([p.prompt_in_user for p in plans])

        # -- layout: one entry per (output row, event) --
        count = ev.count[out_traj]
        row_ev = exclusive(count)
        m = int(row_ev[-1])
        o = np.repeat(np.arange(n_out, dtype=np.int64), count)
        e = ev.start[out_traj][o] + (np.arange(m, dtype=np.int64) - row_ev[o])
        v = out_variant[o]
        k = ev.kind[e]
        api = api_of[v]
        head = ev.head[e]

        # -- hooks: inject position per (variant, hook) --
        is_hook = k == HOOK
        hook_rows = np.flatnonzero(is_hook)
        hook_plan: dict[tuple[int, int], object] = {}
        inject = np.zeros(m, dtype=np.int8)
        hook_code = np.zeros(0, dtype=np.int64)
        hook_names: list[str] = []
        if len(hook_rows):
            encoded = ev.fields["hook_id"].take(pa.array(e[hook_rows])).dictionary_encode()
            hook_code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            hook_names = encoded.dictionary.to_pylist()
            pair = v[hook_rows] * len(hook_names) + hook_code
            uniq, at, inverse = distinct(pair, first=True)
            injects = np.zeros(len(uniq), dtype=np.int8)
            for j, p in enumerate(uniq.tolist()):
                vi, hi = divmod(p, len(hook_names))
                first = hook_rows[at[j]]
                try:
                    plan = plans[vi].hook(hook_names[hi])
                except ProtocolError as exc:
                    raise self.fail(exc, int(e[first])) from None
                hook_plan[(vi, hi)] = plan
                injects[j] = plan.inject
            inject[hook_rows] = injects[inverse]

        # -- how many messages each entry makes, and the role of its last one --
        n_msg = np.zeros(m, dtype=np.int64)
        role = np.full(m, -1, dtype=np.int8)
        is_user, is_asst, is_res = k == USER, k == ASSISTANT, k == RESULT
        is_call = (k == CALL) | (k == SKILL)
        split = is_asst & ~api & ev.has_calls[e] & ~prefix_ok[v]
        n_msg[is_user] = 1
        role[is_user] = rec.USER
        n_msg[is_asst] = 1 + split[is_asst]
        role[is_asst] = rec.ASSISTANT
        n_msg[is_call] = head[is_call].astype(np.int64) + (k[is_call] == SKILL)
        role[is_call & head] = rec.ASSISTANT
        role[k == SKILL] = rec.TOOL
        n_msg[is_res] = 1
        role[is_res] = rec.TOOL
        n_msg[is_hook & (inject != 2)] = 1
        role[is_hook & (inject == 1)] = rec.USER
        role[is_hook & (inject == 0)] = rec.SYSTEM
        to_result = is_hook & (inject == 2)
        # A tool_result hook joins the tool message just before it; hooks joining are
        # transparent, so look back to the last entry with a fixed role in the same row.
        fixed = np.where(role >= 0, np.arange(m, dtype=np.int64), -1)
        last = np.maximum.accumulate(fixed)
        before = np.concatenate(([-1], last[:-1]))
        row_start = row_ev[o]
        prev_role = np.full(m, -1, dtype=np.int8)
        valid = before >= row_start
        prev_role[valid] = role[before[valid]]
        merged = to_result & (prev_role == rec.TOOL)
        n_msg[to_result & ~merged] = 1
        role[to_result & ~merged] = rec.SYSTEM

        # -- record slots --
        has_user = np.bincount(ev.traj[ev.kind == USER], minlength=len(ev.start) - 1) > 0
        pre_sys = sysmsg_of[out_variant]
        pre_user = in_user_of[out_variant] & ~has_user[out_traj]
        pre = (pre_sys | pre_user).astype(np.int64)
        per_row = pre + np.bincount(o, weights=n_msg, minlength=n_out).astype(np.int64)
        row_rec = exclusive(per_row)
        csum = np.cumsum(n_msg)
        within = csum - n_msg - (csum - n_msg)[row_ev[o]] if m else csum
        slot = row_rec[o] + pre[o] + within
        r_total = int(row_rec[-1])
        r_role = np.zeros(r_total, dtype=np.int8)
        r_content = np.full(r_total, -1, dtype=np.int64)
        r_reason = np.full(r_total, -1, dtype=np.int64)
        r_callid = np.full(r_total, -1, dtype=np.int64)
        r_error = np.zeros(r_total, dtype=bool)
        r_ncalls = np.full(r_total, -1, dtype=np.int64)

        text, aux = self.text, self.aux
        t_text = text.add(ev.fields["text"])
        t_content = text.add(ev.fields["content"])
        used_variants = first_seen(out_variant)[0]
        prompt_ref = np.full(len(plans), -1, dtype=np.int64)
        prompt_ref[used_variants] = text.add([plans[i].prompt for i in used_variants.tolist()])
        prompt_ref[used_variants] += np.arange(len(used_variants))
        a_reason = aux.add(ev.fields["reasoning"])
        a_callid = self.a_callid = aux.add(ev.fields["call_id"])

        # prefix messages
        pre_rows = np.flatnonzero(pre > 0)
        r_role[row_rec[pre_rows]] = np.where(pre_sys[pre_rows], rec.SYSTEM, rec.USER)
        r_content[row_rec[pre_rows]] = prompt_ref[out_variant[pre_rows]]

        # user messages (the first one carries the prompt when it is placed in the user turn)
        users = np.flatnonzero(is_user)
        r_role[slot[users]] = rec.USER
        r_content[slot[users]] = t_text + e[users]
        first_user_local = np.full(len(ev.start) - 1, np.iinfo(np.int64).max, dtype=np.int64)
        user_events = np.flatnonzero(ev.kind == USER)
        np.minimum.at(first_user_local, ev.traj[user_events], ev.local[user_events])
        lead = users[
            in_user_of[v[users]] & (ev.local[e[users]] == first_user_local[ev.traj[e[users]]])
        ]
        if len(lead):
            prompts = pa.array([p.prompt for p in plans], pa.large_string())
            joined = pc.binary_join_element_wise(
                prompts.take(pa.array(v[lead])),
                ev.fields["text"].take(pa.array(e[lead])),
                lit("\n\n"),
            )
            r_content[slot[lead]] = text.add(joined) + np.arange(len(lead))

        # tool results
        results = np.flatnonzero(is_res)
        r_role[slot[results]] = rec.TOOL
        r_content[slot[results]] = t_content + e[results]
        r_callid[slot[results]] = a_callid + e[results]
        err = ev.fields["is_error"].take(pa.array(e[results]))
        r_error[slot[results]] = pc.fill_null(err, False).to_numpy(zero_copy_only=False)

        # assistant messages, and the messages calls start
        assts = np.flatnonzero(is_asst)
        r_role[slot[assts]] = rec.ASSISTANT
        r_content[slot[assts]] = t_text + e[assts]
        reasoning_null = ev.fields["reasoning"].is_null().to_numpy(zero_copy_only=False)
        has_reason = assts[~reasoning_null[e[assts]]]
        r_reason[slot[has_reason]] = a_reason + e[has_reason]
        splits = np.flatnonzero(split)
        r_role[slot[splits] + 1] = rec.ASSISTANT
        heads = np.flatnonzero(is_call & head)
        r_role[slot[heads]] = rec.ASSISTANT

        lay = Layout(e, v, k, slot, head, split, merged, r_role, r_content, r_callid)

        # calls: skill loads and tool calls
        calls = np.flatnonzero(is_call)
        owner_entry = row_ev[o[calls]] + ev.local[ev.owner[e[calls]]]
        owner_slot = slot[owner_entry]
        chain_len = np.bincount(owner_entry, minlength=m)
        texts = CallTexts.of(len(calls))
        call_render.skills(self, lay, calls, texts)
        call_render.tool_calls(self, lay, calls, texts)
        piece, names, ids = texts.piece, texts.names, texts.ids

        # api: tool_calls lists on the owner messages
        owned = np.zeros(m + 1, dtype=bool)
        owned[owner_entry[api[calls]]] = True
        api_owner = np.flatnonzero(owned)
        r_ncalls[slot[api_owner]] = chain_len[api_owner]
        api_mask = api[calls]

        # text protocols: the calls block, and the content of the message it goes in
        txt_mask = ~api_mask
        if txt_mask.any():
            call_render.blocks(
                self, lay, owner_entry[txt_mask], owner_slot[txt_mask], piece[txt_mask]
            )

        # hooks: their own messages, or appended to the tool message before them
        own_hooks = np.flatnonzero(is_hook & ~merged)
        r_role[slot[own_hooks]] = role[own_hooks]
        if len(hook_rows):
            hook_render.hooks(self, lay, hook_rows, hook_code, hook_names, hook_plan)

        self.engine.stats.calls += int((k == CALL).sum())
        return rec.Records(
            per_row=per_row,
            role=r_role,
            content=r_content,
            reasoning=r_reason,
            call_id=r_callid,
            is_error=r_error,
            ncalls=r_ncalls,
            call_ids=ids[api_mask],
            call_names=names[api_mask],
            call_args=piece[api_mask],
            text=text,
            aux=aux,
        )
