"""The rule API: a named, versioned, parametrised rewrite of a harness, and what it returns.

A rule looks at a harness, a seeded ``random.Random`` and its parameters, and returns a
``Rewrite``: the new harness plus the ``RewriteMapping`` from canonical to surface identifiers.
Rules never see trajectories; a rule that depends on what a trajectory uses (drop the tools it never
calls) says so in ``needs`` and reads the used sets from ``Context``. A rule that makes a parameter
name also misses the arguments the calls use that their schema does not declare
(``Context.arguments``, given to every rule where known). A chain of rewrites is a rewrite
(``Rewrite.then``, ``compose``).

Writing one::

    @rule("tools.shout", version="1", params={"type": "object", "properties": {}})
    def shout(harness, rng, params, context):
        \"\"\"Upper-case every tool description.\"\"\"
        tools = [dataclasses.replace(t, description=t.description.upper()) for t in harness.tools]
        return Rewrite(harness.replace(tools=tools))

``rule`` is in ``hsa.augment.registry``; it builds a ``Rule`` and registers it.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import pickle
import random
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from hsa.augment import arguments as undeclared
from hsa.augment.mapping import IDENTITY, RewriteMapping
from hsa.augment.param_schemas import copy_json
from hsa.errors import RuleError, schema_message
from hsa.harness.events import Event, SkillLoad, ToolCall
from hsa.harness.jsonvalues import unwritable
from hsa.harness.model import Harness
from hsa.harness.pickling import by_fields

RULE_NAME = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$(?!\n)")
#: the trajectory facts a rule may ask for in ``needs``
CONTEXT_FIELDS = ("used_tools", "used_skills")
#: a parameter schema's keyword listing the values its ``null`` (or ``any``) draws from, so
#: that a recipe can be checked for what it can produce (``hsa.augment.recipe.overlaps``)
DRAWS = "x-hsa-draws"
#: a list parameter's keyword (``true``): the list is candidates the rule draws one from per
#: use (a name per tool), so two lists that share a member can draw the same value
CANDIDATES = "x-hsa-candidates"
#: a parameter's keyword mapping a value to the values the rule may apply it as: ``{"/":
#: [":"]}`` for one written as another, ``{"-": ["-", "_"]}`` for one the harness may refuse
MEANS = "x-hsa-means"
#: a parameter's keyword mapping other parameters to the values under which this one matters:
#: ``{"placement": ["user"]}``; under any other value of theirs it is ignored
WHEN = "x-hsa-when"
#: families of the built-in rules, in the order ``hsa rules list`` shows them
FAMILIES = {
    "skill_ids": "skill identifiers",
    "skill_content": "skill content",
    "tools": "tool schemas",
    "prompt": "prompt structure",
    "hooks": "hooks",
    "protocol": "tool-call protocol",
}
EMPTY_PARAMS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


@by_fields
@dataclass(frozen=True, slots=True)
class Context:
    """What a trajectory uses, for rules that declare a need for it (``None`` = not known).

    Names are canonical: tool names as called in canonical ``tool_call`` events, skill ids as
    loaded in ``skill_load`` events. ``arguments``: per tool, the argument paths its calls use
    that its schema does not declare (``hsa.augment.arguments``), which every rule that makes
    a parameter name misses; no rule needs it (``()`` or ``None``: none known), and every rule
    is given it.
    """

    used_tools: frozenset[str] | None = None
    used_skills: frozenset[str] | None = None
    arguments: undeclared.Arguments | None = None

    def has(self, need: str) -> bool:
        return getattr(self, need) is not None

    def key(self) -> dict[str, Any]:
        """The known fields as sorted lists, for hashing into a variant id (``arguments``
        where there are any)."""
        out: dict[str, Any] = {n: sorted(getattr(self, n)) for n in CONTEXT_FIELDS if self.has(n)}
        if self.arguments:
            out["arguments"] = undeclared.to_json(self.arguments)
        return out

    def without_arguments(self) -> Context:
        return self if self.arguments is None else Context(self.used_tools, self.used_skills)

    @classmethod
    def of(cls, events: Iterable[Event], harness: Harness | None = None) -> Context:
        """The context of one canonical trajectory; with its canonical ``harness``, the
        arguments its calls use that their schemas do not declare too."""
        events = list(events)
        tools: set[str] = set()
        skills: set[str] = set()
        for event in events:
            if isinstance(event, ToolCall):
                tools.add(event.tool)
            elif isinstance(event, SkillLoad):
                skills.add(event.skill_id)
        arguments = None if harness is None else undeclared.of_calls(harness, events)
        return cls(frozenset(tools), frozenset(skills), arguments)

    @classmethod
    def union(cls, contexts: Iterable[Context]) -> Context:
        """What any of several trajectories uses: safe for all of them at once."""
        tools: set[str] = set()
        skills: set[str] = set()
        known: list[undeclared.Arguments] = []
        for c in contexts:
            tools |= c.used_tools or set()
            skills |= c.used_skills or set()
            if c.arguments is not None:
                known.append(c.arguments)
        arguments = undeclared.merged(known) if known else None
        return cls(frozenset(tools), frozenset(skills), arguments)


NO_CONTEXT = Context()


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewritten harness and the canonical -> surface mapping that goes with it."""

    harness: Harness
    mapping: RewriteMapping = IDENTITY

    def then(self, other: Rewrite) -> Rewrite:
        """This rewrite followed by ``other`` (which was computed on ``self.harness``)."""
        return Rewrite(other.harness, self.mapping.then(other.mapping))


def compose(start: Harness, rewrites: Sequence[Rewrite]) -> Rewrite:
    """A chain of rewrites, starting from ``start``, as one rewrite."""
    out = Rewrite(start)
    for rewrite in rewrites:
        out = out.then(rewrite)
    return out


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` of an exception on one line, cut to ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


RuleFn = Callable[[Harness, random.Random, dict[str, Any], Context], Rewrite]


@dataclass(frozen=True, slots=True)
class Rule:
    """A task-preserving rewrite: ``family.verb`` name, version, doc, parameter schema, function.

    ``params`` is a JSON Schema (2020-12) for the parameters; top-level ``default``s are filled
    in before the function sees them. ``needs`` names the ``Context`` fields the function reads.
    """

    name: str
    version: str
    fn: RuleFn = field(repr=False)
    params: MappingABC[str, Any] = field(default_factory=lambda: dict(EMPTY_PARAMS))
    doc: str = ""
    needs: frozenset[str] = frozenset()
    #: ``params`` as sorted JSON, made once: planning resolves parameters for every rewrite
    params_text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not RULE_NAME.match(self.name):
            raise RuleError(
                "a rule name is 'family.verb' in lower case (e.g. 'tools.rename')",
                where=f"rule {self.name!r}",
            )
        unknown = set(self.needs) - set(CONTEXT_FIELDS)
        if unknown:
            raise RuleError(
                f"unknown need(s) {sorted(unknown)}; a rule may need {list(CONTEXT_FIELDS)}",
                where=f"rule {self.name!r}",
            )
        try:
            Draft202012Validator.check_schema(self.params)
        except SchemaError as exc:
            raise RuleError(
                f"parameter schema is not valid JSON Schema: {exc.message}",
                where=f"rule {self.name!r}",
            ) from None
        root = Draft202012Validator(self.params)  # resolves the $refs of a property's schema
        for key, sub in (self.params.get("properties") or {}).items():
            if isinstance(sub, MappingABC) and "default" in sub:
                error = best_match(root.evolve(schema=sub).iter_errors(sub["default"]))
                if error is not None:
                    raise RuleError(
                        f"the default of {key!r} breaks its own schema: {schema_message(error)}",
                        where=f"rule {self.name!r}: params.{key}",
                    )
        if not self.doc.strip():
            why = "a rule needs a docstring"
            if sys.flags.optimize >= 2:  # (hsa's own rules too: the cause is not the rule's)
                why += (
                    ", and python -OO (PYTHONOPTIMIZE=2) strips every docstring: run hsa "
                    "without it (-O keeps them)"
                )
            raise RuleError(why, where=f"rule {self.name!r}")
        object.__setattr__(self, "params_text", _schema_text(self.params))

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def origin(self) -> str:
        """Where the rule's code lives: ``module:function``."""
        return f"{self.fn.__module__}:{getattr(self.fn, '__qualname__', repr(self.fn))}"

    @property
    def summary(self) -> str:
        """The first paragraph of the docstring, on one line."""
        paragraph = self.doc.strip().split("\n\n", 1)[0]
        return " ".join(line.strip() for line in paragraph.splitlines())

    def resolve_params(self, params: MappingABC[str, Any] | None = None) -> dict[str, Any]:
        """``params`` validated against the rule's schema, with top-level defaults filled in."""
        given = dict(params or {})
        try:
            key = json.dumps(given, sort_keys=True)
        except (TypeError, ValueError):  # not JSON: the schema check names the problem
            key = None
        resolved = _resolved(self.name, self.params_text, key) if key else None
        if resolved is None:
            resolved = _resolve(self.name, self.params, given)
        return copy_json(resolved)

    def apply(
        self,
        harness: Harness,
        rng: random.Random,
        params: MappingABC[str, Any] | None = None,
        context: Context = NO_CONTEXT,
    ) -> Rewrite:
        """Run the rule. Raises ``RuleError`` for bad parameters or a missing context field."""
        return self.run(harness, rng, self.resolve_params(params), context)

    def run(
        self,
        harness: Harness,
        rng: random.Random,
        resolved: dict[str, Any],
        context: Context = NO_CONTEXT,
        *,
        strict: bool | None = None,
    ) -> Rewrite:
        """``apply`` with parameters ``resolve_params`` has resolved already (the planner
        resolves them once and records them).

        ``strict`` (the default: for a plugin's rule, whose code is not hsa's own) also checks
        the two things a rule must do that its output cannot show, in every command that
        applies it: it leaves the harness it was given as it was (that harness is the canonical
        one or a variant others share, with values derived from it kept: an edit in place
        would change rows it never made), and it gives the same rewrite when run again from
        the same state of ``rng`` (a draw from ``random`` or the clock would give one variant
        id two contents). ``hsa rules check`` checks hsa's own rules so too. The order of a
        set of strings and ``hash()`` of one are the same twice in one process, so this does
        not catch a choice made by them; ``hsa rules check`` applies a plugin's rule again in
        other processes, under eight other ``PYTHONHASHSEED`` values, for that
        (``hsa.augment.suite``).
        """
        missing = [n for n in sorted(self.needs) if not context.has(n)]
        if missing:
            raise RuleError(
                f"this rule depends on the trajectory and needs {missing} in its context; "
                "plan it per trajectory (hsa.augment.plan(..., context=Context.of(events)))",
                where=f"rule {self.name!r}",
            )
        if not (self.plugin if strict is None else strict):
            return self._call(harness, rng, resolved, context)
        before, start, params = _state(harness), rng.getstate(), copy_json(resolved)
        rewrite = self._call(harness, rng, resolved, context)
        if _state(harness) != before:
            raise RuleError(
                f"changed the harness it was given in place (in {self.origin}): copy a "
                "mapping before changing it (a tool's parameters, the metadata, a hook's "
                "params) and return the copy in a replaced part (docs/rules.md, 'The simplest "
                "rule')",
                where=f"rule {self.name!r}",
            )
        outcome = self._readable(rewrite)
        again = random.Random()
        again.setstate(start)
        other = self._call(harness, again, params, context)
        if _outcome(other) != outcome:
            raise RuleError(
                f"gave two different rewrites from one seed (in {self.origin}): draw "
                "everything from rng, never from random, the clock, a set's order or hash()",
                where=f"rule {self.name!r}",
            )
        return rewrite

    def _call(
        self, harness: Harness, rng: random.Random, resolved: dict[str, Any], context: Context
    ) -> Rewrite:
        try:
            rewrite = self.fn(harness, rng, resolved, self.sees(context))
        except RuleError as exc:
            if exc.where and exc.where.startswith("rule "):
                raise  # names a rule already (this one's parameters, another rule it ran)
            # a RuleError of the rule's own, or of a helper it called (``restyle``,
            # ``fresh_names``): named as any other error of the rule
            where = f"rule {self.name!r}" + (f": {exc.where}" if exc.where else "")
            origin = f" (in {self.origin})" if self.plugin else ""
            raise RuleError(exc.message + origin, file=exc.file, where=where) from exc
        except (Exception, SystemExit) as exc:  # a rule's sys.exit() must not end the command
            # Rule code is often a plugin's: whatever it raises becomes one error that names the
            # rule and where its code lives, in every command that applies rules (``--debug``
            # still shows the original traceback through the chained cause).
            raise RuleError(
                f"raised {one_line(exc)} (in {self.origin}); fix the rule or leave it out",
                where=f"rule {self.name!r}",
            ) from exc
        if not isinstance(rewrite, Rewrite):
            raise RuleError(
                f"returned {type(rewrite).__name__}, not a Rewrite", where=f"rule {self.name!r}"
            )
        for part, kind in ((rewrite.harness, Harness), (rewrite.mapping, RewriteMapping)):
            if not isinstance(part, kind):
                raise RuleError(
                    f"returned a Rewrite holding {type(part).__name__} where a {kind.__name__} "
                    f"belongs (in {self.origin})",
                    where=f"rule {self.name!r}",
                )
        return rewrite

    def _readable(self, rewrite: Rewrite) -> tuple[str, str]:
        """``_outcome(rewrite)``, or one error naming the rule and the part of its rewrite
        hsa cannot read (parts that are not hsa's types, values that are not JSON)."""
        parts = (
            ("harness", _harness_json, "a Harness of hsa.harness parts (Tool, Skill, Hook)"),
            ("mapping", _mapping_json, "a RewriteMapping of ToolMaps and Steps"),
        )
        out = []
        for part, read, kind in parts:
            try:
                out.append(read(rewrite))
            except Exception as exc:
                raise RuleError(
                    f"returned a Rewrite whose {part} hsa cannot read ({one_line(exc)}; in "
                    f"{self.origin}): return {kind} holding JSON values",
                    where=f"rule {self.name!r}",
                ) from exc
        return out[0], out[1]

    @property
    def plugin(self) -> bool:
        """Whether the rule's code is not hsa's own (a plugin's, a test's, a notebook's)."""
        return not (self.fn.__module__ or "").startswith("hsa.")

    def sees(self, context: Context) -> Context:
        """What of ``context`` the rule is given: the fields it declares in ``needs`` (the
        others are ``None``, as when no trajectory is known), so that a rule reads the same
        wherever it runs, ``hsa rules check`` with its trajectories included; and the
        undeclared ``arguments``, which every rule that makes a parameter name must miss."""
        if all(name in self.needs or not context.has(name) for name in CONTEXT_FIELDS):
            return context
        kept = {n: getattr(context, n) if n in self.needs else None for n in CONTEXT_FIELDS}
        return Context(**kept, arguments=context.arguments)


def _harness_json(rewrite: Rewrite) -> str:
    return rewrite.harness.to_json(keep=False)


def _mapping_json(rewrite: Rewrite) -> str:
    return rewrite.mapping.to_json()


def _outcome(rewrite: Rewrite) -> tuple[str, str]:
    """What a rewrite is, to tell two apart: its harness as JSON (key order kept) and its
    mapping as JSON."""
    return _harness_json(rewrite), _mapping_json(rewrite)


def _state(harness: Harness) -> bytes:
    """The harness's fields as pickled bytes, without the values derived from it: equal
    before and after a rule ran unless the rule changed what it was given."""
    fields = tuple(getattr(harness, f.name) for f in dataclasses.fields(harness) if f.init)
    try:
        return pickle.dumps(fields, 5)
    except RecursionError:  # a schema nested deeper than pickle recurses: written as JSON
        tools = [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]
        deep = {id(part) for t in tools for part in (t.parameters, t.extra) if type(part) is dict}
        out = io.BytesIO()
        pickler = pickle.Pickler(out, 5)

        def as_json(obj: Any) -> str | None:
            return json.dumps(obj) if id(obj) in deep else None

        pickler.persistent_id = as_json  # type: ignore[method-assign]
        pickler.dump(fields)
        return out.getvalue()


def _resolve(name: str, schema: MappingABC[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the schema's top-level defaults filled in, then validated (so a
    parameter both required and with a default may be left out)."""
    given = copy.deepcopy(params)
    bad = unwritable(given, "params")  # NaN passes every bound of a schema, and rows record it
    if bad is not None:
        raise RuleError(bad[1], where=f"rule {name!r}: {bad[0]}")
    for key, sub in (schema.get("properties") or {}).items():
        if key not in given and isinstance(sub, MappingABC) and "default" in sub:
            given[key] = copy.deepcopy(sub["default"])
    errors = sorted(
        _validator(_schema_text(schema)).iter_errors(given), key=lambda e: list(map(str, e.path))
    )
    if errors:
        err = errors[0]
        path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in err.path)
        raise RuleError(schema_message(err), where=f"rule {name!r}: params{path}")
    return given


@lru_cache(maxsize=4096)
def _resolved(name: str, schema_text: str, params_text: str) -> dict[str, Any]:
    """Parameters resolved once per distinct (rule, schema, parameters): planning applies the
    same few rule settings to every variant of every harness. Callers copy the result."""
    return _resolve(name, json.loads(schema_text), json.loads(params_text))


@lru_cache(maxsize=1024)
def _validator(schema_text: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_text))


def _schema_text(schema: MappingABC[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True)
