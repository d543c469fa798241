"""HSA-RL: TRL's ``GRPOTrainer`` with multi-turn tool use in an hsa environment.

Each prompt is a task under a harness variant drawn from a recipe (as ``hsa teach`` draws
them). Rollouts are TRL's custom-rollout mechanism (``rollout_func``) driving the teachers'
rollout loop: the model being trained answers each step (``PolicyBackend``), its reply is
parsed under the variant's protocol, its calls run in the environment through the variant's
inverse mapping, and the episode is scored by the environment -- the same path a teacher's
trajectories and an evaluation take. The tokens TRL trains on are the model's own generated
tokens; the tool results and hook messages between them are in the sequence but masked
(``env_mask``). With TRL's ``use_vllm`` (a GPU), each reply comes from TRL's vLLM engine,
whose weights TRL syncs from the model being trained before a batch's rollouts.

Two rewards, weighted by TRL's ``reward_weights``: ``environment`` (the environment's score of
the episode) and ``format`` (1 when every reply parsed, none cut off at the token budget,
and every call fit the variant's schemas). Each episode's rewards are logged with its
variant's rule families (``OUT/rollouts.jsonl``), and the training card shows them per family.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsa.augment.planner import Variant
from hsa.augment.recipe import Recipe
from hsa.config import bounded, by_content, refuse, same_as, setting
from hsa.envs.base import SPLITS, Environment, Task
from hsa.errors import HsaError, TrainError, first_line
from hsa.harness.files import write_atomic
from hsa.harness.model import call_format_problem
from hsa.harness.render import render
from hsa.teachers.backends.base import Backend, BackendStats, run_async
from hsa.teachers.backends.output import parse_output
from hsa.teachers.backends.transformers import template_messages
from hsa.teachers.config import TeachConfig, code_versions, corpus_identity
from hsa.teachers.request import ChatRequest, ChatResponse, Usage, assistant_message
from hsa.teachers.rollout import Rollout, RolloutConfig, RolloutSpec, rollout, surface_opening
from hsa.teachers.task_variants import (
    env_task_variants,
    recipe_from,
    short_tasks,
    trajectory_rules_note,
)
from hsa.train.card import caller_rngs_kept, finish, scratch_removed_on_failure
from hsa.train.config import prepare

ROLLOUT_LOG = "rollouts.jsonl"
#: why a run's variants leave out the recipe's rules that depend on a trajectory
UNTRAJECTORIED = "an RL run's variants are planned before there is a trajectory"
#: the message field that marks a prompt row with its task and variant
PROMPT_KEY = "hsa_prompt"


@dataclass(frozen=True, slots=True)
class RlSettings:
    """The ``hsa:`` section of ``hsa train rl``: the environment, the variants, the episodes."""

    model: str | None = setting(None, help="A local model folder (or a hub name, online).")
    env: str = same_as(TeachConfig, "env")
    env_options: Mapping[str, Any] = same_as(TeachConfig, "env_options")
    split: str = setting("train", help="The split whose tasks are the prompts.")
    tasks: int | None = same_as(TeachConfig, "tasks")
    recipe: str | None = same_as(TeachConfig, "recipe")
    variants_per_task: int = setting(2, help="Harness variants each task is a prompt under.")
    include_canonical: bool = setting(True, help="Each task is also a prompt under its harness.")
    seed: int = same_as(TeachConfig, "seed")
    max_steps_per_turn: int = setting(4, help="Model steps allowed per user turn.")
    call_format: str = same_as(TeachConfig, "call_format")

    def __post_init__(self) -> None:
        problems = bounded(self, "variants_per_task", "seed", low=0)
        problems += bounded(self, "tasks", "max_steps_per_turn", low=1)
        if self.split not in SPLITS:
            problems.append(("split", f"unknown split {self.split!r}: {', '.join(SPLITS)}"))
        if (why := call_format_problem(self.call_format)) is not None:
            problems.append(("call_format", why))
        refuse(problems, TrainError)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt of the run: a task under a variant, and the opening messages it renders."""

    task: Task
    variant: Variant
    messages: list[dict[str, Any]]

    @property
    def key(self) -> str:
        return f"{self.task.id}/{self.variant.variant_id}"

    def row(self) -> dict[str, Any]:
        """The dataset row TRL hands back to ``rollout_func``: the opening messages, the first
        marked with the prompt's key (``PROMPT_KEY``). Two variants can open with the same
        messages and differ in their tools, so the messages alone do not say which it is; the
        rollout renders the conversation itself, and the marker never reaches the model."""
        first, *rest = self.messages
        return {
            "prompt": [{**first, PROMPT_KEY: self.key}, *({**m, PROMPT_KEY: None} for m in rest)],
            "task_id": self.task.id,
            "variant_id": self.variant.variant_id,
        }


def prompt_key(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The key a prompt row's messages carry (``Prompt.row``)."""
    return next((m[PROMPT_KEY] for m in messages if m.get(PROMPT_KEY)), None)


def opening(env: Environment, task: Task, variant: Variant) -> list[dict[str, Any]]:
    """The messages the first request of ``task`` under ``variant`` carries (no tools)."""
    return list(render(surface_opening(env, task, variant)[1], variant.harness).messages)


def prompts_of(env: Environment, settings: RlSettings) -> tuple[list[Prompt], int]:
    """Every prompt of the run: each task under its drawn variants (and its own harness); and
    how many tasks are under fewer variants than ``variants_per_task`` (``short_tasks``: too
    few of the recipe's variants change their harness and differ from each other)."""
    tasks = env.tasks(settings.split)[: settings.tasks]
    if not tasks:
        raise TrainError(env.no_tasks(settings.split), where="split")
    chosen = env_task_variants(
        env,
        tasks,
        recipe_from(settings.recipe),
        seed=settings.seed,
        per_task=settings.variants_per_task,
        include_canonical=settings.include_canonical,
    )
    if not any(chosen.values()):  # (only without the canonical harness: it is always there)
        raise TrainError(
            f"no variant of the recipe ({settings.recipe or 'the default recipe'}) changes the "
            f"harness of any of the {len(tasks)} {settings.split} task(s) of {env.name!r}: its "
            "rules find nothing to rewrite there, and include_canonical is false, so there is no "
            "prompt; use a recipe with rules this environment's harness takes, or set "
            "hsa.include_canonical: true",
            where="recipe",
        )
    prompts = [Prompt(t, v, opening(env, t, v)) for t in tasks for v in chosen[t.id]]
    return prompts, short_tasks(chosen, settings.variants_per_task)


def run_versions(settings: RlSettings) -> dict[str, Any]:
    """The versions of hsa's code that decide a run's prompts and rewards, for a ``--resume``
    to compare (``hsa.train.sft.run_identity``): those a teacher job's output hash takes
    (``code_versions``: variant planning, rendering, the recipe's rules, the environment's
    tasks and scoring)."""
    recipe = settings.recipe
    return code_versions(
        settings.env, lambda: recipe_from(recipe), variants=bool(settings.variants_per_task)
    )


def run_inputs(settings: RlSettings) -> dict[str, Any]:
    """What of a run's inputs its settings name by path, by content, for a ``--resume`` to
    compare: the recipe file's (``content_hash``) and the environment's options with its
    corpus (``corpus_identity``). An edited recipe or corpus draws other prompts or tasks."""
    found: dict[str, Any] = {"env_options": corpus_identity(settings.env, settings.env_options)}
    if settings.recipe is not None:
        found["recipe"] = by_content(settings.recipe)
    return found


def left_out_of(recipe: Recipe) -> tuple[str, ...]:
    """What of ``recipe`` the run's variants leave out, and why (``prompts_of`` plans them
    as ``hsa teach`` does, without a trajectory)."""
    note = trajectory_rules_note(recipe, UNTRAJECTORIED)
    return () if note is None else (note,)


def environment_of(settings: RlSettings, file: str | None) -> Environment:
    """The environment ``settings`` name, built with its options; an unknown name, a missing
    option or one it does not take is refused naming the config's key (``hsa.env``,
    ``hsa.env_options``: ``hsa train rl`` has no ``--env-path``)."""
    from hsa.envs.registry import get, names, required

    if settings.env not in names():
        raise TrainError(
            f"unknown environment {settings.env!r} (hsa.env or --env); registered: "
            f"{', '.join(names())}",
            file=file,
            where="$.hsa.env",
        )
    missing = [name for name in required(settings.env) if name not in settings.env_options]
    if missing:
        shown = ", ".join(f"{name}: ..." for name in missing)
        raise TrainError(
            f"environment {settings.env!r} needs option(s) {', '.join(missing)}: set them in the "
            f"config, hsa: {{env_options: {{{shown}}}}}",
            file=file,
            where="$.hsa.env_options",
        )
    try:
        return get(settings.env, **dict(settings.env_options))
    except HsaError as exc:  # an option it does not take, a corpus it cannot read
        said = (
            exc.message if exc.file is None else f"cannot build environment {settings.env!r}: {exc}"
        )
        raise TrainError(said, file=file, where="$.hsa.env_options") from None


def check_prompts(prompts: int, args: Any, file: str | None) -> None:
    """Refuse a run whose ``prompts`` fill no batch: TRL's ``GRPOTrainer`` draws whole groups
    of ``generation_batch_size / num_generations`` prompts and leaves a short one out, so it
    would train 0 steps and write the model as it was."""
    group = int(args.generation_batch_size) // int(args.num_generations)
    if prompts >= group:
        return
    raise TrainError(
        f"{prompts} prompts (tasks under their variants) fill no batch of {group} "
        f"(generation_batch_size {args.generation_batch_size} / num_generations "
        f"{args.num_generations}): TRL trains on whole batches only, so the run would train 0 "
        "steps; raise hsa.tasks or hsa.variants_per_task, or lower per_device_train_batch_size",
        file=file,
        where="$.per_device_train_batch_size",
    )


def generation_steps(args: Any) -> int:
    """The fewest optimizer steps that train whole generation batches: GRPO plays a batch's
    episodes once every ``steps_per_generation x num_iterations`` micro-batches and keeps them
    in memory, not in its checkpoints."""
    every = int(args.steps_per_generation) * int(args.num_iterations)
    return every // math.gcd(every, int(args.gradient_accumulation_steps))


def check_checkpoints(args: Any, file: str | None) -> None:
    """Refuse a ``save_steps`` that puts checkpoints inside a generation batch
    (``generation_steps``): a run resumed from one would play that batch's episodes again,
    counting them twice and training on other episodes than the stopped run did."""
    whole = generation_steps(args)
    if args.save_strategy != "steps" or whole == 1:
        return
    save = args.save_steps
    if save < 1 and args.max_steps > 0:  # a ratio of the run's steps, as the trainer reads it
        save = math.ceil(args.max_steps * save)
    if save >= 1 and int(save) % whole == 0:
        return
    if save >= 1 and 0 < args.max_steps <= save:
        return  # no checkpoint before the last, at max_steps (check_resumable's)
    shown = f"{args.save_steps}" + (f" ({save} steps)" if save != args.save_steps else "")
    raise TrainError(
        f"must be a whole number of steps and a multiple of {whole}, not {shown}: "
        f"GRPO plays a batch's episodes once every {whole} steps (steps_per_generation "
        f"{args.steps_per_generation} x num_iterations {args.num_iterations} micro-batches, "
        f"gradient_accumulation_steps {args.gradient_accumulation_steps} a step) and a "
        "checkpoint between would be resumed by playing them again",
        file=file,
        where="$.save_steps",
    )


def check_resumable(checkpoint: str, args: Any) -> None:
    """Refuse to resume from a checkpoint inside a generation batch (``generation_steps``):
    the last one, at a ``max_steps`` that is not a multiple of it, or one an older hsa let a
    run write."""
    step = int(Path(checkpoint).name.rpartition("-")[2])
    whole = generation_steps(args)
    if step % whole:
        raise TrainError(
            f"{Path(checkpoint).name} is inside a generation batch (GRPO plays one every "
            f"{whole} steps here): resuming from it would play that batch's episodes again; "
            "resume from an earlier checkpoint (delete the later ones) or train afresh",
            file=checkpoint,
        )


@dataclass(slots=True)
class _Segment:
    ids: list[int]
    logprobs: list[float | None]  # None: vLLM gave none (TRL reads it as NaN)
    model: bool  # generated by the model (trained on) or put there by the environment


class PolicyBackend(Backend):
    """The model being trained, answering one episode's requests and keeping its tokens.

    Each request's prompt must extend the previous one (a prefix-preserving chat template,
    as TRL's training templates are): what the environment added since the model's last reply
    is tokenized as its own segment, from where the model stopped (its end-of-sequence
    token), so the model generates from exactly the tokens it is trained on, and they are
    the template's rendering of the conversation.
    """

    name = "policy"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        template: str | None,
        temperature: float,
        budget: int,
        call_format: str,
        vllm: Any = None,
        sampling: Mapping[str, Any] | None = None,
    ):
        self.model = model
        #: GRPO's sampling settings (top_p, top_k, min_p, repetition_penalty), as TRL samples
        self.sampling = dict(sampling or {})
        #: a problem that makes the episode worthless for training (not the model's fault)
        self.fatal: TrainError | None = None
        self.vllm = vllm  # TRL's VLLMGeneration when the trainer generates with vLLM
        self.tokenizer = tokenizer
        self.template = template
        self.temperature = temperature
        self.budget = budget  # completion tokens left: model and environment tokens alike
        self.call_format = call_format
        self.stats = BackendStats()
        self.prompt_ids: list[int] | None = None
        self.segments: list[_Segment] = []
        self._shown = 0  # messages of the last request, to find what came after them
        self._asked = 0  # characters of the last request's text, where the reply starts

    def chat_text(self, messages: list[dict[str, Any]], tools: Any, more: bool) -> str:
        text: str = self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=more,
            tokenize=False,
            chat_template=self.template,
        )
        return text

    def _reply_end(self, before: str) -> int:
        """Where the model's last reply ends in ``before`` (the conversation through it, as
        the template renders it): just after the reply's last end-of-sequence token, where
        the model stopped, when the template writes more after it (Qwen's ``<|im_end|>\n``).
        That more belongs to the environment's text, masked, so the sequence is the
        template's rendering, as TRL's own tool loop cuts it (``_get_tool_suffix_ids``)."""
        eos = self.tokenizer.eos_token
        found = before.rfind(eos, self._asked) if eos else -1
        return len(before) if found < 0 else found + len(eos)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.stats.requests += 1
        messages = template_messages(request)
        tools = [dict(t) for t in request.tools]
        full = self.chat_text(messages, tools, True)
        if self.prompt_ids is None:
            self.prompt_ids = self.encode(full)
        else:
            # what the environment said since the model's reply: tool results, hook messages
            before = self.chat_text(messages[: self._shown + 1], tools, False)
            if not full.startswith(before):
                # raised again by HarnessRollouts: the rollout loop records hsa errors as the
                # episode's end, and this one is the setup's, not the model's
                self.fatal = TrainError(
                    "the chat template does not preserve the conversation's prefix, so a "
                    "multi-turn rollout cannot be trained on; use a training template "
                    "(chat_template_path)"
                )
                raise self.fatal
            # what fits of it: a completion never outgrows max_completion_length
            added = self.encode(full[self._reply_end(before) :])[: max(self.budget, 0)]
            self.segments.append(_Segment(added, [0.0] * len(added), False))
            self.budget -= len(added)
        self._shown = len(messages)
        self._asked = len(full)
        started = time.monotonic()
        generate = self._generate if self.vllm is None else self._generate_vllm
        ids, logprobs = await asyncio.to_thread(generate) if self.budget > 0 else ([], [])
        self.segments.append(_Segment(ids, logprobs, True))
        self.budget -= len(ids)
        # a reply that ran out of its tokens before its end-of-sequence token is cut off: it
        # may read as an answer, but not the one the model meant (verify's ``complete`` check)
        ended = bool(ids) and ids[-1] in self.stop_ids()
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        for token in (self.tokenizer.eos_token, self.tokenizer.pad_token):
            if token:
                text = text.replace(token, "")
        message = parse_output(text, request, self.call_format) if ids else assistant_message("")
        response = ChatResponse(
            message=message,
            usage=Usage(len(self.context()) - len(ids), len(ids)),
            latency_s=time.monotonic() - started,
            finish_reason="stop" if ended else "length",
        )
        self.stats.record(response)
        return response

    def stop_ids(self) -> set[int]:
        """The tokens a reply ends on by itself: the tokenizer's end-of-sequence token (where
        ``generate`` stops) and the model's own (``generation_config``, where vLLM stops)."""
        found = {self.tokenizer.eos_token_id}
        config = getattr(self.model, "generation_config", None)
        more = getattr(config, "eos_token_id", None)
        found.update(more if isinstance(more, list) else [more])
        return {i for i in found if i is not None}

    def context(self) -> list[int]:
        return [*(self.prompt_ids or []), *(i for s in self.segments for i in s.ids)]

    def _generate_vllm(self) -> tuple[list[int], list[float | None]]:
        """The next reply from TRL's vLLM engine (weights synced by the trainer), cut to the
        episode's budget: the engine's own completion limit is the whole run's."""
        _, completions, logprobs, _ = self.vllm.generate(
            prompts=[self.context()], images=None, num_generations=1
        )
        ids = list(completions[0])[: self.budget]
        # vLLM gives each token's top logprobs, the sampled token's first (None when NaN)
        # None stays None: TRL reads it as NaN and leaves the token out of its correction
        found = [step[0] if step else None for step in logprobs[0]]
        return ids, found[: len(ids)]

    def _generate(self) -> tuple[list[int], list[float | None]]:
        import torch
        from transformers import GenerationConfig

        sample = self.temperature > 0
        # a fresh config: the checkpoint's own sampling defaults (a repetition penalty, say)
        # would sample off the policy GRPO's loss assumes
        config = GenerationConfig(
            max_new_tokens=self.budget,
            do_sample=sample,
            temperature=self.temperature if sample else None,
            top_p=self.sampling.get("top_p") if sample else None,
            top_k=(self.sampling.get("top_k") or None) if sample else None,
            min_p=self.sampling.get("min_p") if sample else None,
            repetition_penalty=self.sampling.get("repetition_penalty") or 1.0,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(self.stop_ids()),  # where a reply ends by itself (stop_ids)
            output_scores=True,
            return_dict_in_generate=True,
        )
        context = torch.tensor([self.context()], device=self.model.device)
        with torch.no_grad():
            output = self.model.generate(
                context, attention_mask=torch.ones_like(context), generation_config=config
            )
        ids: list[int] = output.sequences[0, context.shape[1] :].tolist()
        logprobs: list[float | None] = [
            float(torch.log_softmax(score[0].float(), dim=-1)[token])
            for score, token in zip(output.scores, ids, strict=False)
        ]
        return ids, logprobs


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite number (an integer past a double's range is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def kl_reference(started: str | None, model: Any, file: str | None) -> str:
    """Where a resumed run's KL reference (the model it started from) is loaded from: where
    it lay when the run started (``started``, the record's ``base_path``), or else where
    ``hsa.model`` says it lies now (a folder moved, another mount); a hub name as it was."""
    for place in (started, str(model)):
        if place is not None and Path(place).is_dir():
            return place
    if started is not None and not Path(started).is_absolute():
        return started  # a hub name
    raise TrainError(
        f"a resumed run with a KL penalty (beta) needs the model it started from as its "
        f"reference, and it is no longer at {started or model!r}, nor at hsa.model "
        f"{str(model)!r}: point hsa.model (--model) at it",
        file=file,
        where="$.hsa.model",
    )


#: how an episode ends when its replies were not (all) read: no format reward then
_UNREAD = ("format", "backend", "error")


def rewards_of(result: Rollout) -> tuple[float, float]:
    """``(environment, format)`` rewards of a finished episode: the format reward is 1 only
    when every reply was read, whole, and fit the variant's schemas (an episode the backend or
    an error cut off read nothing for certain, and a reply cut off at the token budget is not
    the one the model meant, however it reads: neither earns any)."""
    score = result.verification.score or 0.0
    checks = result.verification.checks
    well_formed = (
        result.ended not in _UNREAD
        and checks.get("complete", True)
        and checks.get("format")
        and checks.get("schema")
    )
    return float(score), 1.0 if well_formed else 0.0


@dataclass(slots=True)
class HarnessRollouts:
    """TRL's ``rollout_func``: one episode per prompt it is given, played by the model."""

    env: Environment
    prompts: dict[str, Prompt]
    settings: RlSettings
    template: str | None
    log: Path | None = None
    episodes: int = 0
    by_family: dict[str, list[float]] = field(default_factory=dict)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        args = trainer.args
        out: dict[str, list] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "hsa_environment")
        }
        out["hsa_format"] = []
        was_training = model.training
        model.eval()
        try:
            for messages in prompts:
                found = self.prompts.get(prompt_key(messages) or "")
                if found is None:
                    raise TrainError("a prompt that is not one of the run's tasks and variants")
                backend = PolicyBackend(
                    model,
                    trainer.processing_class,
                    template=self.template,
                    temperature=float(args.temperature),
                    budget=int(args.max_completion_length),
                    call_format=self.settings.call_format,
                    vllm=getattr(trainer, "vllm_generation", None) if args.use_vllm else None,
                    sampling={
                        k: getattr(args, k, None)
                        for k in ("top_p", "top_k", "min_p", "repetition_penalty")
                    },
                )
                self.episodes += 1
                spec = RolloutSpec(f"rl/{self.episodes}", found.task, found.variant)
                config = RolloutConfig(max_steps_per_turn=self.settings.max_steps_per_turn)
                result = run_async(rollout(spec, self.env, backend, config))
                if backend.fatal is not None:
                    raise backend.fatal
                environment, form = rewards_of(result)
                segments = backend.segments
                if not segments or not any(s.ids for s in segments):
                    # an episode that ended before the model wrote anything: one masked token,
                    # since TRL cannot take an empty completion
                    eos = trainer.processing_class.eos_token_id
                    segments = [_Segment([eos], [0.0], False)]
                prompt_ids = backend.prompt_ids
                if prompt_ids is None:  # it ended before asking: the opening, as TRL would see it
                    prompt_ids = backend.encode(
                        backend.chat_text([dict(m) for m in found.messages], [], True)
                    )
                out["prompt_ids"].append(prompt_ids)
                out["completion_ids"].append([i for s in segments for i in s.ids])
                out["logprobs"].append([p for s in segments for p in s.logprobs])
                out["env_mask"].append([int(s.model) for s in segments for _ in s.ids])
                out["hsa_environment"].append(environment)
                out["hsa_format"].append(form)
                # numbered as the trainer logs the step this batch trains (global_step counts
                # the steps done); with steps_per_generation above gradient_accumulation_steps,
                # the first of the steps the generation batch trains
                step = trainer.state.global_step + 1
                self._record(step, found, result, environment, form)
        finally:
            model.train(was_training)
        return out

    def resume(self, step: int) -> None:
        """Take up the log of a run resumed from its checkpoint at ``step``: the episodes of
        the steps it holds (``step`` and before) are kept and counted, those of later steps
        (played after the checkpoint, by a run that then stopped) are dropped, since the steps
        are played again."""
        if self.log is None or not self.log.is_file():
            return
        lines = [json.loads(text) for text in self.log.read_text("utf-8").splitlines()]
        # an older hsa numbered steps from 0 (a line's step was the one before its own)
        shift = 1 if any(line["step"] == 0 for line in lines) else 0
        kept = []
        for line in lines:
            line["step"] += shift
            if line["step"] <= step:
                kept.append(json.dumps(line, ensure_ascii=False, sort_keys=True))  # as written
                self.episodes += 1
                for family in line["families"] or ["canonical"]:
                    self.by_family.setdefault(family, []).append(line["environment"])
        body = "".join(text + "\n" for text in kept)
        write_atomic(self.log, body, error=TrainError)

    def _record(
        self, step: int, prompt: Prompt, result: Rollout, environment: float, form: float
    ) -> None:
        families = sorted({name.partition(".")[0] for name, _, _ in prompt.variant.rules})
        for family in families or ["canonical"]:
            self.by_family.setdefault(family, []).append(environment)
        if self.log is None:
            return
        line = {
            "step": step,
            "task_id": prompt.task.id,
            "variant_id": prompt.variant.variant_id,
            "families": families,
            "ended": result.ended,
            # (verify names teach's limit; a reply here is cut off at the run's own)
            "reason": result.verification.reason.replace(
                "raise max_tokens", "raise max_completion_length"
            ),
            "environment": environment,
            "format": form,
        }
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")


def environment_reward(
    completions: list, hsa_environment: list[float], **_: Any
) -> list[float | None]:
    """The environment's score of each episode (a TRL reward function)."""
    return list(hsa_environment)


def format_reward(completions: list, hsa_format: list[float], **_: Any) -> list[float | None]:
    """1 for an episode whose every reply parsed whole and every call fit the variant's
    schemas (``rewards_of``)."""
    return list(hsa_format)


@dataclass(slots=True)
class RlReport:
    out: Path
    steps: int = 0
    prompts: int = 0
    episodes: int = 0
    rewards: list[tuple[int, float]] = field(default_factory=list)
    by_family: dict[str, float] = field(default_factory=dict)
    #: the checkpoint a --resume went on from (None: trained from the start)
    resumed_from: str | None = None
    wall_s: float = 0.0
    #: what of its recipe the run left out, and why (``left_out_of``)
    left_out: tuple[str, ...] = ()
    variants_per_task: int = 0  # asked for
    #: tasks under fewer variants than asked (``prompts_of``)
    short: int = 0


@caller_rngs_kept()
@scratch_removed_on_failure
def train_rl(
    config: Any,
    out: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    trl_overrides: dict[str, Any] | None = None,
    env: Environment | None = None,
    resume: bool = False,
    file: str | None = None,
) -> RlReport:
    """HSA-RL as ``config`` (TRL's ``GRPOConfig`` keys plus ``hsa:``) says, into ``out``."""
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import get_training_chat_template

    from hsa.train.sft import (
        load_model,
        load_tokenizer,
        reached,
        recorded_base,
        resolved_settings,
        resume_point,
        run_identity,
        start_afresh,
        starting_model,
        train_or_finish,
    )
    from hsa.train.templates import check_renders_tools

    started = time.monotonic()
    out = Path(out)
    settings, args, file = prepare(
        config,
        GRPOConfig,
        RlSettings,
        out,
        overrides=overrides,
        trl_overrides=trl_overrides,
        file=file,
    )
    if args.use_vllm and (args.world_size > 1 or args.vllm_tensor_parallel_size > 1):
        raise TrainError(
            "hsa train rl plays each episode on its own, so its vLLM generation runs in one "
            "process on one GPU: use_vllm with more processes or tensor parallelism would wait "
            "on collective calls the other ranks never make",
            file=file,
            where="$.use_vllm",
        )
    weights = args.reward_weights
    if weights is not None and (
        not isinstance(weights, list | tuple)
        or len(weights) != 2
        or not all(_finite(w) for w in weights)
    ):
        raise TrainError(
            "must be a list of two finite numbers (the environment's reward's weight, then the "
            f"format reward's), not {json.dumps(weights, default=str)}",
            file=file,
            where="$.reward_weights",
        )
    if args.eval_strategy != "no":
        strategy = getattr(args.eval_strategy, "value", args.eval_strategy)
        raise TrainError(
            f"is {strategy!r}, but hsa train rl evaluates nothing during training (its "
            "episodes are its data; evaluate the model with hsa eval run): leave "
            "eval_strategy out or set it to 'no'",
            file=file,
            where="$.eval_strategy",
        )
    check_checkpoints(args, file)
    try:
        recipe = recipe_from(settings.recipe)  # read now: its errors named at the config's key
    except HsaError as exc:
        raise TrainError(str(exc), file=file, where="$.hsa.recipe") from None
    identity = run_identity("rl", settings, args, run_versions(settings), run_inputs(settings))
    checkpoint = resume_point(out, resume, args.max_steps, can_finish=True, identity=identity)
    # stopped after its last checkpoint, before writing its model: that checkpoint is the model
    done = checkpoint if reached(checkpoint, args.max_steps) else None
    if checkpoint is not None and done is None:
        check_resumable(checkpoint, args)
    if env is None:
        env = environment_of(settings, file)
    try:
        prompts, short = prompts_of(env, settings)
    except TrainError as exc:  # named at the config's key (hsa.split, ...)
        if exc.file is not None or not exc.where or exc.where.startswith("$"):
            raise
        raise TrainError(exc.message, file=file, where=f"$.hsa.{exc.where}") from None
    check_prompts(len(prompts), args, file)
    start = starting_model(checkpoint, settings.model)
    tokenizer = load_tokenizer(start)
    # the template the episodes are rendered with (PolicyBackend), checked before the model
    # loads: a variant under the api protocol renders its calls and tools through it
    try:
        template = get_training_chat_template(tokenizer)
    except ValueError as exc:  # neither marked for training nor one TRL knows how to mark
        raise TrainError(
            f"its chat template is no training template and TRL cannot make one of it "
            f"({first_line(exc)}): give the model a prefix-preserving chat template with "
            "{% generation %} markers",
            file=start,
        ) from None
    if any(p.variant.harness.protocol.is_api for p in prompts):
        swapped = "the training template TRL swaps in for " if template is not None else ""
        check_renders_tools(tokenizer, template, named=f"{swapped}its chat template", file=start)
    model, tokenizer = load_model(start, tokenizer=tokenizer)
    if checkpoint is not None and args.beta != 0.0:
        # TRL builds the KL reference from the policy's path, here the checkpoint: the run's
        # reference is the model it started from, as in a run never stopped
        model.config._name_or_path = kl_reference(recorded_base(out), settings.model, file)
    tokenizer.padding_side = "left"
    import datasets

    rows = datasets.Dataset.from_list([p.row() for p in prompts])
    out.mkdir(parents=True, exist_ok=True)
    log = out / ROLLOUT_LOG
    rollouts = HarnessRollouts(
        env,
        {p.key: p for p in prompts},
        settings,
        template,
        log,
    )
    if checkpoint is None:
        log.unlink(missing_ok=True)
    else:  # a resumed run adds to the log of the steps its checkpoint holds
        rollouts.resume(int(Path(checkpoint).name.rpartition("-")[2]))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[environment_reward, format_reward],
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        rollout_func=rollouts,
    )
    if checkpoint is None:
        start_afresh(out, identity, settings.model)
    # (finished from done: its episodes and rewards are in the log and the checkpoint's state)
    train_or_finish(trainer, checkpoint, done)
    report = RlReport(out=out, steps=trainer.state.global_step, prompts=len(prompts))
    report.episodes = rollouts.episodes
    report.resumed_from = checkpoint
    report.left_out = left_out_of(recipe) if settings.variants_per_task else ()
    report.variants_per_task, report.short = settings.variants_per_task, short
    report.rewards = [
        (int(e["step"]), float(e["reward"])) for e in trainer.state.log_history if "reward" in e
    ]
    report.by_family = {
        k: round(sum(v) / len(v), 6) for k, v in sorted(rollouts.by_family.items()) if v
    }
    data: dict[str, Any] = {"prompts": len(prompts), "episodes": rollouts.episodes}
    if short:  # (a run with every task under as many variants as asked says nothing)
        data["variants_per_task"] = {"asked": settings.variants_per_task, "short": short}
    resolved = {
        "command": "rl",
        "hsa": resolved_settings(settings, out, checkpoint),
        "data": data,
        "recipe": recipe.to_dict(),
        "reward_by_family": report.by_family,
    }
    finish(out, trainer, tokenizer, resolved, report.rewards)
    report.wall_s = time.monotonic() - started
    return report
