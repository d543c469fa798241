"""Acme's augmentation rules for hsa: tool names written noun-first, as REST-style APIs do."""

from __future__ import annotations

from hsa.augment import Rewrite, rule
from hsa.augment.free_text import format_accepts
from hsa.augment.names import TOOL_NAME, detect_style, fresh_names, split_words, styled
from hsa.augment.rules.tool_names import rename_tools

VERBS = {"get", "list", "search", "find", "create", "update", "delete", "cancel", "return"}


@rule(
    "acme.noun_first",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {"share": {"type": "number", "minimum": 0, "maximum": 1, "default": 1.0}},
    },
)
def noun_first(harness, rng, params, context) -> Rewrite:
    """Write tool names noun-first (``get_order`` -> ``order_get``), keeping their case style.

    ``share`` is the share of verb-first tools to rewrite, drawn at random.
    """

    def propose(name: str) -> str:
        words = split_words(name)
        if len(words) < 2 or words[0].lower() not in VERBS or rng.random() >= params["share"]:
            return name
        return styled([*words[1:], words[0]], detect_style(name))

    names = [t.name for t in harness.tools]
    ok = lambda n: format_accepts(harness.protocol, n)  # noqa: E731
    return rename_tools(harness, fresh_names(names, propose, pattern=TOOL_NAME, accept=ok))
