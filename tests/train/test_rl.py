"""HSA-RL: environment rewards under harness variants, the model's tokens, GRPO end to end."""

from __future__ import annotations

import asyncio
import json
import shutil
from types import SimpleNamespace

import pytest
import torch

from hsa.augment import get_rule
from hsa.augment.planner import (
    PLAN_VERSION,
    Variant,
    apply_chain,
    canonical_variant,
    variant_id,
)
from hsa.augment.recipe import default_recipe
from hsa.envs.registry import get
from hsa.errors import TrainError
from hsa.harness.render import RENDER_VERSION
from hsa.teachers.config import added_hooks_version
from hsa.teachers.oracle import FixedOracleResponder, OracleBackend, OracleResponder
from hsa.teachers.rollout import RolloutConfig, RolloutSpec, rollout
from hsa.train.rl import (
    ROLLOUT_LOG,
    PolicyBackend,
    RlSettings,
    kl_reference,
    left_out_of,
    opening,
    prompt_key,
    prompts_of,
    rewards_of,
    run_inputs,
    run_versions,
    train_rl,
)
from tests.tinymodels import NO_TOOLS_TEMPLATE, qwen_model, qwen_tokenizer


@pytest.fixture(scope="module")
def env():
    return get("livestream")


@pytest.fixture(scope="module")
def renamed(env) -> Variant:
    harness = env.harness()
    chain = [(get_rule("tools.rename"), {"style": "synonym"})]
    rewrite, applied = apply_chain(harness, chain, seed=0)
    vid = variant_id(harness, applied, 0, None)
    return Variant(vid, harness.id, applied, rewrite.harness, rewrite.mapping)


def play(env, task, variant, backend):
    spec = RolloutSpec("rl/test", task, variant)
    return asyncio.run(rollout(spec, env, backend, RolloutConfig()))


def test_the_variants_names_are_rewarded_over_the_canonical_ones(env, renamed):
    """The oracle's calls under the variant's names score; the same calls by canonical names
    under a variant that renamed them do not."""
    lookup = {renamed.variant_id: renamed}
    task = next(
        t
        for t in env.tasks("train")
        if t.kind == "single_tool"
        and all(
            renamed.mapping.tool_name(c["tool"]) != c["tool"]
            for c in t.ground_truth["required_calls"]
        )
    )
    right = play(env, task, renamed, OracleBackend(OracleResponder(env, variants=lookup)))
    wrong = play(env, task, renamed, OracleBackend(FixedOracleResponder(env, variants=lookup)))
    assert rewards_of(right) == (1.0, 1.0)
    environment, form = rewards_of(wrong)
    assert environment < 1.0 and form == 0.0
    # an episode the backend cut off read no reply: no format reward (it was 1)
    import dataclasses

    for ended in ("backend", "error"):
        assert rewards_of(dataclasses.replace(right, ended=ended))[1] == 0.0


def test_an_unknown_call_format_is_refused_at_its_key():
    # it trained to the end on episodes the backend ended at their first reply
    from hsa.errors import TrainError
    from hsa.train.rl import RlSettings

    with pytest.raises(TrainError, match=r"call_format: unknown call format 'nope': hermes"):
        RlSettings(call_format="nope")


def test_a_negative_seed_is_refused_at_its_key():
    from hsa.errors import TrainError
    from hsa.train.rl import RlSettings

    with pytest.raises(TrainError, match=r"seed: must not be negative, got -1"):
        RlSettings(seed=-1)


class Scripted:
    """A stand-in causal LM that 'generates' the given texts in turn, with their scores."""

    def __init__(self, tokenizer, texts):
        self.tokenizer = tokenizer
        self.replies = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        self.device = torch.device("cpu")
        self.contexts: list[list[int]] = []

    def generate(self, context, generation_config, **_):
        assert generation_config.repetition_penalty == 1.0  # none of the checkpoint's own
        self.contexts.append(context[0].tolist())
        ids = self.replies[len(self.contexts) - 1][: generation_config.max_new_tokens]
        scores = [torch.zeros(1, len(self.tokenizer)) for _ in ids]
        sequences = torch.tensor([context[0].tolist() + ids])
        return SimpleNamespace(sequences=sequences, scores=scores)


def _scripted_search(env):
    """A single-tool task under the canonical harness, the two replies that solve it (a search
    call, then an answer) and a tokenizer that spells them."""
    canonical = canonical_variant(env.harness())
    task = next(t for t in env.tasks("train") if t.kind == "single_tool")
    query = json.dumps({"name": "search_products", "arguments": {"query": "lamp"}})
    texts = [f"<tool_call>\n{query}\n</tool_call><|im_end|>", "Done.<|im_end|>"]
    tokenizer = qwen_tokenizer([*texts, "<tool_response> lamp search results"])
    return canonical, task, texts, tokenizer


def test_the_model_generates_from_exactly_the_tokens_it_is_trained_on(env):
    from trl.chat_template_utils import get_training_chat_template

    canonical, task, texts, tokenizer = _scripted_search(env)
    model = Scripted(tokenizer, texts)
    backend = PolicyBackend(
        model,
        tokenizer,
        template=get_training_chat_template(tokenizer),
        temperature=1.0,
        budget=100_000,
        call_format="hermes",
    )
    result = play(env, task, canonical, backend)
    kinds = [s.model for s in backend.segments]
    assert kinds == [True, False, True]
    between = tokenizer.decode(backend.segments[1].ids)
    assert "<tool_response>" in between and "<|im_start|>assistant" in between
    # the second step was generated from the prompt, the first reply and what came between
    first, added = backend.segments[0].ids, backend.segments[1].ids
    assert model.contexts[1] == backend.prompt_ids + first + added
    assert result.ended == "answered"


def test_a_reply_cut_off_at_the_token_budget_is_truncated_and_earns_no_format_reward(env):
    # it read as a clean answer: "ended": "answered", format reward 1
    from trl.chat_template_utils import get_training_chat_template

    canonical, task, _, tokenizer = _scripted_search(env)
    answer = "Done.<|im_end|>"
    whole = len(tokenizer(answer, add_special_tokens=False)["input_ids"])
    results = {}
    for budget in (whole, whole - 1):  # the whole reply, then all of it but its end token
        backend = PolicyBackend(
            Scripted(tokenizer, [answer]),
            tokenizer,
            template=get_training_chat_template(tokenizer),
            temperature=1.0,
            budget=budget,
            call_format="hermes",
        )
        results[budget] = play(env, task, canonical, backend)
    assert rewards_of(results[whole])[1] == 1.0
    cut = results[whole - 1]
    assert cut.verification.checks["complete"] is False
    assert cut.verification.reason.startswith("truncated: ")
    assert rewards_of(cut)[1] == 0.0


class Recording(PolicyBackend):
    """The policy backend, keeping each request's messages and tools as the template reads them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[list, list]] = []

    async def chat(self, request):
        from hsa.teachers.backends.transformers import template_messages

        self.requests.append((template_messages(request), [dict(t) for t in request.tools]))
        return await super().chat(request)


def test_the_sequence_trained_on_is_the_chat_templates_rendering(env):
    # the environment's text started at <|im_start|>, dropping the newline the template writes
    # after <|im_end|>: the model trained on and generated from a context SFT never showed it
    from trl.chat_template_utils import get_training_chat_template

    canonical, task, texts, tokenizer = _scripted_search(env)
    template = get_training_chat_template(tokenizer)
    model = Scripted(tokenizer, texts)
    backend = Recording(
        model, tokenizer, template=template, temperature=1.0, budget=100_000,
        call_format="hermes",
    )  # fmt: skip
    assert play(env, task, canonical, backend).ended == "answered"
    messages, tools = backend.requests[1]
    rendered = backend.chat_text(messages, tools, True)
    assert "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>" in rendered
    # the second step was generated from the template's rendering of its request, token for token
    assert model.contexts[1] == backend.encode(rendered)
    # the whole episode, the last reply included, is the template's rendering up to its end
    final = [*messages, {"role": "assistant", "content": "Done."}]
    whole = backend.chat_text(final, tools, False)
    assert whole.endswith("Done.<|im_end|>\n")
    assert backend.context() == backend.encode(whole.removesuffix("\n"))
    # the model's own tokens are trained on, the template's text between them is not
    trained = [tokenizer.decode(s.ids) for s in backend.segments if s.model]
    assert trained == texts
    between = backend.segments[1]
    assert tokenizer.decode(between.ids).startswith("\n<|im_start|>user\n<tool_response>")
    assert not between.model


def test_prompts_are_tasks_under_variants_and_their_openings_differ(env):
    settings = RlSettings(tasks=3, variants_per_task=2, include_canonical=True)
    prompts, short = prompts_of(env, settings)
    assert len(prompts) == 9 and short == 0 and len({p.key for p in prompts}) == 9
    assert all(p.messages[-1]["role"] == "user" for p in prompts)
    for prompt in prompts:
        assert prompt_key(prompt.row()["prompt"]) == prompt.key


def test_tasks_under_fewer_variants_than_asked_are_counted_not_silent(env, tmp_path):
    from hsa.train.card import render_card

    # one rule at one setting: a task has one variant of its harness, however many are asked
    recipe = tmp_path / "one.yaml"
    recipe.write_text(
        "seed: 0\nvariants_per_harness: 4\nrules:\n"
        "  - {rule: prompt.heading_style, probability: 1.0, params: {style: xml}}\n"
    )
    settings = RlSettings(tasks=2, variants_per_task=3, include_canonical=False, recipe=str(recipe))
    prompts, short = prompts_of(env, settings)
    assert (len(prompts), short) == (2, 2)
    # the card says it where hsa-train.json has it (train_rl writes it only when some fell short)
    data = {"prompts": 2, "episodes": 4, "variants_per_task": {"asked": 3, "short": 2}}
    resolved = {"command": "rl", "hsa": {}, "trl": {}, "data": data}
    said = "2 tasks were under fewer than 3 harness variants each: too few of the recipe's"
    assert said in render_card(resolved, [], [], plot=False)
    del data["variants_per_task"]
    assert "under fewer than" not in render_card(resolved, [], [], plot=False)


def test_a_corpus_with_a_harness_per_task_draws_each_tasks_variants_from_its_own(external):
    # it was refused: "bfcl has 2591 harnesses, one per task (harness_for(task) gives a task's)"
    bfcl = get("bfcl", path=str(external / "bfcl"))
    settings = RlSettings(split="test", tasks=2, variants_per_task=1, include_canonical=True)
    prompts, _ = prompts_of(bfcl, settings)
    assert len(prompts) == 4 and len({p.key for p in prompts}) == 4
    for prompt in prompts:
        assert prompt.variant.harness_id == bfcl.harness_for(prompt.task).id
    canonical = [p for p in prompts if not p.variant.rules]
    assert [p.variant.harness.id for p in canonical] == [
        bfcl.harness_for(p.task).id for p in canonical
    ]


def test_a_few_grpo_steps_run_end_to_end_and_resume(env, tmp_path):
    from trl.chat_template_utils import get_training_chat_template  # noqa: F401 (TRL present)

    texts = [t.turns[0] for t in env.tasks("train")[:40]]
    tokenizer = qwen_tokenizer(texts)
    model_dir = tmp_path / "model"
    qwen_model(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = {
        "hsa": {"model": str(model_dir), "tasks": 2, "variants_per_task": 1,
                "max_steps_per_turn": 2},
        "num_generations": 2,
        "per_device_train_batch_size": 2,
        "max_completion_length": 24,
        "max_steps": 2,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 2,
    }  # fmt: skip
    out = tmp_path / "rl"
    report = train_rl(config, out, env=env)
    assert report.steps == 2 and report.episodes == 4
    log = out / ROLLOUT_LOG
    lines = [json.loads(x) for x in log.read_text("utf-8").splitlines()]
    assert len(lines) == 4 and all(0.0 <= x["environment"] <= 1.0 for x in lines)
    # the log numbers steps as the trainer's log and the card do (it said 0 and 1)
    assert [x["step"] for x in lines] == [1, 1, 2, 2]
    assert [step for step, _ in report.rewards] == [1, 2]
    assert report.by_family and (out / "model.safetensors").is_file()
    resolved = json.loads((out / "hsa-train.json").read_text("utf-8"))
    assert resolved["command"] == "rl" and resolved["recipe"]["rules"]
    assert (out / "README.md").is_file()

    # A run stopped after its last checkpoint, before writing its model: --resume finishes it
    # from that checkpoint without another step (it said "nothing to resume")
    card, finished = (out / "README.md").read_text("utf-8"), resolved
    before = (report.by_family, log.read_text("utf-8"))
    for name in ("model.safetensors", "hsa-train.json", "README.md", "loss.png"):
        (out / name).unlink()
    again = train_rl(config, out, env=env, resume=True)
    assert (again.steps, again.episodes, again.rewards) == (2, 4, report.rewards)
    assert report.resumed_from is None and again.resumed_from == str(out / "checkpoint-2")
    assert (again.by_family, log.read_text("utf-8")) == before
    assert (out / "README.md").read_text("utf-8") == card
    from safetensors.torch import load_file

    written, saved = (load_file(f / "model.safetensors") for f in (out, out / "checkpoint-2"))
    assert written.keys() == saved.keys()
    assert all(torch.equal(written[k], saved[k]) for k in written)
    resolved = json.loads((out / "hsa-train.json").read_text("utf-8"))
    assert resolved["data"] == finished["data"]
    assert resolved["reward_by_family"] == finished["reward_by_family"]

    # A run stopped in step 3, after its episodes were logged and before a checkpoint: the
    # resumed run logs and counts every step once, over the whole run.
    first = log.read_text("utf-8").splitlines()
    stopped = json.dumps({**json.loads(first[0]), "step": 3, "families": ["stopped"]})
    log.write_text("".join(f"{line}\n" for line in [*first, stopped, stopped]), "utf-8")
    report = train_rl({**config, "max_steps": 3}, out, env=env, resume=True)
    lines = [json.loads(x) for x in log.read_text("utf-8").splitlines()]
    assert [x["step"] for x in lines] == [1, 1, 2, 2, 3, 3]
    assert "stopped" not in report.by_family and report.episodes == 6
    resolved = json.loads((out / "hsa-train.json").read_text("utf-8"))
    assert resolved["data"]["episodes"] == 6


def test_a_resumed_run_keeps_the_model_it_started_from_as_its_kl_reference(
    env, tmp_path, monkeypatch
):
    # the policy now loads from the checkpoint, whose path TRL built the reference from: the
    # KL penalty of a resumed run measured against the policy at the checkpoint
    from trl import GRPOTrainer

    tokenizer = qwen_tokenizer([t.turns[0] for t in env.tasks("train")[:20]])
    model_dir = tmp_path / "model"
    qwen_model(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = {
        "hsa": {"model": str(model_dir), "tasks": 2, "variants_per_task": 0,
                "max_steps_per_turn": 1},
        "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4,
        "max_steps": 1, "save_strategy": "steps", "save_steps": 1, "beta": 0.04,
    }  # fmt: skip
    out = tmp_path / "rl"
    train_rl(config, out, env=env)
    (out / "model.safetensors").unlink()
    caught = {}

    class Caught(Exception):
        pass

    def train(self, *args, **kwargs):
        caught["trainer"] = self
        raise Caught

    monkeypatch.setattr(GRPOTrainer, "train", train)
    with pytest.raises(Caught):
        train_rl({**config, "max_steps": 2}, out, env=env, resume=True)
    trainer = caught["trainer"]
    assert trainer.ref_model.config._name_or_path == str(model_dir.resolve())
    from safetensors.torch import load_file

    policy = load_file(out / "checkpoint-1" / "model.safetensors")
    assert all(
        torch.equal(p, policy[k]) for k, p in trainer.model.state_dict().items() if k in policy
    )
    saved = (out / "checkpoint-1" / "config.json").read_text("utf-8")
    assert "_name_or_path" not in saved  # (transformers writes no path into config.json)


def test_a_resumed_runs_kl_reference_is_found_where_the_model_lies_now(tmp_path):
    # the model a run started from, moved since: hsa.model says where (it was TRL's OSError)
    moved = tmp_path / "moved"
    moved.mkdir()
    gone = str(tmp_path / "gone")
    assert kl_reference(str(moved), "elsewhere", None) == str(moved)
    assert kl_reference(gone, str(moved), None) == str(moved)
    assert kl_reference("Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", None) == "Qwen/Qwen2.5-0.5B"
    with pytest.raises(TrainError, match="no longer at") as refused:
        kl_reference(gone, str(tmp_path / "nowhere"), "rl.yaml")
    assert (refused.value.file, refused.value.where) == ("rl.yaml", "$.hsa.model")


class FakeVLLM:
    """TRL's VLLMGeneration as the rollouts call it: token prompts in, completions and each
    token's top logprobs out."""

    def __init__(self, tokenizer, texts):
        self.replies = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        self.prompts: list[list[int]] = []

    def generate(self, prompts, images, num_generations):
        assert images is None and num_generations == 1 and len(prompts) == 1
        self.prompts.append(prompts[0])
        ids = self.replies[len(self.prompts) - 1]
        return [prompts[0]], [ids], [[[-0.5] for _ in ids]], [[[i] for i in ids]]


def test_with_vllm_the_replies_come_from_trls_engine(env):
    from trl.chat_template_utils import get_training_chat_template

    canonical, task, texts, tokenizer = _scripted_search(env)
    engine = FakeVLLM(tokenizer, texts)
    backend = PolicyBackend(
        None,
        tokenizer,
        template=get_training_chat_template(tokenizer),
        temperature=1.0,
        budget=100_000,
        call_format="hermes",
        vllm=engine,
    )
    result = play(env, task, canonical, backend)
    assert result.ended == "answered" and len(engine.prompts) == 2
    first, added = backend.segments[0], backend.segments[1]
    assert engine.prompts[1] == backend.prompt_ids + first.ids + added.ids
    assert first.logprobs == [-0.5] * len(first.ids)


def test_resume_needs_a_checkpoint(env, tmp_path):
    from hsa.errors import TrainError

    with pytest.raises(TrainError, match="no checkpoint here"):
        train_rl({"hsa": {"model": str(tmp_path)}}, tmp_path / "out", env=env, resume=True)


def _rl_config(tmp_path, **hsa):
    import yaml

    file = tmp_path / "rl.yaml"
    settings = {"hsa": {"model": "never-loaded", **hsa}, "max_steps": 1, "save_strategy": "no"}
    file.write_text(yaml.safe_dump(settings))
    return file


@pytest.mark.parametrize(
    "hsa, where, said",
    [
        ({"env": "nosuch"}, "$.hsa.env", "unknown environment 'nosuch' (hsa.env or --env)"),
        (
            {"env": "bfcl"},
            "$.hsa.env_options",
            "needs option(s) path: set them in the config, hsa: {env_options: {path: ...}}",
        ),
        (
            {"env": "bfcl", "env_options": {"path": "nope"}},
            "$.hsa.env_options",
            "cannot build environment 'bfcl': nope: no such file",
        ),
        ({"env_options": {"bad": 1}}, "$.hsa.env_options", "takes no option(s) 'bad'"),
    ],
)
def test_an_environment_that_cannot_be_built_names_the_config_key(tmp_path, hsa, where, said):
    file = _rl_config(tmp_path, **hsa)
    with pytest.raises(TrainError) as refused:
        train_rl(file, tmp_path / "out")
    assert refused.value.file == str(file) and refused.value.where == where
    assert said in refused.value.message and "--env-path" not in refused.value.message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "hsa, trl_keys, where, said",
    [
        ({"split": "nope"}, {}, "$.hsa.split", "unknown split 'nope': train, dev, test"),
        ({"recipe": "nope.yaml"}, {}, "$.hsa.recipe", "nope.yaml: cannot read"),
        ({"call_format": "nope"}, {}, "$.hsa.call_format", "unknown call format 'nope'"),
        ({}, {"reward_weights": [1.0]}, "$.reward_weights", "a list of two finite numbers"),
        ({}, {"reward_weights": "12"}, "$.reward_weights", 'not "12"'),
        ({}, {"reward_weights": [1.0, "x"]}, "$.reward_weights", 'not [1.0, "x"]'),
        ({}, {"reward_weights": [float("nan"), 1.0]}, "$.reward_weights", "not [NaN, 1.0]"),
        ({}, {"reward_weights": [10**400, 1.0]}, "$.reward_weights", "two finite numbers"),
        (
            {},
            {"eval_strategy": "steps", "eval_steps": 1},
            "$.eval_strategy",
            "is 'steps', but hsa train rl evaluates nothing",
        ),
        ({}, {"use_vllm": True}, "$.use_vllm", "use_vllm needs vLLM, which is not installed"),
        (
            {},
            {"steps_per_generation": 2, "save_strategy": "steps", "save_steps": 1, "max_steps": 4},
            "$.save_steps",
            "must be a whole number of steps and a multiple of 2, not 1",
        ),
    ],
)
def test_a_setting_it_cannot_run_is_refused_at_its_key_before_a_model_loads(
    tmp_path, monkeypatch, hsa, trl_keys, where, said
):
    # each was a traceback after the model loaded (TRL's), or an error naming no key
    import trl.import_utils as trl_imports

    monkeypatch.setattr(trl_imports, "is_vllm_available", lambda *args, **kwargs: False)
    file = _rl_config(tmp_path, **hsa)
    with pytest.raises(TrainError) as refused:
        train_rl(file, tmp_path / "out", trl_overrides=trl_keys)
    assert refused.value.file == str(file) and refused.value.where == where
    assert said in refused.value.message
    assert not (tmp_path / "out").exists()


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded")


@pytest.mark.parametrize("protocol", ["api", "text"])
def test_a_template_that_drops_api_calls_is_refused_for_api_variants_before_the_model_loads(
    env, tmp_path, monkeypatch, protocol
):
    import yaml

    tokenizer = qwen_tokenizer([t.turns[0] for t in env.tasks("train")[:5]], vocab_size=300)
    tokenizer.chat_template = NO_TOOLS_TEMPLATE
    tokenizer.save_pretrained(tmp_path / "model")
    qwen_model(tokenizer).config.save_pretrained(tmp_path / "model")  # (never loaded)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", _no_model)
    hsa = {"model": str(tmp_path / "model"), "tasks": 2, "variants_per_task": 0}
    if protocol == "text":  # every prompt under a text protocol: calls and tool docs in the text
        recipe = {"rules": [{"rule": "protocol.switch", "probability": 1.0,
                             "params": {"target": "text"}}]}  # fmt: skip
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        hsa.update(recipe=str(tmp_path / "recipe.yaml"), variants_per_task=1)
        hsa["include_canonical"] = False
    settings = {"hsa": hsa, "num_generations": 2, "per_device_train_batch_size": 2}
    with pytest.raises(TrainError) as refused:
        train_rl({**settings, "max_steps": 1, "save_strategy": "no"}, tmp_path / "out", env=env)
    if protocol == "text":  # not refused: it went on to load the model
        assert refused.value.message == "cannot load the model: the model was loaded"
        return
    assert refused.value.file == str(tmp_path / "model")
    assert refused.value.message.startswith("its chat template drops the called tool's name")
    assert not (tmp_path / "out").exists()


def test_a_split_without_tasks_names_the_config_key(tmp_path, external):
    file = _rl_config(tmp_path, env="tau2", env_options={"path": str(external / "tau2" / "retail")})
    with pytest.raises(
        TrainError, match=r"environment .tau2. has no train tasks \(it has 114 test task"
    ) as refused:
        train_rl(file, tmp_path / "out")
    assert refused.value.file == str(file) and refused.value.where == "$.hsa.split"


def test_fewer_prompts_than_a_batch_are_refused_before_training(env, tmp_path):
    # 1 task under its own harness: 1 prompt, where a batch of 4 takes 2 of 2 generations each
    file = _rl_config(tmp_path, tasks=1, variants_per_task=0)
    trl = {"num_generations": 2, "per_device_train_batch_size": 4}
    with pytest.raises(TrainError, match=r"1 prompts .* fill no batch of 2 \(") as refused:
        train_rl(file, tmp_path / "out", trl_overrides=trl, env=env)
    assert refused.value.where == "$.per_device_train_batch_size"
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_inside_a_generation_batch_is_not_resumed(env, tmp_path):
    # the resumed run played the batch's episodes again: logged and counted twice, not exact
    file = _rl_config(tmp_path)
    out = tmp_path / "out"
    (out / "checkpoint-3").mkdir(parents=True)
    (out / "checkpoint-3" / "trainer_state.json").write_text("{}")
    trl = {"steps_per_generation": 2, "save_strategy": "steps", "save_steps": 2, "max_steps": 4}
    with pytest.raises(TrainError, match="checkpoint-3 is inside a generation batch"):
        train_rl(file, out, trl_overrides=trl, env=env, resume=True)
    # GRPO's default, a batch's episodes per step (steps_per_generation unset): every step
    from trl import GRPOConfig

    from hsa.train.rl import generation_steps

    args = GRPOConfig(str(out), gradient_accumulation_steps=3, bf16=False, report_to=[])
    assert generation_steps(args) == 1


def test_a_resume_under_other_task_or_planning_versions_is_refused(env, tmp_path):
    """A run killed under other splits (or variant planning) and resumed under this hsa drew
    other tasks after its checkpoint than before (price-0005, then price-0004), and said
    nothing: its record keeps the versions, and a resume compares them."""
    from trl import GRPOConfig

    from hsa.train.card import RUN_RECORD
    from hsa.train.config import prepare
    from hsa.train.sft import resume_point, run_identity

    file = _rl_config(tmp_path, tasks=4)
    trl = {"max_steps": 8, "save_strategy": "steps", "save_steps": 1}
    out = tmp_path / "out"
    settings, args, _ = prepare(file, GRPOConfig, RlSettings, out, trl_overrides=trl)
    identity = run_identity("rl", settings, args, run_versions(settings), run_inputs(settings))
    assert identity["versions"] == {
        "task_version": 2,
        "planner": PLAN_VERSION,
        "render": RENDER_VERSION,
        "rule_versions": default_recipe().versions,
        **added_hooks_version(default_recipe().versions),
    }
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-1" / "trainer_state.json").write_text("{}")
    record = out / RUN_RECORD
    record.parent.mkdir()
    record.write_text(json.dumps(identity))
    assert resume_point(out, True, 8, identity=identity) == str(out / "checkpoint-1")

    older = {k: v for k, v in identity.items() if k != "versions"}  # an older hsa's record
    rules = len(default_recipe().versions)
    old_splits = {**identity, "versions": {**identity["versions"], "task_version": 1}}
    for then, said in (
        (older, "(versions.added_hooks: not recorded then, 2 now; versions.planner: not "),
        (older, f"versions.rule_versions: not recorded then, an object of {rules} keys now; "),
        (old_splits, "(versions.task_version: 1 then, 2 now): it could train on other tasks"),
    ):
        record.write_text(json.dumps(then))
        with pytest.raises(TrainError) as refused:
            train_rl(file, out, trl_overrides=trl, env=env, resume=True)
        assert said in refused.value.message and refused.value.file == str(out)
        assert refused.value.message.endswith(
            "finish it with the hsa that started it, or train afresh into another --out"
        )
    # a rule of another version draws other variants: the rule is named
    rules_now = identity["versions"]["rule_versions"]["tools.rename"]
    rules = {**identity["versions"]["rule_versions"], "tools.rename": "0"}
    versions = {**identity["versions"], "rule_versions": rules}
    record.write_text(json.dumps({**identity, "versions": versions}))
    with pytest.raises(TrainError) as refused:
        train_rl(file, out, trl_overrides=trl, env=env, resume=True)
    said = f"(versions.rule_versions.tools.rename: '0' then, '{rules_now}' now)"
    assert said in refused.value.message
    # a run that draws no variants adds no hooks
    canonical = RlSettings(variants_per_task=0)
    assert "added_hooks" not in run_versions(canonical)


def test_a_resume_with_an_edited_recipe_or_corpus_is_refused(external, tmp_path):
    """A run's record keeps its recipe file and corpus by content: the same paths with other
    content would draw other variants or tasks after the checkpoint than before."""
    from trl import GRPOConfig

    from hsa.train.card import RUN_RECORD
    from hsa.train.config import prepare
    from hsa.train.sft import resume_point, run_identity

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("variants_per_harness: 2\nrules:\n  - {rule: tools.rename}\n")
    corpus = tmp_path / "bfcl"
    shutil.copytree(external / "bfcl", corpus)
    bfcl = {"env": "bfcl", "env_options": {"path": str(corpus)}, "split": "test"}
    file = _rl_config(tmp_path, recipe=str(recipe), **bfcl)
    trl = {"max_steps": 8, "save_strategy": "steps", "save_steps": 1}
    out = tmp_path / "out"
    settings, args, _ = prepare(file, GRPOConfig, RlSettings, out, trl_overrides=trl)

    def identity():
        return run_identity("rl", settings, args, run_versions(settings), run_inputs(settings))

    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-1" / "trainer_state.json").write_text("{}")
    (out / RUN_RECORD).parent.mkdir()
    (out / RUN_RECORD).write_text(json.dumps(identity()))
    assert resume_point(out, True, 8, identity=identity()) == str(out / "checkpoint-1")

    recipe.write_text("variants_per_harness: 2\nrules:\n  - {rule: tools.namespace}\n")
    with pytest.raises(TrainError) as refused:
        resume_point(out, True, 8, identity=identity())
    assert "; inputs.recipe: '" in refused.value.message
    assert "versions.rule_versions.tools.namespace: not recorded then, " in refused.value.message
    recipe.write_text("variants_per_harness: 2\nrules:\n  - {rule: tools.rename}\n")
    assert resume_point(out, True, 8, identity=identity()) == str(out / "checkpoint-1")

    edited = corpus / "BFCL_v4_multiple.json"  # one of those the environment reads
    edited.write_bytes(edited.read_bytes() + b"\n")
    with pytest.raises(TrainError) as refused:
        resume_point(out, True, 8, identity=identity())
    assert "(inputs.env_options.path: '" in refused.value.message


def test_a_recipe_that_changes_no_harness_here_names_the_recipe(tmp_path, external):
    # it was refused at $.per_device_train_batch_size: "0 prompts ... fill no batch of 1"
    recipe = tmp_path / "skills.yaml"
    recipe.write_text("variants_per_harness: 2\nrules:\n  - {rule: skill_ids.rename}\n")
    bfcl = {"env": "bfcl", "env_options": {"path": str(external / "bfcl")}, "split": "test"}
    hsa = {**bfcl, "tasks": 1, "include_canonical": False, "recipe": str(recipe)}
    file = _rl_config(tmp_path, **hsa)
    trl = {"num_generations": 2, "per_device_train_batch_size": 2}
    with pytest.raises(TrainError, match="no variant of the recipe") as refused:
        train_rl(file, tmp_path / "out", trl_overrides=trl)
    assert refused.value.file == str(file) and refused.value.where == "$.hsa.recipe"


def test_the_recipes_rules_that_need_a_trajectory_are_said_to_be_left_out():
    # a run plans its prompts' variants as hsa teach does, with no trajectory, so the planner
    # leaves these rules out: the run says so (hsa train rl prints it)
    from hsa.augment.recipe import default_recipe, loads_recipe

    assert left_out_of(default_recipe()) == (
        "the recipe's rules that depend on a trajectory (tools.distractors, tools.drop_unused, "
        "skill_content.drop_unused): an RL run's variants are planned before there is a "
        "trajectory; these rules are applied where trajectories are augmented: hsa augment, "
        "hsa build",
    )
    one = "rules:\n  - {rule: tools.distractors}\n  - {rule: tools.drop_unused, probability: 0}\n"
    (note,) = left_out_of(loads_recipe(one))  # (one never drawn is not left out)
    assert note.startswith("the recipe's rule that depends on a trajectory (tools.distractors):")
    assert left_out_of(loads_recipe("rules:\n  - {rule: tools.rename}\n")) == ()


def test_checkpoints_are_checked_only_where_one_falls_inside_a_generation_batch(tmp_path):
    from trl import GRPOConfig

    from hsa.train.rl import check_checkpoints

    def args(**keys):
        return GRPOConfig(str(tmp_path), bf16=False, report_to=[], **keys)

    # TRL's default save_steps (500) past a short run's max_steps: its only checkpoint is the
    # last, which a --resume finishes from; it was refused as "not 500"
    check_checkpoints(args(num_iterations=3, max_steps=3), "rl.yaml")
    check_checkpoints(args(steps_per_generation=3, max_steps=30, save_steps=6), "rl.yaml")
    with pytest.raises(TrainError, match=r"multiple of 3, not 0.1 \(1 steps\)") as refused:
        check_checkpoints(args(steps_per_generation=3, max_steps=10, save_steps=0.1), "rl.yaml")
    assert refused.value.where == "$.save_steps"


def test_a_log_an_older_hsa_numbered_from_0_is_resumed_by_the_steps_it_holds(tmp_path):
    from hsa.train.rl import HarnessRollouts

    # its step-N lines were the episodes of step N + 1, played after checkpoint N
    log = tmp_path / "rollouts.jsonl"
    lines = [{"step": s, "families": ["tools"], "environment": 1.0} for s in (0, 0, 1, 1, 2, 2)]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rollouts = HarnessRollouts(None, {}, None, None, log=log)
    rollouts.resume(2)
    assert rollouts.episodes == 4 and len(rollouts.by_family["tools"]) == 4
    assert [json.loads(t)["step"] for t in log.read_text().splitlines()] == [1, 1, 2, 2]


def test_a_template_trl_cannot_make_a_training_template_of_is_one_error(env, tmp_path, monkeypatch):
    # no {% generation %} markers and not one of the templates TRL patches: TRL raises
    # ValueError, which reached the user as a traceback
    tokenizer = qwen_tokenizer([t.turns[0] for t in env.tasks("train")[:5]], vocab_size=300)
    tokenizer.chat_template = NO_TOOLS_TEMPLATE.replace("{% generation %}", "").replace(
        "{% endgeneration %}", ""
    )
    tokenizer.save_pretrained(tmp_path / "model")
    qwen_model(tokenizer).config.save_pretrained(tmp_path / "model")  # (never loaded)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", _no_model)
    hsa = {"model": str(tmp_path / "model"), "tasks": 2, "variants_per_task": 0}
    settings = {"hsa": hsa, "num_generations": 2, "per_device_train_batch_size": 2}
    with pytest.raises(TrainError) as refused:
        train_rl({**settings, "max_steps": 1, "save_strategy": "no"}, tmp_path / "out", env=env)
    assert refused.value.file == str(tmp_path / "model")
    assert "training template" in refused.value.message
    assert not (tmp_path / "out").exists()


def test_a_prompts_opening_shows_the_hooks_its_variant_adds(env):
    """The prompt TRL is given opens as the rollout's first request does: with the notes
    ``hooks.neutral_extra`` adds at the session start and the first user turn."""
    harness = env.harness()
    chain = [(get_rule("hooks.neutral_extra"), {"count": 5})]
    rewrite, applied = apply_chain(harness, chain, seed=0)
    variant = Variant(
        variant_id(harness, applied, 0, None), harness.id, applied, rewrite.harness, rewrite.mapping
    )
    task = env.tasks()[0]
    messages = opening(env, task, variant)
    text = "\n".join(m["content"] for m in messages)
    assert "Session started." in text and "Read the whole request before acting." in text
    assert len(messages) > len(opening(env, task, canonical_variant(harness)))
