"""Stage 7 of a batch: hook firings under each row's variant.

Each firing's text comes from a template over its payload derived from the reference
``hook_text`` (or, for a payload the scan cannot take apart, from ``hook_text`` itself). It is
the content of a message of its own, or, with ``inject: tool_result``, joined to the tool
message before it, as ``render`` places them.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.events import HOOK
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.layout import Entries, HookSites, Layout
from hsa.augment.engine.records import Part, distinct, exclusive, run_starts
from hsa.augment.engine.template_fill import Leaves
from hsa.augment.engine.templates import Template, derive
from hsa.errors import HsaError, ProtocolError
from hsa.harness.events import HookFired
from hsa.harness.render import hook_text

if TYPE_CHECKING:
    from hsa.augment.engine.batch import Batch
    from hsa.harness.model import Harness


def _hook_template(harness: Harness, hook_id: str, event: str, skeleton: str) -> Template | None:
    """The template of hook ``hook_id``'s text at ``event`` for payloads shaped ``skeleton``."""
    return derive(
        lambda payload: hook_text(harness, HookFired(hook_id, event, payload))[1], skeleton
    )


def hooks(
    batch: Batch, ent: Entries, lay: Layout, sites: HookSites, content: np.ndarray | None
) -> tuple[Part, dict[str, int]]:
    """The part for the messages hook texts make or join (``content``: every message's
    content so far, read for the tool messages hooks join), and what took the exact path."""
    if not len(sites.at):
        return Part(np.zeros(0, dtype=np.int64)), {}
    texts, counts = _texts(batch, ent, sites)
    hook_rows = sites.at
    own = ~lay.merged[hook_rows]
    slots = lay.slot[hook_rows[own]]
    if own.all():
        return Part(slots, content=texts), counts
    assert content is not None  # a hook joins a tool message, so the caller read contents
    target, joined = _join(batch, lay.slot[hook_rows[~own]] - 1, texts[~own], content)
    part = Part(np.concatenate((slots, target)), content=np.concatenate((texts[own], joined)))
    return part, counts


def _texts(batch: Batch, ent: Entries, sites: HookSites) -> tuple[np.ndarray, dict[str, int]]:
    """Text-pool references of each firing's text."""
    ev = batch.ev
    e, v = ent.event, ent.variant
    hook_rows, hook_code, hook_names, hook_plan = sites.at, sites.code, sites.names, sites.plans
    canon, _, sc = ev.json_field("payload", HOOK)
    hook_index = np.searchsorted(canon, e[hook_rows])
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
        harness = batch.plans[vi].variant.harness
        hook = plan.hook
        key = ("hook", hook.message, hook.wrapper, skel_text[si])
        event_name = ev.fields["hook_event"][int(e[hook_rows[at]])].as_py()
        try:
            tid_of[j] = batch.book.id(
                key, partial(_hook_template, harness, plan.surface_id, event_name, skel_text[si])
            )
        except ProtocolError as exc:
            raise batch.fail(exc, int(e[hook_rows[at]])) from None
    tid = tid_of[inverse]
    ok = sc.ok[hook_index] & (tid >= 0) & ~leaves.exotic_items()[hook_index]
    texts = np.full(len(hook_rows), -1, dtype=np.int64)
    if ok.any():
        texts[ok] = batch.fill(tid[ok], hook_index[ok], sc.leaf_start, leaves, batch.text)
    slow = np.flatnonzero(~ok)
    if len(slow):
        out = []
        for j in slow.tolist():
            event = int(e[hook_rows[j]])
            vi = int(v[hook_rows[j]])
            plan = hook_plan[(vi, int(hook_code[j]))]
            row = {name: ev.fields[name][event].as_py() for name in ("payload", "hook_event")}
            try:
                payload = json.loads(row["payload"]) if row["payload"] else {}
                fired = HookFired(plan.surface_id, row["hook_event"], payload)
                out.append(hook_text(batch.plans[vi].variant.harness, fired)[1])
            except (ValueError, RecursionError) as exc:
                raise batch.fail(HsaError(f"hook payload is not JSON: {exc}"), event) from None
            except ProtocolError as exc:
                raise batch.fail(exc, event) from None
        texts[slow] = batch.text.add(out) + np.arange(len(slow))
    counts = {
        "hooks": len(hook_rows),
        "hooks_exact": len(slow),
        "python_values": leaves.python_values,
    }
    return texts, counts


def _join(
    batch: Batch, target: np.ndarray, texts: np.ndarray, content: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Hook texts joined, in order, to the content of the tool message before them (slot
    ``target``, sorted: hooks come in entry order): the slots and their new contents."""
    first = run_starts(target)
    uniq_t = target[first]
    counts = np.diff(np.append(first, len(target)))
    base = content[uniq_t]
    if (counts == 1).all():
        # rows of one trajectory under variants with the same hook wording join the
        # same two texts: join each distinct pair once
        pairs, inverse = np.unique((base << 32) | texts[first], return_inverse=True)
        merged_text = pc.binary_join_element_wise(
            batch.text.take(pairs >> 32),
            batch.text.take(pairs & 0xFFFFFFFF),
            lit("\n"),
        )
        return uniq_t, batch.text.add(merged_text) + inverse
    size = counts + 1
    starts = exclusive(size)
    idx = np.empty(int(starts[-1]), dtype=np.int64)
    idx[starts[:-1]] = base
    rank = np.arange(len(target)) - np.repeat(first, counts)
    idx[np.repeat(starts[:-1], counts) + 1 + rank] = texts
    lists = pa.ListArray.from_arrays(pa.array(starts.astype(np.int32)), batch.text.take(idx))
    merged_text = pc.binary_join(lists, lit("\n"))
    return uniq_t, batch.text.add(merged_text) + np.arange(len(uniq_t))
