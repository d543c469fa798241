"""The scripted oracle: a policy that solves every livestream task from the events it has seen.

``next_actions(task, events)`` reads the task's plan (the request as an intent) and the tool
results in ``events`` and returns the next assistant step: a skill load, tool calls, or the
final answer. It never looks at the world: every value it states comes from a tool result, so
the same policy can serve as a chat backend. Each request is a short script that is re-run
from the start on every step; ``_View.need`` returns a result already in the events or stops
the script by asking for the missing calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from hsa.envs.base import Environment, Task
from hsa.envs.episode import Episode, next_call_id, run_episode
from hsa.envs.livestream.catalog import BY_CATEGORY
from hsa.envs.livestream.facts import dollars, show
from hsa.errors import EnvError
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)
from hsa.harness.model import Harness


class _Pending(Exception):
    """The script needs these calls (or this skill load) before it can go on."""

    def __init__(self, step: list[Event]):
        super().__init__("pending")
        self.step = step


class _Failed(Exception):
    """A call the script needed returned an error."""


class _View:
    """The calls, results and skill loads in the events so far."""

    def __init__(self, events: Sequence[Event]):
        self.events = events
        self.calls = [e for e in events if isinstance(e, ToolCall)]
        self.results = {e.call_id: e for e in events if isinstance(e, ToolResult)}
        self.loaded = {e.skill_id for e in events if isinstance(e, SkillLoad)}

    def _result(self, tool: str, args: dict[str, Any]) -> ToolResult | None:
        for call in reversed(self.calls):
            if call.tool == tool and call.args == args and call.call_id in self.results:
                return self.results[call.call_id]
        return None

    def need(self, *requests: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
        found = [self._result(tool, args) for tool, args in requests]
        missing = [r for r, f in zip(requests, found, strict=True) if f is None]
        if missing:
            raise _Pending([ToolCall("", tool, args) for tool, args in missing])
        out = []
        for result in (f for f in found if f is not None):  # all of them: none is missing
            data = _data(result)
            if data is None:
                raise _Failed(result.content)
            out.append(data)
        return out

    def one(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.need((tool, args))[0]

    def skill(self, skill_id: str) -> None:
        if skill_id not in self.loaded:
            raise _Pending([SkillLoad(skill_id)])

    def find(self, name: str) -> dict[str, Any] | None:
        """The search hit whose name is exactly ``name``."""
        found = self.one("search_products", {"query": name})
        return _exact(found, name)

    def previous_product(self) -> dict[str, Any] | None:
        """The product the conversation was last about: ``{"product_id", "name"}``."""
        current = None
        for call in self.calls:
            result = self.results.get(call.call_id)
            data = None if result is None else _data(result)
            if data is None:
                continue
            if call.tool == "search_products":
                hit = _exact(data, call.args.get("query", ""))
                if hit is not None:
                    current = {"product_id": hit["product_id"], "name": hit["name"]}
            elif "product_id" in call.args and "name" in data:
                current = {"product_id": data["product_id"], "name": data["name"]}
        return current

    def last_user_text(self) -> str:
        return next(e.text for e in reversed(self.events) if isinstance(e, UserMessage))


def _data(result: ToolResult) -> Any:
    """The JSON of a successful result; None for an error. A result read back from a
    conversation has no error flag (chat messages carry none): the environment's error
    object (``{"error": ...}``) says it."""
    try:
        data = json.loads(result.content)
    except ValueError:
        raise EnvError(
            "a tool result the oracle cannot read: not the JSON the livestream tools answer "
            f"with ({result.content[:80]!r})",
            where=f"tool result {result.call_id!r}",
        ) from None
    if result.is_error or (isinstance(data, dict) and set(data) == {"error"}):
        return None
    return data


def _exact(search_result: dict[str, Any], name: str) -> dict[str, Any] | None:
    wanted = name.strip().lower()
    return next((r for r in search_result["results"] if r["name"].lower() == wanted), None)


def _clock(stamp: str) -> str:
    return stamp[-5:]


def _not_found(name: str) -> str:
    return f"Sorry, I couldn't find the {name} in our catalogue."


# --- one script per kind of request -------------------------------------------------------


def _price(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    stock = "in stock" if hit["in_stock"] else "sold out right now"
    return f"The {hit['name']} is ${dollars(hit['price'])}, and it is {stock}."


def _rating(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    return f"The {hit['name']} is rated {show(hit['rating'])} out of 5 by our viewers."


def _policy(plan: dict[str, Any], v: _View) -> str:
    topic = plan["topic"]
    if topic in ("returns", "warranty"):
        data = v.one("lookup_policy", {"topic": topic, "category": plan["category"]})
        rule = data["rules"][0]
        title = BY_CATEGORY[rule["category"]].title
        if topic == "returns":
            return (
                f"{title} items can be returned within {rule['window_days']} days of delivery, "
                f"{rule['condition']}."
            )
        return f"{title} products come with a {rule['months']}-month warranty: {rule['terms']}."
    if topic == "shipping":
        data = v.one("lookup_policy", {"topic": "shipping"})
        row = next(r for r in data["regions"] if r["region"] == plan["region"])
        return (
            f"Shipping to the {row['region']} region costs ${dollars(row['fee'])} and takes "
            f"{row['delivery_days']} days; orders over ${dollars(row['free_over'])} ship free."
        )
    if topic == "payment":
        data = v.one("lookup_policy", {"topic": "payment"})
        plans = data["installments"]
        months = " or ".join(str(m) for m in plans["months"])
        return (
            f"Yes: orders over ${dollars(plans['min_order'])} can be split into {months} "
            f"interest-free monthly payments. We accept {', '.join(data['methods'])}."
        )
    data = v.one("lookup_policy", {"topic": "price_protection"})
    return f"Yes: {data['summary']} That is {data['days']} days of price protection."


def _order_status(plan: dict[str, Any], v: _View) -> str:
    order = v.one(
        "get_order_status",
        {"order_id": plan["order_id"], "verification": {"phone_last4": plan["phone_last4"]}},
    )
    oid = order["order_id"]
    if order["status"] == "processing":
        return (
            f"Order {oid} is still processing; the estimated delivery date is "
            f"{order['estimated_delivery']}."
        )
    if order["status"] == "shipped":
        return (
            f"Order {oid} has shipped with {order['carrier']}, tracking number "
            f"{order['tracking']}; the estimated delivery date is {order['estimated_delivery']}."
        )
    return f"Order {oid} was delivered on {order['delivered_on']}."


def _schedule(plan: dict[str, Any], v: _View) -> str:
    data = v.one("get_stream_schedule", {"category": plan["category"]})
    if not data["sessions"]:
        return "There is no session for that category today."
    s = data["sessions"][0]
    return (
        f"Today's session, {s['theme']}, starts at {_clock(s['starts_at'])} and is hosted by "
        f"{s['host']}."
    )


def _compare(plan: dict[str, Any], v: _View) -> str:
    a, b = plan["products"]
    found = v.need(("search_products", {"query": a}), ("search_products", {"query": b}))
    hits = [_exact(f, n) for f, n in zip(found, (a, b), strict=True)]
    if None in hits:
        return _not_found(a if hits[0] is None else b)
    ids = [h["product_id"] for h in hits if h is not None]  # all of them: none is None
    rows = v.one("compare_products", {"product_ids": ids, "aspects": ["price", "specs"]})
    first, second = rows["products"]
    spec = BY_CATEGORY[first["category"]].headline
    key = plan["spec"]
    x, y = first["specs"][key], second["specs"][key]
    win, lose = (first, second) if (x > y) == spec.higher_wins else (second, first)
    return (
        f"The {win['name']} wins on {spec.label}: {show(win['specs'][key])} {spec.unit} versus "
        f"{show(lose['specs'][key])} {spec.unit} for the {lose['name']}. The {first['name']} "
        f"costs ${dollars(first['price'])} and the {second['name']} costs "
        f"${dollars(second['price'])}."
    )


def _fee_text(shipping: dict[str, Any]) -> str:
    return (
        "nothing (free shipping)" if shipping["free_shipping"] else f"${dollars(shipping['fee'])}"
    )


def _spec_shipping(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    details = v.one("get_product_details", {"product_id": hit["product_id"]})
    spec = BY_CATEGORY[details["category"]].headline
    value = details["specs"][plan["spec"]]
    stock = v.one(
        "check_stock_and_shipping",
        {"product_id": hit["product_id"], "destination": {"region": plan["region"]}},
    )
    ship = stock["shipping"]
    return (
        f"The {hit['name']} has a {spec.label} of {show(value)} {spec.unit}. Shipping to the "
        f"{ship['region']} region takes {ship['delivery_days']} days and costs {_fee_text(ship)}."
    )


def _flash_sale(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    promos = v.one("get_promotions", {"product_id": hit["product_id"]})
    name, regular = promos["name"], dollars(promos["regular_price"])
    for status in ("active", "upcoming", "ended"):
        sale = next((s for s in promos["flash_sales"] if s["status"] == status), None)
        if sale is None:
            continue
        price = dollars(sale["sale_price"])
        if status == "active":
            return (
                f"Yes! The {name} is on flash sale at ${price} until {_clock(sale['ends_at'])}, "
                f"limit {sale['limit_per_viewer']} per viewer."
            )
        if status == "upcoming":
            return (
                f"Not yet: a flash sale on the {name} starts at {_clock(sale['starts_at'])}, "
                f"at ${price}."
            )
        return f"The flash sale on the {name} has ended; it is back to ${regular}."
    return f"There is no flash sale on the {name} right now; it is ${regular}."


def _coupon(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    qty, code = plan["quantity"], plan["code"]
    quote = v.one(
        "validate_coupon",
        {"code": code, "cart": {"items": [{"product_id": hit["product_id"], "quantity": qty}]}},
    )
    cart = f"{qty} x {hit['name']}"
    reason = quote["reason"]
    if quote["valid"]:
        return (
            f"Yes, {code} works: {cart} comes to ${dollars(quote['subtotal'])}, minus "
            f"${dollars(quote['discount'])}, so you pay ${dollars(quote['total'])}."
        )
    if reason == "not_started":
        return f"{code} is not active yet; it starts at {_clock(quote['valid_from'])}."
    if reason == "expired":
        return f"Sorry, {code} has expired."
    if reason == "wrong_category":
        return f"Sorry, {code} is {quote['summary']}, so it doesn't apply to the {hit['name']}."
    return (
        f"{code} needs a minimum spend of ${dollars(quote['min_spend'])}, and {cart} comes to "
        f"${dollars(quote['subtotal'])}."
    )


def _alternatives(v: _View, hit: dict[str, Any]) -> list[dict[str, Any]]:
    found = v.one(
        "search_products",
        {
            "query": hit["kind"],
            "filters": {"category": hit["category"], "in_stock_only": True},
            "sort": "rating",
        },
    )
    return [r for r in found["results"] if r["product_id"] != hit["product_id"]]


def _variant_stock(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    stock = v.one("check_stock_and_shipping", {"product_id": hit["product_id"]})
    label = plan["variant"]
    asked = next((x for x in stock["variants"] if x["label"] == label), None)
    if asked is not None and asked["stock"] > 0:
        return f"Yes, the {hit['name']} in {label} is in stock ({asked['stock']} left)."
    others = [x["label"] for x in stock["variants"] if x["stock"] > 0]
    if others:
        return (
            f"Sorry, the {hit['name']} in {label} is sold out, but it is in stock in "
            f"{', '.join(others)}."
        )
    alts = _alternatives(v, hit)
    if not alts:
        return f"Sorry, the {hit['name']} is sold out in every option."
    names = ", ".join(f"the {a['name']} (${dollars(a['price'])})" for a in alts[:3])
    return f"Sorry, the {hit['name']} is sold out in every option. In stock instead: {names}."


def _pin_or_alternative(plan: dict[str, Any], v: _View) -> str:
    # the promotion-push skill's steps: find it, its deals, pin it with a caption, announce
    v.skill("promotion-push")
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    target, note = hit, ""
    if not hit["in_stock"]:
        alts = _alternatives(v, hit)
        if not alts:
            return f"The {hit['name']} is sold out and I found no in-stock alternative to pin."
        target = alts[0]
        note = f"The {hit['name']} is sold out, so "
    promos = v.one("get_promotions", {"product_id": target["product_id"]})
    slot = plan["slot"]
    pinned = v.one(
        "pin_product",
        {
            "product_id": target["product_id"],
            "slot": slot,
            "caption": f"{target['name']} - live deal",
        },
    )
    lead = f"{note}I pinned the {target['name']}" if note else f"The {target['name']} is pinned"
    return f"{lead} to the {slot} slot until {_clock(pinned['until'])}: {_offer(promos)}!"


def _compliance(plan: dict[str, Any], v: _View) -> str:
    v.skill("ad-compliance")
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    d = v.one("get_product_details", {"product_id": hit["product_id"]})
    spec = BY_CATEGORY[d["category"]].headline
    return (
        f"I can't make claims like that, but here are the facts: the {d['name']} is rated "
        f"{show(d['reviews']['rating'])} out of 5 from {d['reviews']['count']:,} reviews, and its "
        f"{spec.label} is {show(d['specs'][spec.key])} {spec.unit}."
    )


def _shipping(plan: dict[str, Any], v: _View) -> str:
    product = v.previous_product()
    if product is None:
        return "Which product do you mean?"
    stock = v.one(
        "check_stock_and_shipping",
        {"product_id": product["product_id"], "destination": {"region": plan["region"]}},
    )
    ship = stock["shipping"]
    return (
        f"Yes, the {product['name']} ships to the {ship['region']} region in "
        f"{ship['delivery_days']} days, and shipping costs {_fee_text(ship)}."
    )


def _deals(plan: dict[str, Any], v: _View) -> str:
    product = v.previous_product()
    if product is None:
        return "Which product do you mean?"
    promos = v.one("get_promotions", {"product_id": product["product_id"]})
    sale = next((s for s in promos["flash_sales"] if s["status"] == "active"), None)
    if sale is not None:
        return (
            f"Yes: the {promos['name']} is on flash sale at ${dollars(sale['sale_price'])} "
            f"until {_clock(sale['ends_at'])}."
        )
    if promos["coupons"]:
        codes = "; ".join(f"{c['code']} ({c['summary']})" for c in promos["coupons"])
        return f"There's no flash sale on it right now, but these codes work: {codes}."
    return "There's no flash sale and no coupon for it right now."


def _after_sales(plan: dict[str, Any], v: _View) -> str:
    v.skill("after-sales")
    order = v.one(
        "get_order_status",
        {"order_id": plan["order_id"], "verification": {"phone_last4": plan["phone_last4"]}},
    )
    oid = order["order_id"]
    if order["status"] != "delivered":
        return (
            f"Order {oid} is {order['status']} and not delivered yet; the estimated delivery "
            f"date is {order['estimated_delivery']}. Returns can start once it arrives."
        )
    item = order["items"][0]
    policy = v.one("lookup_policy", {"topic": "returns", "category": item["category"]})
    window = policy["rules"][0]["window_days"]
    delivered = date.fromisoformat(order["delivered_on"])
    today = date.fromisoformat(order["as_of"][:10])
    if delivered + timedelta(days=window) < today:
        return (
            f"Sorry, order {oid} was delivered on {order['delivered_on']}, and "
            f"{item['category']} items can only be returned within {window} days of delivery, "
            "so it can no longer be returned."
        )
    ticket = v.one(
        "handoff_to_human",
        {
            "reason": "after_sales",
            "summary": f"Return request for order {oid}: {item['name']}.",
            "priority": "high" if plan["damaged"] else "normal",
            "order_id": oid,
        },
    )
    return (
        f"I've passed your return for order {oid} to our after-sales team: ticket "
        f"{ticket['ticket_id']}. {item['category'].capitalize()} items can be returned within "
        f"{window} days of delivery."
    )


def _objection(plan: dict[str, Any], v: _View) -> str:
    v.skill("objection-handling")
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    d = v.one("get_product_details", {"product_id": hit["product_id"]})
    promos = v.one("get_promotions", {"product_id": hit["product_id"]})
    text = (
        f"Totally fair to think it over! The {d['name']} is rated {show(d['reviews']['rating'])} "
        f"out of 5 from {d['reviews']['count']:,} reviews"
    )
    months = d["warranty"]["months"]
    text += f" and comes with a {months}-month warranty." if months else "."
    sale = next((s for s in promos["flash_sales"] if s["status"] == "active"), None)
    if sale is not None:
        text += (
            f" Right now it's on flash sale at ${dollars(sale['sale_price'])} until "
            f"{_clock(sale['ends_at'])}."
        )
    return text


def _suitability(plan: dict[str, Any], v: _View) -> str:
    v.skill("product-qa")
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    d = v.one("get_product_details", {"product_id": hit["product_id"]})
    name, key = d["name"], plan["spec"]
    value = d["specs"][key]
    if key == "skin_types":
        return f"The {name} is made for {show(value)} skin."
    if key == "water_resistance":
        verdict = (
            "so it can handle a swim" if value == "IPX7" else "so please keep it out of the pool"
        )
        return f"The {name} has a water resistance rating of {value}, {verdict}."
    if key == "capacity_l":
        verdict = "plenty for a family of four" if value >= 2 else "on the small side for four"
        return f"The {name} holds {show(value)} litres, {verdict}."
    if key == "material":
        return f"The {name} is made of {value}."
    if key == "noise_db":
        verdict = "quiet enough for a bedroom" if value < 35 else "a bit loud for a bedroom"
        return f"The {name} runs at {value} dB, {verdict}."
    if not value:
        return f"The {name} declares no allergens (none listed)."
    return f"The {name} contains {show(value)}."


def _engagement(plan: dict[str, Any], v: _View) -> str:
    v.skill("viewer-engagement")
    data = v.one("get_stream_schedule", {})
    sessions = data["sessions"]
    live = next((s for s in sessions if s["status"] == "live"), None)
    upcoming = next((s for s in sessions if s["status"] == "upcoming"), None)
    session = live or upcoming
    if session is None:
        return "Welcome! Today's sessions are over; come back tomorrow at 18:00."
    featured = ", ".join(f["name"] for f in session["featured"])
    when = "On air now" if live else f"Next up at {_clock(session['starts_at'])}"
    return (
        f"Welcome! {when}: {session['theme']} with {session['host']}, featuring {featured}. "
        "Ask me about any of them!"
    )


def _push(plan: dict[str, Any], v: _View) -> str:
    v.skill("promotion-push")
    hit = v.find(plan["product"])
    if hit is None:
        return _not_found(plan["product"])
    promos = v.one("get_promotions", {"product_id": hit["product_id"]})
    if not hit["in_stock"]:
        return f"The {hit['name']} is sold out, so I did not pin it."
    pinned = v.one(
        "pin_product",
        {
            "product_id": hit["product_id"],
            "slot": plan["slot"],
            "duration_s": plan["minutes"] * 60,
            "caption": f"{hit['name']} - live deal",
        },
    )
    return (
        f"The {hit['name']} is pinned to the {plan['slot']} slot until "
        f"{_clock(pinned['until'])}: {_offer(promos)}!"
    )


def _offer(promos: dict[str, Any]) -> str:
    """The price to announce from ``get_promotions``: an active flash sale's, with its end."""
    sale = next((s for s in promos["flash_sales"] if s["status"] == "active"), None)
    if sale:
        return (
            f"grab it for ${dollars(sale['sale_price'])} on flash sale until "
            f"{_clock(sale['ends_at'])}"
        )
    return f"grab it for ${dollars(promos['regular_price'])}"


def _not_carried(plan: dict[str, Any], v: _View) -> str:
    hit = v.find(plan["product"])
    if hit is not None:
        return f"Yes, we have the {hit['name']} at ${dollars(hit['price'])}."
    return f"Sorry, we don't carry the {plan['product']} in this stream's catalogue."


def _handoff(plan: dict[str, Any], v: _View) -> str:
    reason = plan["reason"]
    ticket = v.one(
        "handoff_to_human",
        {"reason": reason, "summary": f"Viewer asks: {v.last_user_text()}", "priority": "normal"},
    )
    if reason == "safety":
        return (
            "I can't give health or safety advice, so I've passed your question to a "
            f"specialist: ticket {ticket['ticket_id']}."
        )
    return (
        "I can't predict future prices, so I've passed your question to our team: ticket "
        f"{ticket['ticket_id']}."
    )


SCRIPTS = {
    "price": _price,
    "rating": _rating,
    "policy": _policy,
    "order_status": _order_status,
    "schedule": _schedule,
    "compare": _compare,
    "spec_shipping": _spec_shipping,
    "flash_sale": _flash_sale,
    "coupon": _coupon,
    "variant_stock": _variant_stock,
    "pin_or_alternative": _pin_or_alternative,
    "compliance": _compliance,
    "shipping": _shipping,
    "deals": _deals,
    "after_sales": _after_sales,
    "objection": _objection,
    "suitability": _suitability,
    "engagement": _engagement,
    "push": _push,
    "not_carried": _not_carried,
    "handoff": _handoff,
}


def next_actions(task: Task, events: Sequence[Event]) -> list[Event]:
    """The oracle's next assistant step for ``task`` after ``events``.

    Returns calls (with ids ``call_<n>``) or a skill load while the request needs more
    information, then the final answer as one ``AssistantMessage``. Returns ``[]`` when every
    user turn is already answered.
    """
    turn = sum(isinstance(e, UserMessage) for e in events) - 1
    plan = list(task.metadata.get("plan") or ())
    if turn < 0 or turn >= len(plan) or _answered(events):
        return []
    step_plan = plan[turn]
    script = SCRIPTS[step_plan["ask"]]
    view = _View(events)
    try:
        return [AssistantMessage(script(step_plan, view))]
    except _Pending as pending:
        return _number(pending.step, events)
    except _Failed as failed:
        return [AssistantMessage(f"Sorry, I couldn't look that up: {failed}")]
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        # JSON of another shape than the tools answer with (a client's own tool message)
        raise EnvError(
            "a tool result the oracle cannot read: not the JSON the livestream tools answer "
            f"with ({type(exc).__name__}: {exc})",
            where="messages",
        ) from None


def _answered(events: Sequence[Event]) -> bool:
    """Whether the current turn already has an accepted final answer."""
    for event in reversed(events):
        if isinstance(event, HookFired) and event.event == "stop":
            return False  # a stop hook fired: the answer may have been refused; answer again
        if isinstance(event, AssistantMessage):
            return True
        if isinstance(event, UserMessage | ToolCall | ToolResult | SkillLoad):
            return False
    return False


def _number(step: list[Event], events: Sequence[Event]) -> list[Event]:
    out: list[Event] = []
    for event in step:
        if isinstance(event, ToolCall):
            out.append(ToolCall(next_call_id([*events, *out]), event.tool, event.args))
        else:
            out.append(event)
    return out


def solve(env: Environment, task: Task, *, harness: Harness | None = None) -> Episode:
    """``env.solve(task)`` (``hsa.envs.<name>.solve``, as ``hsa rules check`` looks it up), or
    the same policy played under another ``harness`` with the canonical names."""
    return run_episode(env, task, env.oracle(), harness=harness, source="oracle")
