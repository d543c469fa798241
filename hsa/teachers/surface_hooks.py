"""Hooks a variant adds to its harness (``hooks.neutral_extra``'s): they fire on the surface only.

An episode's canonical events hold the firings of the environment's own hooks, which a variant
only rewords and renames. A hook the variant adds has no canonical counterpart (no canonical
hook is mapped to it: ``added_hooks``, as ``hsa.augment.checks`` tells them apart), so its
firings are kept apart from the canonical events and shown among them on the surface, in the
variant's wording: after the canonical hooks of the same lifecycle event (where
``hooks.neutral_extra`` lists them), matched against the call as the model made it and the
result as it was shown. Such a hook may only add context: one that denied or changed a call
would make the episode under the variant another than the canonical one.
"""

from __future__ import annotations

from collections.abc import Sequence

from hsa.augment.planner import Variant
from hsa.envs.hook_runtime import HookContext, run_hooks
from hsa.errors import TeacherError
from hsa.harness.events import Event, HookFired
from hsa.harness.model import Harness, Hook


def added_hooks(canonical: Harness, variant: Variant) -> tuple[Hook, ...]:
    """The hooks of ``variant``'s harness that no hook of ``canonical`` is mapped to."""
    if not variant.harness.hooks or variant.harness.hooks == canonical.hooks:
        return ()
    mapped = {variant.mapping.hooks.get(h.id, h.id) for h in canonical.hooks}
    return tuple(h for h in variant.harness.hooks if h.id not in mapped)


class SurfaceHooks:
    """The firings of the hooks a variant adds, during one episode, each at the number of
    canonical events before it."""

    __slots__ = ("fired", "hooks")

    def __init__(self, hooks: Harness | None = None):
        self.hooks = hooks
        self.fired: list[tuple[int, HookFired]] = []

    @classmethod
    def of(cls, canonical: Harness, variant: Variant) -> SurfaceHooks:
        """The hooks ``variant`` adds to ``canonical``, to fire; ``TeacherError`` for one
        that does more than add context."""
        hooks = added_hooks(canonical, variant)
        for hook in hooks:
            if hook.effect != "add_context":
                raise TeacherError(
                    f"variant {variant.variant_id}: hook {hook.id!r}, which it adds to harness "
                    f"{canonical.id!r}, has effect {hook.effect!r}; an added hook may only add "
                    "context"
                )
        if not hooks:
            return cls()
        harness = variant.harness
        return cls(Harness(id=harness.id, version=harness.version, hooks=hooks))

    def __bool__(self) -> bool:
        return self.hooks is not None

    def fire(self, event: str, context: HookContext, at: int) -> None:
        """Run the added hooks of ``event`` in ``context`` (surface names), their firings
        shown after the first ``at`` canonical events."""
        if self.hooks is not None:
            self.fired.extend((at, f) for f in run_hooks(self.hooks, event, context).fired)

    def among(self, events: Sequence[Event]) -> list[Event]:
        """``events``, the canonical events on the surface (``map_events``), with the firings
        among them."""
        if not self.fired:
            return list(events)
        out: list[Event] = []
        fired = iter(self.fired)
        pending = next(fired, None)
        for index, event in enumerate(events):
            while pending is not None and pending[0] <= index:
                out.append(pending[1])
                pending = next(fired, None)
            out.append(event)
        if pending is not None:
            out.append(pending[1])
            out.extend(f for _, f in fired)
        return out
