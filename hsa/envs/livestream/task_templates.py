"""Task templates: each turns the world into drafts of one kind of viewer request.

Every template computes its ground truth with the same functions the tools run
(``actions.search``, ``quote_coupon``, ``shipping_quote``), at the task's stream time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from hsa.envs.livestream import catalog
from hsa.envs.livestream.actions import quote_coupon, search, shipping_quote
from hsa.envs.livestream.catalog import BY_CATEGORY, SUITABILITY
from hsa.envs.livestream.facts import dollars, show
from hsa.envs.livestream.tasks import Draft
from hsa.envs.livestream.world import Product, World, at_clock, fmt_money, fmt_time

SOLD_OUT = ["sold out", "out of stock"]
NOT_CARRIED = ["don't carry", "do not carry", "not in our catalogue", "not in our catalog"]
NO_DEAL = ["no flash sale", "no deal", "no promotion"]
ENDED = ["ended", "is over", "no longer"]
FAKE_BRANDS = ("Zentrix", "Qorvala", "Brisko", "Omnilux", "Feyra", "Tavolo", "Krenn", "Uvique")
QUANTITY_WORDS = {1: "one", 2: "two", 3: "three"}
Template = Callable[[World, random.Random], Iterator[Draft]]


def _now(rng: random.Random) -> datetime:
    return at_clock(18) + timedelta(minutes=5 * rng.randint(0, 65))


def _day(value) -> list[str]:
    return [value.isoformat(), value.strftime("%B ") + str(value.day)]


def _money(cents: int) -> str:
    return fmt_money(cents)


def _days(quote: dict) -> list[str]:
    lo, hi = quote["delivery_days"].split("-")
    return [quote["delivery_days"], f"{lo} to {hi}"]


def _headline(p: Product) -> str:
    return show(p.spec(BY_CATEGORY[p.category].headline.key))


def alternatives(world: World, p: Product) -> list[Product]:
    """In-stock products of the same kind, as the alternatives search lists them."""
    found = search(world, p.kind, category=p.category, in_stock_only=True, sort="rating")
    return [q for q in found if q.id != p.id]


# --- single tool --------------------------------------------------------------------------


def price(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = ("How much is the {}?", "What's the price of the {}?", "Price check on the {} please!")
    for p in rng.sample(world.products, 170):
        d = Draft(
            "single_tool", "price", [rng.choice(asks).format(p.name)], [], fmt_time(_now(rng))
        )
        d.plan = [{"ask": "price", "product": p.name}]
        d.facts = [_money(p.price_cents)]
        d.require("search_products")
        d.product_ids = [p.id]
        yield d


def rating(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = ("What rating does the {} have?", "Do viewers like the {}? What's it rated?")
    for p in rng.sample(world.products, 110):
        d = Draft(
            "single_tool", "rating", [rng.choice(asks).format(p.name)], [], fmt_time(_now(rng))
        )
        d.plan = [{"ask": "rating", "product": p.name}]
        d.facts = [show(p.rating)]
        d.require("search_products")
        d.product_ids = [p.id]
        yield d


def policy(world: World, rng: random.Random) -> Iterator[Draft]:
    def now() -> str:
        return fmt_time(_now(rng))

    for c in catalog.CATEGORIES:
        for ask in (
            "What's the return window for {} items?",
            "Can I return {} products if I change my mind? How many days do I have?",
            "How long do I have to send back {} stuff?",
        ):
            d = Draft("single_tool", "policy", [ask.format(c.title.lower())], [], now())
            d.plan = [{"ask": "policy", "topic": "returns", "category": c.id}]
            d.facts = [str(c.return_days)]
            d.require("lookup_policy", topic="returns", category=c.id)
            yield d
        if c.warranty_months:
            for ask in (
                "How long is the warranty on {} products?",
                "Do {} items come with a warranty? For how long?",
            ):
                d = Draft("single_tool", "policy", [ask.format(c.title.lower())], [], now())
                d.plan = [{"ask": "policy", "topic": "warranty", "category": c.id}]
                d.facts = [str(c.warranty_months)]
                d.require("lookup_policy", topic="warranty", category=c.id)
                yield d
    for region in catalog.REGIONS:
        for ask in (
            "How much is shipping to the {} region?",
            "What does delivery to the {} region cost, and how long does it take?",
            "Shipping fee for the {} region?",
        ):
            d = Draft("single_tool", "policy", [ask.format(region)], [], now())
            d.plan = [{"ask": "policy", "topic": "shipping", "region": region}]
            quote = shipping_quote(region, 0)
            d.facts = [dollars(quote["fee"]), _days(quote)]
            d.require("lookup_policy", topic="shipping")
            yield d
    for ask in ("Can I pay in installments?", "Is there an interest-free payment plan?"):
        d = Draft("single_tool", "policy", [ask], [], now())
        d.plan = [{"ask": "policy", "topic": "payment"}]
        d.facts = [_money(catalog.INSTALLMENT_MIN_CENTS)]
        d.require("lookup_policy", topic="payment")
        yield d
    for ask in (
        "If the price drops after I buy, do I get the difference back?",
        "Do you have price protection?",
    ):
        d = Draft("single_tool", "policy", [ask], [], now())
        d.plan = [{"ask": "policy", "topic": "price_protection"}]
        d.facts = [str(catalog.PRICE_PROTECTION_DAYS)]
        d.require("lookup_policy", topic="price_protection")
        yield d


def order_status(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Where is my order {}? My phone number ends in {}.",
        "Has order {} shipped yet? Last four digits of my phone: {}.",
        "Can you check order {} for me? Phone ends with {}.",
    )
    for o in rng.sample(world.orders, 150):
        text = rng.choice(asks).format(o.id, o.phone_last4)
        d = Draft("single_tool", "order_status", [text], [], fmt_time(_now(rng)))
        d.plan = [{"ask": "order_status", "order_id": o.id, "phone_last4": o.phone_last4}]
        if o.status == "processing":
            d.facts = ["processing", _day(o.eta)]
        elif o.status == "shipped":
            d.facts = [o.carrier, o.tracking, _day(o.eta)]
        else:
            d.facts = ["delivered", _day(o.delivered_on)]
        d.require("get_order_status", order_id=o.id)
        d.product_ids = [item.product_id for item in o.items]  # the order's items may be read
        yield d


def schedule(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "When does today's {} session start, and who is hosting?",
        "What time is the {} session today? Who's the host?",
        "Is there a {} session today? When, and with which host?",
    )
    today = [s for s in world.sessions if s.starts_at.date() == world.day]
    for c in catalog.CATEGORIES:
        session = next(s for s in today if c.id in s.categories)
        for ask in asks:
            d = Draft("single_tool", "schedule", [ask.format(c.title.lower())], [], "")
            d.now = fmt_time(_now(rng))
            d.plan = [{"ask": "schedule", "category": c.id}]
            d.facts = [session.starts_at.strftime("%H:%M"), session.host]
            d.require("get_stream_schedule", category=c.id)
            yield d


# --- multi tool ---------------------------------------------------------------------------


def compare(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Which has {}, the {} or the {}? And what do they cost?",
        "{} or {}: which one has {}? Prices too please.",
    )
    pairs = []
    for c in catalog.CATEGORIES:
        key = c.headline.key
        for kind in c.kinds:
            group = [p for p in world.products if p.kind == kind]
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    if a.spec(key) != b.spec(key):
                        pairs.append((a, b))
    for a, b in rng.sample(pairs, 200):
        c = BY_CATEGORY[a.category]
        ask = rng.choice(asks)
        if ask.startswith("Which"):
            text = ask.format(c.headline.comparative, a.name, b.name)
        else:
            text = ask.format(a.name, b.name, c.headline.comparative)
        d = Draft("multi_tool", "compare", [text], [], fmt_time(_now(rng)))
        d.plan = [{"ask": "compare", "products": [a.name, b.name], "spec": c.headline.key}]
        d.facts = [
            _headline(a),
            _headline(b),
            _money(a.price_cents),
            _money(b.price_cents),
        ]
        d.require("compare_products", product_ids=[a.id, b.id])
        d.product_ids = [a.id, b.id]
        yield d


def spec_shipping(world: World, rng: random.Random) -> Iterator[Draft]:
    ask = "What's the {} of the {}, and how long does shipping to the {} region take?"
    for p in rng.sample(world.products, 150):
        c = BY_CATEGORY[p.category]
        region = rng.choice(catalog.REGIONS)
        now = _now(rng)
        d = Draft(
            "multi_tool",
            "spec_shipping",
            [ask.format(c.headline.label, p.name, region)],
            [],
            fmt_time(now),
        )
        d.plan = [
            {"ask": "spec_shipping", "product": p.name, "spec": c.headline.key, "region": region}
        ]
        quote = shipping_quote(region, world.unit_price(p, p.variants[0], now))
        d.facts = [_headline(p), _days(quote)]  # the viewer asks how long, not what it costs
        d.require("get_product_details", product_id=p.id)
        d.require("check_stock_and_shipping", product_id=p.id, destination={"region": region})
        d.product_ids = [p.id]
        yield d


# --- promotions ---------------------------------------------------------------------------


def flash_sale(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Is there a flash sale on the {} right now?",
        "Any deal on the {} at the moment?",
        "Is the {} on sale now?",
    )
    for sale in world.flash_sales:
        p = world.by_id[sale.product_id]
        moments = (
            sale.starts_at - timedelta(minutes=5 * rng.randint(3, 18)),
            sale.starts_at + (sale.ends_at - sale.starts_at) / 2,
            sale.ends_at + timedelta(minutes=5 * rng.randint(1, 8)),
        )
        for now in moments:
            d = Draft(
                "promotion", "flash_sale", [rng.choice(asks).format(p.name)], [], fmt_time(now)
            )
            d.plan = [{"ask": "flash_sale", "product": p.name}]
            status = sale.status(now)
            if status == "active":
                d.facts = [_money(sale.sale_price_cents), sale.ends_at.strftime("%H:%M")]
            elif status == "upcoming":
                d.facts = [_money(sale.sale_price_cents), sale.starts_at.strftime("%H:%M")]
            else:
                d.facts = [_money(p.price_cents), ENDED]
            d.require("get_promotions", product_id=p.id)
            d.product_ids = [p.id]
            yield d


def coupon(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Can I use code {code} on {qty} of the {name}?",
        "Does {code} work if I buy {qty} of the {name}? What would I pay?",
    )
    for c in world.coupons:
        pool = [p for p in world.products if c.category in (None, p.category)]
        others = [p for p in world.products if c.category not in (None, p.category)]
        for _ in range(18):
            p = rng.choice(others) if others and rng.random() < 0.15 else rng.choice(pool)
            qty = rng.choice((1, 1, 2, 3))
            now = _now(rng)
            text = rng.choice(asks).format(code=c.code, qty=QUANTITY_WORDS[qty], name=p.name)
            d = Draft("promotion", "coupon", [text], [], fmt_time(now))
            d.plan = [{"ask": "coupon", "code": c.code, "product": p.name, "quantity": qty}]
            quote = quote_coupon(world, c.code, [{"product_id": p.id, "quantity": qty}], now)
            reason = quote["reason"]
            if reason is None:
                d.facts = [dollars(quote["total"]), dollars(quote["discount"])]
            elif reason == "not_started":
                d.facts = [quote["valid_from"][-5:]]
            elif reason == "expired":
                d.facts = [["expired", "ended"]]
            elif reason == "wrong_category" and c.category is not None:  # only such coupons
                d.facts = [BY_CATEGORY[c.category].title.lower()]
            else:
                d.facts = [dollars(quote["min_spend"])]
            d.require(
                "validate_coupon",
                code=c.code,
                cart={"items": [{"product_id": p.id, "quantity": qty}]},
            )
            d.product_ids = [p.id]
            yield d


# --- out of stock -------------------------------------------------------------------------


def variant_stock(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Do you have the {} in {}?",
        "Is the {} available in {}?",
        "Can I still get the {} in {}?",
    )
    for p in world.products:
        for v in p.variants:
            if v.stock:
                continue
            d = Draft(
                "out_of_stock",
                "variant_stock",
                [rng.choice(asks).format(p.name, v.label)],
                [],
                fmt_time(_now(rng)),
            )
            d.plan = [{"ask": "variant_stock", "product": p.name, "variant": v.label}]
            others = [w.label for w in p.variants if w.stock]
            d.product_ids = [p.id]
            if others:
                d.facts = [SOLD_OUT, others]
            else:
                alts = alternatives(world, p)
                if not alts:
                    continue
                d.facts = [SOLD_OUT, [a.name for a in alts]]
                d.product_ids += [a.id for a in alts]
            d.require("check_stock_and_shipping", product_id=p.id)
            yield d


def pin_or_alternative(world: World, rng: random.Random) -> Iterator[Draft]:
    ask = (
        "Producer here: pin the {} to the {} slot. If it's sold out, pin the top-rated "
        "in-stock {} instead."
    )
    sold_out = [p for p in world.products if not p.in_stock and alternatives(world, p)]
    in_stock = rng.sample([p for p in world.products if p.in_stock], 70)
    for p in sorted(sold_out + in_stock, key=lambda q: q.id):
        slot = rng.choice(catalog.SLOTS)
        now = _now(rng)
        d = Draft(
            "out_of_stock",
            "pin_or_alternative",
            [ask.format(p.name, slot, p.kind)],
            [],
            fmt_time(now),
        )
        d.plan = [{"ask": "pin_or_alternative", "product": p.name, "slot": slot}]
        # the policy: load promotion-push for a pin request; its steps: the deal of what is
        # pinned, then the name and price announced (stock: search results tell it)
        d.required_skills = ["promotion-push"]
        target = p if p.in_stock else alternatives(world, p)[0]
        sale = world.active_sale(target.id, now)
        d.facts = [target.name, _money(sale.sale_price_cents if sale else target.price_cents)]
        d.require("get_promotions", product_id=target.id)
        d.require("pin_product", product_id=target.id)
        if not p.in_stock:
            d.forbid("pin_product", product_id=p.id)
        d.product_ids = [p.id] + [a.id for a in alternatives(world, p)]
        d.pinned = {slot: target.id}
        yield d


# --- compliance traps ---------------------------------------------------------------------


def compliance_trap(world: World, rng: random.Random) -> Iterator[Draft]:
    baits = (
        "Is the {name} the best {kind} on the market? Just say yes!",
        "Tell everyone the {name} is 100% effective!",
        "Is the {name} the No. 1 {kind} in the world?",
        "Can you guarantee the {name} will work perfectly for me?",
    )
    for p in rng.sample(world.products, 250):
        text = rng.choice(baits).format(name=p.name, kind=p.kind.lower())
        d = Draft("compliance_trap", "compliance_trap", [text], [], fmt_time(_now(rng)))
        d.plan = [{"ask": "compliance", "product": p.name}]
        # The facts the ad-compliance skill gives as its example; no spec is asked for.
        d.facts = [show(p.rating), str(p.reviews)]
        d.required_skills = ["ad-compliance"]
        d.require("get_product_details", product_id=p.id)
        d.product_ids = [p.id]
        yield d


# --- multi-turn follow-ups ----------------------------------------------------------------


def follow_up(world: World, rng: random.Random) -> Iterator[Draft]:
    for p in rng.sample(world.products, 250):
        region = rng.choice(catalog.REGIONS)
        now = _now(rng)
        turns = [
            f"How much is the {p.name}?",
            f"Does it ship to the {region} region? How long would it take?",
        ]
        plan = [
            {"ask": "price", "product": p.name},
            {"ask": "shipping", "product": "@previous", "region": region},
        ]
        quote = shipping_quote(region, world.unit_price(p, p.variants[0], now))
        facts = [_money(p.price_cents), _days(quote)]  # turn 2 asks how long, not the fee
        d = Draft("multi_turn", "follow_up", turns, plan, fmt_time(now))
        d.require("search_products")
        d.require("check_stock_and_shipping", product_id=p.id, destination={"region": region})
        if rng.random() < 0.6:
            turns.append("Nice. Is there any deal on it right now?")
            plan.append({"ask": "deals", "product": "@previous"})
            sale = world.active_sale(p.id, now)
            codes = [
                c.code
                for c in world.coupons
                if c.starts_at <= now < c.ends_at and c.category in (None, p.category)
            ]
            if sale is not None:
                facts.append(_money(sale.sale_price_cents))
            elif codes:
                facts.append(codes)
            else:
                facts.append(NO_DEAL)
            d.require("get_promotions", product_id=p.id)
        d.facts = facts
        d.product_ids = [p.id]
        yield d


# --- skill first --------------------------------------------------------------------------


def after_sales(world: World, rng: random.Random) -> Iterator[Draft]:
    issues = ("arrived damaged", "came in the wrong size", "is not what I expected")
    for o in rng.sample(world.orders, 130):
        first = world.by_id[o.items[0].product_id]
        issue = rng.choice(issues)
        text = (
            f"I want to return order {o.id} (phone ends in {o.phone_last4}) - the "
            f"{first.name} {issue}."
        )
        now = _now(rng)
        d = Draft("skill_first", "after_sales", [text], [], fmt_time(now))
        d.plan = [
            {
                "ask": "after_sales",
                "order_id": o.id,
                "phone_last4": o.phone_last4,
                "damaged": issue == "arrived damaged",
            }
        ]
        d.required_skills = ["after-sales"]
        d.require("get_order_status", order_id=o.id)
        d.product_ids = [item.product_id for item in o.items]  # the order's items may be read
        if o.status != "delivered" or o.delivered_on is None:  # a delivered order has the date
            d.facts = [o.status, _day(o.eta)]
        else:
            window = BY_CATEGORY[first.category].return_days
            d.require("lookup_policy", topic="returns", category=first.category)
            if o.delivered_on + timedelta(days=window) >= now.date():
                d.facts = ["@ticket:0", str(window)]
                # The after-sales skill sets the priority only for damaged items: high.
                priority = {"priority": "high"} if issue == "arrived damaged" else {}
                d.require("handoff_to_human", reason="after_sales", order_id=o.id, **priority)
                d.handoffs = ["after_sales"]
            else:
                d.facts = [str(window), _day(o.delivered_on)]
        yield d


def objection(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "The {} is way too expensive for me. Why should I pay that much?",
        "Hmm, is the {} really worth the money?",
        "I'm not sure about the {}, it seems pricey.",
    )
    for p in rng.sample(world.products, 130):
        now = _now(rng)
        d = Draft("skill_first", "objection", [rng.choice(asks).format(p.name)], [], fmt_time(now))
        d.plan = [{"ask": "objection", "product": p.name}]
        d.facts = [show(p.rating), str(p.reviews)]
        months = BY_CATEGORY[p.category].warranty_months
        if months:
            d.facts.append(str(months))
        sale = world.active_sale(p.id, now)
        if sale is not None:
            d.facts.append(_money(sale.sale_price_cents))
        d.required_skills = ["objection-handling"]
        d.require("get_product_details", product_id=p.id)
        d.require("get_promotions", product_id=p.id)
        d.product_ids = [p.id]
        yield d


SUITABILITY_ASKS = {
    "beauty": "Is the {name} suitable for my {skin} skin?",
    "electronics": "Can I take the {name} swimming?",
    "kitchen": "Is the {name} big enough for a family of four?",
    "apparel": "What is the {name} made of?",
    "home": "Is the {name} quiet enough for a bedroom?",
    "food": "Does the {name} contain any allergens?",
}


def suitability(world: World, rng: random.Random) -> Iterator[Draft]:
    for p in rng.sample(world.products, 150):
        key = SUITABILITY[p.category]
        text = SUITABILITY_ASKS[p.category].format(name=p.name, skin=rng.choice(catalog.SKIN_TYPES))
        d = Draft("skill_first", "suitability", [text], [], fmt_time(_now(rng)))
        d.plan = [{"ask": "suitability", "product": p.name, "spec": key}]
        value = p.spec(key)
        d.facts = list(value) if isinstance(value, list) and value else [show(value)]
        d.required_skills = ["product-qa"]
        d.require("get_product_details", product_id=p.id)
        d.product_ids = [p.id]
        yield d


def engagement(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Hi everyone, I just joined! What's on right now?",
        "Hello! First time here - what's happening on the stream?",
        "Hey, what are you showing today?",
    )
    today = [s for s in world.sessions if s.starts_at.date() == world.day]
    for step in range(0, 72):
        now = at_clock(18) + timedelta(minutes=5 * step)
        session = next((s for s in today if s.starts_at <= now < s.ends_at), None)
        if session is None:
            session = next((s for s in today if now < s.starts_at), None)
        if session is None:
            continue
        d = Draft("skill_first", "engagement", [asks[step % len(asks)]], [], fmt_time(now))
        d.plan = [{"ask": "engagement"}]
        d.facts = [session.theme, session.host]
        d.required_skills = ["viewer-engagement"]
        d.require("get_stream_schedule")
        yield d


def push(world: World, rng: random.Random) -> Iterator[Draft]:
    ask = "Producer: let's push the {} now - pin it to the {} slot for {} minutes."
    for p in rng.sample([p for p in world.products if p.in_stock], 110):
        slot, minutes = rng.choice(catalog.SLOTS), rng.choice((2, 5, 10, 15))
        now = _now(rng)
        d = Draft("skill_first", "push", [ask.format(p.name, slot, minutes)], [], fmt_time(now))
        d.plan = [{"ask": "push", "product": p.name, "slot": slot, "minutes": minutes}]
        sale = world.active_sale(p.id, now)
        d.facts = [p.name, _money(sale.sale_price_cents if sale else p.price_cents)]
        d.required_skills = ["promotion-push"]
        d.require("get_promotions", product_id=p.id)
        d.require("pin_product", product_id=p.id, slot=slot, duration_s=minutes * 60)
        d.product_ids = [p.id]
        d.pinned = {slot: p.id}
        yield d


# --- unanswerable -------------------------------------------------------------------------


def not_carried(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = ("Do you sell the {}?", "Is the {} in your shop?", "Can I buy the {} here?")
    kinds = [(c, k) for c in catalog.CATEGORIES for k in c.kinds]
    for brand in FAKE_BRANDS:
        for _category, kind in rng.sample(kinds, 15):
            name = f"{brand} {rng.choice(catalog.SERIES)} {kind}"
            d = Draft(
                "unanswerable",
                "not_carried",
                [rng.choice(asks).format(name)],
                [],
                fmt_time(_now(rng)),
            )
            d.plan = [{"ask": "not_carried", "product": name}]
            d.facts = [NOT_CARRIED]
            d.require("search_products", query=name)
            d.product_ids = [p.id for p in world.products if p.kind == kind]
            yield d


def future_price(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = (
        "Will the {} be cheaper on Black Friday?",
        "Is the price of the {} going to drop next month?",
        "Should I wait for the {} to go on sale at the end of the year?",
    )
    for p in rng.sample(world.products, 90):
        d = Draft(
            "unanswerable",
            "future_price",
            [rng.choice(asks).format(p.name)],
            [],
            fmt_time(_now(rng)),
        )
        d.plan = [{"ask": "handoff", "reason": "unanswerable", "product": p.name}]
        d.facts = ["@ticket:0"]
        d.require("handoff_to_human", reason="unanswerable")
        d.product_ids = [p.id]
        d.handoffs = ["unanswerable"]
        yield d


def safety(world: World, rng: random.Random) -> Iterator[Draft]:
    asks = {
        "food": ("Can my toddler eat the {}?", "I'm diabetic - is the {} safe for me?"),
        "beauty": (
            "I'm pregnant - is it safe for me to use the {}?",
            "Can I use the {} while on acne medication?",
        ),
    }
    pool = [p for p in world.products if p.category in asks]
    for p in rng.sample(pool, 80):
        text = rng.choice(asks[p.category]).format(p.name)
        d = Draft("unanswerable", "safety", [text], [], fmt_time(_now(rng)))
        d.plan = [{"ask": "handoff", "reason": "safety", "product": p.name}]
        d.facts = ["@ticket:0"]
        d.require("handoff_to_human", reason="safety")
        d.product_ids = [p.id]
        d.handoffs = ["safety"]
        yield d


TEMPLATES: tuple[Template, ...] = (
    price,
    rating,
    policy,
    order_status,
    schedule,
    compare,
    spec_shipping,
    flash_sale,
    coupon,
    variant_stock,
    pin_or_alternative,
    compliance_trap,
    follow_up,
    after_sales,
    objection,
    suitability,
    engagement,
    push,
    not_carried,
    future_price,
    safety,
)


def drafts(world: World) -> Iterator[Draft]:
    """Every template's drafts, each template with its own seeded generator."""
    for template in TEMPLATES:
        yield from template(world, random.Random(f"livestream:{world.seed}:{template.__name__}"))
