"""Datasets: augmented rows in Parquet shards, their manifest and card, readers and exports."""

from hsa.datasets.schema import (
    ROW_SCHEMA,
    SCHEMA_VERSION,
    chat_messages,
    conversation,
    trl_messages,
)

__all__ = ["ROW_SCHEMA", "SCHEMA_VERSION", "chat_messages", "conversation", "trl_messages"]
