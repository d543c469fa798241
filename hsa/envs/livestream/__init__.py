"""The bundled live-commerce environment: a seeded shop, its harness, tasks and oracle."""

from hsa.envs.livestream.env import LivestreamEnvironment
from hsa.envs.livestream.harness import harness
from hsa.envs.livestream.oracle import next_actions, solve

__all__ = ["LivestreamEnvironment", "harness", "next_actions", "solve"]
