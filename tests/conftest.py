"""Shared fixtures: where the public corpora live."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# hsa's own rules only, in this process and the commands it runs: a rule plugin installed on the
# machine (a broken one, one in a built-in family) is no part of what the suite tests; a test
# of plugins names its own (registry.PLUGINS_VARIABLE)
os.environ["HSA_PLUGINS"] = ""

# one math thread per process: the suite runs on two worker processes (pytest-xdist) on two
# cores, and torch's default of a thread per core in each made their training tests contend
# (tests/train/test_sft.py: 144 s at the default, 59 s at one thread); the commands the tests
# run inherit it. A setting the caller made is kept.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# bytecode written, as Python does by default: where the environment says not to
# (PYTHONDONTWRITEBYTECODE, which some CI images set), every `hsa` command the tests start
# compiled the package again (about 0.4 s each; tests/cli/test_augment_cli.py took 84 s with
# it set, 71 s without), and the workers rewrote the test modules' asserts again each run
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Ctrl-C as a terminal gives it: a suite started as a background job of a script (``cmd &``)
# gets SIGINT ignored, which its commands inherit, and hsa keeps a signal ignored (as it
# should), so the tests of what a Ctrl-C does would fail there and pass in a terminal
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# property tests check what holds, never how long it takes: an example that runs past
# hypothesis's default deadline (200 ms) on a loaded machine (CI's two cores, two test workers)
# is not a failure, and failed a random draw of tests/harness/test_docs.py once in a run beside
# other jobs; a test that sets its own deadline keeps it
settings.register_profile("hsa", deadline=None)
settings.load_profile("hsa")


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


@pytest.fixture(scope="session")
def refused() -> Iterator[str]:
    """The base URL of a local port that refuses connections: bound for the session and never
    listening (a fixed port such as 9 may have a server on some machine)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def figures(monkeypatch) -> list:
    """The matplotlib figures the card saves, as they are drawn."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    found: list = []
    save = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda self, *a, **k: (found.append(self), save(self, *a, **k))[1]
    )
    return found
