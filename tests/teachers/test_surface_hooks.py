"""Hooks a variant adds: told apart from the canonical ones it renames, shown among the
canonical events where they fired."""

from __future__ import annotations

from hsa.augment.mapping import RewriteMapping
from hsa.augment.planner import Variant
from hsa.envs.hook_runtime import HookContext
from hsa.harness.events import HookFired, UserMessage
from hsa.harness.model import Harness, Hook
from hsa.teachers.surface_hooks import SurfaceHooks, added_hooks


def _hook(hook_id: str, event: str = "session_start") -> Hook:
    return Hook(id=hook_id, event=event, effect="add_context", message=f"{hook_id}.")


def _variant(canonical: Harness, hooks: list[Hook], renamed: dict[str, str]) -> Variant:
    surface = canonical.replace(hooks=hooks)
    return Variant("v", canonical.id, (("r", "1", {}),), surface, RewriteMapping(hooks=renamed))


def test_a_hook_is_added_when_no_canonical_hook_is_mapped_to_it():
    # "a" renamed to "b"; the variant's "a" is no canonical hook's, though one was called so
    canonical = Harness(id="h", hooks=(_hook("a"), _hook("c")))
    variant = _variant(canonical, [_hook("b"), _hook("c"), _hook("a")], {"a": "b"})
    assert [h.id for h in added_hooks(canonical, variant)] == ["a"]
    assert added_hooks(canonical, _variant(canonical, list(canonical.hooks), {})) == ()


def test_firings_are_shown_after_the_canonical_events_they_followed():
    canonical = Harness(id="h")
    variant = _variant(canonical, [_hook("start"), _hook("asked", "user_prompt_submit")], {})
    added = SurfaceHooks.of(canonical, variant)
    added.fire("session_start", HookContext("session_start"), 0)
    added.fire("user_prompt_submit", HookContext("user_prompt_submit"), 1)
    events = [UserMessage("hi")]
    assert added.among(events) == [
        HookFired("start", "session_start", {}),
        UserMessage("hi"),
        HookFired("asked", "user_prompt_submit", {}),
    ]
    assert SurfaceHooks().among(events) == events and not SurfaceHooks()
