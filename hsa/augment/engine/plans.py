"""What the engine needs to know about one variant, worked out once: its prompt, its tools, its
call style, and how each canonical tool, skill and hook appears under it."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from hsa.augment.engine.call_styles import CallStyle, style_of
from hsa.augment.mapping import Step
from hsa.augment.planner import Variant
from hsa.errors import HsaError, ProtocolError
from hsa.harness.model import Harness, Hook
from hsa.harness.prompt import system_prompt
from hsa.harness.render import tools_json

INJECT = ("system", "user", "tool_result")


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """A canonical tool under a variant: its surface name and argument steps."""

    name: str
    steps: tuple[Step, ...]
    steps_key: str


@dataclass(frozen=True, slots=True)
class SkillPlan:
    """A canonical skill under a variant: the loading call's text and the content it returns."""

    call_name: str
    call_args: dict[str, Any]
    content: str


@dataclass(frozen=True, slots=True)
class HookPlan:
    """A canonical hook under a variant: the surface hook, and where its text goes."""

    surface_id: str
    hook: Hook
    inject: int  # index into INJECT


def prepare(harness: Harness) -> None:
    """Make the texts ``VariantPlan.of`` reads from a variant's harness (its system prompt and
    tools) and the variants file its JSON, and keep them on it: a worker process that plans
    variants makes them there, and they travel with the harness (``Harness.__reduce__``). A
    prompt that does not render is left to fail where the variant is used, as without this."""
    with contextlib.suppress(HsaError):
        system_prompt(harness)
    harness.derived(tools_json)
    harness.to_json()


@dataclass(slots=True)
class VariantPlan:
    """One variant, prepared for rendering; the per-name tables fill in on first use."""

    index: int
    variant: Variant
    style: CallStyle
    prompt: str
    prompt_in_user: bool
    system_message: bool
    tools_json: str
    protocol: str
    #: the harness the trajectories are under, where known: an ``ArgumentClash`` is said
    #: against its schemas (a parameter in the way, or an argument they do not declare)
    canonical: Harness | None = None
    _tools: dict[str, ToolPlan] = field(default_factory=dict)
    _skills: dict[str, SkillPlan] = field(default_factory=dict)
    _hooks: dict[str, HookPlan] = field(default_factory=dict)

    @classmethod
    def of(cls, index: int, variant: Variant, canonical: Harness | None = None) -> VariantPlan:
        harness = variant.harness
        prompt = system_prompt(harness)
        in_user = harness.prompt.placement == "user" and bool(prompt)
        return cls(
            index=index,
            variant=variant,
            style=style_of(harness),
            prompt=prompt,
            prompt_in_user=in_user,
            system_message=bool(prompt) and not in_user,
            tools_json=harness.derived(tools_json),
            protocol=harness.protocol.label,
            canonical=canonical,
        )

    @property
    def tools_value(self) -> str | None:
        """What a row's ``tools`` column holds: the tools JSON, or null where a request sends
        no tools (a text protocol lists them in the prompt), as the OpenAI API leaves ``tools``
        out, and as chat templates that take an empty list for a tool-calling request (Llama
        3's) need it."""
        return None if self.tools_json == "[]" else self.tools_json

    def tool(self, canonical: str) -> ToolPlan:
        found = self._tools.get(canonical)
        if found is None:
            mapped = self.variant.mapping.tools.get(canonical)
            steps = () if mapped is None else tuple(mapped.steps)
            key = json.dumps([s.to_dict() for s in steps], ensure_ascii=False, sort_keys=True)
            found = ToolPlan(canonical if mapped is None else mapped.name, steps, key)
            self._tools[canonical] = found
        return found

    def skill(self, canonical: str) -> SkillPlan:
        """How loading skill ``canonical`` renders; ``ProtocolError`` as ``render`` raises it."""
        found = self._skills.get(canonical)
        if found is None:
            harness = self.variant.harness
            surface = self.variant.mapping.skills.get(canonical, canonical)
            if harness.skill_tool is None or harness.skill_arg is None:
                raise ProtocolError(
                    f"harness {harness.id!r} has no skill tool to load skill {surface!r} with"
                )
            skill = harness.skill(surface)
            if skill is None:
                raise ProtocolError(f"skill {surface!r} is not in harness {harness.id!r}")
            found = SkillPlan(harness.skill_tool.name, {harness.skill_arg: surface}, skill.content)
            self._skills[canonical] = found
        return found

    def hook(self, canonical: str) -> HookPlan:
        """The surface hook of ``canonical``; ``ProtocolError`` as ``render`` raises it."""
        found = self._hooks.get(canonical)
        if found is None:
            harness = self.variant.harness
            surface = self.variant.mapping.hooks.get(canonical, canonical)
            hook = harness.hook(surface)
            if hook is None:
                raise ProtocolError(f"hook {surface!r} is not in harness {harness.id!r}")
            inject = INJECT.index(hook.inject) if hook.inject in INJECT else 0
            found = HookPlan(surface, hook, inject)
            self._hooks[canonical] = found
        return found
