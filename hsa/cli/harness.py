"""``hsa harness``: validate, import and show harnesses."""

from __future__ import annotations

from pathlib import Path

import click

from hsa.cli.output import console, fail
from hsa.errors import HarnessValidationError


@click.group("harness")
def group() -> None:
    """Validate, import and inspect harnesses."""


def _harness_dirs(path: Path) -> list[Path]:
    if path.is_file() or (path / "harness.yaml").is_file():
        return [path]
    if path.is_dir():
        return sorted(p.parent for p in path.rglob("harness.yaml"))
    return [path]


@group.command("validate")
@click.argument("path", type=click.Path(path_type=Path))
def validate(path: Path) -> None:
    """Check a harness (directory, harness.yaml or JSON document) against the schema.

    PATH may also be a directory holding several harness directories, as written by
    `hsa harness import`; each is checked. Every problem is printed as `file: json-path: reason`.
    """
    from hsa.harness import problems

    targets = _harness_dirs(path)
    if not targets:
        fail(f"{path}: no harness.yaml found")
    found = []
    for target in targets:
        found.extend(problems(target))
    if found:
        raise HarnessValidationError(found)
    noun = "harness" if len(targets) == 1 else "harnesses"
    console().print(f"ok: {len(targets)} {noun} valid ({path})")
