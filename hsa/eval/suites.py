"""The suites: which tasks run under which harnesses, laid out as episodes in a fixed order.

- ``canonical``: each sampled task under the environment's own harness (the product's
  current harness: HAT's "Live-Stream QA").
- ``variants``: the same tasks, each under ``variants`` harness variants drawn from a
  held-out recipe (HAT's "Harness-Variant QA"), drawn as ``hsa teach`` draws them (by task
  id, from a pool planned from the recipe and seed), so a run's variants are reproducible.
- ``bfcl``: BFCL v4's format-sensitivity study. On BFCL, its own entries under its own 26
  configurations (imported from ``BFCL_v4_format_sensitivity.json``: return format x
  ``<TOOLCALL>`` tag x function-doc format, plus two prompt styles), each with BFCL's system
  prompt for its configuration (``hsa.eval.bfcl_prompt``); on any other environment,
  each task under every configuration of those three axes its names fit, the harness
  otherwise unchanged.

Tasks are sampled once per run (``sample_tasks``), by a hash of the seed and the task id, so
that every suite sees the same tasks and a task keeps its place when others are added.

A recipe whose rules depend on the trajectory (``tools.drop_unused`` and the like) is planned
per task with what the environment's reference solution of the task uses, as ``hsa build``
plans them per trajectory. Its ``base`` rules (a compact harness, say) make the harness under
evaluation: the canonical episodes run under the base rules alone, the variants under base and
drawn rules.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from hsa.augment.free_text import protocol_fits
from hsa.augment.planner import Variant, canonical_variant
from hsa.augment.recipe import Recipe, load_recipe, loads_recipe
from hsa.augment.registry import get as get_rule
from hsa.augment.rule import NO_CONTEXT, Context
from hsa.augment.rules.protocol import with_protocol
from hsa.augment.seeded import derive_seed
from hsa.envs.base import Environment, Task
from hsa.errors import EnvError, EvalError
from hsa.eval.bfcl_prompt import config_fields, system_template
from hsa.harness.model import Harness, Protocol
from hsa.teachers.rollout import RolloutSpec
from hsa.teachers.task_variants import solution_context, task_variants

#: BFCL v4's format-sensitivity axes: return formats, the tool-call tag, function-doc formats
BFCL_CALL_FORMATS = ("python", "json", "xml_verbose", "xml_concise")
BFCL_TAGS = (True, False)
BFCL_DOC_FORMATS = ("python", "xml", "json")
#: the kind of BFCL's format-sensitivity tasks, whose metadata names their configuration
FORMAT_KIND = "format_sensitivity"
#: the built-in held-out recipe (the same as examples/eval-heldout.yaml)
HELDOUT = "heldout.yaml"
#: how errors name the built-in held-out recipe's file
HELDOUT_FILE = f"hsa/eval/{HELDOUT}"


@dataclass(frozen=True, slots=True)
class Episode:
    """One episode of a run: a suite, the configuration it runs under, and the rollout."""

    suite: str
    config: str  # the variant's protocol label in bfcl, "canonical" or the variant id otherwise
    spec: RolloutSpec
    group: str = ""  # what intervals resample: the task, or the BFCL entry of a configured task
    #: the drawn rules the episode is attributed to (per rule and family): a recipe's base
    #: rules make the harness under evaluation, every episode's alike, so they are left out
    rules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.group:
            object.__setattr__(self, "group", self.spec.task.id)


def heldout_text() -> str:
    """The text of hsa's built-in held-out recipe."""
    return resources.files("hsa.eval").joinpath(HELDOUT).read_text("utf-8")


def heldout_recipe(path: str | Path | None = None) -> Recipe:
    """The recipe at ``path``, or hsa's built-in held-out recipe."""
    if path is not None:
        return load_recipe(path)
    return loads_recipe(heldout_text(), file=HELDOUT_FILE)


def sample_tasks(tasks: Sequence[Task], n: int | None, seed: int) -> list[Task]:
    """``n`` of ``tasks`` (all when None), chosen by a hash of ``seed`` and each task id and
    kept in their original order."""
    if n is None or n >= len(tasks):
        return list(tasks)
    ranked = sorted(range(len(tasks)), key=lambda i: derive_seed("eval-task", seed, tasks[i].id))
    return [tasks[i] for i in sorted(ranked[:n])]


def _spec(suite: str, task: Task, variant: Variant, seed: int) -> RolloutSpec:
    rollout_id = f"{suite}/{task.id}/{variant.variant_id}"
    return RolloutSpec(
        id=rollout_id,
        task=task,
        variant=variant,
        seed=derive_seed("eval-rollout", seed, rollout_id) % 2**31,
    )


def contexts(env: Environment, tasks: Sequence[Task], recipe: Recipe | None) -> list[Context]:
    """What each task's reference solution uses, when ``recipe`` has rules that need it."""
    if recipe is None or not recipe.needs:
        return [NO_CONTEXT] * len(tasks)
    try:
        return [solution_context(env, task) for task in tasks]
    except EnvError as exc:
        raise EvalError(
            f"{exc.message}; the recipe's trajectory-dependent rules are planned with what the "
            "reference solution of each task uses",
            where="recipe",
        ) from None


def drawn_rules(variant: Variant, recipe: Recipe) -> tuple[str, ...]:
    """The rules of ``variant`` drawn from ``recipe``, its base rules left out.

    Planning applies the base rules first, in the recipe's order, and records a rule only when
    it changed something, so the base rules a variant records are the leading entries that
    match the recipe's base in order (name and parameters); what follows was drawn.
    """
    applied = variant.rules
    k = 0
    for item in recipe.base:
        params = get_rule(item.rule).resolve_params(item.params)
        if k < len(applied) and applied[k][0] == item.rule and applied[k][2] == params:
            k += 1
    return tuple(name for name, _, _ in applied[k:])


def _one_harness(env: Environment, suite: str) -> Harness:
    try:
        return env.harness()
    except EnvError as exc:
        raise EvalError(
            f"{exc.message}; the {suite} suite needs an environment with one harness "
            "(livestream, a tau2 domain); run the bfcl suite on BFCL",
            where=f"env {env.name!r}",
        ) from None


def _planned(
    env: Environment,
    tasks: Sequence[Task],
    recipe: Recipe,
    *,
    k: int,
    seed: int,
    canonical: bool,
    suite: str,
) -> dict[str, list[Variant]]:
    """Per task id, ``k`` variants of ``recipe`` (or with ``canonical``, one variant of its base
    rules alone, drawn as the variants are), tasks grouped by what their solutions use."""
    harness = _one_harness(env, suite)
    if not canonical and not recipe.rules:
        return {task.id: [] for task in tasks}  # a recipe of base rules alone: no variants
    if canonical:
        recipe = dataclasses.replace(recipe, rules=(), min_rules=0)
        k = 1
    groups: dict[str, tuple[Context, list[Task]]] = {}
    for task, context in zip(tasks, contexts(env, tasks, recipe), strict=True):
        key = json.dumps(context.key(), sort_keys=True)
        groups.setdefault(key, (context, []))[1].append(task)
    out: dict[str, list[Variant]] = {}
    for context, group in groups.values():
        out |= task_variants(
            harness, group, recipe, seed=seed, per_task=k, include_canonical=False, context=context
        )
    return out


def canonical_episodes(
    env: Environment,
    tasks: Sequence[Task],
    *,
    seed: int,
    recipe: Recipe | None = None,
    suite: str = "canonical",
) -> list[Episode]:
    """Each task under the environment's harness (with ``recipe``'s base rules, if any);
    ``suite`` names the suite in errors."""
    based = None
    if recipe is not None and recipe.base:
        based = _planned(env, tasks, recipe, k=1, seed=seed, canonical=True, suite=suite)
    out = []
    for task in tasks:
        found = based[task.id] if based is not None else []  # none: the base changes nothing
        variant = found[0] if found else canonical_variant(env.harness_for(task))
        out.append(Episode("canonical", "canonical", _spec("canonical", task, variant, seed)))
    return out


def variant_episodes(
    env: Environment,
    tasks: Sequence[Task],
    recipe: Recipe,
    *,
    k: int,
    seed: int,
    suite: str = "variants",
) -> list[Episode]:
    """Each task under ``k`` variants of ``recipe``; ``suite`` names the suite in errors."""
    chosen = _planned(env, tasks, recipe, k=k, seed=seed, canonical=False, suite=suite)
    out = []
    for task in tasks:
        for variant in chosen[task.id]:
            spec = _spec("variants", task, variant, seed)
            rules = drawn_rules(variant, recipe)
            out.append(Episode("variants", variant.variant_id, spec, rules=rules))
    return out


def firstcall_episodes(
    env: Environment, tasks: Sequence[Task], recipe: Recipe, *, k: int, seed: int
) -> list[Episode]:
    """Each task under its own harness and ``k`` held-out variants, for its first reply."""
    out = []
    for episode in canonical_episodes(env, tasks, seed=seed, recipe=recipe, suite="firstcall"):
        out.append(
            Episode(
                "firstcall",
                "canonical",
                _spec("firstcall", episode.spec.task, episode.spec.variant, seed),
            )
        )
    for episode in variant_episodes(env, tasks, recipe, k=k, seed=seed, suite="firstcall"):
        spec = _spec("firstcall", episode.spec.task, episode.spec.variant, seed)
        out.append(Episode("firstcall", episode.config, spec, rules=episode.rules))
    return out


def bfcl_protocols(harness: Harness) -> list[Protocol]:
    """BFCL's format-sensitivity configurations that can carry ``harness``'s names."""
    out: list[Protocol] = []
    for call in BFCL_CALL_FORMATS:
        for tag in BFCL_TAGS:
            if protocol_fits(harness, Protocol("text", call, tag)):
                out.extend(Protocol("text", call, tag, doc) for doc in BFCL_DOC_FORMATS)
    return out


def bfcl_variant(harness: Harness, protocol: Protocol, config: str | None = None) -> Variant:
    """``harness`` under ``protocol`` as a variant: the same names, so the identity mapping.
    With a BFCL format-sensitivity ``config``, its system prompt is BFCL's for that
    configuration (``hsa.eval.bfcl_prompt``), followed, as BFCL's
    ``system_prompt_pre_processing_chat_model`` puts it, by ``"\n\n"`` and the entry's own
    system message (the importer's ``system`` section) when it has one."""
    base = canonical_variant(harness)
    changed = with_protocol(harness, protocol)
    suffix = protocol.label
    if config is not None:
        template = system_template(config)
        own = next((s for s in harness.prompt.sections if s.id == "system"), None)
        if own is not None and own.body:
            template += "\n\n" + own.body  # a literal template: the entry's text verbatim
        changed = changed.replace(prompt=dataclasses.replace(changed.prompt, template=template))
        fields = config_fields(config)
        suffix += f"/{fields['prompt_fmt']}/{fields['style']}"
    return dataclasses.replace(base, variant_id=f"{base.variant_id}~{suffix}", harness=changed)


def _configured(env: Environment, task: Task) -> Episode:
    """A BFCL format-sensitivity task under the configuration its metadata names."""
    found = task.metadata[FORMAT_KIND]
    protocol = Protocol.from_dict(found["protocol"])
    config = str(found["config"])
    variant = bfcl_variant(env.harness_for(task), protocol, config)
    return Episode("bfcl", config, _spec("bfcl", task, variant, 0))


def bfcl_episodes(
    env: Environment, tasks: Sequence[Task], configured: Sequence[Task], *, seed: int
) -> list[Episode]:
    """BFCL's format-sensitivity episodes: the ``configured`` tasks (BFCL's own entries and
    configurations, imported from ``BFCL_v4_format_sensitivity.json``) when there are any,
    else every ``task`` under each configuration of the three axes its names fit."""
    if configured:
        out = []
        for task in configured:
            episode = _configured(env, task)
            spec = _spec("bfcl", task, episode.spec.variant, seed)
            out.append(Episode("bfcl", episode.config, spec, group=_entry(task)))
        return out
    out = []
    for task in tasks:
        for protocol in bfcl_protocols(env.harness_for(task)):
            variant = bfcl_variant(env.harness_for(task), protocol)
            out.append(Episode("bfcl", protocol.label, _spec("bfcl", task, variant, seed)))
    return out


def split_tasks(tasks: Sequence[Task], n: int | None, seed: int) -> tuple[list[Task], list[Task]]:
    """The run's tasks: ``n`` sampled ordinary tasks, and the format-sensitivity tasks of ``n``
    sampled BFCL entries (each entry with all its configurations)."""
    ordinary = [t for t in tasks if t.kind != FORMAT_KIND]
    configured = [t for t in tasks if t.kind == FORMAT_KIND]
    chosen = sample_tasks(ordinary, n, seed)
    if configured and n is not None:
        entries: dict[str, Task] = {}
        for task in configured:
            entries.setdefault(_entry(task), task)
        keep = {_entry(t) for t in sample_tasks(list(entries.values()), n, seed)}
        configured = [t for t in configured if _entry(t) in keep]
    return chosen, configured


def _entry(task: Task) -> str:
    return task.id.split(":", 2)[-1]  # format_sensitivity:CONFIG:ENTRY


def episodes(
    env: Environment,
    tasks: Sequence[Task],
    suites: Sequence[str],
    *,
    recipe: Recipe | None,
    k: int,
    seed: int,
    configured: Sequence[Task] = (),
) -> list[Episode]:
    """Every episode of a run, suite by suite in the order given (``configured``: BFCL's
    format-sensitivity tasks, see ``bfcl_episodes``)."""
    out: list[Episode] = []
    for suite in suites:
        if suite == "canonical":
            out += canonical_episodes(env, tasks, seed=seed, recipe=recipe)
        elif suite == "variants":
            out += variant_episodes(env, tasks, recipe or heldout_recipe(), k=k, seed=seed)
        elif suite == "bfcl":
            out += bfcl_episodes(env, tasks, configured, seed=seed)
        elif suite == "firstcall":
            out += firstcall_episodes(env, tasks, recipe or heldout_recipe(), k=k, seed=seed)
        elif suite == "ifeval":
            continue  # not an environment's episodes: hsa.eval.ifeval asks its prompts
        else:
            raise EvalError(f"unknown suite {suite!r}")
    return out
