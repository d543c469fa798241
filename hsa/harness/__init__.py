"""The shared vocabulary: harness value objects, canonical events, render/parse, load/save.

``load_harness(PATH)`` reads a harness (a JSON document or a directory), ``loads_harness(TEXT)``
parses one document and ``save_harness(HARNESS, PATH)`` writes one.
"""

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
from hsa.harness.io import dump_yaml, problems
from hsa.harness.io import load as load_harness
from hsa.harness.io import loads as loads_harness
from hsa.harness.io import save as save_harness
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
    "load_harness",
    "loads_harness",
    "normalize_call_ids",
    "parse",
    "problems",
    "render",
    "save_harness",
    "system_prompt",
    "trajectories_from_table",
    "trajectories_to_table",
    "validate_document",
]
