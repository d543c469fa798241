"""Identifiers for rewritten harnesses: naming styles, legal fresh names, token-aware replacement.

Every name a rule invents goes through ``fresh_names``: it is made legal for its kind (tool,
parameter, skill id, hook id), kept within the length limit, and never equal to another name
of the same kind, old or new — so two tools can never end up with one name, even when one name
is a prefix or substring of another. Identifiers in free text are replaced by
``hsa.harness.identifiers.replace_identifiers``, whole tokens only and all at once, never by
naive ``str.replace``.
"""

from __future__ import annotations

import hashlib
import keyword
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from hsa.augment.banks import synonyms
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


@lru_cache(maxsize=8192)
def word_form(word: str) -> str:
    """``word`` lower case and singular (``Items`` -> item, ``entries`` -> entry, ``addresses``
    -> address), by the regular English plurals: the form two names' words are compared in, so
    that a plural is the same word as its singular. Irregular plurals keep their spelling, and
    a word that only looks plural is cut alike in both its forms (``news`` -> new)."""
    lower = word.lower()
    if len(lower) > 4 and lower.endswith("ies"):
        return lower[:-3] + "y"
    if lower.endswith("es") and lower[:-2].endswith(("ss", "sh", "ch", "x", "z")):
        return lower[:-2]
    if len(lower) > 3 and lower.endswith("s") and not lower.endswith(("ss", "us", "is")):
        return lower[:-1]
    return lower


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
    """The style ``name`` is written in (snake when it cannot tell): ``upper`` when all its
    letters are capitals, one word or more (``CANCEL``, ``EXCHANGE_ITEM``)."""
    if "-" in name:
        return "kebab"
    if name.isupper():
        return "upper"
    if "_" in name:
        return "snake"
    if name[:1].isupper():
        return "pascal"
    if any(c.isupper() for c in name):
        return "camel"
    return "snake"


def style_key(name: str) -> str:
    """``name`` with its style left out: its words lower case, joined by ``_`` (``name`` itself
    where it has none). Two spellings of one name have one key (``wrong_size``,
    ``WRONG_SIZE``, ``WrongSize``, ``wrong-size``), so a respelling can be told from a swap
    hidden by a change of case (``economy`` -> ``BUSINESS``, where ``business`` is a value
    too)."""
    return restyle(name, "snake")


def restyled_into(was: str, value: str, values: Iterable[Any]) -> str | None:
    """The first string of ``values`` that ``value`` spells in another style (``business`` for
    ``BUSINESS``, where ``value`` respells ``was``, ``economy``: a swap hidden by a change of
    case), or None; None too where ``value`` is ``was`` itself in another style."""
    key = style_key(value)
    if key == style_key(was):
        return None
    return next((v for v in values if isinstance(v, str) and style_key(v) == key), None)


@lru_cache(maxsize=8192)
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
    """``name`` with each word that has synonyms in ``bank`` replaced by one, style kept
    (``detect_style``); a name none of whose words is replaced comes back as it is. A synonym
    holding a word the name has already (``category_type`` -> ``kind_kind``) is passed over
    while another is left.

    A synonym holding a word of ``avoid`` (in its ``word_form``: the harness's own words,
    ``vocabulary``) in any form is never taken: there that word names something of its own
    (``items`` -> ``products`` where items and products are two things). Nor is one holding a
    word ``claimed`` gives to another word (``{synonym word: word}``, both in their
    ``word_form``, which this call adds its choices to: the names of one rewrite share it, so
    that ``items`` and ``product`` never become ``articles`` and ``article``). A word whose
    every synonym is passed over so stays as it is.
    """
    words = split_words(name)
    if not words:
        return name
    claimed = {} if claimed is None else claimed

    def offered(word: str) -> list[str]:
        choices = list(bank.get(word.lower()) or ())
        if not avoid and not claimed:
            return choices
        own = word_form(word)
        return [
            c
            for c in choices
            if not any(
                (form in avoid and form != own) or claimed.get(form, own) != own
                for form in map(word_form, split_words(c))
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
            claimed.setdefault(word_form(w), word_form(word))
    if all(new.lower() == old.lower() for new, old in zip(out, words, strict=True)):
        return name  # nothing to restyle it for ("getHTTPOrder" stays, not "getHttpOrder")
    # A synonym may be several words ("look_up"): split again before styling.
    flat = [w for word in out for w in split_words(word)]
    return styled(flat, detect_style(name))


def vocabulary(harness: Harness) -> frozenset[str]:
    """The words of a harness's own names, each in its ``word_form``: its tools' names (the
    skill tool's too), their parameters' names and its skill ids. A synonym drawn for one of
    its names avoids them in any form (``synonym_name``)."""
    names = [s.id for s in harness.skills]
    for tool in [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]:
        names.append(tool.name)
        names.extend(all_property_names(dict(tool.parameters)))
    return frozenset(word_form(w) for n in names for w in split_words(n))


def proposer(style: str, rng: random.Random, prefix: str, harness: Harness) -> Callable[[str], str]:
    """A new name for an old one in ``style`` (for ``fresh_names``): ``prefix`` and a random
    token for ``random``, ``synonym_name`` (avoiding the harness's ``vocabulary`` and the
    words the names proposed before it took) for ``synonym``, else the name restyled."""
    bank = synonyms()
    # a synonym is never a word the harness names something else with
    avoid = vocabulary(harness) if style == "synonym" else frozenset()
    claimed: dict[str, str] = {}  # nor one another word of this rewrite took

    def propose(name: str) -> str:
        if style == "random":
            return f"{prefix}{random_token(rng)}"
        if style == "synonym":
            return synonym_name(name, bank, rng, avoid, claimed)
        return restyle(name, style)

    return propose


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


#: what ``_fit`` replaces by ``_``: ``_UNSAFE``, all but letters, digits and ``_ . : -``;
#: ``_DOTS``, dots and colons, in names that take none (compiled once: names are fitted for
#: every rename)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_DOTS = re.compile(r"[.:]")


def _fit(candidate: str, pattern: re.Pattern[str], limit: int) -> str:
    if pattern is ANY_VALUE:
        return candidate[:limit] or "_"
    cleaned = _UNSAFE.sub("_", candidate)
    if pattern is PARAM_NAME or pattern is TOOL_NAME:
        cleaned = _DOTS.sub("_", cleaned)
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
