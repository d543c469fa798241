"""The livestream world: a seeded catalogue, promotions, schedule and orders, as read-only data."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from hsa.envs.livestream import catalog
from hsa.envs.livestream.catalog import BY_CATEGORY, CATEGORIES, Category

STREAM_DAY = date(2025, 6, 18)
PRODUCTS_PER_KIND = 6
TIME_FORMAT = "%Y-%m-%d %H:%M"
_WORD = re.compile(r"[a-z0-9]+")


def fmt_time(moment: datetime) -> str:
    return moment.strftime(TIME_FORMAT)


def fmt_money(cents: int) -> str:
    """``12999`` -> ``129.99`` (answers and tool outputs add the ``$``)."""
    return f"{cents // 100}.{cents % 100:02d}"


def at_clock(hour: int, minute: int = 0, day: date = STREAM_DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute)


@dataclass(frozen=True, slots=True)
class Variant:
    id: str
    label: str
    price_cents: int
    stock: int


@dataclass(frozen=True, slots=True)
class Product:
    id: str
    name: str
    brand: str
    category: str
    kind: str
    description: str
    variants: tuple[Variant, ...]
    specs: tuple[tuple[str, Any], ...]
    rating: float
    reviews: int
    list_price_cents: int
    internal_cost_cents: int
    supplier_code: str

    @property
    def price_cents(self) -> int:
        """The lowest variant price: what a search result shows as the price."""
        return min(v.price_cents for v in self.variants)

    @property
    def stock(self) -> int:
        return sum(v.stock for v in self.variants)

    @property
    def in_stock(self) -> bool:
        return self.stock > 0

    def spec(self, key: str) -> Any:
        return dict(self.specs)[key]

    def variant(self, variant_id: str) -> Variant | None:
        return next((v for v in self.variants if v.id == variant_id), None)


@dataclass(frozen=True, slots=True)
class FlashSale:
    id: str
    product_id: str
    sale_price_cents: int
    starts_at: datetime
    ends_at: datetime
    limit_per_viewer: int

    def status(self, now: datetime) -> str:
        if now < self.starts_at:
            return "upcoming"
        return "active" if now < self.ends_at else "ended"


@dataclass(frozen=True, slots=True)
class Coupon:
    code: str
    kind: str  # percent | fixed
    value: int  # percent, or cents
    min_spend_cents: int
    category: str | None
    starts_at: datetime
    ends_at: datetime

    @property
    def summary(self) -> str:
        off = f"{self.value}% off" if self.kind == "percent" else f"${fmt_money(self.value)} off"
        scope = f" {BY_CATEGORY[self.category].title.lower()} items" if self.category else ""
        floor = f" over ${fmt_money(self.min_spend_cents)}" if self.min_spend_cents else ""
        return f"{off}{scope}{floor}"


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    starts_at: datetime
    ends_at: datetime
    host: str
    theme: str
    categories: tuple[str, ...]
    featured: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OrderItem:
    product_id: str
    variant_id: str
    quantity: int
    price_cents: int


@dataclass(frozen=True, slots=True)
class Order:
    id: str
    phone_last4: str
    placed_on: date
    status: str
    items: tuple[OrderItem, ...]
    carrier: str
    tracking: str | None
    region: str
    shipped_on: date | None
    delivered_on: date | None
    eta: date | None


@dataclass(frozen=True, slots=True)
class World:
    """Everything a livestream episode can look up. Built once per seed, never mutated."""

    seed: int
    day: date
    products: tuple[Product, ...]
    flash_sales: tuple[FlashSale, ...]
    coupons: tuple[Coupon, ...]
    sessions: tuple[Session, ...]
    orders: tuple[Order, ...]
    by_id: dict[str, Product]
    by_name: dict[str, Product]
    orders_by_id: dict[str, Order]
    words: dict[str, frozenset[str]]  # product id -> the words a search matches against

    def product(self, product_id: str) -> Product | None:
        return self.by_id.get(product_id)

    def coupon(self, code: str) -> Coupon | None:
        return next((c for c in self.coupons if c.code == code.upper()), None)

    def sales_for(self, product_id: str) -> list[FlashSale]:
        return [s for s in self.flash_sales if s.product_id == product_id]

    def active_sale(self, product_id: str, now: datetime) -> FlashSale | None:
        return next((s for s in self.sales_for(product_id) if s.status(now) == "active"), None)

    def unit_price(self, product: Product, variant: Variant, now: datetime) -> int:
        """A variant's price at ``now``: the flash-sale price applies to the cheapest variant."""
        sale = self.active_sale(product.id, now)
        if sale is not None and variant.price_cents == product.price_cents:
            return sale.sale_price_cents
        return variant.price_cents


def generate(seed: int = 0) -> World:
    """The world for ``seed``: the same seed always gives the same world."""
    rng = random.Random(f"livestream:{seed}")
    products = _products(rng)
    by_id = {p.id: p for p in products}
    flash_sales = _flash_sales(rng, products)
    coupons = _coupons(rng)
    sessions = _sessions(rng, products)
    orders = _orders(rng, products)
    return World(
        seed=seed,
        day=STREAM_DAY,
        products=products,
        flash_sales=flash_sales,
        coupons=coupons,
        sessions=sessions,
        orders=orders,
        by_id=by_id,
        by_name={p.name.lower(): p for p in products},
        orders_by_id={o.id: o for o in orders},
        words={
            p.id: frozenset(words(f"{p.name} {p.brand} {p.kind} {p.category}")) for p in products
        },
    )


def words(text: str) -> list[str]:
    """The lower-case words of ``text``, as search compares them."""
    return _WORD.findall(text.lower())


def _price(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randrange(lo, hi) * 100 + 99


def _specs(rng: random.Random, category: str) -> list[tuple[str, Any]]:
    if category == "beauty":
        types = sorted(rng.sample(catalog.SKIN_TYPES, rng.randint(1, 3)))
        return [
            ("volume_ml", rng.choice((15, 30, 40, 50, 75, 100, 120))),
            ("skin_types", types),
            ("fragrance_free", rng.random() < 0.5),
        ]
    if category == "electronics":
        return [
            ("battery_hours", rng.randint(4, 60)),
            ("water_resistance", rng.choice(catalog.WATER_RATINGS)),
            ("weight_g", rng.randint(40, 900)),
        ]
    if category == "kitchen":
        return [
            ("capacity_l", rng.choice((0.5, 0.8, 1.0, 1.2, 1.5, 1.7, 2.0, 3.5, 4.5, 5.5, 6.0))),
            ("power_w", rng.choice((300, 600, 800, 1000, 1200, 1500, 1800, 2200))),
            ("dishwasher_safe", rng.random() < 0.5),
        ]
    if category == "apparel":
        return [
            ("weight_g", rng.randint(120, 1400)),
            ("material", rng.choice(catalog.MATERIALS)),
            ("water_repellent", rng.random() < 0.4),
        ]
    if category == "home":
        return [
            ("noise_db", rng.randint(18, 62)),
            ("power_w", rng.choice((5, 8, 12, 25, 40, 60, 1500))),
            ("coverage_m2", rng.choice((10, 15, 20, 30, 45, 60))),
        ]
    allergens = sorted(rng.sample(catalog.ALLERGENS, rng.randint(0, 2)))
    return [
        ("net_weight_g", rng.choice((100, 150, 200, 250, 300, 500, 750, 1000))),
        ("allergens", allergens),
        ("origin", rng.choice(catalog.ORIGINS)),
        ("shelf_life_days", rng.choice((90, 180, 270, 365))),
    ]


def _products(rng: random.Random) -> tuple[Product, ...]:
    products: list[Product] = []
    names: set[str] = set()
    for category in CATEGORIES:
        for kind in category.kinds:
            combos = [(b, s) for b in category.brands for s in catalog.SERIES]
            rng.shuffle(combos)
            for brand, series in combos[:PRODUCTS_PER_KIND]:
                name = f"{brand} {series} {kind}"
                if name in names:
                    continue
                names.add(name)
                products.append(_product(rng, len(products) + 1, name, brand, category, kind))
    return tuple(products)


def _product(
    rng: random.Random, number: int, name: str, brand: str, category: Category, kind: str
) -> Product:
    pid = f"P{number:04d}"
    base = _price(rng, *category.price_range)
    count = rng.randint(2, len(category.variant_labels))
    labels = category.variant_labels[:count]
    roll = rng.random()
    stocks = [rng.randint(3, 250) for _ in labels]
    if roll < 0.12:  # sold out entirely
        stocks = [0] * count
    elif roll < 0.32:  # some variants sold out
        for i in rng.sample(range(count), rng.randint(1, count - 1)):
            stocks[i] = 0
    variants = []
    for i, (label, stock) in enumerate(zip(labels, stocks, strict=True)):
        step = 0 if category.variant_axis == "color" else i
        price = base + step * (base // 100 * 60 if category.id != "food" else base // 100 * 170)
        price = price // 100 * 100 + 99
        variants.append(Variant(f"{pid}-V{i + 1}", label, price, stock))
    specs = _specs(rng, category.id)
    rating = rng.randint(36, 49) / 10
    cost = base * rng.randint(35, 60) // 100
    desc = (
        f"{name}: a {category.title.lower()} favourite from {brand}, rated {rating} by our viewers."
    )
    return Product(
        id=pid,
        name=name,
        brand=brand,
        category=category.id,
        kind=kind,
        description=desc,
        variants=tuple(variants),
        specs=tuple(specs),
        rating=rating,
        reviews=rng.randint(12, 4800),
        list_price_cents=base + (base // 100) * rng.randint(10, 40),
        internal_cost_cents=cost,
        supplier_code=f"SUP-{rng.randint(1000, 9999)}",
    )


def _flash_sales(rng: random.Random, products: tuple[Product, ...]) -> tuple[FlashSale, ...]:
    candidates = [p for p in products if p.in_stock]
    chosen = rng.sample(candidates, 48)
    sales = []
    for i, product in enumerate(sorted(chosen, key=lambda p: p.id)):
        start = at_clock(18) + timedelta(minutes=30 * rng.randint(0, 9))
        length = timedelta(minutes=rng.choice((30, 45, 60, 90)))
        off = rng.randint(15, 40)
        sale = product.price_cents * (100 - off) // 100 // 100 * 100 + 99
        sale = min(sale, product.price_cents - 100)
        sales.append(
            FlashSale(
                id=f"FS{i + 1:03d}",
                product_id=product.id,
                sale_price_cents=sale,
                starts_at=start,
                ends_at=start + length,
                limit_per_viewer=rng.choice((1, 2, 3, 5)),
            )
        )
    return tuple(sales)


def _coupons(rng: random.Random) -> tuple[Coupon, ...]:
    d = STREAM_DAY
    yesterday, tomorrow = d - timedelta(days=1), d + timedelta(days=1)
    rows = [
        ("LIVE10", "percent", 10, 5000, None, (18, 0, d), (23, 59, d)),
        ("BEAUTY15", "percent", 15, 3000, "beauty", (18, 0, d), (23, 59, d)),
        ("KITCHEN20", "fixed", 2000, 15000, "kitchen", (19, 0, d), (22, 0, d)),
        ("NIGHTOWL", "percent", 20, 8000, None, (22, 0, d), (23, 59, d)),
        ("EARLYBIRD", "fixed", 500, 0, None, (18, 0, d), (19, 0, d)),
        ("TECH25", "fixed", 2500, 20000, "electronics", (20, 0, d), (23, 0, d)),
        ("COZYHOME", "percent", 12, 6000, "home", (18, 0, d), (23, 59, d)),
        ("STYLE10", "percent", 10, 4000, "apparel", (18, 30, d), (21, 30, d)),
        ("SNACK5", "fixed", 500, 2500, "food", (18, 0, d), (23, 59, d)),
        ("FANDAY", "percent", 8, 0, None, (10, 0, yesterday), (23, 59, yesterday)),
        ("SUMMER30", "fixed", 3000, 25000, None, (0, 0, tomorrow), (23, 59, tomorrow)),
        ("VIP50", "fixed", 5000, 50000, None, (18, 0, d), (23, 59, d)),
    ]
    coupons = []
    for code, kind, value, floor, cat, start, end in rows:
        # The seed moves thresholds a little so that worlds differ beyond the catalogue.
        floor = floor + rng.choice((0, 0, 1000)) if floor else 0
        coupons.append(Coupon(code, kind, value, floor, cat, at_clock(*start), at_clock(*end)))
    return tuple(coupons)


def _sessions(rng: random.Random, products: tuple[Product, ...]) -> tuple[Session, ...]:
    sessions = []
    blocks = ((18, 0, 19, 30), (19, 30, 21, 0), (21, 0, 22, 30), (22, 30, 23, 59))
    for offset in range(3):
        day = STREAM_DAY + timedelta(days=offset)
        cats = list(catalog.CATEGORY_IDS)
        rng.shuffle(cats)
        groups = (cats[0:1], cats[1:3], cats[3:4], cats[4:6])
        for i, (block, group) in enumerate(zip(blocks, groups, strict=True)):
            pool = [p for p in products if p.category in group and p.in_stock]
            featured = tuple(sorted(p.id for p in rng.sample(pool, 3)))
            theme = " & ".join(catalog.THEMES[c] for c in group)
            sessions.append(
                Session(
                    id=f"S{offset + 1}{i + 1}",
                    starts_at=at_clock(block[0], block[1], day),
                    ends_at=at_clock(block[2], block[3], day),
                    host=rng.choice(catalog.HOSTS),
                    theme=theme,
                    categories=tuple(group),
                    featured=featured,
                )
            )
    return tuple(sessions)


def _orders(rng: random.Random, products: tuple[Product, ...]) -> tuple[Order, ...]:
    orders: list[Order] = []
    ids: set[str] = set()
    while len(orders) < 240:
        oid = f"ORD-{rng.randint(100000, 999999)}"
        if oid in ids:
            continue
        ids.add(oid)
        age = rng.randint(0, 28)
        placed = STREAM_DAY - timedelta(days=age)
        items = []
        for product in rng.sample(products, rng.choice((1, 1, 2))):
            variant = rng.choice(product.variants)
            items.append(OrderItem(product.id, variant.id, rng.randint(1, 2), variant.price_cents))
        carrier = rng.choice(catalog.CARRIERS)
        tracking = shipped = delivered = eta = None
        transit = rng.randint(2, 4)
        if age <= 1:
            status = "processing"
            eta = placed + timedelta(days=transit + 2)
        else:
            shipped = placed + timedelta(days=1)
            tracking = f"{carrier[:2].upper()}{rng.randint(10**9, 10**10 - 1)}"
            if age < transit + 1:
                status, eta = "shipped", shipped + timedelta(days=transit)
            else:
                status, delivered = "delivered", shipped + timedelta(days=transit)
        orders.append(
            Order(
                id=oid,
                phone_last4=f"{rng.randint(0, 9999):04d}",
                placed_on=placed,
                status=status,
                items=tuple(items),
                carrier=carrier,
                tracking=tracking,
                region=rng.choice(catalog.REGIONS),
                shipped_on=shipped,
                delivered_on=delivered,
                eta=eta,
            )
        )
    return tuple(orders)
