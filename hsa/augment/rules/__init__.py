"""The built-in rules, one module per family; importing this package registers them all."""

from hsa.augment.rules import prompt, tool_names, tool_set

__all__ = ["prompt", "tool_names", "tool_set"]
