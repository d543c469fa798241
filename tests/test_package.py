"""The package stays light: importing hsa and running `hsa --help` loads no heavy framework."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "vllm", "ray", "trl", "datasets")

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))
"""


def _loaded(body: str) -> list[str]:
    code = PROBE.format(body=body, heavy=set(HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_hsa_loads_no_heavy_framework():
    assert _loaded("import hsa, hsa.harness, hsa.envs, hsa.augment") == []


def test_help_loads_no_heavy_framework():
    body = (
        "from hsa.cli import app\n"
        "try:\n    app.main(['--help'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "for name in list(app.commands):\n"
        "    try:\n        app.main([name, '--help'], standalone_mode=False)\n"
        "    except SystemExit:\n        pass\n"
    )
    assert _loaded(body) == []


def test_version():
    out = subprocess.run(
        [sys.executable, "-c", "from hsa.cli import main; main(['--version'])"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0
    assert "hsa, version" in out.stdout
