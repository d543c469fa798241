"""Identifiers for rewritten harnesses: naming styles, legal fresh names, token-aware replacement.

Every name a rule invents goes through ``fresh_names``: it is made legal for its kind (tool,
parameter, skill id, hook id), kept within the length limit, and never equal to another name
of the same kind, old or new — so two tools can never end up with one name, even when one name
is a prefix or substring of another. Identifiers in free text are replaced by
``replace_identifiers``, whole tokens only and all at once, never by naive ``str.replace``.
"""

from __future__ import annotations

import hashlib
import keyword
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import TYPE_CHECKING

from hsa.augment.param_schemas import all_property_names
from hsa.augment.rule import CANDIDATES, DRAWS
from hsa.errors import RuleError

if TYPE_CHECKING:
    from hsa.harness.model import Harness

# Each ends "$(?!\n)": Python's "$" also matches before a final newline, and rule schemas
# (JSON Schema, searched by jsonschema with Python's re) carry PARAM_NAME's pattern.
#: OpenAI/Anthropic tool names
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$(?!\n)")
#: parameter names hsa invents: valid in every call format, Python keyword syntax included
#: (``fresh_names`` also keeps them off Python's keywords)
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$(?!\n)")
#: what a rule's parameter schema adds (``"not": ...``) to ``PARAM_NAME``'s pattern where a
#: recipe gives a parameter name: no Python keyword (``from``, ``class``); soft keywords
#: (``match``, ``type``) are names. The title is what the refusal says.
NOT_A_KEYWORD = {
    "enum": list(keyword.kwlist),
    "title": "a Python keyword, which a call written as Python cannot pass",
}
#: skill and hook ids (the harness schema's pattern)
ID_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?!\n)")
#: enum values: any non-empty string (they are data, only kept distinct)
ANY_VALUE = re.compile(r"^(?s:.){1,128}$(?!\n)")
STYLES = ("snake", "camel", "pascal", "kebab", "upper")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_WORD_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_words(name: str) -> list[str]:
    """The words of an identifier in any style: ``getHTTPOrder_v2`` -> get, HTTP, Order, v, 2."""
    return _WORD_SPLIT.findall(name)


def styled(words: Sequence[str], style: str) -> str:
    """Join ``words`` in ``style`` (snake, camel, pascal, kebab, upper)."""
    lower = [w.lower() for w in words if w]
    if not lower:
        return ""
    if style == "snake":
        return "_".join(lower)
    if style == "kebab":
        return "-".join(lower)
    if style == "upper":
        return "_".join(w.upper() for w in lower)
    if style == "camel":
        return lower[0] + "".join(w.capitalize() for w in lower[1:])
    if style == "pascal":
        return "".join(w.capitalize() for w in lower)
    raise RuleError(f"unknown naming style {style!r}; one of {', '.join(STYLES)}")


def detect_style(name: str) -> str:
    """The style ``name`` is written in (snake when it cannot tell)."""
    if "-" in name:
        return "kebab"
    if "_" in name:
        return "upper" if name.isupper() else "snake"
    if name[:1].isupper():
        return "pascal"
    if any(c.isupper() for c in name):
        return "camel"
    return "snake"


@lru_cache(maxsize=1 << 16)
def restyle(name: str, style: str) -> str:
    """``name`` written in ``style``; a name with no words is kept. Once per distinct pair:
    drawing a style restyles every name of a harness in every style, and names recur across
    the variants of a harness and the conversations of a corpus."""
    return styled(split_words(name), style) or name


def random_token(rng: random.Random, length: int = 6) -> str:
    """A random lower-case token that starts with a letter."""
    first = rng.choice(_ALPHABET[:26])
    return first + "".join(rng.choice(_ALPHABET) for _ in range(length - 1))


def synonym_name(
    name: str,
    bank: Mapping[str, Sequence[str]],
    rng: random.Random,
    avoid: AbstractSet[str] = frozenset(),
    claimed: dict[str, str] | None = None,
) -> str:
    """``name`` with each word that has synonyms in ``bank`` replaced by one, style kept; a
    synonym holding a word the name has already (``category_type`` -> ``kind_kind``) is passed
    over while another is left.

    A synonym holding a word of ``avoid`` (lower case: the harness's own words, ``vocabulary``)
    is never taken: there that word names something of its own (``item`` -> ``product`` where
    items and products are two things). Nor is one holding a word ``claimed`` gives to another
    word (``{synonym word: word}``, lower case, which this call adds its choices to: the names
    of one rewrite share it, so that ``item`` and ``product`` never both become ``article``).
    A word whose every synonym is passed over so stays as it is.
    """
    words = split_words(name)
    if not words:
        return name
    claimed = {} if claimed is None else claimed

    def offered(word: str) -> list[str]:
        choices = list(bank.get(word.lower()) or ())
        if not avoid and not claimed:
            return choices
        own = word.lower()
        return [
            c
            for c in choices
            if not any(
                (w.lower() in avoid and w.lower() != own) or claimed.get(w.lower(), own) != own
                for w in split_words(c)
            )  # the word itself may stay in its synonym: date -> calendar_date
        ]

    out: list[str] = []
    for index, word in enumerate(words):
        choices = offered(word)
        if not choices:
            out.append(word)
            continue
        # the words before (as replaced) and after (as they are, or as they may become)
        taken = {w.lower() for done in out for w in split_words(done)}
        for later in words[index + 1 :]:
            taken.add(later.lower())
            taken.update(w for s in offered(later) for w in split_words(s))
        fresh = [c for c in choices if not taken & {w.lower() for w in split_words(c)}]
        out.append(rng.choice(fresh or choices))
        for w in split_words(out[-1]):
            claimed.setdefault(w.lower(), word.lower())
    # A synonym may be several words ("look_up"): split again before styling.
    flat = [w for word in out for w in split_words(word)]
    return styled(flat, detect_style(name))


def vocabulary(harness: Harness) -> frozenset[str]:
    """The words of a harness's own names, lower case: its tools' names (the skill tool's
    too), their parameters' names and its skill ids. A synonym drawn for one of its names
    avoids them (``synonym_name``)."""
    names = [s.id for s in harness.skills]
    for tool in [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]:
        names.append(tool.name)
        names.extend(all_property_names(dict(tool.parameters)))
    return frozenset(w.lower() for n in names for w in split_words(n))


def changing_styles(
    names: Sequence[str], styles: Sequence[str], bank: Mapping[str, Sequence[str]]
) -> list[str]:
    """The styles among ``styles`` that would change at least one of ``names``.

    ``random`` always does; ``synonym`` does when some word has a synonym in ``bank``; a case
    style does when some name is not already written in it. Falls back to ``styles`` when none
    would (there is nothing to rename).
    """
    out = []
    for style in styles:
        if style == "random":
            out.append(style)
        elif style == "synonym":
            if any(w.lower() in bank for n in names for w in split_words(n)):
                out.append(style)
        elif any(restyle(n, style) != n for n in names):
            out.append(style)
    return out or list(styles)


def style_param(styles: Sequence[str], description: str) -> dict[str, object]:
    """The schema of a rule's ``style`` parameter: one of ``styles``, ``any`` (one drawn per
    rewrite), or a list of styles to draw one from (``[camel, synonym]``)."""
    return {
        "anyOf": [
            {"enum": ["any", *styles]},
            {"type": "array", "items": {"enum": list(styles)}, "minItems": 1, "uniqueItems": True},
        ],
        "default": "any",
        "description": f"{description} A list draws one of the styles it names per rewrite.",
        DRAWS: list(styles),
        CANDIDATES: True,
    }


def draw_style(
    value: str | Sequence[str],
    styles: Sequence[str],
    names: Sequence[str],
    bank: Mapping[str, Sequence[str]],
    rng: random.Random,
) -> str:
    """The style a rewrite uses: ``value`` itself when it is one style, else one drawn from
    ``styles`` (``any``) or from the listed ones, among those that would change ``names``."""
    if isinstance(value, str) and value != "any":
        return value
    pool = list(styles) if value == "any" else [s for s in styles if s in value]
    return rng.choice(changing_styles(names, pool, bank))


def _fit(candidate: str, pattern: re.Pattern[str], limit: int) -> str:
    if pattern is ANY_VALUE:
        return candidate[:limit] or "_"
    cleaned = re.sub(r"[^A-Za-z0-9_.:-]", "_", candidate)
    if pattern is PARAM_NAME or pattern is TOOL_NAME:
        cleaned = re.sub(r"[.:]", "_", cleaned)
    if pattern is PARAM_NAME:
        cleaned = cleaned.replace("-", "_")
        if cleaned[:1].isdigit():
            cleaned = "p_" + cleaned
    if pattern is ID_NAME:
        cleaned = cleaned.lstrip("_.:-")
    if not cleaned:
        cleaned = "x"
    if len(cleaned) > limit:
        digest = hashlib.sha1(candidate.encode("utf-8")).hexdigest()[:6]
        cleaned = cleaned[: limit - 7].rstrip("_.:-") + "_" + digest
    return cleaned


def fresh_names(
    originals: Sequence[str],
    propose: Callable[[str], str],
    *,
    taken: Iterable[str] = (),
    pattern: re.Pattern[str] = TOOL_NAME,
    accept: Callable[[str], bool] | None = None,
) -> dict[str, str]:
    """A collision-free renaming of ``originals``: ``{original: new}``.

    ``propose`` suggests a name; it is made to match ``pattern`` and to pass ``accept`` (e.g.
    "parses back in the harness's call format"), and suffixed ``_2``, ``_3``, ... when it would
    equal another original, another new name or anything in ``taken``, or (for ``PARAM_NAME``)
    be a Python keyword (``from``: a call written as Python passes arguments by keyword). A
    name that would stay the same is kept only if no other original claims it first.
    """
    limit = 64 if pattern is not ID_NAME else 128
    taken = set(taken)
    blocked = taken | set(originals)
    out: dict[str, str] = {}
    used: set[str] = set()
    for original in originals:
        candidate = _fit(propose(original), pattern, limit)
        if accept is not None and not accept(candidate):
            candidate = _fit(restyle(candidate, "snake"), pattern, limit)
            if not accept(candidate):
                candidate = original
        base, n = candidate, 1
        while (
            candidate in used
            or candidate in taken
            or (candidate in blocked and candidate != original)
            or not pattern.match(candidate)
            or (pattern is PARAM_NAME and candidate != original and keyword.iskeyword(candidate))
        ):
            n += 1
            suffix = f"_{n}"
            candidate = base[: limit - len(suffix)] + suffix
            if n > 10_000:
                raise RuleError(f"cannot find a free name for {original!r}")
        out[original] = candidate
        used.add(candidate)
    return out


# --- identifiers in free text ---

_TEMPLATE_CODE = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.DOTALL)
_BOUNDARY = "A-Za-z0-9_-"
#: a name that reads as a word ("search", "Order"): in free text it is a name only where the
#: text marks it as one
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
_PATH_PUNCTUATION = frozenset("_.{}~:@/\\-")
#: what ends the word around a name (for URLs and e-mail addresses, which run past paths)
_WORD_END = frozenset(" \t\n\r\"'`<>()[]")
#: the characters next to a name that may make it part of a place (``_in_path``)
_BEFORE_PLACE = frozenset("/\\~@:.=&?#%")
_AFTER_PLACE = frozenset("/\\@:?#=&")
_URL_OR_MAIL = re.compile(r"[A-Za-z][\w+.-]*://|[\w.+-]@[\w-]+\.\w")


def _in_path(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a name found in it) names a file, a folder or a place: it
    is part of a URL or an e-mail address, of an absolute, home or relative path
    (``/usr/bin/x``, ``~/x``, ``./x``, ``C:\\x``), of a relative path to a file or folder
    (``scripts/x.py``, ``{lang}/x/``), or of a file name (``x.rb``, ``x.tar.gz``, ``x.yaml:3``)
    or host (``x.ai``). A slash command (``/x``), alternatives (``x/y``) and an attribute
    (``x.get``) are prose."""
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
    if text[right : right + 1] == "(" and "/" not in token:
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
) -> str:
    """``text`` with every whole-token occurrence of a key of ``table`` replaced by its value.

    Replacement is simultaneous (``a->b, b->a`` swaps) and token-aware: ``get_order`` is not
    touched inside ``get_order_details``. Names that read as words (``search``), and the names
    in ``phrases`` that read as words joined by hyphens (``after-sales``), are replaced only
    where the text marks them as names: in backticks or quotes, alone in parentheses, or
    called (``search(``); "the after-sales team" keeps its words. ``phrases`` are skill ids,
    which Agent Skills writes in kebab case: a tool renamed ``handoff-to-human`` from
    ``handoff_to_human`` by a rule was replaced everywhere, and a later rule must go on
    replacing it everywhere. File paths and URLs are left as they are: a name in
    ``scripts/get_order.py`` names a file, and so does one in ``get_order.rb`` or
    ``get_order.yaml:3`` (a file name has an extension of ``FILE_EXTENSIONS``; ``get_order.get``
    and ``get_order.json()`` are code that uses the name). With ``template=True`` the Jinja2
    code in ``{{ }}``, ``{% %}`` and ``{# #}`` is left as it is.
    """
    table = {k: v for k, v in table.items() if k and k != v and k in text}
    if not table:
        return text
    plain = [n for n in table if _PLAIN_WORD.match(n) or (n in phrases and _PHRASE.match(n))]
    if len(text) <= _SHORT and all(map(_WORD.fullmatch, table)):
        # every name is a whole token of the boundary characters: in a short text, look up its
        # tokens rather than build a regex for this table (a corpus brings a new table with
        # each conversation; a long prompt is searched faster by the table's regex)
        plain_set = frozenset(plain)

        def swap(chunk: str) -> str:
            return _swap_tokens(chunk, table, plain_set)

    else:
        plain_set = frozenset(plain)
        marked = [n for n in table if n not in plain_set]
        regexes = [r for r in (_token_regex(marked, False), _token_regex(plain, True)) if r]

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
        if _in_path(chunk, start, end):
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
        if start < last or _in_path(chunk, start, end):
            continue
        out.append(chunk[last:start])
        out.append(table[chunk[start:end]])
        last = end
    out.append(chunk[last:])
    return "".join(out)
