"""Just enough Markdown structure for the rules that reorder and restyle text: headings,
sections, list markers, and prose that points at a part of the text by where it is.

Lines inside code blocks (fenced, or indented) and raw HTML blocks (``<!-- ... -->``,
``<div>`` up to a blank line: CommonMark's seven kinds) are never treated as structure, so a
``# comment`` in a code sample is not a heading, ``- x`` in a code sample is not a list item,
and a section commented out stays inside its comment; nor is a thematic break (``* * *``,
``- - -``) a list item. The rules that restyle keep what the text says as CommonMark reads
it: a heading restyled as underlined (setext) or bold text stands apart from the line before
it, where it would otherwise join that line's paragraph.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# any indentation: a list item's fence is indented as its text is (``_Opaque`` checks it)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
#: the tags whose line begins an HTML block of CommonMark's sixth kind
_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details"
    "|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head"
    "|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p"
    "|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
#: CommonMark's HTML blocks by how their first line begins (at most three spaces in), each
#: with what the line that ends it holds (that line, the first included, is the block's last)
#: or None where the block ends before a blank line
_HTML_BLOCKS: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...] = (
    (
        re.compile(r"<(?:pre|script|style|textarea)(?=[ \t>]|\r?$)", re.IGNORECASE),
        re.compile(r"</(?:pre|script|style|textarea)>", re.IGNORECASE),
    ),
    (re.compile(r"<!--"), re.compile(r"-->")),
    (re.compile(r"<\?"), re.compile(r"\?>")),
    (re.compile(r"<![A-Za-z]"), re.compile(r">")),
    (re.compile(r"<!\[CDATA\["), re.compile(r"\]\]>")),
    (re.compile(rf"</?(?:{_BLOCK_TAGS})(?=[ \t]|/?>|\r?$)", re.IGNORECASE), None),
)
_ATTRIBUTE = (
    r"\s+[A-Za-z_:][A-Za-z0-9_.:-]*"  # a name, and maybe a value: unquoted or quoted
    r"(?:\s*=\s*(?:[^\"'=<>`\x00-\x20]+|'[^']*'|\"[^\"]*\"))?"
)
#: the seventh kind: a line of one whole open or closing tag, which ends before a blank line
#: and cannot interrupt a paragraph
_TAG_LINE = re.compile(
    rf"(?:<[A-Za-z][A-Za-z0-9-]*(?:{_ATTRIBUTE})*\s*/?>|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$"
)
# a closing run of #s is one after a space ("## C#" is titled "C#")
_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)(?:[ \t]+(#+))?[ \t]*\r?$")
_EQUALS = re.compile(r"^[ \t]*=+[ \t]*\r?$")
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
    """For each line, whether it is code or raw HTML: in a fenced block (fences included; one
    closes at a fence of its character at least as long, at most three spaces right of the
    text it is in, with nothing after it), an indented one (four spaces in, where no paragraph
    goes on and outside the items of a list, which indent their own text), or an HTML block
    (CommonMark's: ``<!--`` to ``-->``, ``<script>``, ``<pre>``, ``<style>`` or
    ``<textarea>`` to its closing tag, ``<?`` to ``?>``, ``<!X`` to ``>``, ``<![CDATA[`` to
    ``]]>``, and a block-level tag such as ``<div>``, or a line of one whole tag where no
    paragraph goes on, to a blank line)."""
    return [bool(kind) for kind in _scan(lines).kinds]


def _item_mask(lines: list[str]) -> list[bool]:
    """For each line, whether it begins a list item: a marker outside code, and not a line of
    a paragraph (one indented four spaces, or numbered from other than 1, cannot begin a
    list there) nor a thematic break."""
    return _scan(lines).items


@dataclass(frozen=True, slots=True)
class _Reading:
    """How ``_scan`` reads the lines of a text, each line's entry in each list."""

    #: the kind of block of code or raw HTML the line is in: ``fenced``, ``indented`` or
    #: ``html`` ("": none, the line is text or structure)
    kinds: list[str]
    #: whether the line is the first of its block of code or raw HTML
    firsts: list[bool]
    #: whether the line begins a list item
    items: list[bool]
    #: whether the line, left of the text of the list item a fenced or HTML block is open in,
    #: ends that block (a blank line before it would be in the block: it ends no item)
    cuts: list[bool]
    #: whether a fenced or HTML block is open at the end of the text (it runs to the end)
    open_at_end: bool


@dataclass(frozen=True, slots=True)
class _Opaque:
    """A fenced code block or a raw HTML block going on: lines that are never structure."""

    #: the text column of the list item it is in (0: none): a line left of that ends both
    at: int
    #: a fenced block's opening run of backticks or tildes ("": raw HTML)
    fence: str = ""
    #: what an HTML block's last line holds (None: it ends before a blank line)
    end: re.Pattern[str] | None = None

    @property
    def kind(self) -> str:
        return "fenced" if self.fence else "html"

    def holds(self, blank: bool, indent: int) -> bool:
        """Whether a line that comes while the block is open is in it (its last line too)."""
        if self.at and not blank and indent < self.at:
            return False  # the item ends, and the block with it
        return not (blank and not self.fence and self.end is None)

    def ends_at(self, line: str, indent: int) -> bool:
        """Whether ``line``, in the block, is its last: for a fenced block, a fence of its
        character at least as long with nothing after it, at most three columns right of the
        text it is in (CommonMark's closing fence; one further in is code)."""
        if self.fence:
            match = _FENCE.match(line)
            return (
                match is not None
                and indent - self.at < 4
                and match.group(1).startswith(self.fence)
                and not match.group(2).strip()
            )
        return self.end is not None and self.end.search(line) is not None


def _opens(text: str, paragraph: bool, at: int) -> _Opaque | None:
    """The fenced code or raw HTML block that ``text`` (a line less its indentation, or an item's
    text after its marker) begins in a list item whose text is at column ``at`` (0: none), if
    it begins one. Where a paragraph goes on, an HTML line of one whole tag (CommonMark's
    seventh kind) is that paragraph's text."""
    fence = _FENCE.match(text)
    if fence is not None:
        # an info string never holds a backtick (that line is inline code)
        if fence.group(1)[0] == "`" and "`" in fence.group(2):
            return None
        return _Opaque(at, fence=fence.group(1))
    if not text.startswith("<"):
        return None
    for start, end in _HTML_BLOCKS:
        if start.match(text):
            return _Opaque(at, end=end)
    if not paragraph and _TAG_LINE.match(text):
        return _Opaque(at)
    return None


def _scan(lines: list[str]) -> _Reading:
    kinds: list[str] = []
    firsts: list[bool] = []
    items: list[bool] = []
    cuts: list[bool] = []
    block: _Opaque | None = None  # the fenced code or raw HTML block going on
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
        kinds.append("")
        firsts.append(False)
        cuts.append(False)
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
        if block is not None and not block.holds(blank, indent):
            cuts[-1] = not blank
            block = None
        if block is not None:
            kinds[-1] = block.kind
            if block.ends_at(line, indent):
                block = None
            continue
        if indented and not blank and indent < 4:
            indented = False
        if indented or (not blank and not paragraph and not around and indent >= 4):
            firsts[-1] = not indented
            indented = True
            kinds[-1] = "indented"
            in_list = False
            continue
        opened = _opens(line.lstrip(), paragraph, around) if indent - around < 4 else None
        if opened is not None:
            kinds[-1], firsts[-1] = opened.kind, True
            # an HTML block may end on its first line (a fence cannot: its own fence is no
            # closing one)
            block = opened if opened.fence or not opened.ends_at(line, indent) else None
            paragraph = False
            in_list = in_list and around > 0  # in an item, or after the list
            continue
        heading = _ATX.match(line) is not None or (
            # a "=" underline (under an item's text, in that text; never a quote's lazy line)
            paragraph
            and not quoted
            and _EQUALS.match(line) is not None
            and 0 <= indent - (text_at if in_list and item_text else 0) < 4
        )
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
            text = line[marker.end() :]
            # its text is a paragraph, unless a heading or a thematic break
            ruled = _ATX.match(text) is not None or _THEMATIC.match(text) is not None
            paragraph = item_text = not empty and not coded and not ruled
            quoted = _QUOTE.match(text) is not None
            # a fenced or HTML block opened on the item's line (the line stays the item's)
            opened = None if empty or coded else _opens(text, False, text_at)
            if opened is not None:
                paragraph = item_text = False
                if opened.fence or not opened.ends_at(text, indent):
                    block = opened
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
    return _Reading(kinds, firsts, items, cuts, block is not None)


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
    return _headings(lines, _scan(lines))


def _headings(lines: list[str], reading: _Reading) -> list[Heading]:
    """``headings`` of ``lines`` as ``_scan`` read them."""
    out = []
    for i, line in enumerate(lines):
        if not reading.kinds[i] and (m := _ATX.match(line)):
            out.append(Heading(i, len(m.group(1)), m.group(2)))
    return out


def sibling_sections(text: str) -> tuple[str, list[str], str] | None:
    """``(before, sections, after)`` for the shallowest heading level that occurs twice or more.

    The sections are the runs of lines from each such heading to the next one; ``before`` is
    what precedes the first. Returns None when there are no siblings, when a shallower
    heading follows them (they would not share one parent), or when the text ends in a fenced
    or HTML block left open (``<!--`` with no ``-->``): its section, moved, would take in the
    sections after it.
    """
    lines = text.split("\n")
    reading = _scan(lines)
    if reading.open_at_end:
        return None
    found = _headings(lines, reading)
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
    reading = _scan(lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        m = None if reading.kinds[i] else _ATX.match(line)
        if m is None:
            out.append(line)
            continue
        level, title = len(m.group(1)), m.group(2)
        end = "\r" if line.endswith("\r") else ""  # a CRLF document's lines stay CRLF
        stands_alone = not (_BLOCK_START.match(title) or _THEMATIC.match(title))
        setext = style == "setext" and level <= 2 and stands_alone
        if (setext or style == "bold") and out and out[-1].strip() and not reading.cuts[i]:
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
    fenced or indented, and raw HTML (a comment too) are kept byte for byte, one block each
    (only a CRLF line end read as LF, and the blank lines that end an indented block left
    out, as CommonMark leaves them)."""
    parts: list[list[Block]] = [[]]
    lines = content.split("\n")
    reading = _scan(lines)
    previous = ""  # the line before, stripped ("" when blank or code)
    block: list[str] = []  # the block of code or raw HTML going on
    kind = ""  # ... its kind

    def end_block() -> None:
        if kind == "indented":
            while block and not block[-1].strip():
                block.pop()
        if block:
            parts[-1].append(("code", "\n".join(block)))
        block.clear()

    for i, raw in enumerate(lines):
        line = raw.removesuffix("\r")
        if reading.kinds[i] and not reading.firsts[i]:
            block.append(line)
            continue
        end_block()
        kind = reading.kinds[i]
        if kind:
            block.append(line)
            previous = ""
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
    return tuple(tuple(part) for part in parts if part)
