"""Just enough Markdown structure for the rules that reorder and restyle text: headings,
sections, list markers, and prose that points at a part of the text by where it is.

Lines inside code blocks (fenced, or indented) are never treated as structure, so a
``# comment`` in a code sample is not a heading and ``- x`` in a code sample is not a list
item; neither is a thematic break (``* * *``, ``- - -``). The rules that restyle keep what
the text says as CommonMark reads it: a heading restyled as underlined (setext) or bold text
stands apart from the line before it, where it would otherwise join that line's paragraph.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# any indentation: a list item's fence is indented as its text is
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
# a closing run of #s is one after a space ("## C#" is titled "C#")
_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+(#+))?[ \t]*\r?$")
_THEMATIC = re.compile(r"^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*\r?$")
#: what a heading's title must not begin with to be written as a paragraph line (setext): it
#: would read as a list item, quote, heading, fence, HTML or table there (or be a rule)
_BLOCK_START = re.compile(r"^(?:[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|[>#<|=`~])")
# a marker before the item's text, or ending the line (an empty item)
_BULLET = re.compile(r"^(\s*)([-*+])(\s+(?=\S)|[ \t]*(?=\r?$))")
_ORDERED = re.compile(r"^(\s*)(\d{1,9})([.)])(\s+(?=\S)|[ \t]*(?=\r?$))")
#: a block quote's line with text in it (nested quotes alike)
_QUOTE = re.compile(r"^(?:>[ \t]*)+[^>\s]")
_BOLD = re.compile(r"^\*\*([^*].*?)\*\*\s*$")
#: "see X below": a few words between, none opening a clause ("see whether it falls below"),
#: and the "below" no preposition with an object ("see the table below and copy it"; never
#: "see it drop below 5" nor "see the ads below the fold")
_CLAUSE = r"(?:whether|if|how|that|when|what|which|why|where|who|once|until|unless|because|while)"
_SEE_PART = (
    rf"see(?:\s+(?!{_CLAUSE}\b)[^\s.]+){{0,8}}?\s+(?:above|below)"
    # ... and ends the phrase: "below" is no preposition with an object ("below 5", "below the
    # fold"); what follows it otherwise ("below and copy it", "below (refunds)") may be anything
    r"(?![ \t]*[\d$]|[ \t]+(?:the|a|an|zero|this|that|these|those|its|their|your|our)\b)"
)
#: prose that points at a part of the text by where it is
_POSITIONAL = re.compile(
    r"\b(?:(?:section|sections|step|steps|heading|part|instructions|guidance)\s+(?:above|below)"
    r"|(?:see|shown|described|listed|explained|covered|mentioned)\s+(?:above|below)"
    r"|(?:previous|preceding|next|following|earlier|later)\s+(?:section|step|heading|part)s?"
    r"|(?:above|below)\s+(?:section|step|heading|part)s?"
    rf"|{_SEE_PART})\b"
    r"|\((?:above|below)\)",
    re.IGNORECASE,
)


def points_by_position(text: str) -> bool:
    """Whether ``text`` points at another part by where it is ("the section above", "see
    below", "the next step"): the parts it is in then depend on their order."""
    return _POSITIONAL.search(text) is not None


_PLACE = re.compile(r"\b(?:above|below)\b", re.IGNORECASE)
_BACKWARD = re.compile(r"above|previous|preceding|earlier", re.IGNORECASE)
_SECTION = re.compile(r"section|heading", re.IGNORECASE)


def _points_back(pointer: str) -> bool:
    """Whether a pointer (a match of ``_POSITIONAL``) points at an earlier part: by its last
    "above" or "below" where it has one ("see the earlier rules below" points ahead)."""
    places = _PLACE.findall(pointer)
    if places:
        return places[-1].lower() == "above"
    return _BACKWARD.search(pointer) is not None


def points_outside_by_position(text: str) -> bool:
    """Whether ``text`` points at another part by where it is (``points_by_position``) from a
    place where that part cannot be its own: one that names a section or heading ("the
    section below"), or another "above" in its first paragraph, "below" in its last ("the
    options listed above", after a list of them, stays within)."""
    gaps = list(re.finditer(r"\n[ \t]*\n", text.strip()))
    text = text.strip()
    first_end = gaps[0].start() if gaps else len(text)
    last_start = gaps[-1].end() if gaps else 0
    for match in _POSITIONAL.finditer(text):
        if _SECTION.search(match.group(0)):
            return True
        if _points_back(match.group(0)):
            if match.start() < first_end:
                return True
        elif match.end() > last_start:
            return True
    return False


def code_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it is code: in a fenced block (fences included; one closes at a
    fence of its character at least as long, with nothing after it) or in an indented one
    (four spaces in, where no paragraph goes on and outside the items of a list, which indent
    their own text)."""
    return _scan(lines)[0]


def _indented_code_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it is in an indented code block (``code_mask``'s, fences
    apart)."""
    return _scan(lines)[2]


def _item_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it begins a list item: a marker outside code, and not a line of
    a paragraph (one indented four spaces, or numbered from other than 1, cannot begin a
    list there) nor a thematic break."""
    return _scan(lines)[1]


def _scan(lines: list[str]) -> tuple[list[bool], list[bool], list[bool]]:
    code: list[bool] = []
    items: list[bool] = []
    indented_code: list[bool] = []
    fence = ""  # the open fence
    fence_at = 0  # ... the text column of the item whose line opened it (0: none)
    indented = in_list = paragraph = False
    text_at = 0  # the column the last item's text begins at
    open_items: list[int] = []  # the text columns of the items the last one is in, and its own
    bare = False  # the line before was an empty item
    outer_at = 0  # ... the text column of the item that empty item is in (0: none)
    item_text = False  # the paragraph going on is an item's text (not one after its list)
    quoted = False  # the paragraph going on is a block quote's
    for line in lines:
        blank, indent = not line.strip(), _indent(line)
        items.append(False)
        indented_code.append(False)
        if bare and (
            blank or (indent < text_at and not (indent - outer_at < 4 and _starts_item(line)))
        ):
            # an item begins with at most one blank line, and holds no paragraph that a line
            # left of its text could go on: either ends it (a line that begins an item less
            # than four columns right of the text of the item around it begins the next one),
            # and the list unless an item around it goes on
            open_items.pop()
            if outer_at and (blank or indent >= outer_at):
                text_at = outer_at
            else:
                in_list = False
        bare = False
        # the text column of the item a line here is in (0: none); four columns right of it,
        # a line that begins no paragraph is code
        around = max((c for c in open_items if c <= indent), default=0) if in_list else 0
        if fence and fence_at and not blank and indent < fence_at:
            fence = ""  # the item whose line opened it ends, and the fence with it
        if fence:
            code.append(True)
            match = _FENCE.match(line)
            if match and match.group(1).startswith(fence) and not match.group(2).strip():
                fence = ""
            continue
        if indented and not blank and indent < 4:
            indented = False
        if indented or (not blank and not paragraph and not around and indent >= 4):
            indented = indented_code[-1] = True
            in_list = False
            code.append(True)
            continue
        match = _FENCE.match(line)
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence, fence_at = match.group(1), 0
            code.append(True)
            paragraph = False
            in_list = in_list and indent > 0  # not the text of an item
            continue
        code.append(False)
        heading = _ATX.match(line) is not None
        thematic = _THEMATIC.match(line) is not None
        marker = None if thematic else (_BULLET.match(line) or _ORDERED.match(line))
        empty = marker is not None and not line[marker.end() :].strip()
        if (
            empty
            and paragraph
            and not (quoted and indent - around < 4)
            and not (in_list and item_text and indent < text_at)
        ):
            # an empty item cannot interrupt a paragraph ("-" under one, at most three spaces
            # in, underlines it as a heading; four in, it is the paragraph's text); under an
            # item's text, one left of that text is the list's next item, and under a block
            # quote's an item all the same (an underline is never a lazy line of a quote)
            marker = None
            heading = line.strip() == "-" and indent - (text_at if in_list and item_text else 0) < 4
        if (
            marker is not None
            and indent - around < 4
            and (
                in_list
                or not (paragraph and not quoted and marker.re is _ORDERED and int(marker[2]) != 1)
            )
        ):
            if not in_list:
                open_items.clear()
            while open_items and open_items[-1] > indent:
                open_items.pop()  # items this one is not in
            items[-1] = in_list = True
            # an empty item's text goes one past its marker, whatever spaces end the line, and
            # so does the text of one whose marker five or more spaces follow (they are code)
            spaces = len(line[: marker.start(marker.lastindex or 0)].expandtabs(4))
            end = len(line[: marker.end()].expandtabs(4))
            coded = not empty and end - spaces >= 5  # its first line is code, no paragraph
            text_at = spaces + 1 if empty or coded else end
            outer_at = open_items[-1] if open_items else 0
            open_items.append(text_at)
            bare = empty
            paragraph = item_text = not empty and not coded
            quoted = _QUOTE.match(line[marker.end() :]) is not None
            opened = _FENCE.match(line[marker.end() :])  # a fence opened on the item's line
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence, fence_at = opened.group(1), text_at
                paragraph = item_text = False
            continue
        elif in_list and not paragraph and not blank and indent - around >= 4:
            continue  # code in an item (which no rule here reads)
        elif thematic:
            in_list = False
        elif not blank and indent == 0 and (not paragraph or heading or line[0] == ">"):
            in_list = False  # a paragraph, heading or quote after the list
        quote = indent - around < 4 and line.lstrip()[:1] == ">"
        if (not paragraph or quote) and not blank:
            # a block begins (a quote interrupts a paragraph): in the items its indent is in
            while open_items and open_items[-1] > indent:
                open_items.pop()
            in_list = in_list and bool(open_items)
            item_text = in_list
            text_at = open_items[-1] if open_items else text_at
        if quote and _QUOTE.match(line.lstrip()) is None:
            heading = True  # an empty quote line holds no paragraph, and ends the one before
        ends = blank or heading or thematic
        quoted = not ends and ((quoted and paragraph) or quote)
        paragraph = not ends
    return code, items, indented_code


def _starts_item(line: str) -> bool:
    return not _THEMATIC.match(line) and bool(_BULLET.match(line) or _ORDERED.match(line))


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


@dataclass(frozen=True, slots=True)
class Heading:
    line: int
    level: int
    title: str


def headings(text: str) -> list[Heading]:
    """ATX headings (``## Title``) outside code blocks."""
    lines = text.split("\n")
    mask = code_mask(lines)
    out = []
    for i, line in enumerate(lines):
        if not mask[i] and (m := _ATX.match(line)):
            out.append(Heading(i, len(m.group(1)), m.group(2)))
    return out


def sibling_sections(text: str) -> tuple[str, list[str], str] | None:
    """``(before, sections, after)`` for the shallowest heading level that occurs twice or more.

    The sections are the runs of lines from each such heading to the next one; ``before`` is
    what precedes the first. Returns None when there are no siblings, or when a shallower
    heading follows them (they would not share one parent).
    """
    found = headings(text)
    lines = text.split("\n")
    if found and found[0].level == 1 and not any(ln.strip() for ln in lines[: found[0].line]):
        found = found[1:]  # the document's title, with what follows it, stays first
    levels = sorted({h.level for h in found})
    level = next((lv for lv in levels if sum(h.level == lv for h in found) >= 2), None)
    if level is None:
        return None
    siblings = [h for h in found if h.level == level]
    first = siblings[0].line
    if any(h.level < level and h.line > first for h in found):
        return None
    trailing_newline = text.endswith("\n")
    body = lines[:-1] if trailing_newline else lines
    starts = [h.line for h in siblings] + [len(body)]
    sections = ["\n".join(body[a:b]).rstrip("\r\n") for a, b in itertools.pairwise(starts)]
    before = "\n".join(body[:first])
    return before, sections, ("\r\n" if text.endswith("\r\n") else "\n") if trailing_newline else ""


def restyle_headings(text: str, style: str) -> str:
    """Headings written as ``atx`` (``## T``), ``closed`` (``## T ##``), ``bold`` or ``setext``.

    ``setext`` underlines levels 1 and 2 and leaves deeper headings in ATX form, and those whose
    title would read as something else on a line of its own (``1. Install``, a list item). An
    underlined or bold heading is parted by a blank line from a line of text before it (and a
    bold one from a line after it), which it would otherwise join.
    """
    lines = text.split("\n")
    mask = code_mask(lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        m = None if mask[i] else _ATX.match(line)
        if m is None:
            out.append(line)
            continue
        level, title = len(m.group(1)), m.group(2)
        end = "\r" if line.endswith("\r") else ""  # a CRLF document's lines stay CRLF
        stands_alone = not (_BLOCK_START.match(title) or _THEMATIC.match(title))
        setext = style == "setext" and level <= 2 and stands_alone
        if (setext or style == "bold") and out and out[-1].strip():
            out.append(end)
        if style == "closed":
            out.append(f"{'#' * level} {title} {'#' * level}{end}")
        elif style == "bold":
            out.append(f"**{title}**{end}")
            if i + 1 < len(lines) and lines[i + 1].strip():
                out.append(end)
        elif setext:
            out.append(title + end)
            out.append(("=" if level == 1 else "-") * max(3, len(title)) + end)
        else:
            out.append(f"{'#' * level} {title}{end}")
    return "\n".join(out)


def heading_style_of(text: str) -> str:
    lines = [
        ln
        for ln, code in zip(text.split("\n"), code_mask(text.split("\n")), strict=True)
        if not code
    ]
    if any((m := _ATX.match(ln)) and m.group(3) for ln in lines):
        return "closed"
    if any(_ATX.match(ln) for ln in lines):
        return "atx"
    if any(_BOLD.match(ln) for ln in lines):
        return "bold"
    return "atx"


def restyle_lists(text: str, bullet: str, ordered: str) -> str:
    """Unordered items marked with ``bullet`` (``-``, ``*``, ``+``) and ordered ones as
    ``1.`` or ``1)`` (``ordered``), outside code blocks."""
    lines = text.split("\n")
    items = _item_mask(lines)
    out = []
    for i, line in enumerate(lines):
        if not items[i]:
            out.append(line)
            continue
        line = _BULLET.sub(lambda m: f"{m.group(1)}{bullet}{m.group(3)}", line, count=1)
        line = _ORDERED.sub(
            lambda m: f"{m.group(1)}{m.group(2)}{ordered}{m.group(4)}", line, count=1
        )
        out.append(line)
    return "\n".join(out)


def list_markers(text: str) -> tuple[set[str], set[str]]:
    """The bullet and ordered markers ``text`` uses outside code blocks."""
    lines = text.split("\n")
    items = _item_mask(lines)
    bullets, ordered = set(), set()
    for i, line in enumerate(lines):
        if not items[i]:
            continue
        if m := _BULLET.match(line):
            bullets.add(m.group(2))
        if m := _ORDERED.match(line):
            ordered.add(m.group(3))
    return bullets, ordered


# --- what a skill says, whatever its markup (the skills check of hsa.augment.checks) ---

#: on a line with its spacing collapsed: an ATX heading's title, a whole-line bold title, a
#: setext underline, a list marker (an ordered item's number kept)
_ATX_TITLE = re.compile(r"^#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?$")
_BOLD_TITLE = re.compile(r"^\*\*(.+)\*\*$")
_UNDERLINE = re.compile(r"^(?:=+|-+)$")
_MARKER = re.compile(r"^(?:[-*+]|(\d{1,9})[.)])(?:[ \t]+(?=\S)|$)")

#: one block of a skill's Markdown as the skills check reads it: ``("heading", title)``,
#: ``("text", line)`` with its markup and spacing taken out, or ``("code", lines)`` verbatim
Block = tuple[str, str]


def skill_blocks(content: str) -> tuple[tuple[Block, ...], ...]:
    """``content`` as what it says, whatever its markup: its parts from one heading to the
    next (any level, and ATX, closed, setext or bold alike), each the blocks it holds in
    order. A text line loses its list marker (an ordered item keeps its number), indentation
    and spacing; a blank line, a thematic break and a setext underline are markup; code,
    fenced or indented, is kept byte for byte (only a CRLF line end read as LF, and the blank
    lines that end an indented block left out, as CommonMark leaves them)."""
    parts: list[list[Block]] = [[]]
    lines = content.split("\n")
    indented = _indented_code_mask(lines)
    fence = ""
    code: list[str] = []
    previous = ""  # the line before, stripped ("" when blank or code)
    block: list[str] = []  # the indented code block going on

    def end_block() -> None:
        while block and not block[-1].strip():
            block.pop()
        if block:
            parts[-1].append(("code", "\n".join(block)))
        block.clear()

    for i, raw in enumerate(lines):
        line = raw.removesuffix("\r")
        if not fence and indented[i]:
            block.append(line)
            previous = ""
            continue
        end_block()
        if fence:
            code.append(line)
            match = _FENCE.match(line)
            if match and match.group(1).startswith(fence) and not match.group(2).strip():
                parts[-1].append(("code", "\n".join(code)))
                fence, code = "", []
            continue
        match = _FENCE.match(line)
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence, code, previous = match.group(1), [line], ""
            continue
        text = " ".join(line.split())
        if not text:
            previous = ""
            continue
        if previous and _UNDERLINE.match(text) and parts[-1][-1:] == [("text", previous)]:
            parts[-1].pop()  # a setext heading: the line above is its title
            parts.append([("heading", previous)])
            previous = ""
            continue
        if _THEMATIC.match(text):
            previous = ""
            continue
        title = _ATX_TITLE.match(text) or _BOLD_TITLE.match(text)
        if title is not None:
            parts.append([("heading", title.group(1).strip())])
            previous = ""
            continue
        marker = _MARKER.match(text)
        if marker is not None:
            number = marker.group(1)
            text = (f"{number}. " if number else "") + text[marker.end() :]
        parts[-1].append(("text", text))
        previous = text
    end_block()
    if fence:  # a fence left open runs to the end of the text
        parts[-1].append(("code", "\n".join(code)))
    return tuple(tuple(part) for part in parts if part)
