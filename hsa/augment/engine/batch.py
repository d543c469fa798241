"""One batch through the vectorised path, as a chain of named stages over numpy arrays.

``render_batch`` is the whole path; each stage is a function that takes the arrays the earlier
stages returned and returns its own (frozen dataclasses of arrays, or ``records.Part``: the
message fields it sets, by slot). No stage writes another's output.

1. ``layout.entries``: one entry per (output row, event);
2. ``layout.hook_sites``: which entries are hook firings and where each variant puts them;
   ``layout.place_notes`` moves a hook's own message fired among the results of one
   message's calls after the last of them, as ``render`` shows it;
3. ``layout.lay_out``: how many messages each entry makes, every message's slot and role;
4. ``texts.texts``: prompt, user, assistant and tool-result messages (canonical strings);
5. ``calls.call_texts``: every call's surface name, id and text; skill-result messages;
6. ``calls.call_lists`` (api) and ``calls.blocks`` (text protocols): where calls go;
7. ``hooks.hooks``: hook texts, in their own messages or joined to a tool message;
8. ``records.assemble``: the parts, in this order, as ``Records``.

Strings live in two append-only pools (``text`` for message contents, ``aux`` for the rest):
a stage adds the strings it makes and returns their offsets. The order in which stages add
them is the order of the output's content dictionary, so it is kept fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from hsa.augment.engine import records as rec
from hsa.augment.engine.calls import blocks, call_lists, call_texts
from hsa.augment.engine.events import Events
from hsa.augment.engine.hook_texts import hooks
from hsa.augment.engine.layout import entries, hook_sites, lay_out, place_notes
from hsa.augment.engine.plans import VariantPlan
from hsa.augment.engine.records import first_seen
from hsa.augment.engine.template_fill import Leaves, TemplateBook, fill
from hsa.augment.engine.texts import sources, texts
from hsa.errors import DatasetError, HsaError

#: (row of the batch) -> (file, how to name the row in an error)
Locate = Callable[[int], tuple[str | None, str]]


def default_locate(table: pa.Table, file: str | None) -> Locate:
    ids = table.column("id")

    def locate(row: int) -> tuple[str | None, str]:
        return file, f"row {row} (id {ids[row].as_py()!r})"

    return locate


@dataclass(frozen=True, slots=True)
class Batch:
    """What every stage reads: the batch's events, the variants, the engine's template book
    (templates are derived on first use and kept), and the string pools stages add to."""

    ev: Events
    plans: Sequence[VariantPlan]
    book: TemplateBook
    text: rec.Pool
    aux: rec.Pool
    locate: Locate

    def fail(self, exc: HsaError, event: int) -> DatasetError:
        """``exc`` as the error of event ``event``, naming its file, row and index."""
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
        width = max(len(self.book.templates), 1)
        pairs, _, inverse = first_seen(item * width + tid)
        items, tids = np.divmod(pairs, width)
        texts = fill(self.book, tids, leaf_start[items], leaves)
        return pool.add(texts) + inverse


def render_batch(
    batch: Batch, out_traj: np.ndarray, out_variant: np.ndarray
) -> tuple[rec.Records, dict[str, int]]:
    """The records of output rows (``out_traj[i]``, ``out_variant[i]``) and what the stages
    counted (``EngineStats`` fields). Raises ``styles.NotDecomposable`` when a call format
    turns out not to decompose (``Engine.render`` handles it)."""
    if not len(out_traj):
        return rec.Records.empty(batch.text, batch.aux), {}
    ent = entries(batch.ev, out_traj, out_variant)
    sites = hook_sites(batch, ent)
    ent, sites = place_notes(batch, ent, sites)
    lay = lay_out(batch, ent, sites, out_traj, out_variant)
    src = sources(batch, out_variant)
    parts = texts(batch, src, ent, lay, out_variant)
    calls, skill_results, counts = call_texts(batch, src, ent, lay)
    ncalls, lists = call_lists(ent, lay, calls)
    parts += [skill_results, ncalls, blocks(batch, ent, lay, calls)]
    if len(sites.at):
        # hooks joining a tool message read its content as the parts so far set it
        content = rec.column(lay.size, parts, "content") if lay.merged.any() else None
        hook_part, hook_counts = hooks(batch, ent, lay, sites, content)
        parts.append(hook_part)
        for name, n in hook_counts.items():
            counts[name] = counts.get(name, 0) + n
    records = rec.assemble(lay.per_row, lay.role, parts, lists, batch.text, batch.aux)
    return records, counts
