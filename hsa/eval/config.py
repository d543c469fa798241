"""``EvalConfig``: what an evaluation runs -- the model under test, the suites, the tasks."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hsa.config import bounded, from_mapping, refuse, same_as, setting, settings_hash, typed
from hsa.envs.base import SPLITS
from hsa.errors import EvalError
from hsa.teachers.config import (
    BACKENDS,
    RAMP_MAX,
    TIMEOUT_MAX,
    TeachConfig,
    code_versions,
    corpus_identity,
    local_model,
    max_tokens_field_problems,
    public_url,
    template_kwargs_problems,
)

#: the suites, in the order a run reports them
SUITES = ("canonical", "variants", "firstcall", "bfcl", "ifeval")
#: the models an evaluation can put under test: the teacher backends
POLICIES = BACKENDS

#: settings that change what a run scores (not how fast it runs, nor where the server is)
_OUTPUT_FIELDS = (
    "env",
    "env_options",
    "policy",
    "model",
    "suites",
    "tasks",
    "split",
    "variants",
    "recipe",
    "ifeval_data",
    "seed",
    "max_steps_per_turn",
    "repair",
    "temperature",
    "top_p",
    "max_tokens",
    "call_format",
)


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """An evaluation run. The same names are used in YAML and as ``hsa eval run`` flags."""

    env: str = setting("livestream", help="The environment whose tasks are evaluated.")
    env_options: Mapping[str, Any] = setting(
        default_factory=dict, help="Options of the environment (its seed, a corpus path)."
    )
    policy: str = setting(
        "oracle",
        help="The model under test: oracle, fixed-oracle (the oracle as a model trained on the "
        "canonical harness only), openai (a server: needs base_url and model), vllm or "
        "transformers (a local model folder).",
    )
    model: str | None = same_as(TeachConfig, "model")
    base_url: str | None = same_as(TeachConfig, "base_url")
    api_key: str | None = same_as(TeachConfig, "api_key")
    suites: tuple[str, ...] = setting(
        ("canonical", "variants"),
        help="Suites to run, given in any order and run and reported in this one: canonical "
        "(the environment's own harness), variants (held-out harness variants), firstcall (the "
        "first reply to each task under its harness and variants, scored name / argument keys "
        "/ exact call), bfcl (BFCL's format-sensitivity configurations), ifeval (general "
        "instruction following, scored by lm-eval's IFEval checker; needs lm-eval and "
        "ifeval_data).",
    )
    tasks: int | None = setting(
        None, help="Sample N tasks of the split, the same ones for every suite (unset: all)."
    )
    split: str = setting("test", help="The split whose tasks are evaluated.")
    variants: int = setting(4, help="Harness variants each task runs under in the variants suite.")
    recipe: str | None = setting(
        None,
        help="Held-out recipe the variants are drawn from (unset: hsa's built-in held-out "
        "recipe, examples/eval-heldout.yaml).",
    )
    ifeval_data: str | None = setting(
        None, help="IFEval's prompts, a local JSONL file (google/IFEval), for the ifeval suite."
    )
    seed: int = setting(0, help="Seed of task sampling, variant drawing and sampling.")
    task_seed: int | None = setting(
        None,
        help="Seed of task sampling alone (unset: --seed): runs with other seeds then evaluate "
        "the same tasks.",
    )
    concurrency: int = setting(16, help="Episodes and requests in flight.")
    max_steps_per_turn: int = same_as(TeachConfig, "max_steps_per_turn")
    repair: bool = same_as(TeachConfig, "repair")
    temperature: float = same_as(TeachConfig, "temperature")
    top_p: float = same_as(TeachConfig, "top_p")
    max_tokens: int | None = same_as(TeachConfig, "max_tokens")
    max_tokens_field: str = same_as(TeachConfig, "max_tokens_field")
    timeout_s: float = same_as(TeachConfig, "timeout_s")
    max_retries: int = same_as(TeachConfig, "max_retries")
    send_metadata: bool = same_as(TeachConfig, "send_metadata")
    api_key_header: str = same_as(TeachConfig, "api_key_header")
    ramp_s: float = same_as(TeachConfig, "ramp_s")
    call_format: str = same_as(TeachConfig, "call_format")
    chat_template_kwargs: Mapping[str, Any] = same_as(TeachConfig, "chat_template_kwargs")
    vllm_args: Mapping[str, Any] = same_as(TeachConfig, "vllm_args")
    cache: str | None = setting(None, help="Request cache file (unset: OUT/cache.sqlite).")
    bootstrap: int = setting(2000, help="Bootstrap resamples of the tasks for each interval.")

    def __post_init__(self) -> None:
        refuse(typed(self), EvalError)
        object.__setattr__(self, "model", local_model(self.policy, self.model))
        problems = []
        if self.policy not in POLICIES:
            problems.append(("policy", f"unknown policy {self.policy!r}: {', '.join(POLICIES)}"))
        if self.policy == "openai" and not self.base_url:
            problems.append(("base_url", "the openai policy needs a base URL"))
        if self.policy in ("openai", "vllm", "transformers") and not self.model:
            problems.append(("model", f"the {self.policy} policy needs a model"))
        if isinstance(self.suites, str | list):
            object.__setattr__(self, "suites", _suites(self.suites))
        unknown = [s for s in self.suites if s not in SUITES]
        if unknown:
            problems.append(
                ("suites", f"unknown suite(s) {', '.join(unknown)}: {', '.join(SUITES)}")
            )
        elif not self.suites:
            problems.append(("suites", f"no suite given: name one or more of {', '.join(SUITES)}"))
        else:  # in SUITES order: ``a,b`` and ``b,a`` are one run, written and reported alike
            object.__setattr__(self, "suites", tuple(s for s in SUITES if s in self.suites))
        if self.split not in SPLITS:
            problems.append(("split", f"unknown split {self.split!r}: {', '.join(SPLITS)}"))
        problems += bounded(self, "temperature", "max_retries", "seed", low=0)
        problems += bounded(self, "ramp_s", low=0, high=RAMP_MAX)
        problems += bounded(self, "timeout_s", low=0, high=TIMEOUT_MAX, low_open=True)
        problems += bounded(self, "top_p", low=0, high=1, low_open=True)
        problems += bounded(
            self, "tasks", "variants", "concurrency", "max_steps_per_turn", "max_tokens", low=1
        )
        problems += bounded(self, "bootstrap", low=100)
        problems += template_kwargs_problems(self.chat_template_kwargs)
        problems += max_tokens_field_problems(self.max_tokens_field)
        if self.policy in ("oracle", "fixed-oracle") and self.model:
            # reports name the model under test policy/model: a model it never ran would be false
            problems.append(("model", f"the {self.policy} policy runs no model; leave it out"))
        refuse(problems, EvalError)

    @property
    def model_name(self) -> str:
        return self.model or f"hsa-{self.policy}"

    @property
    def label(self) -> str:
        """How reports name the model under test: ``policy/model``."""
        return f"{self.policy}/{self.model_name}"

    def teach_config(self) -> TeachConfig:
        """The backend settings as ``hsa.teachers.make.make_backend`` takes them."""
        return TeachConfig(
            env=self.env,
            env_options=dict(self.env_options),
            backend=self.policy,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            api_key_header=self.api_key_header,
            seed=self.seed,
            concurrency=self.concurrency,
            max_steps_per_turn=self.max_steps_per_turn,
            repair=self.repair,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            max_tokens_field=self.max_tokens_field,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            send_metadata=self.send_metadata,
            ramp_s=self.ramp_s,
            call_format=self.call_format,
            chat_template_kwargs=dict(self.chat_template_kwargs),
            vllm_args=dict(self.vllm_args),
        )

    def public_dict(self) -> dict[str, Any]:
        """The config as it may be written down: no API key, no credentials in the URL."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("api_key")
        out["env_options"] = dict(self.env_options)
        out["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        out["vllm_args"] = dict(self.vllm_args)
        out["base_url"] = public_url(self.base_url)
        out["suites"] = list(self.suites)
        return json.loads(json.dumps(out, default=str))

    def output_hash(self) -> str:
        """A hash of the settings that decide the scores (with the content of the recipe file
        and of the corpus ``env_options.path`` names: ``corpus_identity``) and of the versions
        of hsa's code that decide them (``code_versions``: the held-out variants always drawn)."""
        from hsa.eval.suites import heldout_recipe

        public = self.public_dict()
        chosen = {name: public[name] for name in _OUTPUT_FIELDS}
        chosen["env_options"] = corpus_identity(self.env, public["env_options"])
        if self.task_seed is not None:  # (unset, it leaves the hash as it was before it)
            chosen["task_seed"] = self.task_seed
        if self.chat_template_kwargs:  # (likewise)
            chosen["chat_template_kwargs"] = public["chat_template_kwargs"]
        chosen |= code_versions(self.env, lambda: heldout_recipe(self.recipe), variants=True)
        return settings_hash(chosen, files=("recipe", "ifeval_data"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str | None = None) -> EvalConfig:
        """A config from a mapping (a YAML ``eval:`` section), unknown keys refused."""
        data = dict(data)
        if "suites" in data:
            data["suites"] = _suites(data["suites"])
        config: EvalConfig = from_mapping(cls, data, error=EvalError, file=file)
        return config


def _suites(value: Any) -> tuple[str, ...]:
    """Suites from ``a,b`` text or a list, in the order given, each once (``EvalConfig``
    then puts them in ``SUITES`` order)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        name = str(item).strip()
        if name and name not in out:
            out.append(name)
    return tuple(out)
