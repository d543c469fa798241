"""The fixed vocabulary the livestream world is drawn from: categories, brands, specs, regions.

Nothing here is random; ``world.py`` draws from it with a seeded generator. No word in this
file may be an absolute advertising claim (see ``compliance.py``): product names and policy
texts are quoted in answers.
"""

from __future__ import annotations

from dataclasses import dataclass

REGIONS = ("north", "south", "east", "west", "central", "remote")
SLOTS = ("main", "sidebar")
POLICY_TOPICS = ("shipping", "returns", "warranty", "payment", "price_protection")
HANDOFF_REASONS = ("after_sales", "complaint", "unanswerable", "safety", "other")
ORDER_STATUSES = ("processing", "shipped", "delivered")
CARRIERS = ("SwiftPost", "RedArrow Express", "Cloud Logistics")
HOSTS = ("Mia", "Leo", "Ava", "Kai", "Zoe")
SERIES = ("Pro", "Lite", "Max", "Air", "Mini", "Plus", "Neo", "Go", "One", "Flex", "Nova", "Core")


@dataclass(frozen=True, slots=True)
class Spec:
    """A product attribute: key, unit, and how a comparison ranks it (``higher`` wins or not)."""

    key: str
    label: str
    unit: str = ""
    higher_wins: bool = True
    comparative: str = ""


@dataclass(frozen=True, slots=True)
class Category:
    """A catalogue category: what its products are, what they cost, how they vary."""

    id: str
    title: str
    kinds: tuple[str, ...]
    brands: tuple[str, ...]
    price_range: tuple[int, int]  # dollars
    variant_axis: str
    variant_labels: tuple[str, ...]
    headline: Spec  # the spec compared and asked about
    warranty_months: int
    return_days: int
    return_condition: str
    warehouse: str


CATEGORIES: tuple[Category, ...] = (
    Category(
        id="beauty",
        title="Beauty",
        kinds=(
            "Serum",
            "Moisturizer",
            "Cleanser",
            "Sunscreen",
            "Lip Tint",
            "Face Mask",
            "Toner",
            "Eye Cream",
        ),
        brands=("Lumina", "Petalis", "Aquaveil", "Rosemead", "Kireina"),
        price_range=(12, 68),
        variant_axis="size",
        variant_labels=("30 ml", "50 ml", "100 ml"),
        headline=Spec("volume_ml", "volume", "ml", True, "more product"),
        warranty_months=0,
        return_days=7,
        return_condition="unopened and sealed",
        warehouse="east",
    ),
    Category(
        id="electronics",
        title="Electronics",
        kinds=(
            "Wireless Earbuds",
            "Power Bank",
            "Smartwatch",
            "Bluetooth Speaker",
            "Ring Light",
            "Phone Gimbal",
            "Webcam",
            "Mini Projector",
        ),
        brands=("Voltix", "Soundra", "Orbitek", "Pixelon", "Nexa"),
        price_range=(25, 240),
        variant_axis="color",
        variant_labels=("Black", "White", "Blue", "Sand"),
        headline=Spec("battery_hours", "battery life", "hours", True, "longer battery life"),
        warranty_months=12,
        return_days=15,
        return_condition="with all accessories and the original box",
        warehouse="south",
    ),
    Category(
        id="kitchen",
        title="Kitchen",
        kinds=(
            "Air Fryer",
            "Blender",
            "Rice Cooker",
            "Kettle",
            "Coffee Grinder",
            "Juicer",
            "Steam Oven",
            "Stand Mixer",
        ),
        brands=("Cookwell", "Hearthly", "Mirachef", "Brightpan", "Kitto"),
        price_range=(29, 260),
        variant_axis="color",
        variant_labels=("Silver", "Black", "Cream"),
        headline=Spec("capacity_l", "capacity", "litres", True, "bigger capacity"),
        warranty_months=24,
        return_days=15,
        return_condition="unused, with the original box",
        warehouse="central",
    ),
    Category(
        id="apparel",
        title="Apparel",
        kinds=(
            "Hoodie",
            "Running Shoes",
            "Yoga Pants",
            "Down Jacket",
            "Sneakers",
            "T-Shirt",
            "Rain Coat",
            "Backpack",
        ),
        brands=("Stridewell", "Northloom", "Cotera", "Urbanfold", "Pacelane"),
        price_range=(15, 180),
        variant_axis="size",
        variant_labels=("S", "M", "L", "XL"),
        headline=Spec("weight_g", "weight", "g", False, "lighter"),
        warranty_months=0,
        return_days=30,
        return_condition="unworn, with tags attached",
        warehouse="north",
    ),
    Category(
        id="home",
        title="Home",
        kinds=(
            "Desk Lamp",
            "Humidifier",
            "Air Purifier",
            "Robot Vacuum",
            "Weighted Blanket",
            "Aroma Diffuser",
            "Fan Heater",
            "Memory Pillow",
        ),
        brands=("Nestora", "Calmly", "Hometide", "Lumeo", "Softhaven"),
        price_range=(19, 320),
        variant_axis="color",
        variant_labels=("White", "Grey", "Oak"),
        headline=Spec("noise_db", "noise level", "dB", False, "quieter"),
        warranty_months=12,
        return_days=15,
        return_condition="unused, with the original box",
        warehouse="central",
    ),
    Category(
        id="food",
        title="Food",
        kinds=(
            "Green Tea",
            "Mixed Nuts",
            "Dark Chocolate",
            "Coffee Beans",
            "Dried Mango",
            "Oat Granola",
            "Rice Crackers",
            "Honey",
        ),
        brands=("Harvestia", "Goldleaf", "Terranut", "Sunmeadow", "Kibo Farms"),
        price_range=(6, 45),
        variant_axis="pack",
        variant_labels=("1 pack", "3 packs", "6 packs"),
        headline=Spec("net_weight_g", "net weight", "g", True, "a bigger pack"),
        warranty_months=0,
        return_days=7,
        return_condition="unopened",
        warehouse="east",
    ),
)
CATEGORY_IDS = tuple(c.id for c in CATEGORIES)
BY_CATEGORY = {c.id: c for c in CATEGORIES}

# Suitability questions the product-qa skill answers: the spec key each category is asked about.
SUITABILITY = {
    "beauty": "skin_types",
    "electronics": "water_resistance",
    "kitchen": "capacity_l",
    "apparel": "material",
    "home": "noise_db",
    "food": "allergens",
}
SKIN_TYPES = ("dry", "oily", "combination", "sensitive", "normal")
WATER_RATINGS = ("none", "IPX4", "IPX5", "IPX7")
MATERIALS = ("organic cotton", "recycled polyester", "merino wool", "nylon ripstop", "bamboo knit")
ALLERGENS = ("nuts", "soy", "milk", "gluten", "sesame")
ORIGINS = ("Yunnan", "Kyoto", "Chiang Mai", "Sicily", "Oaxaca", "Kerala")

# Shipping by destination region: fee in cents, delivery days (low, high), free-shipping threshold.
SHIPPING = {
    "north": (499, (2, 3), 5900),
    "south": (499, (2, 3), 5900),
    "east": (399, (1, 2), 5900),
    "west": (599, (3, 4), 5900),
    "central": (399, (1, 2), 5900),
    "remote": (1299, (5, 8), 19900),
}
PRICE_PROTECTION_DAYS = 7
INSTALLMENT_MIN_CENTS = 10000
PAYMENT_METHODS = ("credit card", "debit card", "PayLink wallet", "bank transfer")

FAQ = (
    (
        "How do I use a coupon code?",
        "Enter the code at checkout before paying; one code per order.",
    ),
    (
        "Can I pay in installments?",
        "Orders over $100.00 can be split into 3 or 6 interest-free "
        "monthly payments by credit card.",
    ),
    ("Do you ship abroad?", "We ship within the country only, to all six delivery regions."),
    (
        "How do I track my order?",
        "Ask the host with your order id and the last four digits of "
        "your phone number, or use the tracking number from your confirmation message.",
    ),
    (
        "Can I change my delivery address?",
        "Yes, until the order ships; contact support with the order id.",
    ),
    (
        "Can I cancel an order?",
        "Orders can be cancelled free of charge while they are still processing.",
    ),
    ("Do you offer gift wrapping?", "Gift wrapping is available for $2.99 per order at checkout."),
    (
        "Where can I watch a replay?",
        "Replays of each session are posted on the channel page "
        "within two hours of the session ending.",
    ),
    (
        "Do flash-sale items have a purchase limit?",
        "Yes, each flash sale has a per-viewer limit shown on the pinned product card.",
    ),
    ("Can I get an invoice?", "Electronic invoices are issued automatically when the order ships."),
    (
        "How do I join the viewer giveaway?",
        "Comment the daily keyword shown on screen; winners are drawn at the end of each session.",
    ),
    (
        "Can I combine a coupon with a flash sale?",
        "Yes: the coupon applies to the flash-sale price while the sale is live.",
    ),
)

THEMES = {
    "beauty": "Glow-Up Hour",
    "electronics": "Gadget Night",
    "kitchen": "Kitchen Heroes",
    "apparel": "Style Lab",
    "home": "Cozy Home Corner",
    "food": "Snack Break",
}
