"""The ifeval suite: prompts asked without tools, scored by lm-eval's IFEval checker."""

from __future__ import annotations

import json
import re
import sys
import types

import pyarrow.parquet as pq
import pytest

from hsa.envs.registry import get
from hsa.errors import EvalError
from hsa.eval.config import EvalConfig
from hsa.eval.ifeval import SCORER, load_prompts, scorer
from hsa.eval.runner import EPISODES, evaluate
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.request import ChatRequest, ChatResponse, assistant_message


def _lowercase_checker(doc, results):
    """A stand-in for lm-eval's process_results: one instruction per id, 'lowercase' checked."""
    reply = results[0]
    followed = [reply == reply.lower() if i == "change_case:english_lowercase" else bool(reply)
                for i in doc["instruction_id_list"]]  # fmt: skip
    return {
        "prompt_level_strict_acc": all(followed),
        "inst_level_strict_acc": followed,
        "prompt_level_loose_acc": all(followed),
        "inst_level_loose_acc": followed,
    }


@pytest.fixture
def fake_lm_eval(monkeypatch):
    names = SCORER.split(".")
    for depth in range(1, len(names) + 1):
        monkeypatch.setitem(
            sys.modules, ".".join(names[:depth]), types.ModuleType(names[depth - 1])
        )
    monkeypatch.setattr(sys.modules[SCORER], "process_results", _lowercase_checker, raising=False)


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "ifeval.jsonl"
    rows = [
        {"key": 1, "prompt": "Say hi in lowercase.", "instruction_id_list":
         ["change_case:english_lowercase"], "kwargs": [{}]},
        {"key": 2, "prompt": "SHOUT, in lowercase.", "instruction_id_list":
         ["change_case:english_lowercase", "length_constraints:number_words"], "kwargs": [{}, {}]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    return path


class Replies(Backend):
    name = "replies"

    def __init__(self):
        self.stats = BackendStats()
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        text = request.messages[0]["content"]
        return ChatResponse(assistant_message("hi there" if "hi" in text else "NO"))


def test_prompts_are_asked_without_tools_and_scored_by_the_checker(fake_lm_eval, prompts, tmp_path):
    backend = Replies()
    config = EvalConfig(suites=("ifeval",), ifeval_data=str(prompts))
    report = evaluate(config, tmp_path / "run", env=get("livestream"), backend=backend)
    assert [r.tools for r in backend.requests] == [(), ()]
    ifeval = report.summary["suites"]["ifeval"]
    assert ifeval["success"] == 0.5 and ifeval["n"] == 2
    assert ifeval["lm_eval"] == {
        "prompt_level_strict_acc": 0.5,
        "inst_level_strict_acc": round(2 / 3, 6),
        "prompt_level_loose_acc": 0.5,
        "inst_level_loose_acc": round(2 / 3, 6),
    }
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    assert [r["success"] for r in rows] == [True, False]
    assert rows[1]["reason"] == "strict: 1 of 2 instructions followed; loose: 1 of 2"


def test_without_lm_eval_the_suite_is_refused_naming_it(monkeypatch, prompts, tmp_path):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # not importable, whatever is installed
    with pytest.raises(EvalError, match="lm-eval"):
        scorer()
    config = EvalConfig(suites=("ifeval",), ifeval_data=str(prompts))
    with pytest.raises(EvalError, match="pip install 'lm-eval"):
        evaluate(config, tmp_path / "run", env=get("livestream"), backend=Replies())
    assert not (tmp_path / "run" / "summary.json").exists()
    # neither lm-eval nor the prompts: both said at once (only lm-eval was)
    with pytest.raises(EvalError, match=r"pip install 'lm-eval.*; and .*--ifeval-data PATH"):
        evaluate(EvalConfig(suites=("ifeval",)), tmp_path / "run", backend=Replies())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(EvalError, match=rf"; and {re.escape(str(bad))}: line 1: not JSON"):
        evaluate(
            EvalConfig(suites=("ifeval",), ifeval_data=str(bad)), tmp_path / "r", backend=Replies()
        )


def test_the_oracle_cannot_answer_ifeval(fake_lm_eval, prompts, tmp_path):
    config = EvalConfig(suites=("ifeval",), ifeval_data=str(prompts))
    with pytest.raises(EvalError, match="needs a model"):
        evaluate(config, tmp_path / "run", env=get("livestream"))


def test_the_prompts_file_is_required_and_checked(tmp_path):
    with pytest.raises(EvalError, match="--ifeval-data PATH"):
        load_prompts(None)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": 1, "prompt": "x", "instruction_id_list": [], "kwargs": []}\n{oops\n')
    with pytest.raises(EvalError, match="line 2"):
        load_prompts(bad)
    assert len(load_prompts(bad, 1)) == 1


@pytest.mark.parametrize("line", ["5", "null", '"text"', "[1]"])
def test_a_prompts_line_that_is_no_object_is_one_error_naming_the_line(tmp_path, line):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": 1, "prompt": "x", "instruction_id_list": [], "kwargs": []}\n' + line)
    with pytest.raises(EvalError, match="must be a JSON object") as caught:
        load_prompts(bad)
    assert caught.value.file == str(bad) and caught.value.where == "line 2"
