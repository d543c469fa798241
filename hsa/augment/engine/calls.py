"""Stages 5 and 6 of a batch: tool calls and skill loads under each row's variant.

Stage 5 (``call_texts``) gives every call entry its surface name, id and text: the arguments
JSON under ``api``, its piece of the turn's block under a text protocol. Arguments are taken
apart once per batch (``jsontext.scan``); each (variant class, skeleton) gets a template
derived from the reference formatter (``templates.derive``); templates are filled in bulk
(``fill.fill``). A skill load also makes its result message. Stage 6 puts the calls where
``render`` puts them: ``tool_calls`` lists on the owning messages (``call_lists``, api), or
each turn's pieces joined into the block ``format_calls`` writes (``blocks``, text protocols).

A call format found not to decompose while rendering raises ``styles.NotDecomposable``, which
``Engine.render`` handles (its docstring says how).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.events import ASSISTANT, CALL, SKILL
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.layout import Entries, Layout
from hsa.augment.engine.plans import ToolPlan, VariantPlan
from hsa.augment.engine.records import Part, distinct, exclusive, first_seen, run_starts
from hsa.augment.engine.template_fill import Leaves
from hsa.augment.engine.templates import Template, derive
from hsa.augment.engine.texts import Sources
from hsa.augment.mapping import ArgumentClash, apply_steps
from hsa.errors import HsaError, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hsa.augment.engine.batch import Batch
    from hsa.augment.engine.call_styles import CallStyle
    from hsa.augment.mapping import Step


@dataclass(frozen=True, slots=True)
class CallTexts:
    """Stage 5: per call entry (``at``, in entry order), the entry whose message holds it
    (``owner``) and aux-pool references of its text (``piece``), ``name`` and ``id``."""

    at: np.ndarray
    owner: np.ndarray
    piece: np.ndarray
    name: np.ndarray
    id: np.ndarray


def _call_template(
    style: CallStyle, name: str, steps: Sequence[Step], skeleton: str
) -> Template | None:
    """The template of one call to ``name`` in ``style`` for arguments shaped ``skeleton``."""
    return derive(lambda value: style.one(name, value), skeleton, steps)


def call_texts(
    batch: Batch, src: Sources, ent: Entries, lay: Layout
) -> tuple[CallTexts, Part, dict[str, int]]:
    """Every call's text, name and id; the skill results' part; what took the exact path."""
    ev = batch.ev
    k = ent.kind
    at = np.flatnonzero((k == CALL) | (k == SKILL))
    owner = ent.row_start[ent.row[at]] + ev.local[ev.owner[ent.event[at]]]
    piece, name, ids = (np.full(len(at), -1, dtype=np.int64) for _ in range(3))
    skill = np.flatnonzero(k[at] == SKILL)
    results = Part(np.zeros(0, dtype=np.int64))
    if len(skill):
        piece[skill], name[skill], ids[skill], results = _skills(batch, ent, lay, at[skill])
    call = np.flatnonzero(k[at] == CALL)
    counts = {"calls": len(call)}
    if len(call):
        ids[call] = src.call_id + ent.event[at[call]]
        piece[call], name[call], more = _tool_calls(batch, ent, at[call])
        counts.update(more)
    return CallTexts(at, owner, piece, name, ids), results, counts


def _skills(
    batch: Batch, ent: Entries, lay: Layout, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Part]:
    """Skill loads: piece, name and id of each loading call, and the part of the result
    messages (after the call, or after the message the call starts)."""
    ev = batch.ev
    e, v = ent.event, ent.variant
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
    ids = a_ids + np.arange(len(rows))
    results = Part(lay.slot[rows] + lay.head[rows], content=t_skill + inverse, call_id=ids)
    return a_piece + inverse, a_name + inverse, ids, results


def _tool_calls(
    batch: Batch, ent: Entries, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Tool calls: piece (or arguments JSON) and surface name of each, and what took the
    exact path."""
    ev = batch.ev
    e, v = ent.event, ent.variant
    canon, args, sc = ev.json_field("args", CALL)  # the batch's canonical calls
    call_index = np.searchsorted(canon, e[rows])
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
    class_keys: list[tuple[VariantPlan, ToolPlan]] = []
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
    names = batch.aux.add(surface) + inverse
    cls = class_of[inverse]

    # templates: one per (class, skeleton)
    width = max(len(skel_text), 1)
    tpair = cls * width + skel_code[call_index]
    tuniq, tat, tinverse = distinct(tpair, first=True)
    tid_of = np.full(len(tuniq), -1, dtype=np.int64)
    for j, p in enumerate(tuniq.tolist()):
        ci, si = divmod(p, width)
        plan, tp = class_keys[ci]
        first_row = rows[tat[j]]
        if not sc.ok[call_index[tat[j]]]:
            continue
        name_key = "" if plan.style.api else tp.name
        template_key = ("call", plan.style.key, name_key, tp.steps_key, skel_text[si])
        try:
            tid_of[j] = batch.book.id(
                template_key,
                partial(_call_template, plan.style, tp.name, tp.steps, skel_text[si]),
            )
        except ProtocolError as exc:
            raise batch.fail(exc, int(ev.owner[e[first_row]])) from None
        except ArgumentClash as exc:
            raise batch.fail(
                _clashed(exc, plan, tool_names[tool_code[call_index[tat[j]]]]), int(e[first_row])
            ) from None
    tid = tid_of[tinverse]
    ok = sc.ok[call_index] & (tid >= 0) & ~leaves.exotic_items()[call_index]
    out = np.full(len(rows), -1, dtype=np.int64)
    if ok.any():
        out[ok] = batch.fill(tid[ok], call_index[ok], sc.leaf_start, leaves, batch.aux)
    slow = np.flatnonzero(~ok)
    if len(slow):
        texts = []
        for j in slow.tolist():
            plan, tp = class_keys[cls[j]]
            raw = args[int(call_index[j])].as_py()
            tool = tool_names[tool_code[call_index[j]]]
            texts.append(exact_call(batch, plan, tp, raw, int(e[rows[j]]), tool))
        out[slow] = batch.aux.add(texts) + np.arange(len(slow))
    return out, names, {"calls_exact": len(slow), "python_values": leaves.python_values}


def exact_call(
    batch: Batch, plan: VariantPlan, tp: ToolPlan, raw: str | None, event: int, tool: str
) -> str:
    """One call's text through the reference (``apply_steps`` and the format); ``tool``: the
    canonical name, for an error."""
    try:
        value = json.loads(raw) if raw else {}
    except (ValueError, RecursionError) as exc:
        raise batch.fail(HsaError(f"tool-call args are not JSON: {exc}"), event) from None
    if not isinstance(value, dict):
        raise batch.fail(HsaError("tool-call args must be a JSON object"), event)
    try:
        return plan.style.one(tp.name, apply_steps(value, tp.steps))
    except ProtocolError as exc:
        raise batch.fail(exc, int(batch.ev.owner[event])) from None
    except ArgumentClash as exc:
        raise batch.fail(_clashed(exc, plan, tool), event) from None


def _clashed(exc: ArgumentClash, plan: VariantPlan, tool: str) -> HsaError:
    """``exc`` naming the variant and the tool whose call it is about, said against that
    tool's schema where the plan knows it."""
    found = plan.canonical.tool(tool) if plan.canonical is not None else None
    if found is not None:
        exc = exc.against(found.parameters)
    rules = [name for name, _, _ in plan.variant.rules]
    return HsaError(
        f"under variant {plan.variant.variant_id} (rules {rules}), tool {tool!r}: "
        f"{exc.where}: {exc.message}"
    )


def call_lists(
    ent: Entries, lay: Layout, calls: CallTexts
) -> tuple[Part, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Stage 6, api: the number of ``tool_calls`` on each owning message, and the (id, name,
    arguments) references of the calls, in message order."""
    api = lay.api[calls.at]
    owned = np.zeros(len(ent) + 1, dtype=bool)
    owned[calls.owner[api]] = True
    owners = np.flatnonzero(owned)
    chain = np.bincount(calls.owner, minlength=len(ent))
    lists = (calls.id[api], calls.name[api], calls.piece[api])
    return Part(lay.slot[owners], ncalls=chain[owners]), lists


def blocks(batch: Batch, ent: Entries, lay: Layout, calls: CallTexts) -> Part:
    """Stage 6, text protocols: each turn's call pieces joined into its block, as the content
    of the message that owns them."""
    txt = ~lay.api[calls.at]
    if not txt.any():
        return Part(np.zeros(0, dtype=np.int64))
    owner_entry, piece = calls.owner[txt], calls.piece[txt]
    e, v, k = ent.event, ent.variant, ent.kind
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
    slots = lay.slot[owners]
    split_owner = lay.split[owners]
    # assistant text + "\n" + block, unless the format keeps them apart (then the block
    # is the message after the text); a turn started by a call, or by "", is the block alone
    with_text = (k[owners] == ASSISTANT) & ~split_owner & ~batch.ev.bare[e[owners]]
    texts = batch.ev.fields["text"].take(pa.array(e[owners]))
    content = pc.if_else(
        pa.array(with_text), pc.binary_join_element_wise(texts, block, lit("\n")), block
    )
    base = batch.text.add(content)
    target = np.where(split_owner, slots + 1, slots)
    return Part(target, content=base + np.arange(len(owners)))
