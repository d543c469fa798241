"""Small inputs for dataset tests: livestream oracle trajectories and a recipe of every family."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hsa.augment import Recipe, default_recipe

#: every family, and the protocol switch often enough that text protocols show up
RECIPE = {
    "seed": 3,
    "variants_per_harness": 6,
    "variants_per_trajectory": 2,
    "min_rules": 2,
    "max_rules": 8,
    "rules": [
        {"rule": "skill_ids.rename", "probability": 0.4},
        {"rule": "skill_content.reorder_sections", "probability": 0.3},
        {"rule": "tools.rename", "probability": 0.4},
        {"rule": "tools.rename_params", "probability": 0.4, "params": {"fraction": 0.5}},
        {"rule": "tools.wrap_args", "probability": 0.2},
        {"rule": "tools.enum_values", "probability": 0.3},
        {"rule": "tools.shuffle", "probability": 0.3},
        {"rule": "hooks.wording", "probability": 0.4},
        {"rule": "hooks.position", "probability": 0.4},
        {"rule": "prompt.heading_style", "probability": 0.3},
        {"rule": "prompt.placement", "probability": 0.2},
        {"rule": "protocol.switch", "probability": 0.6},
    ],
}


def recipe() -> Recipe:
    return Recipe.from_dict(RECIPE)


@pytest.fixture(scope="session")
def livestream_table(tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    """Oracle trajectories of 48 livestream tasks, with their task splits (teacher lineage)."""
    from hsa.datasets.source import INPUT_SCHEMA
    from hsa.envs import get_env

    env = get_env("livestream")
    rows = []
    for task in env.tasks()[::60][:48]:
        episode = env.solve(task)
        row = episode.trajectory.to_row()
        row.update(task_id=task.id, split=task.split, teacher="oracle/hsa-oracle")
        row.update(verified=True, reason="solved")
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)


@pytest.fixture
def shards(tmp_path: Path, livestream_table: pa.Table) -> Path:
    """The livestream trajectories as a directory of two Parquet shards."""
    folder = tmp_path / "trajectories"
    folder.mkdir()
    half = livestream_table.num_rows // 2
    pq.write_table(livestream_table.slice(0, half), folder / "part-00000.parquet")
    pq.write_table(livestream_table.slice(half), folder / "part-00001.parquet")
    return folder


__all__ = ["RECIPE", "default_recipe", "recipe"]
