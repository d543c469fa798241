"""Recipes: which rules a variant may draw, with what probability and parameters, and how many.

A recipe is YAML validated by the JSON Schema shipped as ``hsa/augment/schema/recipe.schema.json``::

    seed: 0
    variants_per_harness: 8      # variants planned per harness
    variants_per_trajectory: 2   # of which each trajectory is rendered under this many
    include_canonical: false     # also the unchanged harness (unset: augment's default, yes)
    min_rules: 1                 # a variant draws at least this many rules (default 1)
    max_rules: null              # ... and at most this many
    base:                        # applied to every variant first, never drawn or counted
      - rule: tools.drop_unused
        params: {keep: 3}
    rules:                       # applied in this order when drawn
      - rule: tools.rename
        probability: 0.5         # the chance it is drawn (default 1)
        params: {style: synonym}

A variant draws each rule with its ``probability``; when that gives fewer than ``min_rules``,
more are drawn, weighted by probability, and past ``max_rules`` some are let go. A rule
drawn that changes nothing a row can show (a protocol's doc format under ``api``, hooks of
a harness without hooks) is then left out of the variant, so a variant may apply fewer than
``min_rules`` (never more than ``max_rules``; ``base`` rules come on top); a draw whose
rules all change nothing is drawn again, a few times. A rule's ``probability`` is therefore
not the share of variants that apply it: the top-up and the redraws raise it, the rules that
change nothing lower the others' counts. ``variants.parquet`` and each row's ``rules`` list
what was applied.

``default_recipe()`` enables every built-in family.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import product
from pathlib import Path
from typing import Any, NamedTuple

from jsonschema import Draft202012Validator

from hsa.config import first_schema_problem, loads_yaml, read_yaml
from hsa.errors import RuleError
from hsa.harness.jsonvalues import json_path, unwritable
from hsa.harness.pickling import by_fields


@lru_cache(maxsize=1)
def recipe_schema() -> dict[str, Any]:
    """The published JSON Schema of a recipe."""
    text = resources.files("hsa.augment").joinpath("schema/recipe.schema.json").read_text("utf-8")
    return json.loads(text)


#: the rule tuples of recipes checked already, by their ids (the tuples kept, so an id is
#: never another tuple's): a recipe replaced from another shares them
_CHECKED: dict[tuple[int, int], tuple[tuple[RecipeRule, ...], tuple[RecipeRule, ...]]] = {}


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return Draft202012Validator(recipe_schema())


@by_fields
@dataclass(frozen=True, slots=True)
class RecipeRule:
    """One rule of a recipe: drawn with ``probability``, applied with ``params``."""

    rule: str
    probability: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "probability": self.probability} | _params_dict(self)


@by_fields
@dataclass(frozen=True, slots=True)
class Recipe:
    """A validated recipe (see the module docstring for the fields)."""

    rules: tuple[RecipeRule, ...]
    seed: int = 0
    variants_per_harness: int = 4
    variants_per_trajectory: int = 1
    #: also the canonical, unchanged harness: ``plan`` lists its variant first, and ``hsa
    #: augment`` / ``hsa build`` follow it when their ``keep_canonical`` is unset; None:
    #: unset (their default: yes)
    include_canonical: bool | None = None
    #: rules drawn at least (see the module docstring: applied may be fewer)
    min_rules: int = 1
    max_rules: int | None = None
    #: rules applied to every variant before the drawn ones (a compact harness, say): not
    #: drawn, not counted by min/max_rules, not part of what ``overlaps`` compares
    base: tuple[RecipeRule, ...] = ()

    def __post_init__(self) -> None:
        # what ``from_dict`` checks of a file holds of a recipe made in code too: the shape
        # and ranges of every field, and the counts across them
        for key in ("rules", "base"):
            found = getattr(self, key)
            if not isinstance(found, tuple) or not all(isinstance(r, RecipeRule) for r in found):
                raise RuleError(
                    f"{key} must be a tuple of RecipeRule (Recipe.from_dict reads a mapping)",
                    where=f"$.{key}",
                )
        data = self.to_dict()
        checked = _CHECKED.get((id(self.rules), id(self.base)))
        reused = checked is not None and checked[0] is self.rules and checked[1] is self.base
        if reused:
            # the rules of a recipe this one was replaced from (``dataclasses.replace``, as
            # planning does per harness): checked already, so only the rest is checked here
            data["rules"] = []
            data.pop("base", None)
        bad = unwritable(data, "$")  # NaN passes every bound of the schema
        if bad is not None:
            raise RuleError(bad[1], where=bad[0])
        problem = first_schema_problem(_validator().iter_errors(data))
        if problem is not None:
            at, message = problem
            raise RuleError(message, where="$" + json_path(at)[1:])
        self._check_counts()
        if reused:
            return
        from hsa.augment.registry import get

        for key in ("rules", "base"):  # each rule exists and takes its parameters
            for i, item in enumerate(getattr(self, key)):
                try:
                    get(item.rule).resolve_params(item.params)
                except RuleError as exc:
                    raise RuleError(exc.message, where=f"$.{key}[{i}]: {exc.where}") from None
        _CHECKED[(id(self.rules), id(self.base))] = (self.rules, self.base)
        while len(_CHECKED) > 256:
            _CHECKED.pop(next(iter(_CHECKED)))

    def _check_counts(self) -> None:
        """The checks across fields: how many variants and rules can be asked for."""
        if self.variants_per_trajectory > self.variants_per_harness:
            raise RuleError(
                f"variants_per_trajectory ({self.variants_per_trajectory}) exceeds "
                f"variants_per_harness ({self.variants_per_harness}); lower it or plan more",
                where="$.variants_per_trajectory",
            )
        # a rule of probability 0 is never drawn, not even to make up min_rules
        drawable = sum(1 for r in self.rules if r.probability > 0)
        if self.rules and drawable < self.min_rules:
            zero = len(self.rules) - drawable
            raise RuleError(
                f"min_rules ({self.min_rules}) exceeds the {drawable} rule(s) the recipe draws "
                "from"
                + (f" ({zero} more of probability 0 are never drawn)" if zero else "")
                + ": no variant can apply that many",
                where="$.min_rules",
            )
        if self.max_rules is not None and self.max_rules < self.min_rules:
            raise RuleError(
                f"max_rules ({self.max_rules}) is below min_rules ({self.min_rules})",
                where="$.max_rules",
            )

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=str))

    @property
    def needs(self) -> frozenset[str]:
        """Trajectory facts some rule of the recipe depends on: plan per trajectory if any."""
        from hsa.augment.registry import get

        out: set[str] = set()
        for item in self.base + self.rules:
            out |= get(item.rule).needs
        return frozenset(out)

    @property
    def versions(self) -> dict[str, str]:
        """The version of each rule the recipe names (its base rules too), by name: a rule
        whose output changed bumps it, so output planned from the recipe is another output."""
        from hsa.augment.registry import get

        names = sorted({item.rule for item in self.base + self.rules})
        return {name: get(name).version for name in names}

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "seed": self.seed,
                "variants_per_harness": self.variants_per_harness,
                "variants_per_trajectory": self.variants_per_trajectory,
                "min_rules": self.min_rules,
                "max_rules": self.max_rules,
                "rules": [r.to_dict() for r in self.rules],
            }
            | (
                {}
                if self.include_canonical is None
                else {"include_canonical": self.include_canonical}
            )
            | ({"base": [_base_dict(r) for r in self.base]} if self.base else {})
        )

    def to_yaml(self) -> str:
        from hsa.harness.io import dump_yaml

        return dump_yaml(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, *, file: str | None = None, root: str = "$") -> Recipe:
        """Validate ``data`` against the recipe schema and every rule's parameter schema.

        ``root`` is the JSON path of ``data`` in its file (``$.augment.recipe`` in a build
        config), so that errors name a path of that file.
        """
        problem = first_schema_problem(_validator().iter_errors(data))
        if problem is not None:
            at, message = problem
            if isinstance(data, Mapping) and "rules" not in data and "source" in data:
                # (the one key a build config must have; a recipe never has it)
                message = (
                    "this is a build config, not a recipe (it has 'source' and no 'rules'): "
                    "run it with `hsa build`, or give the recipe it names (augment.recipe)"
                )
                at = []
            raise RuleError(message, file=file, where=root + json_path(at)[1:])

        # (each rule's existence and parameters are checked as the recipe is made)
        lists: dict[str, list[RecipeRule]] = {"rules": [], "base": []}
        for key, found_rules in lists.items():
            for item in data.get(key) or ():
                probability = float(item.get("probability", 1.0))
                found_rules.append(RecipeRule(item["rule"], probability, item.get("params", {})))
        try:
            recipe = cls(
                rules=tuple(lists["rules"]),
                base=tuple(lists["base"]),
                seed=int(data.get("seed", 0)),
                variants_per_harness=int(data.get("variants_per_harness", 4)),
                variants_per_trajectory=int(data.get("variants_per_trajectory", 1)),
                include_canonical=data.get("include_canonical"),
                min_rules=int(data.get("min_rules", 1)),
                max_rules=data.get("max_rules"),
            )
        except RuleError as exc:  # (a NaN: the schema's bounds let it through)
            where = (exc.where or "$").replace("$", root, 1)
            raise RuleError(exc.message, file=file, where=where) from None
        return recipe


def _base_dict(item: RecipeRule) -> dict[str, Any]:
    return {"rule": item.rule} | _params_dict(item)


def _params_dict(item: RecipeRule) -> dict[str, Any]:
    # params that are not a mapping (a list, a string, None: a RecipeRule made in code) are
    # passed on as they are, for the schema to refuse at their path
    if not isinstance(item.params, Mapping):
        return {"params": item.params}
    return {"params": dict(item.params)} if item.params else {}


def loads_recipe(text: str, *, file: str | None = None) -> Recipe:
    """A recipe from YAML text."""
    return Recipe.from_dict(loads_yaml(text, error=RuleError, file=file), file=file)


def load_recipe(path: str | Path) -> Recipe:
    """A recipe from a YAML file."""
    return Recipe.from_dict(read_yaml(path, error=RuleError), file=str(path))


#: where the default recipe lives, as errors about it name it
DEFAULT_RECIPE_FILE = "hsa/augment/recipes/default.yaml"


def default_recipe() -> Recipe:
    """The recipe shipped with hsa: every family enabled, moderate probabilities."""
    text = resources.files("hsa.augment").joinpath("recipes/default.yaml").read_text("utf-8")
    return loads_recipe(text, file=DEFAULT_RECIPE_FILE)


class _Anything:
    """A parameter value that may be anything: it meets every value."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


def _values(schema: Mapping[str, Any], value: Any) -> list[Any]:
    """The values a parameter set to ``value`` can take, as the rule applies them. ``null``
    and ``any`` stand for what the rule draws from: the values its schema lists under
    ``DRAWS``, else (``any``) every other value of its enum, else anything at all; a list, for
    a parameter whose schema marks it ``CANDIDATES`` (or that draws), the values it lists. Each
    is then read through the schema's ``MEANS``: the values the rule may apply it as."""
    from hsa.augment.rule import CANDIDATES, DRAWS, MEANS

    drawn = schema.get(DRAWS)
    if isinstance(value, list) and (schema.get(CANDIDATES) is True or isinstance(drawn, list)):
        values = list(value)  # candidates the rule draws from: one of them
    elif value is None or value == "any":
        choices = schema.get("enum")
        if isinstance(drawn, list):
            values = list(drawn)
        elif value == "any" and isinstance(choices, list):
            values = [c for c in choices if c != "any"]
        else:
            values = [_Anything()]
    else:
        values = [value]
    means = schema.get(MEANS)
    if not isinstance(means, Mapping):
        return values
    out: list[Any] = []
    for v in values:
        applied = means.get(v) if isinstance(v, str) else None
        out.extend(applied if isinstance(applied, list) else [v])
    return out


def _common(schema: Mapping[str, Any], mine: Any, theirs: Any) -> list[Any]:
    """The values a parameter set to ``mine`` can take that one set to ``theirs`` can too."""
    others = _values(schema, theirs)
    out: list[Any] = []
    for v in _values(schema, mine):
        if isinstance(v, _Anything):
            out.extend(others)
        elif v in others:
            out.append(v)
    return out


def _meet(props: Mapping[str, Any], mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> bool:
    """Whether a rule's parameters ``mine`` and ``theirs`` (resolved) can take the same values:
    every parameter's values intersect, apart from one whose schema's ``WHEN`` says it is
    ignored under values the parameters it names take on both sides."""
    from hsa.augment.rule import WHEN

    names = sorted(set(mine) | set(theirs))
    schemas: dict[str, Mapping[str, Any]] = {}
    for name in names:
        schema = props.get(name)
        schemas[name] = schema if isinstance(schema, Mapping) else {}
    shared = {n: _common(schemas[n], mine.get(n), theirs.get(n)) for n in names}
    when = {n: w for n in names if isinstance(w := schemas[n].get(WHEN), Mapping)}
    deciding = sorted({d for w in when.values() for d in w if d in shared and d not in when})
    if any(not shared[n] for n in names if n not in when):
        return False
    for values in product(*(shared[d] for d in deciding)):
        taken = dict(zip(deciding, values, strict=True))
        if all(shared[n] or not _matters(w, taken) for n, w in when.items()):
            return True
    return False


def _matters(when: Mapping[str, Any], taken: Mapping[str, Any]) -> bool:
    """Whether a parameter whose ``WHEN`` is ``when`` matters with the parameters it names
    set to ``taken``; not where one of them may be anything (it may take another value)."""
    for name, allowed in when.items():
        if name not in taken or not isinstance(allowed, list):
            continue
        if isinstance(taken[name], _Anything) or taken[name] not in allowed:
            return False
    return True


class Overlap(NamedTuple):
    """A rule of a held-out recipe (at ``held``) that draws what a rule of the training recipe
    (at ``training``) draws, with both rules' parameters, their defaults filled in."""

    held: int
    training: int
    rule: str
    params: str  # as compact JSON, keys sorted
    other: str


def overlapping(held_out: Recipe, training: Recipe) -> list[Overlap]:
    """Where ``held_out`` draws what ``training`` draws: each rule of ``held_out`` that
    ``training`` also has with parameters that can take the same values (every parameter's
    values intersect, as the rule applies them: ``null`` and ``any`` mean what the rule draws
    from, a list of candidates each of them, see ``_values``; one the others leave ignored
    meets any, see ``_meet``), whatever the rules' probabilities. Empty when held out."""
    from hsa.augment.registry import get

    found: list[Overlap] = []
    for i, mine in enumerate(held_out.rules):
        rule = get(mine.rule)
        props = (rule.params or {}).get("properties") or {}
        params = rule.resolve_params(mine.params)
        for j, theirs in enumerate(training.rules):
            if theirs.rule != mine.rule:
                continue
            other = rule.resolve_params(theirs.params)
            if _meet(props, params, other):
                found.append(Overlap(i, j, mine.rule, _short(params), _short(other)))
    return found


def overlaps(held_out: Recipe, training: Recipe) -> list[str]:
    """``overlapping``, each as ``rules[i] NAME {params} overlaps training rules[j]
    {params}``."""
    return [
        f"rules[{o.held}] {o.rule} {o.params} overlaps training rules[{o.training}] {o.other}"
        for o in overlapping(held_out, training)
    ]


def _short(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
