"""The canonical livestream harness: prompt sections, tools, the skill tool, skills and hooks."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from hsa.envs.livestream.actions import INTERNAL_FIELDS
from hsa.envs.livestream.tools import TOOLS, skill_tool
from hsa.harness.model import Harness, Hook, Matcher, Prompt, Protocol, Section, Skill
from hsa.harness.skillfile import parse_skill_md

HARNESS_ID = "livestream"
SKILL_IDS = (
    "product-qa",
    "promotion-push",
    "objection-handling",
    "ad-compliance",
    "viewer-engagement",
    "after-sales",
)
SEARCH_PAGE_SIZE = 5
PROMOTION_EVERY_N_TURNS = 2
_FNS = "hsa.envs.livestream.hookfns"

PERSONA = """\
You are Aria, the AI co-host of a live-stream shopping channel. Viewers ask questions in the
chat while the stream runs, and the producer sometimes asks you to feature a product. You answer
quickly, warmly and precisely, from the catalogue tools only."""

POLICY = """\
- Every product fact (price, stock, specs, deals, dates) must come from a tool result in this
  conversation. Never guess; if the tools cannot answer, say so or hand off to a human.
- Advertising rules: never make absolute claims - no "best", "No. 1", "100% effective",
  "guaranteed", "perfect". Give ratings, review counts and specs instead.
- Load the matching skill before acting on: suitability questions (product-qa), producer
  requests to push or pin a product (promotion-push), viewers hesitating about price
  (objection-handling), viewers baiting an absolute claim (ad-compliance), greetings from new
  viewers (viewer-engagement), returns and damaged items (after-sales).
- Never pin a sold-out product. When a product is sold out, offer in-stock alternatives.
- Orders are private: look one up only with its order id and the last four digits of the phone.
- Questions you must not answer (future prices, health or safety advice) go to a human with
  handoff_to_human; give the viewer the ticket id.
- Internal fields (costs, supplier codes, margins) are never shown to viewers."""

OUTPUT_FORMAT = """\
Reply in one short spoken-style paragraph addressed to the viewer. Write prices as $ and two
decimals, times as HH:MM, and name products exactly as the catalogue does.
{{ call_instructions }}"""


@lru_cache(maxsize=1)
def skills() -> tuple[Skill, ...]:
    """The bundled skills, read from the SKILL.md files shipped in the package."""
    root = resources.files("hsa.envs.livestream").joinpath("skills")
    out = []
    for skill_id in SKILL_IDS:
        file = root.joinpath(skill_id, "SKILL.md")
        out.append(parse_skill_md(file.read_text("utf-8"), skill_id=skill_id, file=str(file)))
    return tuple(out)


HOOKS: tuple[Hook, ...] = (
    Hook(
        id="stream-clock",
        event="session_start",
        effect="add_context",
        message="Stream clock: {{ now }}. On air: {{ session }}.",
        inject="system",
        payload_fn=f"{_FNS}:stream_clock",
    ),
    Hook(
        id="promotion-reminder",
        event="user_prompt_submit",
        effect="add_context",
        message=(
            "Reminder: flash sale on {{ product }} at {{ price }} until {{ ends }}; mention it "
            "if it fits the conversation."
        ),
        matcher=Matcher(every_n_turns=PROMOTION_EVERY_N_TURNS),
        inject="user",
        wrapper="reminder",
        payload_fn=f"{_FNS}:promotion_reminder",
    ),
    Hook(
        id="search-page-size",
        event="pre_tool_use",
        effect="update_input",
        message="Search results are capped at {{ limit }} per request during the stream.",
        matcher=Matcher(tool="search_products"),
        inject="tool_result",
        wrapper="stream-note",
        params={"set": {"limit": SEARCH_PAGE_SIZE}, "payload": {"limit": str(SEARCH_PAGE_SIZE)}},
    ),
    Hook(
        id="no-sold-out-pin",
        event="pre_tool_use",
        effect="deny",
        message="Pin refused: {{ name }} ({{ product_id }}) is sold out. Pin an in-stock product.",
        matcher=Matcher(tool="pin_product"),
        inject="tool_result",
        wrapper="guard",
        payload_fn=f"{_FNS}:out_of_stock_pin",
    ),
    Hook(
        id="redact-internal",
        event="post_tool_use",
        effect="update_output",
        message="Internal fields removed from this result: {{ fields }}.",
        matcher=Matcher(tool="get_product_details|compare_products"),
        inject="tool_result",
        wrapper="system-note",
        payload_fn=f"{_FNS}:redacted_fields",
        params={"remove": list(INTERNAL_FIELDS)},
    ),
    Hook(
        id="compliance-guard",
        event="stop",
        effect="deny",
        message=(
            "Compliance check failed: the answer makes absolute claims ({{ claims }}). "
            "Answer again with verifiable facts and no superlatives."
        ),
        inject="system",
        payload_fn=f"{_FNS}:compliance_guard",
    ),
)


#: the one-line persona of the compact harness
SHORT_PERSONA = (
    "You are Aria, the AI co-host of a live-stream shopping channel: answer viewers from the "
    "catalogue tools only."
)


@lru_cache(maxsize=1)
def compact_harness() -> Harness:
    """The canonical harness made short for small models: a one-line persona, the skills
    catalogue and one line per tool (``lines`` docs); calls written as Python calls in the
    reply, with no instructions for them (a model learns them from its data). Tools, skills and
    hooks as in ``harness()``; its prompt is about a sixth of that harness's under a text
    protocol with JSON docs."""
    full = harness()
    return full.replace(
        id=f"{HARNESS_ID}-compact",
        protocol=Protocol("text", "python", False, "lines"),
        prompt=Prompt(
            sections=(
                Section("persona", "Persona", SHORT_PERSONA, kind="persona"),
                Section("skills", "Skills", "", kind="skills"),
                Section("tools", "Tools", "", kind="tools"),
            )
        ),
        metadata={"env": "livestream", "compact": True},
    )


@lru_cache(maxsize=1)
def harness() -> Harness:
    """The canonical harness of the livestream environment."""
    return Harness(
        id=HARNESS_ID,
        version="1",
        prompt=Prompt(
            sections=(
                Section("persona", "Persona", PERSONA, kind="persona"),
                Section("policy", "Policy", POLICY, kind="policy"),
                Section("skills", "Skills", "", kind="skills"),
                Section("tools", "Tools", "", kind="tools"),
                Section("output_format", "Output format", OUTPUT_FORMAT, kind="output_format"),
            )
        ),
        tools=TOOLS,
        skills=skills(),
        hooks=HOOKS,
        skill_tool=skill_tool(list(SKILL_IDS)),
        metadata={"env": "livestream"},
    )
