"""One config pattern (``hsa.config``): every config is a frozen dataclass with help and a default
per setting, validated when built, read from YAML with unknown keys and wrong types named."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import yaml

from hsa.config import (
    cli_help,
    default_of,
    from_mapping,
    help_of,
    loads_yaml,
    read_yaml,
    same_as,
    schema_problem,
    setting,
    settings_of,
)
from hsa.errors import ConfigError, DatasetError, EvalError, HsaError, TeacherError
from hsa.eval.config import EvalConfig
from hsa.harness import dump_yaml
from hsa.pipelines.augment import AugmentConfig
from hsa.pipelines.build import BuildConfig, SourceConfig, build_schema
from hsa.teachers.backends.openai import OpenAIConfig
from hsa.teachers.backends.transformers import TransformersConfig
from hsa.teachers.backends.vllm import VLLMConfig
from hsa.teachers.config import TeachConfig
from hsa.teachers.request import Sampling
from hsa.teachers.rollout import RolloutConfig
from hsa.teachers.throttle import Backoff, ThrottleConfig

CONFIGS = [
    AugmentConfig,
    BuildConfig,
    SourceConfig,
    TeachConfig,
    RolloutConfig,
    Sampling,
    OpenAIConfig,
    VLLMConfig,
    ThrottleConfig,
    Backoff,
    TransformersConfig,
    EvalConfig,
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_config_is_frozen_with_help_per_setting_and_validates_itself(config: type) -> None:
    params = config.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    for found in settings_of(config):
        assert help_of(config, found.name).strip(), f"{config.__name__}.{found.name} has no help"
    assert "__post_init__" in vars(config), "validation belongs in __post_init__"
    assert not hasattr(config, "check"), "no validation a caller must remember to call"


@pytest.mark.parametrize(
    ("lower", "name", "job_name"),
    [
        (Sampling, "temperature", "temperature"),
        (Sampling, "top_p", "top_p"),
        (Sampling, "max_tokens", "max_tokens"),
        (EvalConfig, "max_steps_per_turn", "max_steps_per_turn"),
        (EvalConfig, "temperature", "temperature"),
        (EvalConfig, "call_format", "call_format"),
        (RolloutConfig, "max_steps_per_turn", "max_steps_per_turn"),
        (RolloutConfig, "repair", "repair"),
        (OpenAIConfig, "concurrency", "concurrency"),
        (OpenAIConfig, "timeout_s", "timeout_s"),
        (OpenAIConfig, "max_retries", "max_retries"),
        (OpenAIConfig, "send_metadata", "send_metadata"),
        (OpenAIConfig, "api_key_header", "api_key_header"),
        (OpenAIConfig, "max_tokens_field", "max_tokens_field"),
        (EvalConfig, "max_tokens_field", "max_tokens_field"),
        (EvalConfig, "api_key_header", "api_key_header"),
        (VLLMConfig, "call_format", "call_format"),
        (Backoff, "base_s", "backoff_s"),
    ],
)
def test_a_default_is_written_once(lower: type, name: str, job_name: str) -> None:
    # the teach job's config owns the default; the configs it feeds share it
    assert default_of(lower, name) == default_of(TeachConfig, job_name)
    assert help_of(lower, name) == help_of(TeachConfig, job_name)


@dataclasses.dataclass(frozen=True, slots=True)
class _Example:
    count: int = setting(3, help="How many.")
    rate: float = setting(0.5, help="How fast.")
    label: str | None = setting(None, help="A label (unset: none).")
    on: bool = setting(False, help="Whether it is on.")
    options: dict[str, Any] = setting(default_factory=dict, help="Extra options.")
    copied: int = same_as(TeachConfig, "samples")

    def __post_init__(self) -> None:
        if self.count < 1:
            raise TeacherError("must be at least 1", where="count")


def test_settings_carry_their_help_and_default() -> None:
    assert help_of(_Example, "count") == "How many."
    assert cli_help(_Example, "count") == "How many.  [default: 3]"
    assert cli_help(_Example, "on") == "Whether it is on.  [default: no]"
    assert cli_help(_Example, "label") == "A label (unset: none)."  # unset says its meaning
    assert default_of(_Example, "options") == {}
    assert _Example().copied == default_of(TeachConfig, "samples")


def test_secret_settings_stay_out_of_repr() -> None:
    config = TeachConfig(backend="openai", base_url="http://h/v1", model="m", api_key="sk-xyz")
    assert "sk-xyz" not in repr(config)


def test_from_mapping_names_unknown_keys_with_the_nearest_known_one() -> None:
    with pytest.raises(TeacherError) as caught:
        from_mapping(_Example, {"cuont": 2}, error=TeacherError, file="x.yaml", root="$.s")
    assert str(caught.value) == "x.yaml: $.s.cuont: unknown setting 'cuont'; did you mean 'count'?"
    with pytest.raises(TeacherError, match="known: copied, count, label, on, options, rate"):
        from_mapping(_Example, {"zzz": 1}, error=TeacherError)


@pytest.mark.parametrize(
    ("data", "path", "expected"),
    [
        ({"seeed": 3}, ["seeed"], "unknown setting 'seeed'; did you mean 'seed'?"),
        (
            {"augment": {"varients_per_trajectory": 3}},
            ["augment", "varients_per_trajectory"],
            "unknown setting 'varients_per_trajectory'; did you mean 'variants_per_trajectory'?",
        ),
        ({"zzzz": 1}, ["zzzz"], "unknown setting 'zzzz'; known: "),
        ({"seed": "x"}, ["seed"], "'x' is not of type 'integer'"),
    ],
)
def test_a_schema_error_names_an_unknown_key_with_the_nearest_allowed_one(
    data: dict[str, Any], path: list[Any], expected: str
) -> None:
    # as from_mapping does for a YAML section, for a file checked against the build schema
    from jsonschema.validators import Draft202012Validator

    config = {"source": {"env": "livestream"}, **data}
    errors = list(Draft202012Validator(build_schema()).iter_errors(config))
    assert len(errors) == 1
    found, message = schema_problem(errors[0])
    assert found == path and message.startswith(expected)


@pytest.mark.parametrize(
    ("data", "where", "expected"),
    [
        ({"count": "3"}, "count", "expected an integer, got '3'"),
        ({"count": True}, "count", "expected an integer, got True"),
        ({"count": None}, "count", "expected an integer, got None"),
        ({"rate": "fast"}, "rate", "expected a finite number, got 'fast'"),
        ({"on": 1}, "on", "expected true or false, got 1"),
        ({"label": 5}, "label", "expected a string or null, got 5"),
        ({"options": [1]}, "options", "expected a mapping, got [1]"),
    ],
)
def test_from_mapping_names_values_of_the_wrong_type(
    data: dict[str, Any], where: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping(_Example, data, error=ConfigError, file="c.yaml")
    assert caught.value.where == where and caught.value.message == expected


def test_from_mapping_accepts_what_fits_and_reports_validation_in_its_own_error() -> None:
    built = from_mapping(_Example, {"count": 2, "rate": 1, "label": None}, error=ConfigError)
    assert built == _Example(count=2, rate=1, label=None)
    with pytest.raises(ConfigError) as caught:
        from_mapping(_Example, {"count": 0}, error=ConfigError, file="c.yaml", root="$.s")
    assert str(caught.value) == "c.yaml: $.s.count: must be at least 1"
    with pytest.raises(ConfigError, match="expected a mapping of settings, got list"):
        from_mapping(_Example, [1], error=ConfigError)


@pytest.mark.parametrize(
    ("config", "changes", "error", "where"),
    [
        (AugmentConfig, {"batch_size": 0}, DatasetError, "batch_size"),
        (AugmentConfig, {"splits": {"train": -1}}, DatasetError, "splits"),
        (AugmentConfig, {"tokenizer": "/no/such/folder"}, DatasetError, "tokenizer"),
        (TeachConfig, {"top_p": 0}, TeacherError, "top_p"),
        (TeachConfig, {"timeout_s": 0}, TeacherError, "timeout_s"),
        (TeachConfig, {"backoff_s": -1}, TeacherError, "backoff_s"),
        (TeachConfig, {"api_key_header": "api key"}, TeacherError, "api_key_header"),
        (TeachConfig, {"max_tokens_field": "max_new_tokens"}, TeacherError, "max_tokens_field"),
        (TeachConfig, {"model": "gpt-x"}, TeacherError, "model"),  # the oracle runs none
        # an argument of the template call itself, not a template variable
        (
            TeachConfig,
            {"chat_template_kwargs": {"tools": []}},
            TeacherError,
            "chat_template_kwargs",
        ),
        (EvalConfig, {"chat_template_kwargs": {"tokenize": 1}}, EvalError, "chat_template_kwargs"),
        (EvalConfig, {"model": "gpt-x"}, EvalError, "model"),  # the oracle policy runs none
        (Sampling, {"max_tokens": 0}, TeacherError, "max_tokens"),
        (RolloutConfig, {"max_steps_per_turn": 0}, TeacherError, "max_steps_per_turn"),
        (ThrottleConfig, {"decrease": 1.5}, TeacherError, "decrease"),
        (Backoff, {"max_s": -1}, TeacherError, "max_s"),
        (SourceConfig, {}, ConfigError, "$.source"),
        (SourceConfig, {"env": "livestream", "tasks": 0}, ConfigError, "$.source.tasks"),
        (BuildConfig, {"teach": {"tasks": 3}}, ConfigError, "$.teach.tasks"),
        (BuildConfig, {"teach": {"concurency": 3}}, ConfigError, "$.teach.concurency"),
    ],
)
def test_an_invalid_config_cannot_be_built(
    config: type, changes: dict[str, Any], error: type[HsaError], where: str
) -> None:
    if config is BuildConfig:
        changes = {"source": SourceConfig(env="livestream"), **changes}
    with pytest.raises(error) as caught:
        config(**changes)
    assert caught.value.where == where


def test_openai_and_vllm_configs_refuse_what_they_cannot_run() -> None:
    with pytest.raises(TeacherError, match="not an http"):
        OpenAIConfig(base_url="ftp://h/v1", model="m")
    # what no request could be sent to is refused here, not by the HTTP client mid-job
    for url, why in [
        ("http://u:secret@127.0.0.1:99999/v1?k=s", "Port out of range"),
        ("http://127.0.0.1:abc/v1", "Port could not be cast"),
        ("http://[::1/v1", "Invalid IPv6 URL"),
        ("http:///v1", "names no host"),
    ]:
        with pytest.raises(TeacherError, match=why) as caught:
            OpenAIConfig(base_url=url, model="m")
        assert "secret" not in str(caught.value)
    for config in (OpenAIConfig, _openai_teach):
        with pytest.raises(TeacherError, match="line break") as caught:
            config(base_url="http://h/v1", model="m", api_key="sk-abc123\r")
        assert "sk-abc" not in str(caught.value)
    with pytest.raises(TeacherError, match="unknown call format"):
        VLLMConfig(model="m", call_format="smoke-signals")


def _schema_node(path: tuple[str, ...]) -> dict[str, Any]:
    node = build_schema()
    for key in path:
        node = node["properties"][key]
    return node


def _schema_settings() -> list[tuple[tuple[str, ...], type, str]]:
    """Each build-config schema property with the config setting it is."""
    out: list[tuple[tuple[str, ...], type, str]] = []
    for name in ("name", "out", "source", "teach", "augment"):
        out.append(((name,), BuildConfig, name))
    out += [(("seed",), AugmentConfig, "seed"), (("splits",), AugmentConfig, "splits")]
    out += [(("source", f.name), SourceConfig, f.name) for f in settings_of(SourceConfig)]
    out += [
        (("augment", f.name), AugmentConfig, f.name)
        for f in settings_of(AugmentConfig)
        if f.name not in ("seed", "splits")  # top-level in the YAML
    ]
    return out


def test_the_build_schema_has_exactly_the_configs_settings() -> None:
    schema = build_schema()
    top = {f.name for f in settings_of(BuildConfig)} - {"file"} | {"seed", "splits"}
    assert set(schema["properties"]) == top
    assert set(_schema_node(("source",))["properties"]) == {
        f.name for f in settings_of(SourceConfig)
    }
    augment = {f.name for f in settings_of(AugmentConfig)} - {"seed", "splits"}
    assert set(_schema_node(("augment",))["properties"]) == augment


@pytest.mark.parametrize(("path", "config", "name"), _schema_settings(), ids=str)
def test_the_build_schema_says_what_the_config_says(path, config, name) -> None:
    node = _schema_node(path)
    assert node["description"] == help_of(config, name)
    try:
        default = default_of(config, name)
    except KeyError:  # a required setting
        default = None
    if default is None or dataclasses.is_dataclass(default) or default == {}:
        assert "default" not in node
    else:
        assert node["default"] == default


def test_bounded_names_each_setting_out_of_its_range() -> None:
    from types import SimpleNamespace

    from hsa.config import bounded

    config = SimpleNamespace(count=0, rate=1.5, label=None)
    assert bounded(config, "count", low=1) == [("count", "must be at least 1, got 0")]
    assert bounded(config, "count", "label", low=0) == []  # label unset: skipped
    assert bounded(config, "rate", low=0, high=1, low_open=True) == [
        ("rate", "must be in (0, 1], got 1.5")
    ]
    assert bounded(config, "count", low=0, low_open=True) == [
        ("count", "must be more than 0, got 0")
    ]
    assert bounded(SimpleNamespace(count=-1), "count", low=0) == [
        ("count", "must not be negative, got -1")
    ]


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (lambda: AugmentConfig(seed="x"), "seed"),
        (lambda: AugmentConfig(splits=["train"]), "splits"),
        (lambda: TeachConfig(temperature="0.7"), "temperature"),
        (lambda: TeachConfig(env_options=None), "env_options"),
        (lambda: EvalConfig(tasks="all"), "tasks"),
        (lambda: TeachConfig(temperature=float("nan")), "temperature"),
        (lambda: EvalConfig(ramp_s=float("inf")), "ramp_s"),
    ],
)
def test_a_config_made_in_code_is_type_checked_as_a_file_is(make, where):
    with pytest.raises(HsaError) as caught:
        make()
    assert caught.value.where == where and "expected" in caught.value.message


def test_augment_refuses_a_run_with_no_row_to_write_or_an_absurd_width():
    with pytest.raises(DatasetError, match="no row to write"):
        AugmentConfig(variants_per_trajectory=0, keep_canonical=False)
    with pytest.raises(DatasetError, match="must be in"):
        AugmentConfig(variants_per_trajectory=10**12)


def test_yaml_reads_dates_and_times_as_the_text_they_are_written_as() -> None:
    text = "day: 2024-01-05\nat: 2001-12-14t21:59:43.10-05:00\ntagged: !!timestamp 2024-01-05\n"
    assert loads_yaml(text, error=HsaError) == {
        "day": "2024-01-05",
        "at": "2001-12-14t21:59:43.10-05:00",
        "tagged": "2024-01-05",
    }


def test_yaml_reads_a_number_with_an_exponent_as_yaml_1_2_and_json_read_it(tmp_path) -> None:
    # YAML 1.1 (PyYAML's rule) reads 1e-3 as text: a config's float setting refused it
    config = tmp_path / "teach.yaml"
    config.write_text("temperature: 1e-3\ntop_p: 9.5E-1\ntimeout_s: 1.2e2\nseed: 0\n")
    teach = TeachConfig.from_dict(read_yaml(config, error=ConfigError), file=str(config))
    assert (teach.temperature, teach.top_p, teach.timeout_s) == (0.001, 0.95, 120.0)
    text = "a: 1E5\nb: -2e+4\nc: .5e1\nd: 1.0e+5\ne: .inf\nf: -.Inf\n"
    assert loads_yaml(text, error=HsaError) == {
        "a": 1e5,
        "b": -2e4,
        "c": 5.0,
        "d": 1e5,
        "e": float("inf"),
        "f": float("-inf"),
    }
    assert math.isnan(loads_yaml("x: .nan", error=HsaError)["x"])
    # what is no number stays the text it is written as
    text = "a: '1e-3'\nb: 1.2.3\nc: 1e\nd: e5\ne: 1e3x\nf: Qwen2.5-7B\ng: 2e-3.5\n"
    assert loads_yaml(text, error=HsaError) == {
        "a": "1e-3",
        "b": "1.2.3",
        "c": "1e",
        "d": "e5",
        "e": "1e3x",
        "f": "Qwen2.5-7B",
        "g": "2e-3.5",
    }
    with pytest.raises(TeacherError, match="temperature: expected a finite number, got inf"):
        TeachConfig.from_dict(loads_yaml("temperature: .inf", error=HsaError))
    # and hsa writes a string that reads so quoted, so that it is read back as a string
    written = {"1e3": "1E5", "b": ["-2e+4", "1.5e3"], "c": 1e-3}
    assert loads_yaml(dump_yaml(written), error=HsaError) == written


def test_yaml_reads_merge_keys_and_still_refuses_a_key_given_twice() -> None:
    # a mapping merged in (``<<: *anchor``) was refused: its tag had no constructor
    text = (
        "rules: [&common {rule: tools.rename, probability: 0.3}, "
        "{<<: *common, rule: tools.namespace}]\n"
    )
    assert loads_yaml(text, error=HsaError) == {
        "rules": [
            {"rule": "tools.rename", "probability": 0.3},
            {"rule": "tools.namespace", "probability": 0.3},
        ]
    }
    # several merged, the mapping's own key first whatever its place: YAML's merge
    text = "a: &a {p: 1, q: 1}\nb: &b {q: 2, r: 2}\nc: {p: 3, <<: [*a, *b]}\n"
    assert loads_yaml(text, error=HsaError)["c"] == {"p": 3, "q": 1, "r": 2}
    for twice in ("a: &a {p: 1}\nb: {<<: *a, q: 1, q: 2}\n", "a: &a {p: 1, p: 2}\nb: {<<: *a}\n"):
        with pytest.raises(ConfigError, match=r"the key '[pq]' is given twice"):
            loads_yaml(twice, error=ConfigError)
    # twice in a mapping written only where it is merged (never read on its own), at any
    # depth: merging kept the last (probability: 0.9) without a word
    merged_twice = {
        "rules: [{<<: &common {rule: tools.rename, probability: 0.3, probability: 0.9}}, "
        "{<<: *common, rule: tools.namespace}]\n": "probability",
        "b: {<<: &a {p: 1, p: 2}}\n": "p",
        "b: {<<: [&a {p: 1, p: 2}]}\n": "p",
        "b: {<<: [{q: 1}, &a {p: 1, p: 2}]}\n": "p",
        "a: &a {<<: {p: 1, p: 2}}\n": "p",
        "a: &a {p: 1}\nb: &b {q: 1}\nc: {<<: *a, <<: *b}\n": "<<",
    }
    for twice, key in merged_twice.items():
        with pytest.raises(ConfigError, match=f"the key '{key}' is given twice"):
            loads_yaml(twice, error=ConfigError)
    # a chain of merges whose middle overrides what it merged is YAML's, and no key twice: read
    # as PyYAML reads it (which of the two a leaf gets differs between PyYAML 6.0.3 and 6.0.4)
    for chain in (
        "base: &b {p: 1}\nmid: &m\n  <<: *b\n  p: 2\nleaf:\n  <<: *m\n  r: 3\n",
        "a: &a {p: 1}\nb: &b {p: 2}\nm: &m {<<: [*a, *b]}\nleaf: {<<: *m}\n",
    ):
        assert loads_yaml(chain, error=ConfigError) == yaml.safe_load(chain)
    with pytest.raises(ConfigError, match="expected a mapping or list of mappings") as err:
        loads_yaml("a: {<<: 5}\n", error=ConfigError)
    assert err.value.where == "line 1"


@pytest.mark.parametrize(
    "nested",
    ["[" * 999 + "]" * 999, "{a: " * 999 + "}" * 999],
    ids=["flow sequences", "flow mappings"],
)
def test_yaml_nested_too_deeply_is_refused_at_its_line(nested) -> None:
    # libyaml's composer recurses in C: 50,000 levels overflowed the stack (SIGSEGV, no word)
    text = f"a: 1\nb:\n  c: {nested}\n"
    with pytest.raises(ConfigError, match="nested more than 1,000 levels deep") as err:
        loads_yaml(text, error=ConfigError, file="h.yaml")
    assert (err.value.file, err.value.where) == ("h.yaml", "line 3")
    within = "a: 1\nb:\n  c: " + "[" * 998 + "]" * 998 + "\n"  # 1,000 levels with b's and the top
    assert loads_yaml(within, error=ConfigError)["a"] == 1


def test_yaml_block_nesting_counts_too() -> None:
    text = "".join(f"{'  ' * i}k:\n" for i in range(1100))
    with pytest.raises(ConfigError, match="nested more than 1,000 levels deep") as err:
        loads_yaml(text, error=ConfigError)
    # where level 1,001 opens; PyYAML 6.0.4's libyaml refuses it itself, a line before
    assert err.value.where in ("line 1001", "line 1000")
    # an explicit key's value, a sequence of sequences on one line: no bracket and no
    # indentation told its depth, and 50,000 levels overflowed the stack again
    with pytest.raises(ConfigError, match="nested more than 1,000 levels deep"):
        loads_yaml("id: acme\n? deep\n: " + "- " * 50_000 + "x\n", error=ConfigError)


def alias_bomb(levels: int, indent: str = "") -> str:
    """YAML whose line ``i + 1`` holds ``a{i}``: nine aliases of ``a{i-1}`` (9**levels values)."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * 9)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "".join(f"{indent}{line}\n" for line in lines)


def test_yaml_aliases_standing_for_too_many_values_are_refused_at_the_alias() -> None:
    # a 7-level bomb (1,443 bytes of harness.yaml) read as shared lists, then every walk of
    # the value read went through its 4.8 million values: 13 s and 572 MB (10 levels: 19 GB)
    with pytest.raises(ConfigError, match=r"the alias \*a5 takes the values aliases repeat") as err:
        loads_yaml(alias_bomb(7), error=ConfigError, file="h.yaml")
    assert (err.value.file, err.value.where) == ("h.yaml", "line 7")
    assert "past 1,000,000" in err.value.message


def test_yaml_aliases_are_counted_as_often_as_they_are_reached(monkeypatch) -> None:
    from hsa import config

    def count(text: str) -> int:
        return config.count_aliased(yaml.parse(text, Loader=yaml.SafeLoader))

    assert count("a: 1\nb: [1, {c: 2}]\n") == 0
    # each alias of a: the list, 1, the mapping, c and 2
    assert count("a: &a [1, {c: 2}]\nb: *a\nc: [*a, *a]\n") == 3 * 5
    assert count("a: &a [x]\nb: &b [*a, *a]\nc: [*b, *b]\n") == 2 * 2 + 2 * (1 + 2 * 2)
    assert count("d: &d {p: 1}\ne: {<<: *d, q: 2}\n") == 3
    sizes = [10]  # a0's list and its nine values; then each list and its nine aliases
    for _ in range(5):
        sizes.append(1 + 9 * sizes[-1])
    assert count(alias_bomb(6)) == 9 * sum(sizes[:-1]) == 672_588
    # up to the cap read, one value past it refused
    text = "a: &a [x, y]\nb: [*a, *a, *a]\n"  # 9 values repeated
    monkeypatch.setattr(config, "YAML_ALIASED_VALUES", 9)
    assert loads_yaml(text, error=ConfigError)["b"] == [["x", "y"]] * 3
    monkeypatch.setattr(config, "YAML_ALIASED_VALUES", 8)
    with pytest.raises(ConfigError, match=r"the alias \*a takes .* past 8 ") as err:
        loads_yaml(text, error=ConfigError)
    assert err.value.where == "line 2"


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [1, *a]\n",
        "a: &a\n  b: [1]\n  c: *a\n",
        "a: &a {<<: *a, p: 1}\n",  # a mapping merged into itself
        "a: &a {p: 1, q: {<<: [*a]}}\n",
    ],
)
def test_a_yaml_alias_inside_its_own_anchor_is_refused_at_its_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"the alias \*a is inside its own anchor &a") as err:
        loads_yaml("x: 1\n" + text, error=ConfigError, file="c.yaml")
    line = 2 + next(i for i, each in enumerate(text.splitlines()) if "*a" in each)
    assert (err.value.file, err.value.where) == ("c.yaml", f"line {line}")


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        ("a: &x 1\nb: &x 2\n", "line 2", "found duplicate anchor"),
        ("x: 1\na: [1, 2\n", "line 3", "while parsing a flow sequence at line 2, "),
    ],
)
def test_a_yaml_error_says_what_it_was_reading_where(text: str, where: str, reason: str) -> None:
    # (PyYAML's problem alone is "second occurrence" for an anchor given twice)
    with pytest.raises(ConfigError) as err:
        loads_yaml(text, error=ConfigError, file="c.yaml")
    assert err.value.where == where and err.value.message.startswith(f"invalid YAML: {reason}")
    if "anchor" in text:
        assert err.value.message.endswith("first occurrence at line 1, second occurrence")


def _openai_teach(**settings: Any) -> TeachConfig:
    return TeachConfig(backend="openai", **settings)


def test_yaml_past_what_python_reads_is_one_error() -> None:
    from hsa.config import loads_yaml

    with pytest.raises(ConfigError, match="4,300 digits") as caught:
        loads_yaml("seed: 1" + "0" * 5000, error=ConfigError, file="c.yaml")
    assert caught.value.file == "c.yaml"


def test_content_hash_is_the_content_of_a_file_or_of_every_file_of_a_folder(tmp_path):
    import hashlib

    from hsa.config import content_hash

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.json").write_bytes(b"{}")
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"[]")
    assert content_hash(tmp_path / "d" / "a.json") == hashlib.sha256(b"{}").hexdigest()
    folder = content_hash(tmp_path / "d")
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"[1]")
    assert content_hash(tmp_path / "d") != folder
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"[]")
    assert content_hash(tmp_path / "d") == folder
    (tmp_path / "d" / "sub" / "b.json").rename(tmp_path / "d" / "sub" / "c.json")
    assert content_hash(tmp_path / "d") != folder  # (a file's name is part of it)
    with pytest.raises(FileNotFoundError):
        content_hash(tmp_path / "missing")


def test_a_folder_s_content_leaves_out_hidden_entries_and_the_output_of_hsa_jobs(tmp_path):
    # (an editor's swap file, .DS_Store, a job's .hsa/lock or its --out inside the folder
    # changed the hash of the folder it was in)
    import hashlib

    from hsa.config import content_hash, files_hash, folder_files

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.json").write_bytes(b"{}")
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"[]")
    folder = content_hash(tmp_path / "d")
    for name in (".DS_Store", ".a.json.swp", "sub/.hidden", ".git/config", ".hsa/lock"):
        (tmp_path / "d" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "d" / name).write_bytes(b"x")
    (tmp_path / "d" / "run" / ".hsa").mkdir(parents=True)  # a job's --out
    (tmp_path / "d" / "run" / "teach.json").write_bytes(b"{}")
    assert content_hash(tmp_path / "d") == folder
    assert [p.name for p in folder_files(tmp_path / "d")] == ["a.json", "b.json"]
    # a linked folder is read through (a link back up is not followed)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "c.json").write_bytes(b"1")
    (tmp_path / "d" / "linked").symlink_to(tmp_path / "shared")
    (tmp_path / "d" / "sub" / "up").symlink_to(tmp_path / "d")
    assert [p.name for p in folder_files(tmp_path / "d")] == ["a.json", "c.json", "b.json"]
    linked = content_hash(tmp_path / "d")
    (tmp_path / "shared" / "c.json").write_bytes(b"2")
    assert content_hash(tmp_path / "d") != linked
    # one file under the empty name is its content alone; under a name, its name counts too
    file = tmp_path / "d" / "a.json"
    assert files_hash({"": file}) == hashlib.sha256(b"{}").hexdigest() == content_hash(file)
    assert files_hash({"x.json": file}) != files_hash({"y.json": file})
    assert files_hash({"x.json": file}, stand_ins={"x.json": b"[]"}) == files_hash(
        {"x.json": tmp_path / "d" / "sub" / "b.json"}
    )
