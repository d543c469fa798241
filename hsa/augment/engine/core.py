"""The engine: canonical trajectories x variants -> OpenAI-format messages, by columns.

``Engine.render(table, out_traj, out_variant)`` renders output row ``i`` as trajectory
``out_traj[i]`` under variant ``out_variant[i]`` and returns the ``messages`` column. It is
``render(map_events(events, variant.mapping), variant.harness)`` for every row -- the tests
check exactly that -- computed without a Python loop over rows. What the reference refuses is
refused first, with the reference's message (``checks.py``); then:

1. events are flattened and their turn structure computed once per batch (``events.py``);
2. the batch goes through the stages of ``batch.render_batch``: every output row's events are
   laid out as numpy index columns, how many messages each event makes under its row's
   variant gives every message its slot and role (``layout.py``), and each kind of message
   gets its fields from its own stage (``texts.py``, ``calls.py``, ``hook_texts.py``);
3. tool-call arguments and hook payloads are taken apart once per batch (``jsontext.py``),
   rendered through templates derived once per (variant class, skeleton) (``templates.py``)
   and filled in bulk (``template_fill.py``).

``docs/engine.md`` shows each stage's output on a small example.

What this path cannot render exactly goes through the reference: single calls or hook firings
whose JSON it cannot take apart (``calls_exact``, ``hooks_exact``), and whole rows under a call
format that does not decompose into per-call pieces (``rows_exact``). ``stats`` counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine import records as rec
from hsa.augment.engine.batch import Batch, Locate, default_locate, render_batch
from hsa.augment.engine.call_styles import NotDecomposable
from hsa.augment.engine.checks import refuse
from hsa.augment.engine.events import CALL, RESULT, SKILL, Events, explode
from hsa.augment.engine.jsontext import lit
from hsa.augment.engine.plans import VariantPlan
from hsa.augment.engine.records import first_seen
from hsa.augment.engine.template_fill import TemplateBook
from hsa.augment.mapping import map_events
from hsa.augment.planner import Variant
from hsa.errors import DatasetError, HsaError
from hsa.harness.events import Trajectory
from hsa.harness.model import Harness
from hsa.harness.render import render


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

    def add(self, counts: dict[str, int]) -> None:
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)


class Engine:
    """Renders canonical trajectories under planned variants (see the module docstring)."""

    def __init__(self, variants: Sequence[Variant] = ()):
        self.plans: list[VariantPlan] = []
        self.book = TemplateBook()
        self.stats = EngineStats()
        # call styles found not to decompose while rendering (see ``render``)
        self._not_decomposable: set[str] = set()
        for variant in variants:
            self.add(variant)

    def add(self, variant: Variant, canonical: Harness | None = None) -> int:
        """Make ``variant`` available to render under; returns its index. ``canonical``: the
        harness the trajectories rendered under it are under, where known (for errors)."""
        self.plans.append(VariantPlan.of(len(self.plans), variant, canonical))
        return len(self.plans) - 1

    # --- per-variant columns -------------------------------------------------------------

    def tools_column(self, out_variant: np.ndarray) -> pa.Array:
        """The ``tools`` column (JSON text), dictionary-encoded by variant
        (``VariantPlan.tools_value``)."""
        return rec.unique_dictionary(out_variant, [p.tools_value for p in self.plans])

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

        A text call format is checked to decompose into per-call pieces when its style is made
        (``call_styles.py``), on made-up calls. Should a real call still break that shape, the
        stage meeting it raises ``NotDecomposable``; this is the one place that catches it:
        the style is remembered as not decomposable and the batch is rendered again from the
        start, its rows under that style now going through the reference. Each style can
        fail so only once per engine, so the loop ends.
        """
        out_traj = np.asarray(out_traj, dtype=np.int64)
        out_variant = np.asarray(out_variant, dtype=np.int64)
        if locate is None:
            locate = default_locate(table, file)
        self.stats.trajectories += table.num_rows
        used = first_seen(out_traj)[0]
        if len(used) < table.num_rows:
            # Only rendered trajectories are read, as the reference reads them: one that no
            # output row uses is neither checked nor taken apart.
            keep = np.sort(used)
            table = table.take(pa.array(keep))
            out_traj = np.searchsorted(keep, out_traj)
            used = np.searchsorted(keep, used)
            locate = _relocated(locate, keep)
        events = explode(table)
        refuse(table, events, used, locate)
        self.stats.rows += len(out_traj)
        while True:
            exact = self._exact_rows(events, out_traj, out_variant)
            text, aux = rec.Pool(), rec.Pool()
            batch = Batch(events, self.plans, self.book, text, aux, locate)
            try:
                fast, counts = render_batch(batch, out_traj[~exact], out_variant[~exact])
                break
            except NotDecomposable as exc:
                if exc.key in self._not_decomposable:  # its rows were exact: a bug, not a retry
                    raise
                self._not_decomposable.add(exc.key)
        self.stats.add(counts)
        self.stats.rows_exact += int(exact.sum())
        slow = self._reference(table, out_traj[exact], out_variant[exact], text, aux, locate)
        return rec.to_arrow(rec.merge(fast, slow, exact))

    def _exact_rows(self, ev: Events, out_traj: np.ndarray, out_variant: np.ndarray) -> np.ndarray:
        broken = np.array(
            [not p.style.decomposable or p.style.key in self._not_decomposable for p in self.plans]
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
            except HsaError as exc:
                raise DatasetError(exc.message, file=file, where=exc.where) from None
            plan = self.plans[v]
            try:
                events = map_events(trajectory.events, plan.variant.mapping, plan.canonical)
                convs.append(render(events, plan.variant.harness))
            except HsaError as exc:
                # render names the event ("events[3]"), not the row
                at = f"{where}.{exc.where}" if exc.where else where
                raise DatasetError(exc.message, file=file, where=at) from None
        return conversations_to_records(convs, text, aux)


def _relocated(locate: Locate, rows: np.ndarray) -> Locate:
    """``locate`` for a table of the rows ``rows`` of the table it names."""
    return lambda row: locate(int(rows[row]))


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
