"""Augmentation: task-preserving rewrites of harnesses, and the mappings they imply."""

from hsa.augment.mapping import IDENTITY, Mapping, Step, ToolMap, apply_steps, map_events

__all__ = ["IDENTITY", "Mapping", "Step", "ToolMap", "apply_steps", "map_events"]
