"""Identifiers in free text: token-aware replacement that leaves paths, file names and URLs alone.

A harness names its tools and skills in prose (descriptions, prompt sections, skill contents,
hook messages); a rename, by an augmentation rule or by an import that makes a folder name a
legal skill id, follows them there with ``replace_identifiers``, never with ``str.replace``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

_TEMPLATE_CODE = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.DOTALL)
_BOUNDARY = "A-Za-z0-9_-"
#: a name that reads as a word ("search", "Order"): in free text it is a name only where the
#: text marks it as one (as is any name of ``replace_identifiers``' ``marked``)
_PLAIN_WORD = re.compile(r"^[A-Za-z][a-z]*$")
#: words joined by hyphens ("after-sales"): plain too where the caller says such a name may be
#: a phrase (``replace_identifiers``' ``phrases``)
_PHRASE = re.compile(r"^[A-Za-z][a-z]*(?:-[a-z]+)+$")
_WORD = re.compile(f"[{_BOUNDARY}]+")
_QUOTES = "`'\""
_SHORT = 4096
#: the extensions that make a bare ``name.ext`` a file name (``data_export.rb``, ``go.mod``,
#: ``out.tar.gz``) or a host (``claude.ai``); what follows the dot of ``math.sqrt``,
#: ``page.goto`` or ``client.messages.create`` is none of them, and neither are extensions
#: that are as often attributes or methods (``log``: ``console.log``; ``map``, ``env``, ``db``,
#: ``key``, ``sum``, ``out``, ``bin``, ``net``, ``cmd``, ``fs``, ``ex``, ``properties``). One
#: that is called is a method all the same (``response.json()``).
_EXTENSION_GROUPS = (
    # code and build files
    "py pyi pyx ipynb js mjs cjs jsx ts mts cts tsx vue svelte astro rb erb go mod rs java kt kts"
    " scala sbt gradle groovy swift c h cc cpp cxx hpp hh cs php pl pm lua jl dart exs erl clj"
    " cljs elm hs ml nim zig sol ps1 psm1 bat sh bash zsh fish wasm sql graphql gql proto"
    " j2 jinja jinja2 tmpl mustache hbs ejs",
    # data and configuration
    "json jsonl ndjson json5 yaml yml toml ini cfg conf plist lock xml xsd csv tsv"
    " parquet arrow avro orc feather h5 hdf5 npy npz pkl pickle sqlite sqlite3 pem crt",
    # documents and pages
    "md markdown mdx rst adoc txt tex bib pdf doc docx odt rtf xls xlsx ods ppt pptx odp"
    " epub html htm xhtml css scss sass less svg",
    # images, sound, video, fonts
    "png jpg jpeg gif webp bmp ico icns tif tiff heic avif psd ai eps mp3 wav ogg flac m4a aac"
    " mp4 mov avi mkv webm ttf otf woff woff2",
    # archives and packages (``.skill``: a packaged Agent Skill)
    "zip tar gz tgz bz2 xz zst 7z rar jar war whl egg deb rpm dmg apk skill",
    # hosts named without a scheme (and ``ai``, above)
    "com org io dev",
)
FILE_EXTENSIONS = frozenset(" ".join(_EXTENSION_GROUPS).split())
#: a file path or URL in prose: a name in it names a file or folder (a skill's own
#: ``scripts/data-report.py``, ``{lang}/claude-api/README.md``), not a tool or skill
_PATH = re.compile(
    r"https?://\S+"
    r"|(?:[\w.{}~:@-]+/)+[\w{}~:@-]+\.[A-Za-z0-9]{1,8}"
    r"|(?:[\w.{}~:@-]+/)+"  # a folder: its name and a slash
    rf"|[\w-]+(?:\.[\w-]+)*\.(?i:{'|'.join(sorted(FILE_EXTENSIONS))})"
)
#: a line number (and column) after a file name: ``data_export.yaml:3``, ``app.py:10:4``
_LINE_NUMBER = re.compile(r"(?::\d+)+$")
#: ... or in parentheses, as pdb and compilers write it: ``data_export.py(3)``, ``app.cs(10,4)``;
#: any other ``(`` after a name is a call
_LINE_IN_PARENS = re.compile(r"\(\d+(?:, ?\d+)?\)")
_PATH_PUNCTUATION = frozenset("_.{}~:@/\\-")
#: what ends the word around a name (for URLs and e-mail addresses, which run past paths)
_WORD_END = frozenset(" \t\n\r\"'`<>()[]")
#: the characters next to a name that may make it part of a place (``in_path``)
_BEFORE_PLACE = frozenset("/\\~@:.=&?#%")
_AFTER_PLACE = frozenset("/\\@:?#=&")
_URL_OR_MAIL = re.compile(r"[A-Za-z][\w+.-]*://|[\w.+-]@[\w-]+\.\w")


def in_path(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a name found in it) names a file, a folder or a place: it
    is part of a URL or an e-mail address, of an absolute, home or relative path
    (``/usr/bin/x``, ``~/x``, ``./x``, ``C:\\x``), of a relative path to a file or folder
    (``scripts/x.py``, ``{lang}/x/``), or of a file name (``x.rb``, ``x.tar.gz``, ``x.yaml:3``,
    ``x.py(3)``) or host (``x.ai``). A slash command (``/x``), alternatives (``x/y``), an
    attribute (``x.get``) and a call (``x.json()``) are prose."""
    before = text[start - 1] if start else " "
    after = text[end : end + 2]
    if before not in _BEFORE_PLACE and not (
        after[:1] in _AFTER_PLACE or (after[:1] == "." and after[1:].isalnum())
    ):
        return False  # a name among words and punctuation: most of them, found at once
    left, right = start, end
    while left and text[left - 1] not in _WORD_END:
        left -= 1
    while right < len(text) and text[right] not in _WORD_END:
        right += 1
    if left == start and right == end:
        return False
    if _URL_OR_MAIL.search(text, left, right):
        return True
    left, right = start, end
    while left and (text[left - 1].isalnum() or text[left - 1] in _PATH_PUNCTUATION):
        left -= 1
    while right < len(text) and (text[right].isalnum() or text[right] in _PATH_PUNCTUATION):
        right += 1
    token = _LINE_NUMBER.sub("", text[left:right].rstrip(".:")).rstrip(".:")
    if "\\" in token or token.startswith(("./", "../", "~/")):
        return True
    if token.startswith("/") and "/" in token[1:]:
        return True
    called = text[right : right + 1] == "(" and not _LINE_IN_PARENS.match(text, right)
    if called and "/" not in token:
        return False  # a method called: ``response.json()``, ``mutex.lock()``
    return _PATH.fullmatch(token) is not None


def _token_regex(names: Sequence[str], code_only: bool) -> re.Pattern[str] | None:
    return _compiled_tokens(tuple(sorted(names)), code_only)


@lru_cache(maxsize=4096)
def _compiled_tokens(names: tuple[str, ...], code_only: bool) -> re.Pattern[str] | None:
    # a rename table recurs in every text of a harness, and across its variants
    if not names:
        return None
    # Longest first, so that a name that is a prefix of another never wins the alternation.
    alternation = "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    core = f"(?<![{_BOUNDARY}])(?:{alternation})(?![{_BOUNDARY}])"
    if code_only:
        # A plain word or phrase ("search", "after-sales") is an identifier only where the text
        # marks it as one: `search`, 'search', "search", (search), or search( ... ).
        core = (
            rf"(?<=`)(?:{alternation})(?=`)|(?<=')(?:{alternation})(?=')"
            rf'|(?<=")(?:{alternation})(?=")|(?<=\()(?:{alternation})(?=\))|{core}(?=\()'
        )
    return re.compile(core)


def replace_identifiers(
    text: str,
    table: Mapping[str, str],
    *,
    template: bool = False,
    phrases: AbstractSet[str] = frozenset(),
    marked: AbstractSet[str] = frozenset(),
) -> str:
    """``text`` with every whole-token occurrence of a key of ``table`` replaced by its value.

    Replacement is simultaneous (``a->b, b->a`` swaps) and token-aware: ``get_order`` is not
    touched inside ``get_order_details``. Names that read as words (``search``), and the names
    in ``phrases`` that read as words joined by hyphens (``after-sales``), and every name in
    ``marked``, are replaced only where the text marks them as names: in backticks or quotes,
    alone in parentheses, or called (``search(``); "the after-sales team" keeps its words.
    ``phrases`` are skill ids, which Agent Skills writes in kebab case: a tool renamed
    ``handoff-to-human`` from ``handoff_to_human`` by a rule was replaced everywhere, and a
    later rule must go on replacing it everywhere. ``marked`` are names that may be anything a
    folder is named (``données-clients``, ``技能``, ``c++``, ``-draft``): prose that spells
    one unmarked ("write c++ code") is prose. File paths and URLs are left as they are: a name in
    ``scripts/get_order.py`` names a file, and so does one in ``get_order.rb`` or
    ``get_order.yaml:3`` (a file name has an extension of ``FILE_EXTENSIONS``; ``get_order.get``
    and ``get_order.json()`` are code that uses the name). With ``template=True`` the Jinja2
    code in ``{{ }}``, ``{% %}`` and ``{# #}`` is left as it is.
    """
    table = {k: v for k, v in table.items() if k and k != v and k in text}
    if not table:
        return text
    plain = [
        n
        for n in table
        if n in marked or _PLAIN_WORD.match(n) or (n in phrases and _PHRASE.match(n))
    ]
    plain_set = frozenset(plain)
    if len(text) <= _SHORT and all(map(_WORD.fullmatch, table)):
        # every name is a whole token of the boundary characters: in a short text, look up its
        # tokens rather than build a regex for this table (a corpus brings a new table with
        # each conversation; a long prompt is searched faster by the table's regex)

        def swap(chunk: str) -> str:
            return _swap_tokens(chunk, table, plain_set)

    else:
        anywhere = [n for n in table if n not in plain_set]
        regexes = [r for r in (_token_regex(anywhere, False), _token_regex(plain, True)) if r]

        def swap(chunk: str) -> str:
            return _swap_spans(chunk, table, regexes)

    if not template:
        return swap(text)
    parts = _TEMPLATE_CODE.split(text)
    return "".join(part if i % 2 else swap(part) for i, part in enumerate(parts))


def _swap_tokens(chunk: str, table: Mapping[str, str], plain: frozenset[str]) -> str:
    """``_swap_spans`` for names made only of boundary characters: such a name matches
    exactly where it is a whole token (a maximal run of them), and a plain word only where a
    quote or backtick is on both sides, it is alone in parentheses, or ``(`` follows."""
    out, last = [], 0
    for match in _WORD.finditer(chunk):
        new = table.get(match.group())
        if new is None:
            continue
        start, end = match.span()
        if match.group() in plain:
            before = chunk[start - 1] if start else ""
            after = chunk[end] if end < len(chunk) else ""
            quoted = before and before == after and before in _QUOTES
            if not (quoted or after == "(" or (before == "(" and after == ")")):
                continue
        if in_path(chunk, start, end):
            continue
        out.append(chunk[last:start])
        out.append(new)
        last = end
    out.append(chunk[last:])
    return "".join(out)


def _swap_spans(chunk: str, table: Mapping[str, str], regexes: list[re.Pattern[str]]) -> str:
    spans: list[tuple[int, int]] = []
    for regex in regexes:
        spans.extend(m.span() for m in regex.finditer(chunk))
    spans.sort()
    out, last = [], 0
    for start, end in spans:
        if start < last or in_path(chunk, start, end):
            continue
        out.append(chunk[last:start])
        out.append(table[chunk[start:end]])
        last = end
    out.append(chunk[last:])
    return "".join(out)
