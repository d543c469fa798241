"""Pipelines: the jobs that chain the layers below into datasets.

``augment(open_source(IN), OUT, AugmentConfig(...))`` renders canonical trajectories under
harness variants into a dataset directory; ``teach(TeachConfig(...), OUT)`` runs a teacher
through an environment's tasks and writes verified trajectory shards; ``build(load_config(YAML))``
chains the two (teacher, then augmentation, splits and card), as ``hsa build`` does.
"""

from hsa.pipelines.augment import AugmentConfig, AugmentReport, augment
from hsa.pipelines.build import BuildConfig, BuildReport, build, load_config, parse_config
from hsa.pipelines.teach import TeachIncomplete, TeachReport, teach, teach_async
from hsa.pipelines.variants_file import read_variants

__all__ = [
    "AugmentConfig",
    "AugmentReport",
    "BuildConfig",
    "BuildReport",
    "TeachIncomplete",
    "TeachReport",
    "augment",
    "build",
    "load_config",
    "parse_config",
    "read_variants",
    "teach",
    "teach_async",
]
