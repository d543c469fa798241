"""Experiments end to end: build both arms' data, train both, evaluate both on held-out tiers."""

from hsa.experiment.config import ExperimentConfig, load_config
from hsa.experiment.run import run

__all__ = ["ExperimentConfig", "load_config", "run"]
