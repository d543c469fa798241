"""The engine's stages, one at a time, on the small example of ``docs/engine.md``.

``trace`` runs the stages of ``batch.render_batch`` by hand on one trajectory under two variants
and writes what each returns; the test checks that the page shows exactly that and that the
stages together give what ``Engine.render`` and the reference ``render`` give. After changing
a stage, rewrite the page's example with ``python -m tests.augment.test_engine_stages``.

Also here: the one restart mechanism (a call format that stops decomposing on a real call) and
which errors a call format may raise while its style is probed.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hsa.augment import canonical_variant, map_events
from hsa.augment.engine import Engine
from hsa.augment.engine import records as rec
from hsa.augment.engine.batch import Batch, default_locate, render_batch
from hsa.augment.engine.call_styles import _text_style, style_of
from hsa.augment.engine.calls import blocks, call_lists, call_texts
from hsa.augment.engine.events import KINDS, explode
from hsa.augment.engine.hook_texts import hooks
from hsa.augment.engine.layout import entries, hook_sites, lay_out, place_notes
from hsa.augment.engine.texts import sources, texts
from hsa.augment.mapping import RewriteMapping, Step, ToolMap
from hsa.augment.planner import Variant
from hsa.datasets.schema import chat_messages
from hsa.harness import (
    AssistantMessage,
    Harness,
    Hook,
    HookFired,
    Prompt,
    Protocol,
    Tool,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    render,
    trajectories_to_table,
)
from hsa.harness.model import Section
from hsa.harness.protocols import CALL_FORMATS, CallFormat
from tests.augment.conftest import make_events, make_harness

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"
BEGIN, END = "<!-- example: begin -->\n", "<!-- example: end -->\n"


def example() -> tuple[pa.Table, list[Variant]]:
    """One trajectory (a call, its result, a hook joining the result) and two variants: the
    canonical one (``api``) and one writing calls as Python, ``search(q=)`` renamed
    ``find(query=)``."""
    harness = Harness(
        "shop",
        prompt=Prompt((Section("persona", "Role", "You help shoppers."),)),
        tools=(
            Tool(
                "search",
                "Find products.",
                {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            ),
        ),
        hooks=(
            Hook(
                "stock", "post_tool_use", "add_context", "In stock: {{ n }}.", inject="tool_result"
            ),
        ),
    )
    trajectory = Trajectory(
        "t0",
        (
            UserMessage("A mug?"),
            AssistantMessage("Looking."),
            ToolCall("c1", "search", {"q": "mug"}),
            ToolResult("c1", "2 found"),
            HookFired("stock", "post_tool_use", {"n": "2"}),
            AssistantMessage("Two mugs."),
        ),
    )
    python = harness.replace(
        tools=(replace(harness.tools[0], name="find"),),
        protocol=Protocol("text", "python", False, "json"),
    )
    rename = RewriteMapping(tools={"search": ToolMap("find", (Step("move", ("q",), ("query",)),))})
    variants = [
        canonical_variant(harness),
        Variant("v1", harness.id, (("example", "1", {}),), python, rename),
    ]
    return trajectories_to_table([trajectory]), variants


def _table(title: str, columns: dict[str, list]) -> list[str]:
    """A fixed-width table: one row per index, one column per name."""
    cells = {name: [str(v) for v in values] for name, values in columns.items()}
    widths = {name: max(len(name), *map(len, values)) for name, values in cells.items()}
    rows = len(next(iter(cells.values())))
    lines = [title, "  " + "  ".join(name.ljust(widths[name]) for name in cells).rstrip()]
    for i in range(rows):
        lines.append("  " + "  ".join(cells[n][i].ljust(widths[n]) for n in cells).rstrip())
    return [*lines, ""]


def _strings(pool: rec.Pool, refs: np.ndarray) -> list[str]:
    """The strings at pool references ``refs``, quoted; ``-`` for none."""
    return ["-" if s is None else repr(s) for s in pool.take(np.asarray(refs)).to_pylist()]


def trace() -> tuple[str, rec.Records]:
    """The stages of ``render_batch`` on ``example()``, run one by one: what each returns, as
    text, and the records they make."""
    table, variants = example()
    engine = Engine(variants)
    out_traj, out_variant = np.array([0, 0]), np.array([0, 1])
    batch = Batch(
        explode(table),
        engine.plans,
        engine.book,
        rec.Pool(),
        rec.Pool(),
        default_locate(table, None),
    )
    text, aux = batch.text, batch.aux
    out: list[str] = []

    ent = entries(batch.ev, out_traj, out_variant)
    kinds = [KINDS[k] for k in ent.kind]
    out += _table(
        f"1. entries (row_start: {ent.row_start.tolist()})",
        {
            "entry": range(len(ent)),
            "row": ent.row,
            "event": ent.event,
            "variant": ent.variant,
            "kind": kinds,
        },
    )
    sites = hook_sites(batch, ent)
    out += [
        f"2. hook_sites: at {sites.at.tolist()}, names {sites.names}, inject (per entry) "
        f"{sites.inject.tolist()} (2: tool_result)",
        "",
    ]
    ent, sites = place_notes(batch, ent, sites)  # (no note among results here: as it was)
    lay = lay_out(batch, ent, sites, out_traj, out_variant)
    out += _table(
        f"3. lay_out: per_row {lay.per_row.tolist()}, row_start {lay.row_start.tolist()}, "
        f"prefix rows {lay.prefix.tolist()}",
        {
            "entry": range(len(ent)),
            "kind": kinds,
            "slot": lay.slot,
            "head": lay.head,
            "split": lay.split,
            "merged": lay.merged,
            "api": lay.api,
        },
    )
    out += _table(
        "   roles by slot", {"slot": range(lay.size), "role": [rec.ROLES[r] for r in lay.role]}
    )

    def parts_table(title: str, parts: list[rec.Part]) -> list[str]:
        rows: dict[str, list] = {"slot": [], "field": [], "value": []}
        for part in parts:
            for name in ("content", "reasoning", "call_id", "is_error", "ncalls"):
                values = getattr(part, name)
                if values is None:
                    continue
                pool = text if name == "content" else aux
                shown = (
                    _strings(pool, values)
                    if name in ("content", "reasoning", "call_id")
                    else [str(x) for x in np.asarray(values).tolist()]
                )
                rows["slot"] += part.slot.tolist()
                rows["field"] += [name] * len(shown)
                rows["value"] += shown
        if not rows["slot"]:
            return [f"{title}: (none)", ""]
        return _table(title, rows)

    src = sources(batch, out_variant)
    parts = texts(batch, src, ent, lay, out_variant)
    out += parts_table("4. texts (parts)", parts)
    calls, skill_results, _ = call_texts(batch, src, ent, lay)
    out += _table(
        "5. call_texts",
        {
            "entry": calls.at,
            "owner": calls.owner,
            "name": _strings(aux, calls.name),
            "id": _strings(aux, calls.id),
            "piece": _strings(aux, calls.piece),
        },
    )
    ncalls, lists = call_lists(ent, lay, calls)
    block = blocks(batch, ent, lay, calls)
    out += parts_table("6. call_lists (api)", [ncalls])
    ids, names, args = (aux.take(x).to_pylist() for x in lists)
    out += [f"   tool_calls: ids {ids}, names {names}, arguments {args}", ""]
    out += parts_table("6. blocks (text protocols)", [block])
    parts += [skill_results, ncalls, block]
    content = rec.column(lay.size, parts, "content")
    hook_part, _ = hooks(batch, ent, lay, sites, content)
    out += parts_table("7. hooks (part)", [hook_part])
    parts.append(hook_part)
    records = rec.assemble(lay.per_row, lay.role, parts, lists, text, aux)
    out.append("8. assemble -> messages")
    for i, messages in enumerate(rec.to_arrow(records).to_pylist()):
        out.append(f"   row {i} (variant {out_variant[i]}):")
        out += [f"     {m}" for m in chat_messages(messages)]
    out.append("")
    return "\n".join(out), records


def _doc_example() -> str:
    page = DOC.read_text(encoding="utf-8")
    return page[page.index(BEGIN) + len(BEGIN) : page.index(END)]


def _fenced(text: str) -> str:
    return f"```text\n{text}```\n"


def test_docs_show_what_the_stages_return() -> None:
    shown, _ = trace()
    assert _doc_example() == _fenced(shown), (
        "docs/engine.md is stale: run python -m tests.augment.test_engine_stages"
    )


def test_the_traced_stages_are_the_engine_and_the_reference() -> None:
    table, variants = example()
    _, records = trace()
    traced = rec.to_arrow(records).to_pylist()
    engine = Engine(variants).render(table, np.array([0, 0]), np.array([0, 1])).to_pylist()
    assert traced == engine
    trajectory = Trajectory.from_row(table.to_pylist()[0])
    for messages, variant in zip(traced, variants, strict=True):
        expected = render(map_events(trajectory.events, variant.mapping), variant.harness)
        assert chat_messages(messages) == expected.messages


def test_render_batch_counts_what_it_rendered() -> None:
    table, variants = example()
    engine = Engine(variants)
    batch = Batch(
        explode(table),
        engine.plans,
        engine.book,
        rec.Pool(),
        rec.Pool(),
        default_locate(table, None),
    )
    records, counts = render_batch(batch, np.array([0, 0]), np.array([0, 1]))
    assert counts == {
        "calls": 2,
        "calls_exact": 0,
        "python_values": 0,
        "hooks": 2,
        "hooks_exact": 0,
    }
    assert records.per_row.tolist() == [5, 6]
    empty, none = render_batch(batch, np.zeros(0, int), np.zeros(0, int))
    assert none == {} and len(empty.per_row) == 0


# --- call formats that break the decomposition ------------------------------------------


def _python_calls_then(odd: str) -> CallFormat:
    """The python call format, except that a turn calling a tool named ``odd`` is wrapped
    differently: its made-up probe calls decompose, real calls of ``odd`` do not."""
    python = CALL_FORMATS["python"]

    def format_calls(calls, tag):
        text = python.format_calls(calls, tag)
        return f"<odd>{text}</odd>" if any(name == odd for name, _ in calls) else text

    return replace(python, name="python_odd", format_calls=format_calls)


def test_a_format_that_stops_decomposing_is_rendered_by_the_reference(monkeypatch) -> None:
    """The one restart: the style is remembered as not decomposable and the batch rendered
    again, its rows through the reference, equal to render."""
    harness = make_harness(Protocol("text", "python_odd", False, "json"))
    monkeypatch.setitem(CALL_FORMATS, "python_odd", _python_calls_then("get_order"))
    assert style_of(harness).decomposable  # the probes do not call get_order
    events = make_events()
    assert any(isinstance(e, ToolCall) and e.tool == "get_order" for e in events)
    trajectories = [Trajectory("a", events), Trajectory("b", (UserMessage("hi"),))]
    table = trajectories_to_table(trajectories)
    variants = [canonical_variant(harness), canonical_variant(make_harness())]
    engine = Engine(variants)
    out_traj, out_variant = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    got = engine.render(table, out_traj, out_variant).to_pylist()
    for i, (t, v) in enumerate(zip(out_traj, out_variant, strict=True)):
        conv = render(trajectories[t].events, variants[v].harness)
        assert chat_messages(got[i]) == conv.messages
    # rows under the broken style took the reference; the api rows did not
    assert engine.stats.rows_exact == 2
    again = engine.render(table, out_traj, out_variant).to_pylist()
    assert again == got
    assert engine.stats.rows_exact == 4


def _refusing(exc: Exception) -> CallFormat:
    python = CALL_FORMATS["python"]

    def format_calls(calls, tag):
        raise exc

    return replace(python, name=f"refuses_{type(exc).__name__}", format_calls=format_calls)


def test_a_format_refusing_the_probes_is_not_decomposable() -> None:
    from hsa.errors import ProtocolError

    style = _text_style(_refusing(ProtocolError("cannot write that")), False)
    assert not style.decomposable


def test_a_bug_in_a_format_is_not_taken_for_a_slow_format() -> None:
    """A format raising anything but ``ProtocolError`` is broken, not slow: the error shows."""
    with pytest.raises(ZeroDivisionError):
        _text_style(_refusing(ZeroDivisionError("bug")), False)


def test_the_example_uses_every_stage() -> None:
    """The page's example is worth reading: it has a turn split in two, a hook joining a tool
    message, an api call list and a text-protocol block."""
    table, variants = example()
    engine = Engine(variants)
    batch = Batch(
        explode(table),
        engine.plans,
        engine.book,
        rec.Pool(),
        rec.Pool(),
        default_locate(table, None),
    )
    out_traj, out_variant = np.array([0, 0]), np.array([0, 1])
    ent = entries(batch.ev, out_traj, out_variant)
    sites = hook_sites(batch, ent)
    lay = lay_out(batch, ent, sites, out_traj, out_variant)
    assert lay.split.any() and lay.merged.any() and lay.api.any() and not lay.api.all()
    calls = call_texts(batch, sources(batch, out_variant), ent, lay)[0]
    assert call_lists(ent, lay, calls)[0].ncalls.tolist() == [1]
    assert len(blocks(batch, ent, lay, calls).slot) == 1


def main() -> None:
    """Rewrite the example in docs/engine.md from ``trace()``."""
    page = DOC.read_text(encoding="utf-8")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    shown, _ = trace()
    DOC.write_text(head + BEGIN + _fenced(shown) + END + tail, encoding="utf-8")
    sys.stdout.write(f"rewrote the example in {DOC}\n")


if __name__ == "__main__":
    main()
