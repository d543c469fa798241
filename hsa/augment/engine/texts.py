"""Stage 4 of a batch: the messages whose content is canonical text, as ``render`` writes them.

The prompt message, user turns (the first one led by the prompt when the variant places it in
the user turn), assistant turns (text and reasoning) and tool results. Their strings are the
batch's columns as they are: ``sources`` adds each column to a pool once, and a message refers
to its event's string by offset. An assistant turn whose calls a text format writes after its
text gets its content in stage 6 (``calls.blocks``) instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.events import ASSISTANT, RESULT, USER
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.layout import Entries, Layout
from hsa.augment.engine.records import Part, first_seen

if TYPE_CHECKING:
    from hsa.augment.engine.batch import Batch


@dataclass(frozen=True, slots=True)
class Sources:
    """Pool offsets of the batch's string columns: event ``i``'s text is ``text + i`` in the
    text pool, and so on; ``prompt[v]`` is variant ``v``'s prompt (-1 if no row uses it)."""

    text: int
    content: int
    prompt: np.ndarray
    reasoning: int
    call_id: int


def sources(batch: Batch, out_variant: np.ndarray) -> Sources:
    """Add the canonical string columns and the prompts in use to the pools."""
    fields = batch.ev.fields
    text = batch.text.add(fields["text"])
    content = batch.text.add(fields["content"])
    used = first_seen(out_variant)[0]
    prompt = np.full(len(batch.plans), -1, dtype=np.int64)
    prompt[used] = batch.text.add([batch.plans[i].prompt for i in used.tolist()])
    prompt[used] += np.arange(len(used))
    reasoning = batch.aux.add(fields["reasoning"])
    call_id = batch.aux.add(fields["call_id"])
    return Sources(text, content, prompt, reasoning, call_id)


def texts(
    batch: Batch, src: Sources, ent: Entries, lay: Layout, out_variant: np.ndarray
) -> list[Part]:
    """The parts for prompt messages, user turns, assistant turns and tool results."""
    ev, plans = batch.ev, batch.plans
    e, v, k, slot = ent.event, ent.variant, ent.kind, lay.slot
    parts = [Part(lay.row_start[lay.prefix], content=src.prompt[out_variant[lay.prefix]])]

    users = np.flatnonzero(k == USER)
    parts.append(Part(slot[users], content=src.text + e[users]))
    # the first user turn carries the prompt when the variant places it in the user turn
    in_user_of = np.array([p.prompt_in_user for p in plans])
    first_user = np.full(len(ev.start) - 1, np.iinfo(np.int64).max, dtype=np.int64)
    user_events = np.flatnonzero(ev.kind == USER)
    np.minimum.at(first_user, ev.traj[user_events], ev.local[user_events])
    lead = users[in_user_of[v[users]] & (ev.local[e[users]] == first_user[ev.traj[e[users]]])]
    if len(lead):
        prompts = pa.array([p.prompt for p in plans], pa.large_string())
        joined = pc.binary_join_element_wise(
            prompts.take(pa.array(v[lead])),
            ev.fields["text"].take(pa.array(e[lead])),
            lit("\n\n"),
        )
        parts.append(Part(slot[lead], content=batch.text.add(joined) + np.arange(len(lead))))

    results = np.flatnonzero(k == RESULT)
    err = ev.fields["is_error"].take(pa.array(e[results]))
    parts.append(
        Part(
            slot[results],
            content=src.content + e[results],
            call_id=src.call_id + e[results],
            is_error=pc.fill_null(err, False).to_numpy(zero_copy_only=False),
        )
    )

    assts = np.flatnonzero(k == ASSISTANT)
    # a text format writing calls after the text makes the content in stage 6
    later = ev.has_calls[e[assts]] & ~lay.api[assts] & ~lay.split[assts]
    # "" beside API calls (a turn of reasoning and calls) is null, as it is without reasoning
    empty = ev.bare[e[assts]] & lay.api[assts]
    plain = assts[~later & ~empty]
    parts.append(Part(slot[plain], content=src.text + e[plain]))
    reasoning_null = ev.fields["reasoning"].is_null().to_numpy(zero_copy_only=False)
    reasoned = assts[~reasoning_null[e[assts]]]
    parts.append(Part(slot[reasoned], reasoning=src.reasoning + e[reasoned]))
    return parts
