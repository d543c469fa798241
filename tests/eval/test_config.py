"""``EvalConfig``: defaults, validation naming the setting, the hash of what decides scores."""

from __future__ import annotations

import dataclasses
import json

import pytest

from hsa.errors import EvalError
from hsa.eval.config import POLICIES, SUITES, EvalConfig
from hsa.teachers.config import TeachConfig


def test_defaults_are_valid():
    config = EvalConfig()
    assert config.policy == "oracle" and config.suites == ("canonical", "variants")
    assert config.split == "test" and config.tasks is None
    assert config.label == "oracle/hsa-oracle"
    assert set(config.suites) <= set(SUITES)


@pytest.mark.parametrize(
    ("given", "suites"),
    [
        ("canonical,variants", ("canonical", "variants")),
        (" bfcl , canonical ,bfcl,", ("canonical", "bfcl")),
        (["variants", "canonical"], ("canonical", "variants")),
        (("ifeval", "firstcall", "variants"), ("variants", "firstcall", "ifeval")),
    ],
)
def test_suites_as_text_or_list_become_a_tuple_in_suites_order(given, suites):
    assert EvalConfig(suites=given).suites == suites
    assert EvalConfig.from_dict({"suites": given}).suites == suites


def test_output_hash_ignores_the_order_suites_are_given_in():
    one = EvalConfig(suites="variants,canonical")
    assert one.output_hash() == EvalConfig(suites="canonical,variants").output_hash()
    assert one.public_dict()["suites"] == ["canonical", "variants"]


@pytest.mark.parametrize("spelled", ["tiny/", "./tiny", "tiny//", "sub/../tiny"])
def test_a_local_model_folder_however_spelled_is_one_run(spelled):
    for policy in ("transformers", "vllm"):
        config = EvalConfig(policy=policy, model=spelled)
        assert config.model == "tiny"
        assert config.output_hash() == EvalConfig(policy=policy, model="tiny").output_hash()
        assert config.teach_config().model == "tiny"
    assert TeachConfig(backend="transformers", model=spelled).model == "tiny"
    # a served model's name is the server's to spell
    served = EvalConfig(policy="openai", base_url="http://x/v1", model="org/m/")
    assert served.model == "org/m/"


@pytest.mark.parametrize(
    ("settings", "named", "says"),
    [
        ({"suites": "canonical,nope"}, "suites", "nope"),
        ({"suites": []}, "suites", "no suite given: name one or more of canonical"),
        ({"policy": "gpt"}, "policy", "gpt"),
        ({"policy": "openai", "model": "m"}, "base_url", "base URL"),
        ({"policy": "transformers"}, "model", "needs a model"),
        ({"policy": "vllm"}, "model", "needs a model"),
        ({"tasks": 0}, "tasks", "at least 1"),
        ({"split": "nope"}, "split", "nope"),
        ({"bootstrap": 10}, "bootstrap", "at least 100"),
        ({"top_p": 0}, "top_p", "(0, 1]"),
        ({"seed": -1}, "seed", "must not be negative"),
    ],
)
def test_invalid_settings_are_refused_naming_the_setting(settings, named, says):
    with pytest.raises(EvalError) as caught:
        EvalConfig(**settings)
    assert caught.value.where == named
    assert named in str(caught.value) and says in str(caught.value)
    with pytest.raises(EvalError) as again:
        EvalConfig.from_dict(settings, file="eval.yaml")
    assert str(again.value).startswith(f"eval.yaml: {named}: ")


def test_from_dict_refuses_an_unknown_key_with_a_hint():
    with pytest.raises(EvalError) as caught:
        EvalConfig.from_dict({"seeds": 3}, file="eval.yaml")
    text = str(caught.value)
    assert "eval.yaml" in text and "unknown setting 'seeds'" in text
    assert "did you mean 'seed'?" in text


def test_from_dict_refuses_a_value_of_the_wrong_type():
    with pytest.raises(EvalError) as caught:
        EvalConfig.from_dict({"tasks": "ten"})
    assert caught.value.where == "tasks" and "an integer" in str(caught.value)


def test_public_dict_leaves_out_the_api_key():
    config = EvalConfig(
        policy="openai", model="m", base_url="http://127.0.0.1:8000/v1", api_key="sk-secret"
    )
    public = config.public_dict()
    assert "api_key" not in public and "sk-secret" not in json.dumps(public)
    assert public["suites"] == ["canonical", "variants"] and public["model"] == "m"
    assert set(public) == {f.name for f in dataclasses.fields(EvalConfig)} - {"api_key"}


def test_output_hash_ignores_how_fast_and_follows_what_scores():
    base = EvalConfig()
    assert EvalConfig(concurrency=1).output_hash() == base.output_hash()
    assert EvalConfig(concurrency=64, timeout_s=5.0).output_hash() == base.output_hash()
    assert EvalConfig(seed=1).output_hash() != base.output_hash()
    assert EvalConfig(tasks=10).output_hash() != base.output_hash()
    assert EvalConfig(suites="canonical").output_hash() != base.output_hash()


def test_output_hash_follows_the_recipe_file_content(tmp_path):
    recipe = tmp_path / "heldout.yaml"
    recipe.write_text("rules: [{rule: tools.shuffle}]\n", "utf-8")
    config = EvalConfig(recipe=str(recipe))
    before = config.output_hash()
    assert config.output_hash() == before
    recipe.write_text("rules: [{rule: tools.rename}]\n", "utf-8")
    assert config.output_hash() != before


def test_output_hashes_follow_the_versions_of_the_recipes_rules(tmp_path, monkeypatch):
    from hsa.augment import registry

    recipe = tmp_path / "heldout.yaml"
    recipe.write_text("rules: [{rule: tools.shuffle}]\n", "utf-8")
    configs = [EvalConfig(recipe=str(recipe)), TeachConfig(recipe=str(recipe)), EvalConfig()]
    before = [c.output_hash() for c in configs]
    bumped = dataclasses.replace(registry.get("tools.shuffle"), version="99")
    monkeypatch.setitem(registry._RULES, "tools.shuffle", bumped)
    after = [c.output_hash() for c in configs]
    # the built-in held-out recipe draws no tools.shuffle: its evaluations are the same
    assert after[0] != before[0] and after[1] != before[1] and after[2] == before[2]


#: a valid (policy, model, base_url) for each policy
BACKENDS = [
    ("oracle", None, None),
    ("fixed-oracle", None, None),
    ("openai", "served", "http://127.0.0.1:8000/v1"),
    ("vllm", "org/model", None),
    ("transformers", "/models/tiny", None),
]


def test_every_policy_is_covered_below():
    assert [policy for policy, _, _ in BACKENDS] == list(POLICIES)


@pytest.mark.parametrize(("policy", "model", "base_url"), BACKENDS)
def test_teach_config_maps_policy_to_backend(policy, model, base_url):
    config = EvalConfig(
        policy=policy,
        model=model,
        base_url=base_url,
        api_key="k",
        api_key_header="api-key",
        temperature=0.7,
        seed=5,
        concurrency=3,
        call_format="hermes",
    )
    teach = config.teach_config()
    assert isinstance(teach, TeachConfig)
    assert teach.backend == policy
    assert (teach.model, teach.base_url, teach.api_key) == (model, base_url, "k")
    assert teach.api_key_header == "api-key"
    assert (teach.temperature, teach.seed, teach.concurrency) == (0.7, 5, 3)
    assert teach.env == config.env and teach.call_format == "hermes"


def test_credentials_in_the_base_url_are_never_written_down():
    config = EvalConfig(policy="openai", model="m", base_url="http://user:secret@host:8000/v1?k=x")
    assert config.public_dict()["base_url"] == "http://host:8000/v1"
    assert "secret" not in json.dumps(config.public_dict())


def test_chat_template_and_engine_arguments_reach_the_backend_and_the_hash_when_set():
    from hsa.envs import get_env
    from hsa.teachers.make import make_backend

    kwargs = {"enable_thinking": False}
    config = EvalConfig(policy="vllm", model="m", chat_template_kwargs=kwargs, vllm_args={"a": 1})
    teach = config.teach_config()
    assert teach.chat_template_kwargs == kwargs and teach.vllm_args == {"a": 1}
    backend = make_backend(teach, get_env("livestream"), {})  # the engine loads on first use
    assert backend.config.chat_template_kwargs == kwargs
    assert backend.config.engine_args == {"a": 1}
    local = make_backend(
        dataclasses.replace(teach, backend="transformers"), get_env("livestream"), {}
    )
    assert local.config.chat_template_kwargs == kwargs
    # set, the arguments change what is scored; unset, the hashes are those of before them
    plain = EvalConfig(policy="vllm", model="m")
    assert config.output_hash() != plain.output_hash()
    assert dataclasses.replace(config, vllm_args={}).output_hash() != plain.output_hash()
    assert dataclasses.replace(config, chat_template_kwargs={}).output_hash() == plain.output_hash()
    assert "chat_template_kwargs" not in plain.teach_config().output_dict()
    assert teach.output_dict()["chat_template_kwargs"] == kwargs
