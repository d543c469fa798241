"""The shared vocabulary: harness value objects, canonical events, render/parse, load/save."""

from hsa.harness.events import (
    EVENT_STRUCT,
    TRAJECTORY_SCHEMA,
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    normalize_call_ids,
    trajectories_from_table,
    trajectories_to_table,
)
from hsa.harness.io import dump_yaml, load, loads, problems, save
from hsa.harness.model import Harness, Hook, Matcher, Prompt, Protocol, Section, Skill, Tool
from hsa.harness.parse import parse
from hsa.harness.prompt import system_prompt
from hsa.harness.render import Conversation, render
from hsa.harness.validate import document_problems, harness_schema, validate_document

__all__ = [
    "EVENT_STRUCT",
    "TRAJECTORY_SCHEMA",
    "AssistantMessage",
    "Conversation",
    "Event",
    "Harness",
    "Hook",
    "HookFired",
    "Matcher",
    "Prompt",
    "Protocol",
    "Section",
    "Skill",
    "SkillLoad",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Trajectory",
    "UserMessage",
    "document_problems",
    "dump_yaml",
    "harness_schema",
    "load",
    "loads",
    "normalize_call_ids",
    "parse",
    "problems",
    "render",
    "save",
    "system_prompt",
    "trajectories_from_table",
    "trajectories_to_table",
    "validate_document",
]
