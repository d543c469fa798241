"""hsa: a data engine for Harness-Aware Training.

The public API is re-exported from the area packages: ``hsa.harness`` (the vocabulary,
render/parse, load/save), ``hsa.envs``, ``hsa.augment``, ``hsa.teachers``, ``hsa.datasets``.
"""

from hsa.errors import HsaError

__version__ = "0.1.0"
__all__ = ["HsaError", "__version__"]
