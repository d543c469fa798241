"""The package root: a light import, a public API that fits on one screen, and its example.

Importing hsa and running `hsa --help` loads no heavy framework; `import hsa` alone loads no
data library either (the names it exports load their area on first use).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hsa
import hsa.errors

HEAVY = ("torch", "transformers", "vllm", "ray", "trl", "datasets")
DATA = ("polars", "pyarrow", "numpy")
ROOT = Path(__file__).resolve().parents[1]
AREAS = ("harness", "envs", "augment", "teachers", "datasets", "pipelines")

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))
"""


def _loaded(body: str, frameworks: tuple[str, ...] = HEAVY) -> list[str]:
    code = PROBE.format(body=body, heavy=set(frameworks))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_hsa_loads_no_heavy_framework():
    assert _loaded("import hsa, hsa.harness, hsa.envs, hsa.augment") == []


def test_import_hsa_loads_no_data_library():
    assert _loaded("import hsa; dir(hsa); hsa.HsaError", HEAVY + DATA) == []


def test_a_public_name_loads_its_area_only_when_used():
    assert _loaded("import hsa; hsa.Harness", (*HEAVY, "polars")) == []
    # the datasets area (pyarrow) loads with its name; polars only when a LazyFrame is made
    loaded = _loaded("import hsa; hsa.scan_dataset", ("pyarrow", "polars"))
    assert "pyarrow" in loaded and "polars" not in loaded


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


# Where each public name comes from: the object ``hsa.NAME`` must be.
HOMES = {
    "Harness": "hsa.harness.model:Harness",
    "load_harness": "hsa.harness.io:load",
    "save_harness": "hsa.harness.io:save",
    "render": "hsa.harness.render:render",
    "parse": "hsa.harness.parse:parse",
    "system_prompt": "hsa.harness.prompt:system_prompt",
    "rule": "hsa.augment.registry:rule",
    "Rewrite": "hsa.augment.rule:Rewrite",
    "Recipe": "hsa.augment.recipe:Recipe",
    "load_recipe": "hsa.augment.recipe:load_recipe",
    "default_recipe": "hsa.augment.recipe:default_recipe",
    "plan": "hsa.augment.planner:plan",
    "pick": "hsa.augment.planner:pick",
    "build": "hsa.pipelines.build:build",
    "load_config": "hsa.pipelines.build:load_config",
    "teach": "hsa.pipelines.teach:teach",
    "TeachConfig": "hsa.teachers.config:TeachConfig",
    "augment_trajectories": "hsa.pipelines.augment:augment",
    "AugmentConfig": "hsa.pipelines.augment:AugmentConfig",
    "open_source": "hsa.datasets.source:open_source",
    "scan_dataset": "hsa.datasets.export:load",
    "to_hf": "hsa.datasets.export:to_hf",
}


def _resolve(home: str) -> object:
    module, _, name = home.partition(":")
    return getattr(importlib.import_module(module), name)


def _errors() -> set[str]:
    found, todo = set(), [hsa.errors.HsaError]
    while todo:
        cls = todo.pop()
        if cls.__module__ == "hsa.errors":
            found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found


def test_the_public_api_is_the_listed_names_and_every_error():
    assert sorted(hsa.__all__) == sorted({*HOMES, *_errors(), "__version__"})
    assert len(hsa.__all__) == len(set(hsa.__all__)) <= 40  # one screen
    for name, home in HOMES.items():
        assert getattr(hsa, name) is _resolve(home), name
    for name in _errors():
        assert getattr(hsa, name) is getattr(hsa.errors, name)
    assert set(hsa.__all__) <= set(dir(hsa))
    star: dict[str, object] = {}
    exec("from hsa import *", star)
    assert set(hsa.__all__) <= set(star)


def test_an_area_package_is_an_attribute_after_a_plain_import():
    # hsa.datasets.to_hf(DIR), as the README writes it, after only `import hsa`
    loaded = _loaded("import hsa; hsa.datasets.iter_trl; hsa.eval", ("hsa",))
    assert "hsa.datasets" in loaded and "hsa.eval" in loaded
    assert "hsa.train" not in loaded  # each only when used
    assert _loaded("import hsa", ("hsa",)) == ["hsa", "hsa._version", "hsa.errors"]


def test_dir_lists_the_area_packages_without_importing_them():
    # a notebook's completion of `hsa.` offers `hsa.datasets`, as the README writes it
    assert _loaded("import hsa; assert 'datasets' in dir(hsa)", ("hsa",)) == [
        "hsa",
        "hsa._version",
        "hsa.errors",
    ]
    assert {"harness", "datasets", "pipelines", "eval", "experiment"} <= set(dir(hsa))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'hsa' has no attribute 'Mapping'"):
        hsa.Mapping  # noqa: B018


def test_type_checkers_see_the_same_names_as_the_lazy_imports():
    tree = ast.parse((ROOT / "hsa" / "__init__.py").read_text("utf-8"))
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    seen = {}
    areas = set()
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            if node.module is None:  # `from . import area`: an area, as an attribute of hsa
                areas.add(alias.name)
                continue
            seen[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    assert set(seen) == set(HOMES)
    assert areas == set(hsa._AREAS)
    for name, home in seen.items():
        assert _resolve(home) is getattr(hsa, name), name


def test_a_name_in_two_areas_is_one_object():
    """No clashing exports: a public name means one thing wherever it is exported."""
    meaning: dict[str, object] = {}
    for area in ("", *AREAS):
        package = importlib.import_module(f"hsa.{area}".rstrip("."))
        for name in package.__all__:
            value = getattr(package, name)
            assert meaning.setdefault(name, value) is value, f"hsa.{area}.{name}"
    assert "Mapping" not in meaning  # the rewrite mapping does not shadow collections.abc's


def test_the_docstring_example_runs():
    code = hsa.__doc__.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) == 5
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    harness = hsa.load_harness(ROOT / "examples" / "rule-package" / "demo-harness")
    variants = hsa.plan(harness, hsa.default_recipe(), seed=0)[:3]
    expected = [f"{v.variant_id} {[t.name for t in v.harness.tools]}" for v in variants]
    assert out.stdout.splitlines() == expected
    assert len({line.split(" ", 1)[1] for line in expected}) > 1  # the variants differ


DEMO = Path(__file__).parents[1] / "examples" / "rule-package" / "demo-harness"


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda h: hsa.render([], "h.yaml"), "harness must be a Harness, got 'h.yaml'"),
        (lambda h: hsa.system_prompt("h.yaml"), "harness must be a Harness, got 'h.yaml'"),
        (lambda h: hsa.save_harness("h", "out"), "harness must be a Harness, got 'h'"),
        (lambda h: hsa.save_harness(h, 5), "path must be a file or folder path, got int"),
        (lambda h: hsa.load_harness(123), "path must be a file or folder path, got int"),
        (lambda h: hsa.scan_dataset(5), "path must be a file or folder path, got int"),
        (lambda h: hsa.load_config({"out": "x"}), "path must be a file or folder path, got dict"),
        (lambda h: hsa.build("b.yaml"), "config must be a BuildConfig, got 'b.yaml'"),
        (lambda h: hsa.plan(h, "r.yaml"), "recipe must be a Recipe, got 'r.yaml'"),
        (lambda h: hsa.render(None, h), "events must be a Sequence, got NoneType"),
        (lambda h: hsa.parse(None, h), "conversation must be a Sequence, got NoneType"),
        (
            lambda h: hsa.plan(hsa.Harness(id="x", tools=["a"]), hsa.default_recipe()),
            "tools[0] must be a Tool, got 'a'",
        ),
        (lambda h: hsa.system_prompt(h.replace(tools=["a"])), "tools[0] must be a Tool, got 'a'"),
    ],
)
def test_a_notebook_users_wrong_argument_is_one_hsa_error(call, says):
    with pytest.raises(hsa.HsaError, match=re.escape(says)):
        call(hsa.load_harness(DEMO))
