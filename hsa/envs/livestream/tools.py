"""The livestream tools as the model sees them: names, descriptions and JSON Schemas."""

from __future__ import annotations

from typing import Any

from hsa.envs.livestream.catalog import (
    CATEGORY_IDS,
    HANDOFF_REASONS,
    POLICY_TOPICS,
    REGIONS,
    SLOTS,
)
from hsa.harness.model import Tool

SEARCH_SORTS = ("relevance", "price_asc", "price_desc", "rating")
DETAIL_SECTIONS = ("variants", "specs", "reviews", "warranty")
COMPARE_ASPECTS = ("price", "rating", "specs", "warranty", "stock")
PRIORITIES = ("low", "normal", "high")

_PRODUCT_ID = {
    "type": "string",
    "pattern": "^P[0-9]{4}$",
    "description": "Catalogue product id, e.g. P0042 (from search results).",
}
_VARIANT_ID = {
    "type": "string",
    "pattern": "^P[0-9]{4}-V[0-9]+$",
    "description": "Variant id, e.g. P0042-V2 (from product details or stock results).",
}
_TIME = {
    "type": "string",
    "description": "Local time as 'YYYY-MM-DD HH:MM'. Defaults to the current stream time.",
}


def _obj(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **extra,
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "search_products",
        "Search the stream's catalogue by keywords. Returns matching products with id, name, "
        "brand, category, price (lowest variant price, USD), rating and whether any variant is "
        "in stock.",
        _obj(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Keywords: a product name, brand or kind of product.",
                },
                "filters": {
                    "type": "object",
                    "description": "Optional filters; omitted ones do not restrict.",
                    "properties": {
                        "category": {"type": "string", "enum": list(CATEGORY_IDS)},
                        "price_range": {
                            "type": "object",
                            "properties": {
                                "min": {"type": "number", "minimum": 0},
                                "max": {"type": "number", "minimum": 0},
                            },
                            "additionalProperties": False,
                        },
                        "in_stock_only": {"type": "boolean", "default": False},
                    },
                    "additionalProperties": False,
                },
                "sort": {"type": "string", "enum": list(SEARCH_SORTS), "default": "relevance"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            },
            ["query"],
        ),
    ),
    Tool(
        "get_product_details",
        "Full details of one product: description, variants with price and stock, specs, "
        "review summary and warranty.",
        _obj(
            {
                "product_id": _PRODUCT_ID,
                "sections": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(DETAIL_SECTIONS)},
                    "uniqueItems": True,
                    "description": "Sections to include; all when omitted.",
                },
            },
            ["product_id"],
        ),
    ),
    Tool(
        "compare_products",
        "Compare two to four products side by side on the chosen aspects.",
        _obj(
            {
                "product_ids": {
                    "type": "array",
                    "items": _PRODUCT_ID,
                    "minItems": 2,
                    "maxItems": 4,
                    "uniqueItems": True,
                },
                "aspects": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(COMPARE_ASPECTS)},
                    "default": ["price", "rating", "specs"],
                },
            },
            ["product_ids"],
        ),
    ),
    Tool(
        "check_stock_and_shipping",
        "Stock per variant of a product and, given a destination, the shipping fee and "
        "delivery time for the requested quantity.",
        _obj(
            {
                "product_id": _PRODUCT_ID,
                "variant_id": _VARIANT_ID,
                "quantity": {"type": "integer", "minimum": 1, "maximum": 20, "default": 1},
                "destination": {"$ref": "#/$defs/Destination"},
            },
            ["product_id"],
            **{
                "$defs": {
                    "Destination": {
                        "type": "object",
                        "properties": {
                            "region": {"type": "string", "enum": list(REGIONS)},
                            "postal_code": {"type": "string", "pattern": "^[0-9]{5,6}$"},
                        },
                        "required": ["region"],
                        "additionalProperties": False,
                    }
                }
            },
        ),
    ),
    Tool(
        "get_promotions",
        "Flash sales and coupons. With a product id: that product's flash sales (status "
        "active, upcoming or ended at the given time) and the coupons it qualifies for. "
        "Without: every flash sale that is active at that time.",
        _obj(
            {
                "product_id": _PRODUCT_ID,
                "at": _TIME,
                "include_upcoming": {"type": "boolean", "default": True},
            },
            [],
        ),
    ),
    Tool(
        "validate_coupon",
        "Check a coupon code against a cart at a given time and quote the discounted total.",
        _obj(
            {
                "code": {"type": "string", "minLength": 3, "maxLength": 20},
                "cart": {
                    "type": "object",
                    "properties": {
                        "items": {
                            "type": "array",
                            "items": {"$ref": "#/$defs/CartItem"},
                            "minItems": 1,
                            "maxItems": 10,
                        }
                    },
                    "required": ["items"],
                    "additionalProperties": False,
                },
                "at": _TIME,
            },
            ["code", "cart"],
            **{
                "$defs": {
                    "CartItem": {
                        "type": "object",
                        "properties": {
                            "product_id": _PRODUCT_ID,
                            "variant_id": _VARIANT_ID,
                            "quantity": {"type": "integer", "minimum": 1, "maximum": 20},
                        },
                        "required": ["product_id", "quantity"],
                        "additionalProperties": False,
                    }
                }
            },
        ),
    ),
    Tool(
        "pin_product",
        "Pin a product card to the live stream so viewers can buy it with one tap.",
        _obj(
            {
                "product_id": _PRODUCT_ID,
                "variant_id": _VARIANT_ID,
                "slot": {"type": "string", "enum": list(SLOTS), "default": "main"},
                "duration_s": {"type": "integer", "minimum": 30, "maximum": 1800, "default": 300},
                "caption": {"type": "string", "maxLength": 80},
            },
            ["product_id"],
        ),
    ),
    Tool(
        "lookup_policy",
        "The store's policy on a topic, optionally for one product category.",
        _obj(
            {
                "topic": {"type": "string", "enum": list(POLICY_TOPICS)},
                "category": {"type": "string", "enum": list(CATEGORY_IDS)},
            },
            ["topic"],
        ),
    ),
    Tool(
        "search_faq",
        "Search the viewer FAQ (payments, coupons, tracking, replays, giveaways, ...).",
        _obj(
            {
                "question": {"type": "string", "minLength": 3},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
            },
            ["question"],
        ),
    ),
    Tool(
        "get_order_status",
        "Status of a viewer's order: items, carrier, tracking, dates. The viewer must give "
        "the last four digits of the phone number on the order.",
        _obj(
            {
                "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
                "verification": {
                    "type": "object",
                    "properties": {"phone_last4": {"type": "string", "pattern": "^[0-9]{4}$"}},
                    "required": ["phone_last4"],
                    "additionalProperties": False,
                },
            },
            ["order_id", "verification"],
        ),
    ),
    Tool(
        "get_stream_schedule",
        "Sessions of the stream (time, host, theme, featured products) on a date.",
        _obj(
            {
                "date": {
                    "type": "string",
                    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                    "description": "YYYY-MM-DD; defaults to today.",
                },
                "category": {"type": "string", "enum": list(CATEGORY_IDS)},
            },
            [],
        ),
    ),
    Tool(
        "handoff_to_human",
        "Hand the conversation to a human agent when you cannot or must not answer. Returns a "
        "ticket id to give the viewer.",
        _obj(
            {
                "reason": {"type": "string", "enum": list(HANDOFF_REASONS)},
                "summary": {"type": "string", "minLength": 5, "maxLength": 500},
                "priority": {"type": "string", "enum": list(PRIORITIES), "default": "normal"},
                "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
            },
            ["reason", "summary"],
        ),
    ),
)


def skill_tool(skill_ids: list[str]) -> Tool:
    """The skill-loading tool, its ``skill_id`` restricted to the harness's skills."""
    return Tool(
        "load_skill",
        "Load a skill's full instructions before following it.",
        _obj(
            {
                "skill_id": {
                    "type": "string",
                    "enum": skill_ids,
                    "description": "Id of the skill to load, from the skills catalogue.",
                }
            },
            ["skill_id"],
        ),
    )


def defaults(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with the schema's top-level defaults filled in for absent parameters."""
    out = dict(args)
    for name, prop in (tool.parameters.get("properties") or {}).items():
        if name not in out and isinstance(prop, dict) and "default" in prop:
            out[name] = prop["default"]
    return out
