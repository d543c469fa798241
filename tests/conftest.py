"""Shared fixtures: where the public corpora live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _external() -> Path:
    override = os.environ.get("HSA_EXTERNAL")
    candidates = [Path(override)] if override else []
    candidates += [ROOT.parent / "shared" / "external", ROOT / "shared" / "external"]
    for candidate in candidates:
        if (candidate / "bfcl").is_dir():
            return candidate
    raise RuntimeError(
        "the public corpora were not found: expected shared/external beside the repository "
        "(or set HSA_EXTERNAL)"
    )


@pytest.fixture(scope="session")
def external() -> Path:
    """The read-only public corpora (BFCL, tau2, agent-skills)."""
    return _external()
