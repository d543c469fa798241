"""Protocol rules: switch between ``api`` and the in-prompt protocols, the call format (with
its ``<TOOLCALL>`` tag) and the tool-doc format.

Candidates come from the registered formats (``hsa.harness.protocols``), so a format added
there is drawn here without change; a format that cannot carry the harness's tool or
parameter names (Python call syntax and ``kebab-case`` or ``from``, say: hsa would write such an
argument as ``**{...}``, which other readers misread) is never drawn. Switching to a
text protocol adds the prompt sections that show tool docs and call instructions when the
system prompt does not show them, since otherwise the model would not see its tools; a
protocol whose docs or instructions the prompt still does not show (a ``prompt.template``
that leaves out its sections) is never drawn either, unless the prompt of the text-protocol
harness rewritten did not show them before (a template that rewords them, say): what it
leaves out is its author's choice, as check ``harness`` takes it, and no section is added for
it that the prompt would not show.
"""

from __future__ import annotations

import dataclasses
import random
from functools import lru_cache
from typing import Any

from hsa.augment.free_text import protocol_fits
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.harness.model import Harness, Protocol, Section
from hsa.harness.prompt import call_instructions, system_prompt, tool_docs
from hsa.harness.protocols import CALL_FORMATS, DRAWN_DOC_FORMATS


def text_protocols(harness: Harness) -> list[Protocol]:
    """Every in-prompt protocol, fitting ``harness``'s names or not, in a stable order: each
    call format with and without its tag, under the drawn doc formats and the harness's own.
    Each protocol is listed once: hermes, which has its own tag, only with ``call_tag`` set."""
    return list(_text_protocols(harness.protocol.doc_format))


@lru_cache(maxsize=16)
def _text_protocols(doc_format: str) -> tuple[Protocol, ...]:
    docs = sorted(DRAWN_DOC_FORMATS | {doc_format})
    found: dict[str, Protocol] = {}
    for call in sorted(CALL_FORMATS):
        for tag in (True, False):
            for doc in docs:
                protocol = Protocol("text", call, tag, doc)
                found.setdefault(protocol.label, protocol)  # with and without a tag hermes ignores
    return tuple(found.values())


def with_protocol(harness: Harness, protocol: Protocol) -> Harness:
    """``harness`` under ``protocol``: under a text protocol, with a tools section and an
    output-format section for the tool docs and call instructions its system prompt does not
    show yet. A prompt template that leaves out its sections may still not show them
    (``unshown`` says)."""
    changed = harness.replace(protocol=protocol)
    return _with_sections(changed, unshown(changed))


def _with_sections(harness: Harness, kinds: list[str]) -> Harness:
    """``harness`` with an empty section of each of ``kinds`` added at the end of its prompt
    (filled with the generated text), under its ``_TITLES`` title and an id not yet used."""
    if not kinds:
        return harness
    prompt = harness.prompt
    ids = {s.id for s in prompt.sections}
    extra = []
    for kind in kinds:
        section_id, n = kind, 1
        while section_id in ids:
            n += 1
            section_id = f"{kind}_{n}"
        ids.add(section_id)
        extra.append(Section(section_id, _TITLES[kind], "", kind))
    return harness.replace(prompt=dataclasses.replace(prompt, sections=(*prompt.sections, *extra)))


#: the section kinds that show what a text protocol needs, with the titles they are added under
_TITLES = {"tools": "Tools", "output_format": "Output format"}

#: what a section of each of those kinds shows when its body is empty
_GENERATED = {"tools": tool_docs, "output_format": call_instructions}


def unshown(harness: Harness) -> list[str]:
    """What the system prompt of a text-protocol ``harness`` does not show of what the model
    needs to call its tools, named by the section kinds that show it: ``tools`` for the tool
    docs, ``output_format`` for the call instructions (none under ``api``). Shown means the
    text is in the prompt as generated (a template may filter or reword it, not seen here).
    A prompt that does not render raises."""
    if harness.protocol.is_api:
        return []
    text = system_prompt(harness)
    prompt = harness.prompt
    # Without a template, an empty section of a kind is filled with that very text (stripped,
    # or whole when verbatim), so it is shown; the text need not be made and looked for (this
    # runs for every protocol a rule draws).
    filled = {s.kind for s in prompt.sections if not s.body} if prompt.template is None else set()
    return [
        kind
        for kind, generate in _GENERATED.items()
        if kind not in filled and generate(harness).strip() not in text
    ]


def _pick(harness: Harness, candidates: list[Protocol], rng: random.Random) -> Rewrite:
    """A protocol drawn evenly from the ``candidates`` (each protocol listed once, as
    ``text_protocols`` lists them) that can carry ``harness``'s names, other than the one it
    has (what the model sees: under ``api`` the text-only fields do not matter). Drawn first
    and checked after: a call format (with or without its tag) that cannot carry the names is
    struck out with all its doc formats and the draw repeated, so a draw checks the one or two
    call formats it meets, not all of them, and each fitting candidate is as likely as
    before. A text protocol whose system prompt would not show the tool docs or call
    instructions, even with the sections ``with_protocol`` adds, is struck out alone, unless
    the prompt of a text-protocol ``harness`` did not show them either (its author's choice,
    as check ``harness`` takes it)."""
    current = harness.protocol.label
    others = [p for p in candidates if p.label != current]
    excused: set[str] | None = None  # what harness's own prompt does not show, once needed
    # whether names fit depends on how calls are written, not on how docs are printed: calls
    # written as the harness writes them are not struck out (its author's choice)
    own = (
        None
        if harness.protocol.is_api
        else (harness.protocol.call_format, harness.protocol.call_tag)
    )
    while others:
        choice = rng.choice(others)
        writes = (choice.call_format, choice.call_tag)
        if not choice.is_api and writes != own and not protocol_fits(harness, choice):
            others = [p for p in others if p.is_api or (p.call_format, p.call_tag) != writes]
            continue
        changed = harness.replace(protocol=choice)
        missing = unshown(changed)
        if not missing:
            return Rewrite(changed)
        added = _with_sections(changed, missing)
        still = unshown(added)
        if not still:
            return Rewrite(added)
        if excused is None:
            excused = set(unshown(harness))
        if set(still) <= excused:
            # the prompt does not show what it did not show before (a template that rewords
            # or leaves out its sections): only the added sections it shows are kept
            shown = [kind for kind in missing if kind not in still]
            if shown == missing:
                return Rewrite(added)
            kept = _with_sections(changed, shown)
            if set(unshown(kept)) <= excused:
                return Rewrite(kept)
        others.remove(choice)  # a template that leaves out the sections showing docs or calls
    return Rewrite(harness)


@rule(
    "protocol.switch",
    # 2: each protocol drawn as often (hermes was listed twice); 3: tool docs and call
    # instructions added under a prompt template too, and never a protocol the prompt hides;
    # 4: python calls never drawn for a parameter that is not a Python identifier (``from``)
    version="4",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "target": {
                "enum": ["any", "api", "text"],
                "default": "any",
                "description": "Switch to the api protocol, to a text protocol, or either.",
            }
        },
    },
)
def switch(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Switch the tool-call protocol between ``api`` and every in-prompt protocol.

    ``api``: tools in the request's tools field, calls in ``tool_calls``. In-prompt: calls as
    Hermes ``<tool_call>`` JSON, BFCL JSON, Python, verbose or concise XML, with or without a
    ``<TOOLCALL>`` tag, and tool docs printed as JSON, XML, Python or Markdown. A text
    protocol brings a ``tools`` and an ``output_format`` section for the tool docs and call
    instructions the system prompt does not show yet, and is never drawn where the prompt
    would still not show them (a ``prompt.template`` that leaves out its sections), unless a
    text-protocol harness's prompt did not show them before either."""
    candidates: list[Protocol] = []
    if params["target"] in ("any", "api"):
        candidates.append(Protocol())
    if params["target"] in ("any", "text"):
        candidates += text_protocols(harness)
    return _pick(harness, candidates, rng)


@rule("protocol.call_format", version="4")  # 2, 3, 4: as switch
def call_format(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Change how calls are written, and whether a ``<TOOLCALL>`` tag wraps them.

    Text protocols only (an ``api`` harness is left as it is); the tool-doc format is kept.
    Prompt sections are added, and protocols the prompt would hide passed over, as
    ``protocol.switch`` does."""
    current = harness.protocol
    candidates = [p for p in text_protocols(harness) if p.doc_format == current.doc_format]
    return _pick(harness, [] if current.is_api else candidates, rng)


@rule("protocol.doc_format", version="3")  # 2: as switch's 3; 3: the fit of names checked
# (as switch's 4) for other call formats only, a harness's own never struck out
def doc_format(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Change how tool docs are printed in the prompt: JSON, XML, Python or Markdown.

    Text protocols only (an ``api`` harness is left as it is); calls are written as before.
    Prompt sections are added, and protocols the prompt would hide passed over, as
    ``protocol.switch`` does."""
    current = harness.protocol
    docs = sorted(DRAWN_DOC_FORMATS | {current.doc_format})
    # the harness's own call_tag kept: a hermes harness may have it either way
    candidates = [dataclasses.replace(current, doc_format=doc) for doc in docs]
    return _pick(harness, [] if current.is_api else candidates, rng)
