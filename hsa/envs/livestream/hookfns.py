"""Payload functions of the livestream hooks: each decides whether its hook fires, and with what."""

from __future__ import annotations

import json
from typing import Any

from hsa.envs.hook_runtime import HookContext
from hsa.envs.livestream.compliance import absolute_claims
from hsa.envs.livestream.state import LiveState
from hsa.envs.livestream.world import fmt_money, fmt_time
from hsa.harness.model import Hook


def _state(context: HookContext) -> LiveState | None:
    return context.state if isinstance(context.state, LiveState) else None


def stream_clock(hook: Hook, context: HookContext) -> dict[str, str] | None:
    """The stream time and the session on air, shown when the session starts."""
    state = _state(context)
    if state is None:
        return None
    live = next((s for s in state.world.sessions if s.starts_at <= state.now < s.ends_at), None)
    on_air = f"{live.theme} with {live.host}" if live else "no session"
    return {"now": fmt_time(state.now), "session": on_air}


def promotion_reminder(hook: Hook, context: HookContext) -> dict[str, str] | None:
    """The live flash sale that ends soonest, or None when no sale is live."""
    state = _state(context)
    if state is None:
        return None
    live = [s for s in state.world.flash_sales if s.status(state.now) == "active"]
    if not live:
        return None
    sale = min(live, key=lambda s: (s.ends_at, s.id))
    return {
        "product": state.world.by_id[sale.product_id].name,
        "price": f"${fmt_money(sale.sale_price_cents)}",
        "ends": sale.ends_at.strftime("%H:%M"),
    }


def out_of_stock_pin(hook: Hook, context: HookContext) -> dict[str, str] | None:
    """Fires when a pin targets a sold-out product or variant."""
    state, args = _state(context), context.args or {}
    if state is None:
        return None
    product = state.world.product(str(args.get("product_id", "")))
    if product is None:
        return None  # the tool reports the unknown id itself
    variant = product.variant(str(args["variant_id"])) if "variant_id" in args else None
    stock = variant.stock if variant is not None else product.stock
    if stock > 0:
        return None
    return {"name": product.name, "product_id": product.id}


def redacted_fields(hook: Hook, context: HookContext) -> dict[str, str] | None:
    """The internal fields present in a result that the hook removes, or None if none are."""
    if context.output is None:
        return None
    try:
        data = json.loads(context.output.content)
    except json.JSONDecodeError:
        return None
    wanted = list(hook.params.get("remove") or ())
    found: set[str] = set()
    _collect_keys(data, set(wanted), found)
    if not found:
        return None
    return {"fields": ", ".join(k for k in wanted if k in found)}


def _collect_keys(value: Any, wanted: set[str], found: set[str]) -> None:
    if isinstance(value, dict):
        found.update(wanted & value.keys())
        for v in value.values():
            _collect_keys(v, wanted, found)
    elif isinstance(value, list):
        for v in value:
            _collect_keys(v, wanted, found)


def compliance_guard(hook: Hook, context: HookContext) -> dict[str, str] | None:
    """The absolute claims a final answer makes, or None when it makes none."""
    claims = absolute_claims(context.final_text or "")
    return {"claims": ", ".join(claims)} if claims else None
