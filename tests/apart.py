"""A probe run in a process of its own, for tests of work that once hung (backtracking
regexes, caches thrashed pair by pair): a regression fails at the time limit rather than
holding the suite, and nothing here measures how long the work takes."""

from __future__ import annotations

import subprocess
import sys


def runs_apart(probe: str, *, timeout: float = 60) -> None:
    """Run the Python source ``probe`` in a new interpreter; fail if it raises or runs past
    ``timeout`` seconds."""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
