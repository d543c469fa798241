"""hsa: a data engine for Harness-Aware Training.

The names a user needs, importable from ``hsa`` itself (each loads its area on first use, so
``import hsa`` stays light):

- harnesses: ``Harness``, ``load_harness``/``save_harness``, ``render`` (canonical events to
  the chat a model sees), ``parse`` (its inverse), ``system_prompt``;
- rewriting them: the ``rule`` decorator and ``Rewrite`` to write a rule; ``Recipe``,
  ``load_recipe``/``default_recipe`` to say which rules to draw; ``plan`` (a harness's
  variants) and ``pick`` (a trajectory's variants);
- the jobs: ``build``/``load_config`` (``hsa build``), ``teach``/``TeachConfig`` (``hsa
  teach``), ``augment_trajectories``/``AugmentConfig`` (``hsa augment``; ``hsa.augment`` is
  the augmentation package);
- their output: ``open_source`` (trajectories to augment), ``scan_dataset`` (a dataset as a
  Polars ``LazyFrame``), ``to_hf`` (as a Hugging Face ``datasets.Dataset``);
- the errors: ``HsaError`` and one subclass per area.

The variants of a harness, from the repository root:

```python
import hsa

harness = hsa.load_harness("examples/rule-package/demo-harness")
for variant in hsa.plan(harness, hsa.default_recipe(), seed=0)[:3]:
    print(variant.variant_id, [tool.name for tool in variant.harness.tools])
```

Everything else lives in the area packages: ``hsa.harness``, ``hsa.envs``, ``hsa.augment``,
``hsa.teachers``, ``hsa.datasets``, ``hsa.pipelines``.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

from hsa._version import __version__
from hsa.errors import (
    AnotherDataset,
    ConfigError,
    DatasetError,
    EnvError,
    EvalError,
    ExperimentError,
    HarnessError,
    HarnessValidationError,
    HsaError,
    ImportFormatError,
    PlanError,
    ProtocolError,
    RuleError,
    TeacherError,
    TemplateError,
    TrainError,
    UnknownFormatError,
)

# name -> (package, name there); a name is imported on first use (module __getattr__).
_LAZY: dict[str, tuple[str, str]] = {
    "Harness": ("hsa.harness", "Harness"),
    "load_harness": ("hsa.harness", "load_harness"),
    "save_harness": ("hsa.harness", "save_harness"),
    "render": ("hsa.harness", "render"),
    "parse": ("hsa.harness", "parse"),
    "system_prompt": ("hsa.harness", "system_prompt"),
    "rule": ("hsa.augment", "rule"),
    "Rewrite": ("hsa.augment", "Rewrite"),
    "Recipe": ("hsa.augment", "Recipe"),
    "load_recipe": ("hsa.augment", "load_recipe"),
    "default_recipe": ("hsa.augment", "default_recipe"),
    "plan": ("hsa.augment", "plan"),
    "pick": ("hsa.augment", "pick"),
    "build": ("hsa.pipelines", "build"),
    "load_config": ("hsa.pipelines", "load_config"),
    "teach": ("hsa.pipelines", "teach"),
    "TeachConfig": ("hsa.teachers", "TeachConfig"),
    "augment_trajectories": ("hsa.pipelines", "augment"),
    "AugmentConfig": ("hsa.pipelines", "AugmentConfig"),
    "open_source": ("hsa.datasets", "open_source"),
    "scan_dataset": ("hsa.datasets", "scan_dataset"),
    "to_hf": ("hsa.datasets", "to_hf"),
}

#: the area packages, each imported on first use as an attribute of ``hsa``
_AREAS = (
    "harness",
    "envs",
    "augment",
    "teachers",
    "datasets",
    "pipelines",
    "train",
    "eval",
    "experiment",
)

if TYPE_CHECKING:  # what the lazy names are, for type checkers; tests keep the two in step
    from hsa.augment import Recipe, Rewrite, default_recipe, load_recipe, pick, plan, rule
    from hsa.datasets import open_source, scan_dataset, to_hf
    from hsa.harness import Harness, load_harness, parse, render, save_harness, system_prompt
    from hsa.pipelines.augment import AugmentConfig
    from hsa.pipelines.augment import augment as augment_trajectories
    from hsa.pipelines.build import build, load_config
    from hsa.pipelines.teach import teach
    from hsa.teachers import TeachConfig

    # the areas, as attributes of hsa (``hsa.envs.get_env``): ``from . import`` re-exports
    from . import (  # noqa: F401
        augment,
        datasets,
        envs,
        eval,
        experiment,
        harness,
        pipelines,
        teachers,
        train,
    )

__all__ = [
    "AnotherDataset",
    "AugmentConfig",
    "ConfigError",
    "DatasetError",
    "EnvError",
    "EvalError",
    "ExperimentError",
    "Harness",
    "HarnessError",
    "HarnessValidationError",
    "HsaError",
    "ImportFormatError",
    "PlanError",
    "ProtocolError",
    "Recipe",
    "Rewrite",
    "RuleError",
    "TeachConfig",
    "TeacherError",
    "TemplateError",
    "TrainError",
    "UnknownFormatError",
    "__version__",
    "augment_trajectories",
    "build",
    "default_recipe",
    "load_config",
    "load_harness",
    "load_recipe",
    "open_source",
    "parse",
    "pick",
    "plan",
    "render",
    "rule",
    "save_harness",
    "scan_dataset",
    "system_prompt",
    "teach",
    "to_hf",
]


if not TYPE_CHECKING:  # hidden from type checkers, which would take any name as valid

    def __getattr__(name: str) -> Any:
        if name in _AREAS:  # hsa.datasets.to_hf(...) after a plain ``import hsa``
            value = _import_module(f"hsa.{name}")
        elif name in _LAZY:
            package, attribute = _LAZY[name]
            value = getattr(_import_module(package), attribute)
        else:
            raise AttributeError(f"module 'hsa' has no attribute {name!r}")
        globals()[name] = value  # the next access is a plain attribute lookup
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_AREAS))
