"""Build configs: validated by the JSON Schema, paths relative to the file, built end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hsa.datasets import build, iter_rows, load_config, parse_config
from hsa.datasets.build import build_schema
from hsa.errors import ConfigError


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


SMALL = {
    "name": "tiny",
    "out": "out",
    "seed": 1,
    "source": {"env": "livestream", "tasks": 12},
    "augment": {"variants_per_trajectory": 2, "batch_size": 8},
}


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        ({"source": {"env": "livestream"}, "sorce": 1}, r"\$", "Additional properties"),
        ({"source": {}}, r"\$\.source", "is not valid under any of the given schemas"),
        (
            {"source": {"env": "livestream", "trajectories": "x.parquet"}},
            r"\$\.source",
            "is valid under each of",
        ),
        (
            {"source": {"env": "livestream"}, "splits": {"tr ain": 1}},
            r"\$\.splits",
            "does not match",
        ),
        (
            {"source": {"env": "livestream"}, "augment": {"batch_size": 0}},
            r"\$\.augment\.batch_size",
            "less than the minimum",
        ),
        (
            {
                "source": {"env": "livestream"},
                "augment": {"recipe": {"rules": [{"rule": "tools.teleport"}]}},
            },
            r"\$\.rules\[0\]",
            "tools.teleport",
        ),
    ],
)
def test_bad_configs_name_the_place(tmp_path: Path, data, where: str, what: str) -> None:
    with pytest.raises(ConfigError, match=rf"build\.yaml: {where}.*{what}"):
        load_config(write(tmp_path, data))


def test_yaml_errors_and_missing_out(tmp_path: Path) -> None:
    path = tmp_path / "build.yaml"
    path.write_text("source: {env: [unclosed\n")
    with pytest.raises(ConfigError, match=r"build\.yaml: line \d+: invalid YAML"):
        load_config(path)
    config = parse_config({"source": {"env": "livestream"}})
    with pytest.raises(ConfigError, match="no output directory"):
        config.out()


def test_schema_is_published() -> None:
    schema = build_schema()
    assert schema["$schema"].endswith("2020-12/schema") and "source" in schema["required"]


def test_a_small_build_end_to_end_and_its_rerun(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, SMALL))
    stages: list[str] = []
    report = build(config, progress=lambda stage, done, total: stages.append(stage))
    out = tmp_path / "out"
    assert report.out == out and report.tasks == 12 and report.verified == 12
    assert {"tasks", "teacher", "augment"} <= set(stages)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"]["total"] == 12 * 3
    assert manifest["config"]["name"] == "tiny" and manifest["config"]["source"]["tasks"] == 12
    rows = list(iter_rows(out))
    assert {r["teacher"] for r in rows} == {"oracle/hsa-oracle"}
    assert all(r["verified"] for r in rows)
    assert (out / "README.md").read_text().startswith("---")
    # a finished build is left as it is
    again = build(config)
    assert again.teacher_skipped and again.augment.complete_already
    # another config into the same directory is refused
    other = load_config(write(tmp_path, {**SMALL, "seed": 2}))
    with pytest.raises(Exception, match="holds another dataset"):
        build(other)


def test_recorded_trajectories_as_source(tmp_path: Path, livestream_table) -> None:
    import pyarrow.parquet as pq

    pq.write_table(livestream_table.slice(0, 10), tmp_path / "recorded.parquet")
    data = {
        "name": "recorded",
        "source": {"trajectories": "recorded.parquet"},
        "augment": {"variants_per_trajectory": 1, "keep_canonical": False},
    }
    report = build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    assert report.augment.rows == 10
    assert not any(r["canonical"] for r in iter_rows(tmp_path / "ds"))
