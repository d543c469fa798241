"""Environments: tool implementations, tasks and scoring."""

from hsa.envs.base import SPLITS, Environment, Outcome, Task, ToolOutput
from hsa.envs.registry import get, names, register

__all__ = ["SPLITS", "Environment", "Outcome", "Task", "ToolOutput", "get", "names", "register"]
