"""What the livestream tools do: each takes the episode state and checked arguments, returns JSON.

A tool that cannot do what was asked (unknown id, failed verification, ...) raises
``ToolFailure``; the environment turns it into an error result the model can read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from hsa.envs.livestream import catalog
from hsa.envs.livestream.catalog import BY_CATEGORY
from hsa.envs.livestream.state import LiveState, ticket_id
from hsa.envs.livestream.world import Product, Variant, World, fmt_time, words

INTERNAL_FIELDS = ("internal_cost", "supplier_code", "margin_pct")
_STOPWORDS = frozenset(
    (
        "a",
        "an",
        "the",
        "i",
        "my",
        "me",
        "do",
        "you",
        "can",
        "how",
        "is",
        "are",
        "to",
        "of",
        "for",
        "on",
        "in",
        "it",
        "and",
        "or",
    )
)


class ToolFailure(Exception):
    """The call was well-formed but cannot be served; the message tells the model why."""


def money(cents: int) -> float:
    return round(cents / 100, 2)


def _product(world: World, product_id: str) -> Product:
    product = world.product(product_id)
    if product is None:
        raise ToolFailure(
            f"no product with id {product_id!r}; use search_products to find product ids"
        )
    return product


def _variant(product: Product, variant_id: str | None) -> Variant | None:
    if variant_id is None:
        return None
    variant = product.variant(variant_id)
    if variant is None:
        ids = ", ".join(v.id for v in product.variants)
        raise ToolFailure(f"{variant_id!r} is not a variant of {product.id}; its variants: {ids}")
    return variant


def _time(state: LiveState, value: str | None) -> datetime:
    if value is None:
        return state.now
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ToolFailure(f"cannot read time {value!r}; write it as 'YYYY-MM-DD HH:MM'") from None


def search(
    world: World,
    query: str,
    *,
    category: str | None = None,
    min_price: float | None = None,
    max_price: float | None = None,
    in_stock_only: bool = False,
    sort: str = "relevance",
) -> list[Product]:
    """Products whose name, brand, kind or category hold every query word, in ``sort`` order."""
    wanted = set(words(query))
    exact = query.strip().lower()
    found = []
    for p in world.products:
        if not wanted or not wanted <= world.words[p.id]:
            continue
        if category is not None and p.category != category:
            continue
        price = p.price_cents / 100
        if (min_price is not None and price < min_price) or (
            max_price is not None and price > max_price
        ):
            continue
        if in_stock_only and not p.in_stock:
            continue
        found.append(p)
    keys: dict[str, Callable[[Product], Any]] = {
        "relevance": lambda p: (p.name.lower() != exact, -p.rating, p.id),
        "price_asc": lambda p: (p.price_cents, p.id),
        "price_desc": lambda p: (-p.price_cents, p.id),
        "rating": lambda p: (-p.rating, -p.reviews, p.id),
    }
    return sorted(found, key=keys[sort])


def search_products(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    filters = args.get("filters") or {}
    price_range = filters.get("price_range") or {}
    found = search(
        state.world,
        args["query"],
        category=filters.get("category"),
        min_price=price_range.get("min"),
        max_price=price_range.get("max"),
        in_stock_only=filters.get("in_stock_only", False),
        sort=args["sort"],
    )
    return {
        "query": args["query"],
        "total": len(found),
        "results": [
            {
                "product_id": p.id,
                "name": p.name,
                "brand": p.brand,
                "category": p.category,
                "kind": p.kind,
                "price": money(p.price_cents),
                "rating": p.rating,
                "in_stock": p.in_stock,
            }
            for p in found[: args["limit"]]
        ],
    }


def _variants(product: Product) -> list[dict[str, Any]]:
    return [
        {"variant_id": v.id, "label": v.label, "price": money(v.price_cents), "stock": v.stock}
        for v in product.variants
    ]


def _warranty(category: str) -> dict[str, Any]:
    months = BY_CATEGORY[category].warranty_months
    if months == 0:
        return {"months": 0, "terms": "no manufacturer warranty; the returns policy applies"}
    return {"months": months, "terms": f"{months}-month manufacturer warranty, free repair"}


def get_product_details(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    p = _product(state.world, args["product_id"])
    sections = args.get("sections") or list(("variants", "specs", "reviews", "warranty"))
    out: dict[str, Any] = {
        "product_id": p.id,
        "name": p.name,
        "brand": p.brand,
        "category": p.category,
        "kind": p.kind,
        "description": p.description,
        "price": money(p.price_cents),
        "list_price": money(p.list_price_cents),
        "internal_cost": money(p.internal_cost_cents),
        "supplier_code": p.supplier_code,
        "margin_pct": round(100 - 100 * p.internal_cost_cents / p.price_cents, 1),
    }
    if "variants" in sections:
        out["variants"] = _variants(p)
    if "specs" in sections:
        out["specs"] = dict(p.specs)
    if "reviews" in sections:
        out["reviews"] = {"rating": p.rating, "count": p.reviews}
    if "warranty" in sections:
        out["warranty"] = _warranty(p.category)
    return out


def compare_products(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    aspects = args["aspects"]
    rows = []
    for pid in args["product_ids"]:
        p = _product(state.world, pid)
        row: dict[str, Any] = {"product_id": p.id, "name": p.name, "category": p.category}
        if "price" in aspects:
            row["price"] = money(p.price_cents)
        if "rating" in aspects:
            row["rating"] = p.rating
        if "specs" in aspects:
            row["specs"] = dict(p.specs)
        if "warranty" in aspects:
            row["warranty_months"] = BY_CATEGORY[p.category].warranty_months
        if "stock" in aspects:
            row["in_stock"] = p.in_stock
        row["internal_cost"] = money(p.internal_cost_cents)
        rows.append(row)
    return {"aspects": list(aspects), "products": rows}


def shipping_quote(region: str, subtotal_cents: int) -> dict[str, Any]:
    fee, (lo, hi), free_over = catalog.SHIPPING[region]
    free = subtotal_cents >= free_over
    return {
        "region": region,
        "fee": 0.0 if free else money(fee),
        "free_shipping": free,
        "free_over": money(free_over),
        "delivery_days": f"{lo}-{hi}",
    }


def check_stock_and_shipping(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    p = _product(state.world, args["product_id"])
    chosen = _variant(p, args.get("variant_id"))
    qty = args["quantity"]
    variants = [chosen] if chosen is not None else list(p.variants)
    out: dict[str, Any] = {
        "product_id": p.id,
        "name": p.name,
        "quantity": qty,
        "variants": [
            {"variant_id": v.id, "label": v.label, "stock": v.stock, "available": v.stock >= qty}
            for v in variants
        ],
        "in_stock": any(v.stock >= qty for v in variants),
    }
    destination = args.get("destination")
    if destination is not None:
        unit = state.world.unit_price(p, chosen or p.variants[0], state.now)
        quote = shipping_quote(destination["region"], unit * qty)
        quote["ships_from"] = BY_CATEGORY[p.category].warehouse
        out["shipping"] = quote
    return out


def _sale_row(sale, now: datetime) -> dict[str, Any]:
    return {
        "sale_id": sale.id,
        "status": sale.status(now),
        "sale_price": money(sale.sale_price_cents),
        "starts_at": fmt_time(sale.starts_at),
        "ends_at": fmt_time(sale.ends_at),
        "limit_per_viewer": sale.limit_per_viewer,
    }


def get_promotions(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    world = state.world
    now = _time(state, args.get("at"))
    upcoming = args["include_upcoming"]
    pid = args.get("product_id")
    if pid is None:
        rows = []
        for sale in world.flash_sales:
            status = sale.status(now)
            if status == "active" or (upcoming and status == "upcoming"):
                name = world.by_id[sale.product_id].name
                rows.append({"product_id": sale.product_id, "name": name, **_sale_row(sale, now)})
        return {"as_of": fmt_time(now), "flash_sales": rows}
    p = _product(world, pid)
    sales = [
        _sale_row(s, now) for s in world.sales_for(p.id) if upcoming or s.status(now) != "upcoming"
    ]
    coupons = [
        {"code": c.code, "summary": c.summary, "valid_until": fmt_time(c.ends_at)}
        for c in world.coupons
        if c.starts_at <= now < c.ends_at and c.category in (None, p.category)
    ]
    return {
        "as_of": fmt_time(now),
        "product_id": p.id,
        "name": p.name,
        "regular_price": money(p.price_cents),
        "flash_sales": sales,
        "coupons": coupons,
    }


def quote_coupon(
    world: World, code: str, items: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """Validate ``code`` against cart ``items`` at ``now`` and price the cart."""
    coupon = world.coupon(code)
    if coupon is None:
        raise ToolFailure(f"unknown coupon code {code!r}")
    subtotal = eligible = 0
    for item in items:
        p = _product(world, item["product_id"])
        variant = _variant(p, item.get("variant_id")) or min(
            p.variants, key=lambda v: v.price_cents
        )
        line = world.unit_price(p, variant, now) * item["quantity"]
        subtotal += line
        if coupon.category in (None, p.category):
            eligible += line
    out: dict[str, Any] = {
        "code": coupon.code,
        "summary": coupon.summary,
        "valid_from": fmt_time(coupon.starts_at),
        "valid_until": fmt_time(coupon.ends_at),
        "subtotal": money(subtotal),
    }
    reason = None
    if now < coupon.starts_at:
        reason = "not_started"
    elif now >= coupon.ends_at:
        reason = "expired"
    elif eligible == 0:
        reason = "wrong_category"
    elif eligible < coupon.min_spend_cents:
        reason = "min_spend"
    if reason is not None:
        out.update(valid=False, reason=reason, min_spend=money(coupon.min_spend_cents))
        out.update(discount=0.0, total=money(subtotal))
        return out
    if coupon.kind == "percent":
        discount = eligible * coupon.value // 100
    else:
        discount = min(coupon.value, eligible)
    out.update(valid=True, reason=None, min_spend=money(coupon.min_spend_cents))
    out.update(discount=money(discount), total=money(subtotal - discount))
    return out


def validate_coupon(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    now = _time(state, args.get("at"))
    result = quote_coupon(state.world, args["code"], args["cart"]["items"], now)
    return {"as_of": fmt_time(now), **result}


def pin_product(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    p = _product(state.world, args["product_id"])
    variant = _variant(p, args.get("variant_id"))
    until = state.now + timedelta(seconds=args["duration_s"])
    card = {
        "product_id": p.id,
        "variant_id": None if variant is None else variant.id,
        "until": fmt_time(until),
        "caption": args.get("caption"),
    }
    state.pinned[args["slot"]] = card
    return {
        "pinned": True,
        "slot": args["slot"],
        "product_id": p.id,
        "name": p.name,
        "until": card["until"],
    }


def lookup_policy(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    topic, category = args["topic"], args.get("category")
    cats = [BY_CATEGORY[category]] if category else list(catalog.CATEGORIES)
    out: dict[str, Any] = {"topic": topic}
    if topic == "shipping":
        out["regions"] = [
            {"region": r, **{k: v for k, v in shipping_quote(r, 0).items() if k != "region"}}
            for r in catalog.REGIONS
        ]
        for row in out["regions"]:
            row["fee"] = money(catalog.SHIPPING[row["region"]][0])
            del row["free_shipping"]
        out["summary"] = (
            "Fees depend on the destination region; orders over the threshold ship free."
        )
    elif topic == "returns":
        out["rules"] = [
            {"category": c.id, "window_days": c.return_days, "condition": c.return_condition}
            for c in cats
        ]
        out["summary"] = "Returns are counted from the delivery date; refunds take 3-5 days."
    elif topic == "warranty":
        out["rules"] = [{"category": c.id, **_warranty(c.id)} for c in cats]
        out["summary"] = "Warranty claims go through the after-sales team with the order id."
    elif topic == "payment":
        out["methods"] = list(catalog.PAYMENT_METHODS)
        out["installments"] = {
            "min_order": money(catalog.INSTALLMENT_MIN_CENTS),
            "months": [3, 6],
            "interest": 0,
        }
        out["summary"] = (
            "Card, wallet and bank transfer; interest-free installments on larger orders."
        )
    else:
        out["days"] = catalog.PRICE_PROTECTION_DAYS
        out["summary"] = (
            f"If a product's regular price drops within {catalog.PRICE_PROTECTION_DAYS} days "
            "of delivery we refund the difference; flash sales are excluded."
        )
    return out


def search_faq(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    asked = {w for w in words(args["question"]) if w not in _STOPWORDS}
    scored = []
    for i, (question, answer) in enumerate(catalog.FAQ):
        overlap = len(asked & set(words(question)))
        if overlap:
            scored.append((-overlap, i, question, answer))
    scored.sort()
    rows = [{"question": q, "answer": a} for _, _, q, a in scored[: args["max_results"]]]
    return {"results": rows}


def _day(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


def get_order_status(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    world = state.world
    order = world.orders_by_id.get(args["order_id"])
    if order is None:
        raise ToolFailure(f"no order {args['order_id']!r}; ask the viewer to check the order id")
    if args["verification"]["phone_last4"] != order.phone_last4:
        raise ToolFailure("verification failed: the phone digits do not match this order")
    items = []
    for item in order.items:
        p = world.by_id[item.product_id]
        variant = p.variant(item.variant_id)
        items.append(
            {
                "product_id": p.id,
                "name": p.name,
                "category": p.category,
                "variant": variant.label if variant else None,
                "quantity": item.quantity,
                "price": money(item.price_cents),
            }
        )
    return {
        "order_id": order.id,
        "status": order.status,
        "placed_on": _day(order.placed_on),
        "items": items,
        "carrier": order.carrier,
        "tracking": order.tracking,
        "shipped_on": _day(order.shipped_on),
        "delivered_on": _day(order.delivered_on),
        "estimated_delivery": _day(order.eta),
        "as_of": fmt_time(state.now),
    }


def get_stream_schedule(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    world = state.world
    raw = args.get("date")
    try:
        day = state.now.date() if raw is None else date.fromisoformat(raw)
    except ValueError:
        raise ToolFailure(f"cannot read date {raw!r}; write it as YYYY-MM-DD") from None
    category = args.get("category")
    rows = []
    for s in world.sessions:
        if s.starts_at.date() != day or (category and category not in s.categories):
            continue
        if state.now < s.starts_at:
            status = "upcoming"
        else:
            status = "live" if state.now < s.ends_at else "ended"
        rows.append(
            {
                "session_id": s.id,
                "starts_at": fmt_time(s.starts_at),
                "ends_at": fmt_time(s.ends_at),
                "status": status,
                "host": s.host,
                "theme": s.theme,
                "categories": list(s.categories),
                "featured": [{"product_id": p, "name": world.by_id[p].name} for p in s.featured],
            }
        )
    return {"date": day.isoformat(), "as_of": fmt_time(state.now), "sessions": rows}


def handoff_to_human(state: LiveState, args: dict[str, Any]) -> dict[str, Any]:
    ticket = ticket_id(state.task_id, len(state.handoffs))
    state.handoffs.append(
        {
            "ticket_id": ticket,
            "reason": args["reason"],
            "priority": args["priority"],
            "order_id": args.get("order_id"),
        }
    )
    wait = {"high": 5, "normal": 15, "low": 30}[args["priority"]]
    return {"ticket_id": ticket, "queue": args["reason"], "estimated_wait_minutes": wait}


ACTIONS: dict[str, Callable[[LiveState, dict[str, Any]], dict[str, Any]]] = {
    "search_products": search_products,
    "get_product_details": get_product_details,
    "compare_products": compare_products,
    "check_stock_and_shipping": check_stock_and_shipping,
    "get_promotions": get_promotions,
    "validate_coupon": validate_coupon,
    "pin_product": pin_product,
    "lookup_policy": lookup_policy,
    "search_faq": search_faq,
    "get_order_status": get_order_status,
    "get_stream_schedule": get_stream_schedule,
    "handoff_to_human": handoff_to_human,
}
