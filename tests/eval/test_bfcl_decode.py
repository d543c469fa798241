"""BFCL's own decoding of format-sensitivity replies: the bfcl suite scores a reply on BFCL's
entries as BFCL's decoder reads it, lenient and strict where that decoder is."""

from __future__ import annotations

import dataclasses
import json
import re

import pyarrow.parquet as pq
import pytest

from hsa.envs.registry import get
from hsa.eval.bfcl_decode import NO_CALL, Undecodable, bfcl_reply, decode
from hsa.eval.config import EvalConfig
from hsa.eval.runner import EPISODES, evaluate, plan
from hsa.harness.model import Protocol
from hsa.teachers.backends.base import Backend
from hsa.teachers.make import make_backend
from hsa.teachers.rollout import TASK_KEY

PY = "[get_weather(city='Paris', days=3), get_time(zone='CET')]"
JSON = '```json\n[{"function":"get_weather","parameters":{"city":"Paris","days":3}}]\n```'
XML = (
    '<functions><function name="get_weather"><param name="city" type="string">Paris</param>'
    '<param name="days" type="integer">3</param></function></functions>'
)
WEATHER = ("get_weather", {"city": "Paris", "days": 3})


@pytest.mark.parametrize(
    "text, fmt, tagged, calls",
    [
        # text after the calls: BFCL reads the tag's first block, the JSON list, the XML
        (f"<TOOLCALL>{PY}</TOOLCALL>\nAnything else?", "python", True, 2),
        (JSON + "\nAnything else?", "json", False, 1),
        (XML + "\nAnything else?", "concise_xml", False, 1),
        # text before the calls, untagged: JSON and XML found, Python fails
        ("Here they are:\n" + JSON, "json", False, 1),
        ("Here they are:\n" + XML, "concise_xml", False, 1),
        ("Here they are:\n" + PY, "python", False, None),
        # parallel calls without brackets: the brackets are added
        (PY[1:-1], "python", False, 2),
        # no tag where one is asked: no call
        (PY, "python", True, None),
    ],
)
def test_replies_are_read_where_bfcl_reads_calls(text, fmt, tagged, calls):
    if calls is None:
        with pytest.raises(Undecodable):
            decode(text, fmt, tagged)
    else:
        found = decode(text, fmt, tagged)
        assert len(found) == calls and found[0] == WEATHER


def test_a_json_call_whose_arguments_hold_a_list_of_objects_is_no_call_as_bfcl_reads_it():
    # BFCL's regex ends its match at the first `]` after a `}`, that list's end: the JSON it
    # cuts out does not load (simple_python_96's right answer, which the oracle loses in the
    # json configurations, docs/eval.md)
    def reply(conditions):
        call = {"function": "query", "parameters": {"table": "user", "conditions": conditions}}
        return f"[{json.dumps(call)}]"

    assert decode(reply([{"field": "age", "value": "25"}]), "json", False) == []
    assert decode(reply(["age > 25"]), "json", False) == [
        ("query", {"table": "user", "conditions": ["age > 25"]})
    ]


def test_xml_types_are_converted_by_bfcls_names_alone():
    aliased = XML.replace('type="integer"', 'type="int"')
    found = decode(aliased, "concise_xml", False)
    assert found == [("get_weather", {"city": "Paris", "days": "3"})]
    with pytest.raises(Undecodable):  # int("3.5") fails BFCL's decoder
        decode(XML.replace(">3<", ">3.5<"), "concise_xml", False)


def test_python_arguments_as_bfcl_resolves_them():
    found = decode("[f(1, a=2*3, b=x, c=(1, 2), d=g(), e=-4)]", "python", False)
    assert found == [("f", {"a": 6, "b": "x", "c": [1, 2], "d": "g()", "e": -4})]
    with pytest.raises(Undecodable):  # BFCL's eval is not run here: no names in arithmetic
        decode("[f(a=x*2)]", "python", False)
    # BFCL evals any binary operation: literal lists and tuples concatenate and repeat too
    found = decode("[f(a=[1]+[2], b=(1, 2)+(3,), c=[0]*3, d=2*'ab')]", "python", False)
    assert found == [("f", {"a": [1, 2], "b": [1, 2, 3], "c": [0, 0, 0], "d": "abab"})]
    for text in (
        "[f(a=[1]+2)]",  # eval's TypeError
        "[f(a=[x]+[1])]",  # eval's NameError: a name is no string in an expression
        "[f(a=[g(b=1)]*2)]",
        "[f(a=[0]*10**7)]",  # too long to build, nested or not
        "[f(a=['a'*1000000]*1000000)]",
        "[f(a=[[[0]*1000]*1000]*1000)]",
    ):
        with pytest.raises(Undecodable):
            decode(text, "python", False)
    for tagged, text in [
        (False, "[f(**{'a': 1})]"),
        (True, "<TOOLCALL>[f(**{'a': 1})]</TOOLCALL>"),
    ]:
        with pytest.raises(Undecodable, match="without a name"):  # BFCL's key None: a failure
            decode(text, "python", tagged)


def test_a_reply_is_rewritten_as_the_format_writes_what_bfcl_read():
    protocol = Protocol("text", "json", False, "json")
    message = bfcl_reply({"role": "assistant", "content": "Sure:\n" + JSON}, protocol, "json")
    assert message["content"] == JSON  # what BFCL read, as the format writes it
    # BFCL reads no call where hsa's format would (a fenced Python list reads to BFCL as
    # ``[python[...]]``, a subscript): the rollout must read none either
    python = Protocol("text", "python", False, "json")
    fenced = {"role": "assistant", "content": f"```python\n{PY}\n```"}
    assert bfcl_reply(fenced, python, "python")["content"] == NO_CALL
    # text that is no call for either stays the model's
    text = {"role": "assistant", "content": "I cannot help with that."}
    assert bfcl_reply(text, python, "python") == text


MUTATIONS = {
    "suffix": lambda c: c + "\nLet me know if you need anything else.",
    "prefix": lambda c: "Here are the calls:\n" + c,
    "nobrackets": lambda c: c[1:-1] if c.startswith("[") and c.endswith("]") else c,
    "xmlalias": lambda c: (
        c.replace('type="integer"', 'type="int"')
        .replace('type="float"', 'type="number"')
        .replace('type="boolean"', 'type="bool"')
        .replace('type="array"', 'type="list"')
    ),
}


def _expected(mutation: str, config: str, text: str) -> bool:
    """Whether BFCL scores the oracle's reply after ``mutation`` correct."""
    untagged_python = "ret_fmt=python&tool_call_tag=False" in config
    if mutation in ("suffix", "prefix"):
        return not untagged_python
    if mutation == "xmlalias":
        return re.search(r'type="(int|number|bool|list)"', text) is None
    return True


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_bfcl_suite_scores_replies_as_bfcl_does(external, tmp_path, mutation):
    env = get("bfcl", path=str(external / "bfcl"))
    config = EvalConfig(env="bfcl", suites=("bfcl",), tasks=4)
    variants = {e.spec.variant.variant_id: e.spec.variant for e in plan(config, env)}
    inner = make_backend(config.teach_config(), env, variants)
    sent: dict[str, str] = {}

    class Mutated(Backend):
        name = "mutated"
        stats = inner.stats

        async def chat(self, request):
            answer = await inner.chat(request)
            text = MUTATIONS[mutation](answer.message["content"])
            sent[request.metadata[TASK_KEY]] = text
            return dataclasses.replace(answer, message={**answer.message, "content": text})

    remote = dataclasses.replace(config, policy="openai", base_url="http://x/v1", model="m")
    evaluate(remote, tmp_path / "run", env=env, backend=Mutated())
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    assert len(rows) == 4 * 26
    for row in rows:
        want = _expected(mutation, row["config"], sent[row["task_id"]])
        assert row["success"] is want, (row["task_id"], sent[row["task_id"]], row["reason"])


def test_a_refused_call_in_a_bfcl_reply_counts_against_the_entry(external, tmp_path):
    # BFCL's checker counts every call it decodes: the right call and one to a function the
    # entry does not offer are the wrong number of calls, though the harness refuses the second
    import asyncio

    from hsa.eval.bfcl_decode import BfclDecoded
    from hsa.eval.metrics import succeeded
    from hsa.teachers.backends.base import BackendStats
    from hsa.teachers.request import ChatResponse
    from hsa.teachers.rollout import RolloutConfig, rollout

    corpus = tmp_path / "bfcl"
    (corpus / "possible_answer").mkdir(parents=True)
    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines()
        (corpus / name).write_text(next(x for x in lines if '"simple_python_94"' in x) + "\n")
    (corpus / "BFCL_v4_format_sensitivity.json").write_text(
        '{"simple_python": ["simple_python_94"]}'
    )
    env = get("bfcl", path=str(corpus))
    untagged = "ret_fmt=python&tool_call_tag=False&"
    episodes = [
        e for e in plan(EvalConfig(env="bfcl", suites=("bfcl",)), env) if untagged in e.config
    ]
    info = "{'name': 'John Doe', 'email': 'johndoe@email.com'}"
    gold = f"update_user_info(user_id=43523, update_info={info})"

    class Replying(Backend):
        name = "replying"
        stats = BackendStats()

        def __init__(self, text: str):
            self.text = text

        async def chat(self, request):
            return ChatResponse({"role": "assistant", "content": self.text})

    assert episodes
    for text, solved in [(f"[{gold}]", True), (f"[{gold}, no_such_tool(a=1)]", False)]:
        for episode in episodes:  # the backend as the eval runner wraps it for this suite
            protocol = episode.spec.variant.harness.protocol
            backend = BfclDecoded(Replying(text), protocol, episode.config)
            done = asyncio.run(rollout(episode.spec, env, backend, RolloutConfig()))
            assert succeeded(done) is solved, (episode.config, done.verification)
    assert done.verification.reason.startswith("schema: call_1: unknown tool 'no_such_tool'")
