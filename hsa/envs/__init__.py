"""Environments: tool implementations, tasks and scoring."""

from hsa.envs.base import SPLITS, Environment, Outcome, Task, ToolOutput

__all__ = ["SPLITS", "Environment", "Outcome", "Task", "ToolOutput"]
