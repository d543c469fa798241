"""The ``ifeval`` suite: general instruction following, scored by lm-eval's IFEval checker.

HAT reports IFEval to show that harness-aware training lost nothing else. Each IFEval prompt is
sent to the model under test as one user message without tools, and its reply is scored by
``lm_eval.tasks.ifeval.utils.process_results`` -- lm-eval's own scorer, not a copy: an
episode succeeds when the reply follows every instruction of its prompt (prompt-level strict
accuracy), and its score is the share of instructions followed (instruction-level strict).
Both lm-eval and IFEval's prompts must be on this machine (hsa downloads nothing); without
either the suite is refused before any request, saying which is missing.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.errors import EvalError, TeacherError
from hsa.teachers.backends.base import Backend
from hsa.teachers.request import ChatRequest, Sampling

SCORER = "lm_eval.tasks.ifeval.utils"
#: what each reply is scored on, as lm-eval names it
METRICS = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)

Scorer = Callable[[Mapping[str, Any], list[str]], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One IFEval row: its key, the prompt, and the instructions it carries."""

    key: str
    doc: Mapping[str, Any]

    @property
    def text(self) -> str:
        return str(self.doc["prompt"])


def scorer() -> Scorer:
    """lm-eval's IFEval ``process_results``; an ``EvalError`` naming what is missing."""
    try:
        module = importlib.import_module(SCORER)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise EvalError(
            f"the ifeval suite scores with lm-eval's IFEval checker ({SCORER}), which cannot "
            f"be imported here: {missing} is missing; pip install 'lm-eval[ifeval]' (and "
            "nltk's punkt data, which lm-eval's checker needs, must be on this machine)",
            where="suites",
        ) from None
    found: Scorer = module.process_results
    return found


def load_prompts(path: str | Path | None, n: int | None = None) -> list[Prompt]:
    """IFEval's prompts from a local JSONL file (google/IFEval's rows: ``key``, ``prompt``,
    ``instruction_id_list``, ``kwargs``), the first ``n`` when given."""
    if path is None:
        raise EvalError(
            "the ifeval suite needs IFEval's prompts in a local JSONL file (google/IFEval, "
            "rows with key, prompt, instruction_id_list, kwargs): --ifeval-data PATH",
            where="ifeval_data",
        )
    prompts: list[Prompt] = []
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except OSError as exc:
        raise EvalError(
            f"cannot read IFEval's prompts: {exc.strerror or exc}", file=str(path)
        ) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise EvalError(f"not JSON: {exc}", file=str(path), where=f"line {number}") from None
        if not isinstance(doc, dict):  # 5 or null: checked first, "in" would raise on them
            raise EvalError(
                f"an IFEval row must be a JSON object, not {type(doc).__name__}",
                file=str(path),
                where=f"line {number}",
            )
        missing = [k for k in ("key", "prompt", "instruction_id_list", "kwargs") if k not in doc]
        if missing:
            raise EvalError(
                f"an IFEval row needs {', '.join(missing)}",
                file=str(path),
                where=f"line {number}",
            )
        prompts.append(Prompt(str(doc["key"]), doc))
        if n is not None and len(prompts) == n:
            break
    if not prompts:
        raise EvalError("no IFEval prompts in this file", file=str(path))
    return prompts


async def ask(
    prompt: Prompt, backend: Backend, model: str, sampling: Sampling, score: Scorer, policy: str
) -> tuple[dict[str, Any], bool] | str:
    """The episode row of one prompt and whether its answer came from the cache, or the
    reason the backend gave no answer."""
    request = ChatRequest(model, [{"role": "user", "content": prompt.text}], (), sampling)
    started = time.monotonic()
    try:
        response = await backend.chat(request)
    except TeacherError as exc:
        return str(exc)
    latency = response.latency_s if response.cached else time.monotonic() - started
    reply = str(response.message.get("content") or "")
    try:
        result = score(dict(prompt.doc), [reply])
    except Exception as exc:  # lm-eval's checker: missing nltk data, an unknown instruction
        raise EvalError(
            f"lm-eval's IFEval checker failed on prompt {prompt.key}: {exc}", where="ifeval"
        ) from None
    followed = list(result["inst_level_strict_acc"])
    success = bool(result["prompt_level_strict_acc"])
    loose = list(result["inst_level_loose_acc"])
    row = {
        "suite": "ifeval",
        "config": "ifeval",
        "task_id": f"ifeval/{prompt.key}",
        "task_group": f"ifeval/{prompt.key}",
        "task_kind": "ifeval",
        "variant_id": "",
        "rules": [],
        "families": [],
        "protocol": "none",
        "policy": policy,
        "success": success,
        "score": sum(followed) / len(followed) if followed else 0.0,
        "verified": success,
        "failure": None if success else "wrong_final_answer",
        "reason": (
            f"strict: {sum(followed)} of {len(followed)} instructions followed; loose: "
            f"{sum(loose)} of {len(loose)}"
        ),
        "turns": 1,
        "steps": 1,
        "calls": 0,
        "tokens_in": response.usage.prompt_tokens,
        "tokens_out": response.usage.completion_tokens,
        "latency_s": round(latency, 6),
        "call_latencies_s": [round(latency, 6)],
        "ifeval": {m: result[m] for m in METRICS},
    }
    return row, response.cached


def ifeval_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """IFEval's four figures as lm-eval aggregates them: prompt-level accuracies are means
    over prompts, instruction-level ones over every instruction of every prompt."""
    out: dict[str, float] = {}
    for metric in METRICS:
        values = [r["ifeval"][metric] for r in rows]
        if metric.startswith("inst_level"):
            flat = [bool(v) for items in values for v in items]
            out[metric] = round(sum(flat) / len(flat), 6) if flat else 0.0
        else:
            out[metric] = round(sum(bool(v) for v in values) / len(values), 6) if values else 0.0
    return out
