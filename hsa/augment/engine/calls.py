"""Tool calls and skill loads under each row's variant: argument JSON, call pieces, turn blocks.

Arguments are taken apart once per batch (``jsontext.scan``); each (variant class, skeleton)
gets a template derived from the reference formatter (``templates.derive``); templates are
filled in bulk (``fill.fill``). A text protocol's pieces are then joined per turn into the
block ``format_calls`` would write.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.events import ASSISTANT, CALL, SKILL
from hsa.augment.engine.fill import Leaves
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.records import TOOL, distinct, exclusive, first_seen, run_starts
from hsa.augment.engine.styles import NotDecomposable, Restart
from hsa.augment.engine.templates import derive
from hsa.augment.engine.variants import ToolPlan, VariantPlan
from hsa.augment.mapping import apply_steps
from hsa.errors import HsaError, ProtocolError

if TYPE_CHECKING:
    from hsa.augment.engine.batch import Batch, CallTexts, Layout


def skills(batch: Batch, lay: Layout, calls: np.ndarray, out: CallTexts) -> None:
    """Skill loads: the call's piece and name, and the skill result message after the turn."""
    ev = batch.ev
    e, v, k = lay.e, lay.v, lay.k
    piece, names, ids = out.piece, out.names, out.ids
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
        plan = batch.plans[vi]
        event = int(e[rows[at[j]]])
        try:
            skill = plan.skill(skill_names[si])
        except ProtocolError as exc:
            raise batch.fail(exc, event) from None
        try:
            pieces.append(plan.style.one(skill.call_name, skill.call_args))
        except ProtocolError as exc:
            raise batch.fail(exc, int(ev.owner[event])) from None
        except NotDecomposable:
            batch.engine._broken.add(plan.style.key)
            raise Restart from None
        contents.append(skill.content)
        call_names.append(skill.call_name)
    t_skill = batch.text.add(contents)
    a_piece = batch.aux.add(pieces)
    a_name = batch.aux.add(call_names)
    counter = ev.counter[e[rows]]
    a_ids = batch.aux.add(
        pc.binary_join_element_wise(
            lit("call_"), pa.array(counter).cast(pa.large_string()), lit("")
        )
    )
    result_slot = lay.slot[rows] + lay.head[rows]
    lay.role[result_slot] = TOOL
    lay.content[result_slot] = t_skill + inverse
    lay.call_id[result_slot] = a_ids + np.arange(len(rows))
    piece[mine] = a_piece + inverse
    names[mine] = a_name + inverse
    ids[mine] = a_ids + np.arange(len(rows))


def tool_calls(batch: Batch, lay: Layout, calls: np.ndarray, out: CallTexts) -> None:
    """Tool calls: surface name, call id, and the argument JSON (api) or call piece (text)."""
    ev = batch.ev
    e, v, k = lay.e, lay.v, lay.k
    piece, names, ids = out.piece, out.names, out.ids
    mine = np.flatnonzero(k[calls] == CALL)
    if not len(mine):
        return
    rows = calls[mine]
    canon, args, sc = ev.json_field("args", CALL)  # the batch's canonical calls
    call_index = np.searchsorted(canon, e[rows])
    ids[mine] = batch.a_callid + e[rows]
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
        plan = batch.plans[vi]
        tp = plan.tool(tool_names[ti])
        key = (plan.style.key, "" if plan.style.api else tp.name, tp.steps_key)
        if key not in class_ids:
            class_ids[key] = len(class_keys)
            class_keys.append((plan, tp))
        class_of[j] = class_ids[key]
        surface.append(tp.name)
    a_names = batch.aux.add(surface)
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
            tid_of[j] = batch.engine.book.id(
                key,
                lambda style=style, name=name, steps=steps, s=skel_text[si]: derive(
                    lambda value: style.one(name, value), s, steps
                ),
            )
        except NotDecomposable:
            batch.engine._broken.add(plan.style.key)
            raise Restart from None
        except ProtocolError as exc:
            raise batch.fail(exc, int(ev.owner[e[first_row]])) from None
    tid = tid_of[tinverse]
    ok = sc.ok[call_index] & (tid >= 0) & ~leaves.exotic_items()[call_index]
    out = np.full(len(rows), -1, dtype=np.int64)
    if ok.any():
        out[ok] = batch.fill(tid[ok], call_index[ok], sc.leaf_start, leaves, batch.aux)
    if (~ok).any():
        slow = np.flatnonzero(~ok)
        batch.engine.stats.calls_exact += len(slow)
        texts = []
        for j in slow.tolist():
            event = int(e[rows[j]])
            plan, tp = class_keys[cls[j]]
            texts.append(exact_call(batch, plan, tp, args[int(call_index[j])].as_py(), event))
        out[slow] = batch.aux.add(texts) + np.arange(len(slow))
    batch.engine.stats.python_values += leaves.python_values
    piece[mine] = out


def exact_call(batch: Batch, plan: VariantPlan, tp: ToolPlan, raw: str | None, event: int) -> str:
    """One call's text through the reference (``apply_steps`` and the format)."""
    try:
        value = json.loads(raw) if raw else {}
    except (ValueError, RecursionError) as exc:
        raise batch.fail(HsaError(f"tool-call args are not JSON: {exc}"), event) from None
    if not isinstance(value, dict):
        raise batch.fail(HsaError("tool-call args must be a JSON object"), event)
    try:
        return plan.style.one(tp.name, apply_steps(value, tp.steps))
    except NotDecomposable:
        batch.engine._broken.add(plan.style.key)
        raise Restart from None
    except ProtocolError as exc:
        raise batch.fail(exc, int(batch.ev.owner[event])) from None


def blocks(
    batch: Batch, lay: Layout, owner_entry: np.ndarray, owner_slot: np.ndarray, piece: np.ndarray
) -> None:
    """Join each turn's call pieces into its block and set the owning message's content."""
    e, v, k, split, r_content = lay.e, lay.v, lay.k, lay.split, lay.content
    starts = run_starts(owner_entry)  # calls come in entry order, so owners are sorted
    owners = owner_entry[starts]
    counts = np.diff(np.append(starts, len(owner_entry)))
    lists = pa.ListArray.from_arrays(
        pa.array(exclusive(counts).astype(np.int32)), batch.aux.take(piece)
    )
    ov = v[owners]
    seps = pa.array([batch.plans[i].style.sep for i in ov.tolist()], pa.large_string())
    joined = pc.binary_join(lists, seps)
    prefixes = pa.array([batch.plans[i].style.prefix for i in ov.tolist()], pa.large_string())
    suffixes = pa.array([batch.plans[i].style.suffix for i in ov.tolist()], pa.large_string())
    block = pc.binary_join_element_wise(prefixes, joined, suffixes, lit(""))
    slots = owner_slot[starts]
    is_asst = k[owners] == ASSISTANT
    split_owner = split[owners]
    # assistant text + "\n" + block, unless the format keeps them apart (then the block
    # is the message after the text); a turn started by a call is the block alone
    with_text = is_asst & ~split_owner
    texts = batch.ev.fields["text"].take(pa.array(e[owners]))
    content = pc.if_else(
        pa.array(with_text), pc.binary_join_element_wise(texts, block, lit("\n")), block
    )
    base = batch.text.add(content)
    target = np.where(split_owner, slots + 1, slots)
    r_content[target] = base + np.arange(len(owners))
