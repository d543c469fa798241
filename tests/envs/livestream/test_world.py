"""The seeded world: deterministic, a few hundred products, promotions with time windows."""

from __future__ import annotations

from hsa.envs.livestream import catalog
from hsa.envs.livestream.compliance import absolute_claims
from hsa.envs.livestream.world import generate


def test_same_seed_same_world_other_seed_other_world():
    assert generate(3) == generate(3)
    a, b = generate(0), generate(1)
    assert [p.name for p in a.products] != [p.name for p in b.products]


def test_catalogue_shape():
    world = generate(0)
    assert 250 <= len(world.products) <= 400
    assert len({p.name for p in world.products}) == len(world.products)
    assert {p.category for p in world.products} == set(catalog.CATEGORY_IDS)
    assert all(len(p.variants) >= 2 for p in world.products)
    sold_out = [p for p in world.products if not p.in_stock]
    partly = [p for p in world.products if p.in_stock and any(v.stock == 0 for v in p.variants)]
    assert len(sold_out) > 10 and len(partly) > 20
    for p in world.products:
        assert all(v.price_cents > 0 and v.price_cents % 100 == 99 for v in p.variants)
        assert p.internal_cost_cents < p.price_cents


def test_promotions_schedule_and_orders():
    world = generate(0)
    for sale in world.flash_sales:
        assert sale.starts_at < sale.ends_at
        assert sale.sale_price_cents < world.by_id[sale.product_id].price_cents
        assert world.by_id[sale.product_id].in_stock
    assert {c.code for c in world.coupons} >= {"LIVE10", "FANDAY", "SUMMER30"}
    assert len([s for s in world.sessions if s.starts_at.date() == world.day]) == 4
    assert {o.status for o in world.orders} == set(catalog.ORDER_STATUSES)
    for order in world.orders:
        if order.status == "delivered":
            assert order.delivered_on <= world.day
        assert order.phone_last4.isdigit() and len(order.phone_last4) == 4


def test_no_quoted_text_makes_an_absolute_claim():
    world = generate(0)
    texts = [p.name for p in world.products] + [p.description for p in world.products]
    texts += [s.theme for s in world.sessions] + [a for _, a in catalog.FAQ]
    texts += [c.return_condition for c in catalog.CATEGORIES]
    assert [t for t in texts if absolute_claims(t)] == []
