"""The engine: canonical trajectories x variants -> OpenAI-format messages, by columns.

``Engine.render(table, out_traj, out_variant)`` renders output row ``i`` as trajectory
``out_traj[i]`` under variant ``out_variant[i]`` and returns the ``messages`` column. It is
``render(map_events(events, variant.mapping), variant.harness)`` for every row -- the tests
check exactly that -- computed without a Python loop over rows:

1. events are flattened and their turn structure computed once per batch (``events.py``);
2. every output row's events are laid out as numpy index columns, and how many messages each
   event makes under its row's variant (hook merges included) gives every message its slot;
3. tool-call arguments and hook payloads are taken apart once per batch (``jsontext.py``),
   rendered through templates derived once per (variant class, skeleton) (``templates.py``)
   and filled in bulk (``fill.py``);
4. text-protocol call blocks are joined per turn with Arrow list kernels.

What this path cannot render exactly goes through the reference: single calls or hook firings
whose JSON it cannot take apart (``calls_exact``, ``hooks_exact``), and whole rows under a call
format that does not decompose into per-call pieces (``rows_exact``). ``stats`` counts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine import records as rec
from hsa.augment.engine.events import ASSISTANT, CALL, HOOK, RESULT, SKILL, USER, Events, explode
from hsa.augment.engine.fill import Leaves, TemplateBook, fill
from hsa.augment.engine.jsontext import lit, scan
from hsa.augment.engine.records import distinct, first_seen, run_starts
from hsa.augment.engine.styles import NotDecomposable
from hsa.augment.engine.templates import derive
from hsa.augment.engine.variants import VariantPlan
from hsa.augment.mapping import apply_steps, map_events
from hsa.augment.planner import Variant
from hsa.errors import DatasetError, HsaError, ProtocolError
from hsa.harness.events import HookFired, Trajectory
from hsa.harness.render import hook_text, render


@dataclass(slots=True)
class EngineStats:
    """What the engine did, cumulative over batches."""

    trajectories: int = 0
    rows: int = 0
    calls: int = 0
    calls_exact: int = 0
    hooks: int = 0
    hooks_exact: int = 0
    rows_exact: int = 0
    python_values: int = 0

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


#: (row of the batch) -> (file, how to name the row in an error)
Locate = Callable[[int], tuple[str | None, str]]


def _default_locate(table: pa.Table, file: str | None) -> Locate:
    ids = table.column("id")

    def locate(row: int) -> tuple[str | None, str]:
        return file, f"row {row} (id {ids[row].as_py()!r})"

    return locate


class _Restart(Exception):
    """A call style turned out not to decompose; render the batch again without it."""


def _excl(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


class Engine:
    """Renders canonical trajectories under planned variants (see the module docstring)."""

    def __init__(self, variants: Sequence[Variant] = ()):
        self.plans: list[VariantPlan] = []
        self.book = TemplateBook()
        self.stats = EngineStats()
        self._broken: set[str] = set()
        for variant in variants:
            self.add(variant)

    def add(self, variant: Variant) -> int:
        """Make ``variant`` available to render under; returns its index."""
        self.plans.append(VariantPlan.of(len(self.plans), variant))
        return len(self.plans) - 1

    # --- per-variant columns -------------------------------------------------------------

    def tools_column(self, out_variant: np.ndarray) -> pa.Array:
        """The ``tools`` column (JSON text), dictionary-encoded by variant."""
        return rec.unique_dictionary(out_variant, [p.tools_json for p in self.plans])

    def protocol_column(self, out_variant: np.ndarray) -> pa.Array:
        return rec.unique_dictionary(out_variant, [p.protocol for p in self.plans])

    # --- rendering --------------------------------------------------------------------------

    def render(
        self,
        table: pa.Table,
        out_traj: np.ndarray,
        out_variant: np.ndarray,
        *,
        file: str | None = None,
        locate: Locate | None = None,
    ) -> pa.Array:
        """The ``messages`` column for output rows (``out_traj[i]``, ``out_variant[i]``).

        Errors name the row as ``locate(row)`` does: ``(file, row name)`` for a row of
        ``table``; by default ``file`` and the row's index and id.
        """
        out_traj = np.asarray(out_traj, dtype=np.int64)
        out_variant = np.asarray(out_variant, dtype=np.int64)
        if locate is None:
            locate = _default_locate(table, file)
        events = explode(table, locate=locate)
        self.stats.trajectories += table.num_rows
        self.stats.rows += len(out_traj)
        while True:
            exact = self._exact_rows(events, out_traj, out_variant)
            text, aux = rec.Pool(), rec.Pool()
            try:
                fast = _Batch(self, table, events, text, aux, locate).render(
                    out_traj[~exact], out_variant[~exact]
                )
                break
            except _Restart:
                continue
        self.stats.rows_exact += int(exact.sum())
        slow = self._reference(table, out_traj[exact], out_variant[exact], text, aux, locate)
        return rec.to_arrow(rec.merge(fast, slow, exact))

    def _exact_rows(self, ev: Events, out_traj: np.ndarray, out_variant: np.ndarray) -> np.ndarray:
        broken = np.array(
            [not p.style.decomposable or p.style.key in self._broken for p in self.plans]
        )
        exact = broken[out_variant] if len(self.plans) else np.zeros(len(out_traj), bool)
        # A skill load's call id "call_<n>" must not clash with a tool call's id; render then
        # picks another, which the row-by-row reference reproduces.
        skills = np.flatnonzero(ev.kind == SKILL)
        if len(skills):
            ids = ev.fields["call_id"]
            named = np.flatnonzero((ev.kind == CALL) | (ev.kind == RESULT))
            taken = pc.binary_join_element_wise(
                pa.array(ev.traj[named]).cast(pa.large_string()),
                ids.take(pa.array(named)),
                lit(":"),
            )
            wanted = pc.binary_join_element_wise(
                pa.array(ev.traj[skills]).cast(pa.large_string()),
                pc.binary_join_element_wise(
                    lit("call_"), pa.array(ev.counter[skills]).cast(pa.large_string()), lit("")
                ),
                lit(":"),
            )
            clash = pc.is_in(wanted, value_set=taken).to_numpy(zero_copy_only=False)
            if clash.any():
                bad = np.zeros(len(ev.start) - 1, dtype=bool)
                bad[ev.traj[skills[clash]]] = True
                exact |= bad[out_traj]
        return exact

    def _reference(
        self,
        table: pa.Table,
        out_traj: np.ndarray,
        out_variant: np.ndarray,
        text: rec.Pool,
        aux: rec.Pool,
        locate: Locate,
    ) -> rec.Records:
        """Rows rendered one by one with ``map_events`` + ``render`` (the exact path)."""
        if not len(out_traj):
            return rec.Records.empty(text, aux)
        rows = table.take(pa.array(np.unique(out_traj))).to_pylist()
        by_index = dict(zip(np.unique(out_traj).tolist(), rows, strict=True))
        convs = []
        for t, v in zip(out_traj.tolist(), out_variant.tolist(), strict=True):
            row = by_index[t]
            file, where = locate(t)
            try:
                trajectory = Trajectory.from_row(row, where=where)
                plan = self.plans[v]
                events = map_events(trajectory.events, plan.variant.mapping)
                convs.append(render(events, plan.variant.harness))
            except HsaError as exc:
                raise DatasetError(exc.message, file=file, where=exc.where or where) from None
        return conversations_to_records(convs, text, aux)


def conversations_to_records(convs: Sequence, text: rec.Pool, aux: rec.Pool) -> rec.Records:
    """Rendered ``Conversation``s as records (the exact path, and the reference in tests)."""
    roles = {name: i for i, name in enumerate(rec.ROLES)}
    per_row, role, content, reasoning, call_id, is_error, ncalls = [], [], [], [], [], [], []
    call_ids, call_names, call_args = [], [], []
    texts: list[str] = []
    auxes: list[str] = []

    def ref(pool: list[str], base: int, value: str | None) -> int:
        if value is None:
            return -1
        pool.append(value)
        return base + len(pool) - 1

    tb, ab = text.size, aux.size
    for conv in convs:
        per_row.append(len(conv.messages))
        for message in conv.messages:
            role.append(roles[message["role"]])
            content.append(ref(texts, tb, message.get("content")))
            reasoning.append(ref(auxes, ab, message.get("reasoning_content")))
            call_id.append(ref(auxes, ab, message.get("tool_call_id")))
            is_error.append(bool(message.get("is_error", False)))
            calls = message.get("tool_calls")
            ncalls.append(-1 if calls is None else len(calls))
            for call in calls or ():
                call_ids.append(ref(auxes, ab, call["id"]))
                call_names.append(ref(auxes, ab, call["function"]["name"]))
                call_args.append(ref(auxes, ab, call["function"]["arguments"]))
    text.add(texts)
    aux.add(auxes)

    def arr(values: list, dtype=np.int64) -> np.ndarray:
        return np.array(values, dtype=dtype)

    return rec.Records(
        per_row=arr(per_row),
        role=arr(role, np.int8),
        content=arr(content),
        reasoning=arr(reasoning),
        call_id=arr(call_id),
        is_error=arr(is_error, bool),
        ncalls=arr(ncalls),
        call_ids=arr(call_ids),
        call_names=arr(call_names),
        call_args=arr(call_args),
        text=text,
        aux=aux,
    )


class _Batch:
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
        row_ev = _excl(count)
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
        row_rec = _excl(per_row)
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

        # calls: skill loads and tool calls
        calls = np.flatnonzero(is_call)
        owner_entry = row_ev[o[calls]] + ev.local[ev.owner[e[calls]]]
        owner_slot = slot[owner_entry]
        chain_len = np.bincount(owner_entry, minlength=m)
        piece = np.full(len(calls), -1, dtype=np.int64)  # aux ref of each call's text
        names = np.full(len(calls), -1, dtype=np.int64)
        ids = np.full(len(calls), -1, dtype=np.int64)
        self._skills(calls, e, v, k, slot, head, piece, names, ids, r_role, r_content, r_callid)
        self._tool_calls(calls, e, v, k, piece, names, ids)

        # api: tool_calls lists on the owner messages
        owned = np.zeros(m + 1, dtype=bool)
        owned[owner_entry[api[calls]]] = True
        api_owner = np.flatnonzero(owned)
        r_ncalls[slot[api_owner]] = chain_len[api_owner]
        api_mask = api[calls]

        # text protocols: the calls block, and the content of the message it goes in
        txt_mask = ~api_mask
        if txt_mask.any():
            self._blocks(
                calls[txt_mask],
                owner_entry[txt_mask],
                owner_slot[txt_mask],
                piece[txt_mask],
                e,
                v,
                k,
                split,
                r_content,
            )

        # hooks: their own messages, or appended to the tool message before them
        own_hooks = np.flatnonzero(is_hook & ~merged)
        r_role[slot[own_hooks]] = role[own_hooks]
        if len(hook_rows):
            self._hooks(hook_rows, hook_code, hook_names, hook_plan, e, v, slot, merged, r_content)

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

    # -- skills ---------------------------------------------------------------------------

    def _skills(self, calls, e, v, k, slot, head, piece, names, ids, r_role, r_content, r_callid):
        ev = self.ev
        mine = np.flatnonzero(k[calls] == SKILL)
        if not len(mine):
            return
        rows = calls[mine]
        encoded = ev.fields["skill_id"].take(pa.array(e[rows])).dictionary_encode()
        code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        skill_names = encoded.dictionary.to_pylist()
        pair = v[rows] * len(skill_names) + code
        uniq, at, inverse = first_seen(pair)
        contents, pieces, call_names = [], [], []
        for j, p in enumerate(uniq.tolist()):
            vi, si = divmod(p, len(skill_names))
            plan = self.plans[vi]
            try:
                skill = plan.skill(skill_names[si])
                pieces.append(plan.style.one(skill.call_name, skill.call_args))
            except ProtocolError as exc:
                raise self.fail(exc, int(e[rows[at[j]]])) from None
            except NotDecomposable:
                self.engine._broken.add(plan.style.key)
                raise _Restart from None
            contents.append(skill.content)
            call_names.append(skill.call_name)
        t_skill = self.text.add(contents)
        a_piece = self.aux.add(pieces)
        a_name = self.aux.add(call_names)
        counter = ev.counter[e[rows]]
        a_ids = self.aux.add(
            pc.binary_join_element_wise(
                lit("call_"), pa.array(counter).cast(pa.large_string()), lit("")
            )
        )
        result_slot = slot[rows] + head[rows]
        r_role[result_slot] = rec.TOOL
        r_content[result_slot] = t_skill + inverse
        r_callid[result_slot] = a_ids + np.arange(len(rows))
        piece[mine] = a_piece + inverse
        names[mine] = a_name + inverse
        ids[mine] = a_ids + np.arange(len(rows))

    # -- tool calls -----------------------------------------------------------------------

    def _tool_calls(self, calls, e, v, k, piece, names, ids):
        ev = self.ev
        mine = np.flatnonzero(k[calls] == CALL)
        if not len(mine):
            return
        rows = calls[mine]
        canon = np.flatnonzero(ev.kind == CALL)  # the batch's canonical calls
        call_index = np.searchsorted(canon, e[rows])
        ids[mine] = self.a_callid + e[rows]
        args = ev.fields["args"].take(pa.array(canon))
        sc = scan(args)
        leaves = Leaves(sc)
        skel = sc.skeleton.dictionary_encode()
        skel_code = skel.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        skel_text = skel.dictionary.to_pylist()
        tools = ev.fields["tool"].take(pa.array(canon)).dictionary_encode()
        tool_code = tools.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        tool_names = tools.dictionary.to_pylist()

        # classes: (style, surface name, steps) per (variant, tool)
        pair = v[rows] * len(tool_names) + tool_code[call_index]
        uniq, inverse = distinct(pair)
        class_of = np.zeros(len(uniq), dtype=np.int64)
        class_keys: list[tuple] = []
        class_ids: dict[tuple, int] = {}
        surface: list[str] = []
        for j, p in enumerate(uniq.tolist()):
            vi, ti = divmod(p, len(tool_names))
            plan = self.plans[vi]
            tp = plan.tool(tool_names[ti])
            key = (plan.style.key, "" if plan.style.api else tp.name, tp.steps_key)
            if key not in class_ids:
                class_ids[key] = len(class_keys)
                class_keys.append((plan, tp))
            class_of[j] = class_ids[key]
            surface.append(tp.name)
        a_names = self.aux.add(surface)
        names[mine] = a_names + inverse
        cls = class_of[inverse]

        # templates: one per (class, skeleton)
        tpair = cls * max(len(skel_text), 1) + skel_code[call_index]
        tuniq, tat, tinverse = distinct(tpair, first=True)
        tid_of = np.full(len(tuniq), -1, dtype=np.int64)
        for j, p in enumerate(tuniq.tolist()):
            ci, si = divmod(p, max(len(skel_text), 1))
            plan, tp = class_keys[ci]
            first_row = rows[tat[j]]
            if not sc.ok[call_index[tat[j]]]:
                continue
            name_key = "" if plan.style.api else tp.name
            key = ("call", plan.style.key, name_key, tp.steps_key, skel_text[si])
            style, name, steps = plan.style, tp.name, tp.steps
            try:
                tid_of[j] = self.engine.book.id(
                    key,
                    lambda style=style, name=name, steps=steps, s=skel_text[si]: derive(
                        lambda value: style.one(name, value), s, steps
                    ),
                )
            except NotDecomposable:
                self.engine._broken.add(plan.style.key)
                raise _Restart from None
            except ProtocolError as exc:
                raise self.fail(exc, int(e[first_row])) from None
        tid = tid_of[tinverse]
        ok = sc.ok[call_index] & (tid >= 0) & ~leaves.exotic_items()[call_index]
        out = np.full(len(rows), -1, dtype=np.int64)
        if ok.any():
            out[ok] = self._fill(tid[ok], call_index[ok], sc.leaf_start, leaves, self.aux)
        if (~ok).any():
            slow = np.flatnonzero(~ok)
            self.engine.stats.calls_exact += len(slow)
            texts = []
            for j in slow.tolist():
                event = int(e[rows[j]])
                plan, tp = class_keys[cls[j]]
                texts.append(self._exact_call(plan, tp, args[int(call_index[j])].as_py(), event))
            out[slow] = self.aux.add(texts) + np.arange(len(slow))
        self.engine.stats.python_values += leaves.python_values
        piece[mine] = out

    def _fill(
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

    def _exact_call(self, plan: VariantPlan, tp, raw: str | None, event: int) -> str:
        try:
            value = json.loads(raw) if raw else {}
        except (ValueError, RecursionError) as exc:
            raise self.fail(HsaError(f"tool-call args are not JSON: {exc}"), event) from None
        if not isinstance(value, dict):
            raise self.fail(HsaError("tool-call args must be a JSON object"), event)
        try:
            return plan.style.one(tp.name, apply_steps(value, tp.steps))
        except NotDecomposable:
            self.engine._broken.add(plan.style.key)
            raise _Restart from None
        except ProtocolError as exc:
            raise self.fail(exc, event) from None

    # -- text-protocol blocks ---------------------------------------------------------------

    def _blocks(self, calls, owner_entry, owner_slot, piece, e, v, k, split, r_content):
        """Join each turn's call pieces into its block and set the owning message's content."""
        starts = run_starts(owner_entry)  # calls come in entry order, so owners are sorted
        owners = owner_entry[starts]
        counts = np.diff(np.append(starts, len(owner_entry)))
        lists = pa.ListArray.from_arrays(
            pa.array(_excl(counts).astype(np.int32)), self.aux.take(piece)
        )
        ov = v[owners]
        seps = pa.array([self.plans[i].style.sep for i in ov.tolist()], pa.large_string())
        joined = pc.binary_join(lists, seps)
        prefixes = pa.array([self.plans[i].style.prefix for i in ov.tolist()], pa.large_string())
        suffixes = pa.array([self.plans[i].style.suffix for i in ov.tolist()], pa.large_string())
        block = pc.binary_join_element_wise(prefixes, joined, suffixes, lit(""))
        slots = owner_slot[starts]
        is_asst = k[owners] == ASSISTANT
        split_owner = split[owners]
        # assistant text + "\n" + block, unless the format keeps them apart (then the block
        # is the message after the text); a turn started by a call is the block alone
        with_text = is_asst & ~split_owner
        texts = self.ev.fields["text"].take(pa.array(e[owners]))
        content = pc.if_else(
            pa.array(with_text), pc.binary_join_element_wise(texts, block, lit("\n")), block
        )
        base = self.text.add(content)
        target = np.where(split_owner, slots + 1, slots)
        r_content[target] = base + np.arange(len(owners))

    # -- hooks ----------------------------------------------------------------------------

    def _hooks(self, hook_rows, hook_code, hook_names, hook_plan, e, v, slot, merged, r_content):
        ev = self.ev
        canon = np.flatnonzero(ev.kind == HOOK)
        hook_index = np.searchsorted(canon, e[hook_rows])
        payloads = ev.fields["payload"].take(pa.array(canon))
        sc = scan(payloads)
        leaves = Leaves(sc)
        skel = sc.skeleton.dictionary_encode()
        skel_code = skel.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        skel_text = skel.dictionary.to_pylist()
        width = max(len(skel_text), 1)
        # a template per (variant, hook, skeleton): hook texts depend on the variant's hook
        vh = v[hook_rows] * len(hook_names) + hook_code
        pair = vh * width + skel_code[hook_index]
        uniq, firsts, inverse = distinct(pair, first=True)
        tid_of = np.full(len(uniq), -1, dtype=np.int64)
        for j, p in enumerate(uniq.tolist()):
            vhi, si = divmod(p, width)
            vi, hi = divmod(vhi, len(hook_names))
            at = firsts[j]
            if not sc.ok[hook_index[at]]:
                continue
            plan = hook_plan[(vi, hi)]
            harness = self.plans[vi].variant.harness
            hook = plan.hook
            key = ("hook", hook.message, hook.wrapper, skel_text[si])
            event_name = ev.fields["hook_event"][int(e[hook_rows[at]])].as_py()
            try:
                tid_of[j] = self.engine.book.id(
                    key,
                    lambda h=harness, s=plan.surface_id, n=event_name, sk=skel_text[si]: derive(
                        lambda payload: hook_text(h, HookFired(s, n, payload))[1], sk
                    ),
                )
            except ProtocolError as exc:
                raise self.fail(exc, int(e[hook_rows[at]])) from None
        tid = tid_of[inverse]
        ok = sc.ok[hook_index] & (tid >= 0) & ~leaves.exotic_items()[hook_index]
        self.engine.stats.hooks += len(hook_rows)
        texts = np.full(len(hook_rows), -1, dtype=np.int64)
        if ok.any():
            texts[ok] = self._fill(tid[ok], hook_index[ok], sc.leaf_start, leaves, self.text)
        if (~ok).any():
            slow = np.flatnonzero(~ok)
            self.engine.stats.hooks_exact += len(slow)
            out = []
            for j in slow.tolist():
                event = int(e[hook_rows[j]])
                vi = int(v[hook_rows[j]])
                plan = hook_plan[(vi, int(hook_code[j]))]
                row = {name: ev.fields[name][event].as_py() for name in ("payload", "hook_event")}
                try:
                    payload = json.loads(row["payload"]) if row["payload"] else {}
                    fired = HookFired(plan.surface_id, row["hook_event"], payload)
                    out.append(hook_text(self.plans[vi].variant.harness, fired)[1])
                except (ValueError, RecursionError) as exc:
                    raise self.fail(HsaError(f"hook payload is not JSON: {exc}"), event) from None
                except ProtocolError as exc:
                    raise self.fail(exc, event) from None
            texts[slow] = self.text.add(out) + np.arange(len(slow))
        self.engine.stats.python_values += leaves.python_values

        own = ~merged[hook_rows]
        r_content[slot[hook_rows[own]]] = texts[own]
        if (~own).any():
            joined = hook_rows[~own]
            # the tool message they join is the last message before them in their row
            target = slot[joined] - 1
            first = run_starts(target)  # hooks come in entry order, so targets are sorted
            uniq_t = target[first]
            counts = np.diff(np.append(first, len(target)))
            base = r_content[uniq_t]
            single = counts == 1
            if single.all():
                # rows of one trajectory under variants with the same hook wording join the
                # same two texts: join each distinct pair once
                pairs, inverse = np.unique((base << 32) | texts[~own][first], return_inverse=True)
                merged_text = pc.binary_join_element_wise(
                    self.text.take(pairs >> 32),
                    self.text.take(pairs & 0xFFFFFFFF),
                    lit("\n"),
                )
                r_content[uniq_t] = self.text.add(merged_text) + inverse
                return
            size = counts + 1
            starts = _excl(size)
            idx = np.empty(int(starts[-1]), dtype=np.int64)
            idx[starts[:-1]] = base
            rank = np.arange(len(joined)) - np.repeat(first, counts)
            idx[np.repeat(starts[:-1], counts) + 1 + rank] = texts[~own]
            lists = pa.ListArray.from_arrays(pa.array(starts.astype(np.int32)), self.text.take(idx))
            merged_text = pc.binary_join(lists, lit("\n"))
            r_content[uniq_t] = self.text.add(merged_text) + np.arange(len(uniq_t))
