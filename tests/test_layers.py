"""The import-linter contracts in pyproject.toml: kept by the package, broken by a bad import.

``lint-imports`` runs in CI before the tests; here it runs on a copy of ``hsa`` so that a
layer-breaking import -- at module level or inside a function -- is shown to fail it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: import-linter's command, run from this interpreter (a dev dependency: no skip if missing)
LINT = [
    sys.executable,
    "-c",
    "from importlinter.cli import lint_imports_command; lint_imports_command()",
]


def _copy(tmp_path: Path) -> Path:
    """``hsa`` and the contracts of pyproject.toml, alone in ``tmp_path``."""
    shutil.copytree(ROOT / "hsa", tmp_path / "hsa", ignore=shutil.ignore_patterns("__pycache__"))
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    lines = ["[importlinter]", f"root_package = {config['root_package']}"]
    for contract in config["contracts"]:
        lines.append(f"[importlinter:contract:{contract['id']}]")
        for key, value in contract.items():
            if key == "id":
                continue
            if isinstance(value, list):
                value = "".join(f"\n    {item}" for item in value)
            lines.append(f"{key} = {value}")
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n", "utf-8")
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [*LINT, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text("utf-8") + text, "utf-8")


def test_the_package_keeps_every_contract(tmp_path):
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_storage_importing_a_pipeline_breaks_both_contracts(tmp_path):
    root = _copy(tmp_path)
    _append(root / "hsa" / "datasets" / "shards.py", "\n\nimport hsa.pipelines.augment\n")
    result = _lint(root)
    assert result.returncode == 1, result.stdout
    assert "0 kept, 2 broken" in result.stdout
    assert "hsa.datasets.shards -> hsa.pipelines.augment" in result.stdout


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path):
    root = _copy(tmp_path)
    _append(
        root / "hsa" / "envs" / "registry.py",
        "\n\ndef _upward():\n    from hsa.teachers import verify\n\n    return verify\n",
    )
    result = _lint(root)
    assert result.returncode == 1, result.stdout
    assert "hsa.envs.registry -> hsa.teachers" in result.stdout
    assert "datasets is storage" in result.stdout and "KEPT" in result.stdout


def test_siblings_may_not_import_each_other(tmp_path):
    root = _copy(tmp_path)
    _append(root / "hsa" / "train" / "data.py", "\n\nimport hsa.pipelines\n")
    _append(root / "hsa" / "eval" / "report.py", "\n\nimport hsa.train.card\n")
    result = _lint(root)
    assert result.returncode == 1, result.stdout
    assert "hsa.train.data -> hsa.pipelines" in result.stdout
    assert "hsa.eval.report -> hsa.train.card" in result.stdout
