"""Datasets: augmented rows in Parquet shards, their manifest and card, readers and exports.

``augment(open_source(IN), OUT, AugmentConfig(...))`` writes a dataset directory;
``build(load_config(YAML))`` runs a whole build; ``load(DIR)`` reads one as a Polars
``LazyFrame``, ``iter_trl(DIR)`` as TRL conversational rows and ``to_hf(DIR)`` as a Hugging Face
``datasets.Dataset``.
"""

from hsa.datasets.build import BuildConfig, BuildReport, build, load_config, parse_config
from hsa.datasets.export import iter_rows, iter_trl, load, shards, to_hf, trl_row
from hsa.datasets.job import AugmentConfig, AugmentReport, augment
from hsa.datasets.schema import (
    ROW_SCHEMA,
    SCHEMA_VERSION,
    chat_messages,
    conversation,
    trl_messages,
)
from hsa.datasets.source import Source, open_source
from hsa.datasets.variants import read_variants

__all__ = [
    "ROW_SCHEMA",
    "SCHEMA_VERSION",
    "AugmentConfig",
    "AugmentReport",
    "BuildConfig",
    "BuildReport",
    "Source",
    "augment",
    "build",
    "chat_messages",
    "conversation",
    "iter_rows",
    "iter_trl",
    "load",
    "load_config",
    "open_source",
    "parse_config",
    "read_variants",
    "shards",
    "to_hf",
    "trl_messages",
    "trl_row",
]
