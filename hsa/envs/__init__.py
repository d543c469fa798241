"""Environments: tool implementations, tasks and scoring.

``get_env(NAME, **options)`` builds a registered environment, ``env_names()`` lists them and
``register_env(NAME, "module:factory")`` adds one.
"""

from hsa.envs.base import SPLITS, Environment, Outcome, Task, ToolOutput
from hsa.envs.registry import get as get_env
from hsa.envs.registry import names as env_names
from hsa.envs.registry import register as register_env

__all__ = [
    "SPLITS",
    "Environment",
    "Outcome",
    "Task",
    "ToolOutput",
    "env_names",
    "get_env",
    "register_env",
]
