"""Datasets: storage only -- Parquet shards, the row format, manifests, cards, readers, exports.

``open_source(IN)`` reads canonical trajectories; ``scan_dataset(DIR)`` reads a dataset directory
as a Polars ``LazyFrame``, ``iter_trl(DIR)`` as TRL conversational rows and ``to_hf(DIR)`` as a
Hugging Face ``datasets.Dataset``. The jobs that write datasets (``augment``, ``build``,
``teach``) live in ``hsa.pipelines``. This package imports nothing of hsa but ``hsa.harness``
and ``hsa.errors``.
"""

from hsa.datasets.export import hf_features, iter_rows, iter_trl, to_hf, trl_row
from hsa.datasets.export import load as scan_dataset
from hsa.datasets.export import shards as shard_paths
from hsa.datasets.schema import (
    ROW_SCHEMA,
    SCHEMA_VERSION,
    chat_messages,
    conversation,
    trl_messages,
)
from hsa.datasets.source import Source, open_source

__all__ = [
    "ROW_SCHEMA",
    "SCHEMA_VERSION",
    "Source",
    "chat_messages",
    "conversation",
    "hf_features",
    "iter_rows",
    "iter_trl",
    "open_source",
    "scan_dataset",
    "shard_paths",
    "to_hf",
    "trl_messages",
    "trl_row",
]
