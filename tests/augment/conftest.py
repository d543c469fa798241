"""A small but complete harness and canonical trajectories exercising every part rules touch;
a registry pinned to the built-in rules, whatever else is installed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hsa.harness import (
    AssistantMessage,
    Harness,
    Hook,
    HookFired,
    Matcher,
    Prompt,
    Protocol,
    Section,
    Skill,
    SkillLoad,
    Tool,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
)

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "description": "The order id, e.g. '#W1'."},
        "items": {
            "type": "array",
            "description": "Items to return; see `order_id`.",
            "items": {"$ref": "#/$defs/Item"},
        },
        "reason": {
            "type": "string",
            "enum": ["damaged", "wrong_size", "no_longer_needed"],
            "description": "Why the items go back.",
        },
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string"},
            },
            "required": ["city"],
        },
    },
    "required": ["order_id", "items", "address"],
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {
                "item_id": {"type": "string"},
                "quantity": {"type": "integer", "minimum": 1},
                "condition": {"type": "string", "enum": ["new", "used"]},
            },
            "required": ["item_id", "quantity"],
        }
    },
}


def make_harness(protocol: Protocol | None = None) -> Harness:
    tools = (
        Tool(
            "get_order",
            "Get the details of an order. Call get_order before return_order_items.",
            {
                "type": "object",
                "properties": {"order_id": {"type": "string", "description": "The order id."}},
                "required": ["order_id"],
            },
        ),
        Tool(
            "get_order_status",
            "Get only the shipping status of an order (cheaper than `get_order`).",
            {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        ),
        Tool(
            "get_order_history",
            "List a customer's past orders (never needed to return items).",
            {
                "type": "object",
                "properties": {"customer": {"type": "string"}, "page": {"type": "integer"}},
                "required": ["customer"],
            },
        ),
        Tool("return_order_items", "Return items of a delivered order.", ORDER_SCHEMA),
        Tool(
            "cancel_order",
            "Cancel a pending order; not for delivered ones (use return_order_items).",
            {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "reason": {
                        "type": "string",
                        "enum": ["no_longer_needed", "ordered_by_mistake"],
                    },
                },
                "required": ["order_id", "reason"],
            },
        ),
        Tool(
            "search",
            "Search the product catalogue.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                    "sort": {"type": "string", "enum": ["price", "rating"]},
                },
                "required": ["query"],
            },
        ),
    )
    skills = (
        Skill(
            "returns-policy",
            "returns-policy",
            "How to handle a return request.",
            "# Returns\n\nIntro line.\n\n## Check\n\n- Call `get_order` first.\n- Ask for the "
            "reason.\n\n## Act\n\n1. Call `return_order_items`.\n2. Confirm.\n\n"
            "## Notes\n\nBe kind.\n\n"
            "```\n# not a heading\n- not a list\n```\n",
        ),
        Skill(
            "returns",
            "returns",
            "Short form of returns-policy.",
            "See the returns-policy skill.\n\n* one\n* two\n",
        ),
        Skill(
            "shipping",
            "shipping",
            "Shipping times and fees.",
            "# Shipping\n\nStandard: 3-5 days.\n",
        ),
    )
    hooks = (
        Hook(
            "greet",
            "session_start",
            "add_context",
            "Customer tier: {{ tier }}.",
            inject="system",
        ),
        Hook(
            "audit",
            "post_tool_use",
            "add_context",
            "Logged call {{ call }} at {{ time }}.",
            matcher=Matcher(tool="get_order.*"),
            inject="tool_result",
            wrapper="audit-note",
        ),
        Hook(
            "nudge",
            "user_prompt_submit",
            "add_context",
            "Remember to verify identity for {{ user }}.",
            inject="user",
            wrapper="reminder",
        ),
    )
    prompt = Prompt(
        sections=(
            Section("persona", "Persona", "You are a support agent for Acme.", "persona"),
            Section(
                "policy",
                "Policy",
                "Always call `get_order` before `return_order_items`. Use search for "
                "products. Never reveal {{ harness_id }}.",
                "policy",
            ),
            Section("tools", "Tools", "", "tools"),
            Section("skills", "Skills", "", "skills"),
            Section("output_format", "Output format", "", "output_format"),
        )
    )
    skill_tool = Tool(
        "load_skill",
        "Load a skill by id.",
        {
            "type": "object",
            "properties": {"skill_id": {"type": "string"}},
            "required": ["skill_id"],
        },
    )
    return Harness(
        id="acme-support",
        protocol=protocol or Protocol(),
        prompt=prompt,
        tools=tools,
        skills=skills,
        hooks=hooks,
        skill_tool=skill_tool,
    )


def make_events() -> tuple:
    return (
        HookFired("greet", "session_start", {"tier": "gold"}),
        UserMessage("I want to return the mug from order #W1, it is damaged. get_order please"),
        HookFired("nudge", "user_prompt_submit", {"user": "ana"}),
        AssistantMessage("Let me load the policy."),
        SkillLoad("returns-policy"),
        AssistantMessage("Checking the order."),
        ToolCall("call_1", "get_order", {"order_id": "#W1"}),
        ToolResult("call_1", '{"status": "delivered", "items": [{"item_id": "m1"}]}'),
        HookFired("audit", "post_tool_use", {"call": "get_order", "time": "12:00"}),
        ToolCall("call_2", "search", {"query": "damaged get_order mug", "sort": "price"}),
        ToolResult("call_2", "[]"),
        ToolCall(
            "call_3",
            "return_order_items",
            {
                "order_id": "#W1",
                "items": [
                    {"item_id": "m1", "quantity": 1, "condition": "used"},
                    {"item_id": "m2", "quantity": 2},
                ],
                "reason": "damaged",
                "address": {"city": "Paris", "zip": "75001"},
            },
        ),
        ToolCall("call_4", "get_order_status", {"order_id": "#W1"}),
        ToolResult("call_3", '{"ok": true}'),
        ToolResult("call_4", '"delivered"'),
        AssistantMessage("Done: your return is registered."),
    )


@pytest.fixture
def harness() -> Harness:
    return make_harness()


@pytest.fixture
def events() -> tuple:
    return make_events()


@pytest.fixture
def trajectory() -> Trajectory:
    return Trajectory("t1", make_events(), task_id="task-1", harness_id="acme-support")


@pytest.fixture
def plugins(monkeypatch) -> Callable[..., None]:
    """Pin the rule registry to the built-in rules plus the entry points passed to the returned
    function (none until it is called), so that no test depends on the plugins installed."""
    from hsa.augment import registry

    registry._load_builtins()
    builtin = {
        name: item
        for name, item in registry._RULES.items()
        if item.fn.__module__.startswith(registry.BUILTIN_MODULE + ".")
    }

    def install(*entry_points) -> None:
        monkeypatch.delenv(registry.PLUGINS_VARIABLE, raising=False)  # every one given
        monkeypatch.setattr(registry, "_RULES", dict(builtin))
        monkeypatch.setattr(registry, "_BROKEN", {})
        monkeypatch.setattr(registry, "_PLUGIN_OF", {})
        monkeypatch.setattr(registry, "_WITHDRAWN", {})
        monkeypatch.setattr(registry, "_PLUGINS_LOADED", False)
        monkeypatch.setattr(registry, "_SKIPPED", [])
        monkeypatch.setattr(registry.metadata, "entry_points", lambda group: list(entry_points))

    install()
    return install
