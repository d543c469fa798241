"""The built-in rules, one module per family; importing this package registers them all.

- skill identifiers: ``skill_ids``
- skill content: ``skill_content``
- tool schemas: ``tool_names``, ``tool_args``, ``tool_text``, ``tool_set``
- prompt structure: ``prompt``
- hooks: ``hooks``
- tool-call protocol: ``protocol``
"""

from hsa.augment.rules import (
    hooks,
    prompt,
    protocol,
    skill_content,
    skill_ids,
    tool_args,
    tool_names,
    tool_set,
    tool_text,
)

__all__ = [
    "hooks",
    "prompt",
    "protocol",
    "skill_content",
    "skill_ids",
    "tool_args",
    "tool_names",
    "tool_set",
    "tool_text",
]
