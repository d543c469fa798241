"""Markdown structure of skill contents: sections, headings, lists."""

from __future__ import annotations

import random

import pytest

from hsa.augment import get_rule, markdown
from hsa.harness import Harness, Skill

GUIDE = "# Guide\n\nIntro.\n\n# Process\n\nDo.\n\n# Reference\n\nRead.\n"


def _content(rule: str, content: str, seed: int, params: dict | None = None) -> str:
    harness = Harness(id="h", skills=(Skill("s", "s", "d", content),))
    rewrite = get_rule(rule).apply(harness, random.Random(seed), params or {})
    return rewrite.harness.skills[0].content


def test_a_documents_title_stays_first_with_what_follows_it():
    before, sections, tail = markdown.sibling_sections(GUIDE)
    assert before == "# Guide\n\nIntro.\n"
    assert sections == ["# Process\n\nDo.", "# Reference\n\nRead."]
    assert tail == "\n"
    for seed in range(8):
        assert _content("skill_content.reorder_sections", GUIDE, seed).startswith(
            "# Guide\n\nIntro.\n\n# "
        )
    # a level-1 heading that is not the document's first line is a sibling as before
    assert markdown.sibling_sections("Intro.\n\n# A\n\nx\n\n# B\n\ny\n")[1] == [
        "# A\n\nx",
        "# B\n\ny",
    ]


@pytest.mark.parametrize("style", ["atx", "closed", "bold", "setext"])
def test_a_crlf_document_stays_crlf(style):
    crlf = GUIDE.replace("\n", "\r\n")
    out = markdown.restyle_headings(crlf, style)
    assert "\n" not in out.replace("\r\n", "")
    assert _content("skill_content.heading_style", crlf, 0, {"style": style}) == out
    for seed in range(4):
        shuffled = _content("skill_content.reorder_sections", crlf, seed)
        assert "\n" not in shuffled.replace("\r\n", "")
        assert sorted(shuffled.split("\r\n")) == sorted(crlf.split("\r\n"))


@pytest.mark.parametrize(
    "pointer",
    ["see the `## Act` section above", "Follow the guidance described below.", "the next step"],
)
def test_sections_that_point_at_each_other_keep_their_order(pointer):
    # "see the section above" came before that section in 4 of 6 variants
    content = (
        f"# Guide\n\nIntro.\n\n## Check\n\nLook; {pointer}.\n\n## Act\n\nDo.\n\n## End\n\nStop.\n"
    )
    for seed in range(8):
        assert _content("skill_content.reorder_sections", content, seed) == content
    plain = content.replace(pointer, "then act")
    assert any(_content("skill_content.reorder_sections", plain, s) != plain for s in range(8))
