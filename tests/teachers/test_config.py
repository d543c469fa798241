"""``TeachConfig``: what decides a job's output, and so its identity."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from hsa.datasets.manifest import config_hash
from hsa.teachers.backends import transformers, vllm
from hsa.teachers.config import TeachConfig


def test_vllm_engine_arguments_that_pick_the_engine_are_part_of_the_job():
    plain = TeachConfig(backend="vllm", model="Qwen/Qwen3-8B")
    awq = dataclasses.replace(plain, vllm_args={"quantization": "awq"})
    assert awq.output_dict()["vllm_args"] == {"quantization": "awq"}
    assert awq.output_hash() != plain.output_hash()
    # without engine arguments, the output and its hash are what they were before these
    # counted, so existing outputs resume
    assert "vllm_args" not in plain.output_dict()
    roomy = dataclasses.replace(plain, vllm_args={"gpu_memory_utilization": 0.5})
    assert roomy.output_hash() == plain.output_hash()
    # another backend runs no vLLM engine: its vllm_args change nothing it writes
    oracle = TeachConfig()
    assert dataclasses.replace(oracle, vllm_args={"quantization": "awq"}).output_hash() == (
        oracle.output_hash()
    )


def test_a_negative_seed_is_refused_as_the_cli_refuses_it():
    import pytest

    from hsa.errors import TeacherError

    with pytest.raises(TeacherError, match="seed: must not be negative, got -1"):
        TeachConfig(tasks=2, seed=-1)


def test_a_base_url_with_whitespace_anywhere_is_refused_before_the_job_starts():
    import pytest

    from hsa.errors import TeacherError
    from hsa.teachers.backends.openai import OpenAIConfig

    # a space at the end went to "/v1 /chat/completions", 404 from every request
    for url in (
        "http://127.0.0.1:8000/v1 ",
        " http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/my models/v1",
        "http://127.0.0.1:8000/v1\r",
        "http://127.0.0.1:8000/v1\t",
    ):
        for make in (
            lambda url: TeachConfig(backend="openai", base_url=url, model="m"),
            lambda url: OpenAIConfig(base_url=url, model="m"),
        ):
            with pytest.raises(TeacherError, match="holds a space or another whitespace") as caught:
                make(url)
            assert caught.value.where == "base_url"


@pytest.mark.parametrize(("backend", "module"), [("vllm", vllm), ("transformers", transformers)])
def test_how_a_local_backend_decodes_is_part_of_the_job(monkeypatch, backend, module):
    local = TeachConfig(backend=backend, model="tiny")
    served = TeachConfig(backend="openai", base_url="http://x/v1", model="tiny")
    before = local.output_hash(), served.output_hash(), TeachConfig().output_hash()
    # rows its old decoding wrote are another job's: a rerun into their folder is refused
    monkeypatch.setattr(module, "DECODE_VERSION", module.DECODE_VERSION + 1)
    assert local.output_hash() != before[0]
    assert (served.output_hash(), TeachConfig().output_hash()) == before[1:]


def test_how_render_shows_events_is_part_of_every_job(monkeypatch):
    # rows rendered under another version of render (where a hook's note among parallel
    # results stood) are another job's: teach, eval and augment record the version
    from hsa.eval.config import EvalConfig
    from hsa.pipelines.augment import AugmentConfig

    rendering = importlib.import_module("hsa.harness.render")  # (the package's is the function)

    jobs = [TeachConfig(), TeachConfig(backend="openai", base_url="http://x/v1", model="m")]
    before = [job.output_hash() for job in jobs], EvalConfig().output_hash()
    assert AugmentConfig().to_dict()["render"] == rendering.RENDER_VERSION
    monkeypatch.setattr(rendering, "RENDER_VERSION", rendering.RENDER_VERSION + 1)
    after = [job.output_hash() for job in jobs], EvalConfig().output_hash()
    assert after[0][0] != before[0][0] and after[0][1] != before[0][1] and after[1] != before[1]


def test_how_the_environment_scores_is_part_of_every_job(monkeypatch):
    # rows an older tau2 scored (a share of its criteria, not its 0/1 reward) are another
    # job's: a teacher job or an evaluation of them is not resumed into
    from hsa.envs.livestream import LivestreamEnvironment
    from hsa.envs.tau2 import Tau2Environment
    from hsa.eval.config import EvalConfig

    tau2 = {"env": "tau2", "env_options": {"path": "retail"}}
    jobs = [TeachConfig(**tau2), EvalConfig(**tau2), TeachConfig(), EvalConfig()]
    before = [job.output_hash() for job in jobs]
    monkeypatch.setattr(Tau2Environment, "score_version", 1)  # as before the version counted
    older = [job.output_hash() for job in jobs]
    assert older[0] != before[0] and older[1] != before[1] and older[2:] == before[2:]
    # livestream's first version leaves the hashes of its jobs as they were; a second not
    monkeypatch.setattr(LivestreamEnvironment, "score_version", 2)
    assert all(job.output_hash() != old for job, old in zip(jobs[2:], older[2:], strict=True))


def test_the_environments_tasks_are_part_of_every_job_and_build(monkeypatch):
    # livestream's tasks are split by the request they open with from version 2 (they were by
    # id, and a held-out task opened a train one): the teacher jobs, evaluations and builds of
    # the older splits are not resumed into, nor their teacher's output reused
    from hsa.envs.livestream import LivestreamEnvironment
    from hsa.eval.config import EvalConfig
    from hsa.pipelines.build import SourceConfig

    def hashes() -> list[str]:
        source = SourceConfig(env="livestream").identity()
        return [TeachConfig().output_hash(), EvalConfig().output_hash(), config_hash(source)]

    now = hashes()
    monkeypatch.setattr(LivestreamEnvironment, "task_version", 1)  # as before it counted
    older = hashes()
    assert all(a != b for a, b in zip(now, older, strict=True))
    assert SourceConfig(env="livestream").identity() == {"env": "livestream"}


def test_the_corpus_is_part_of_a_job_by_its_content_not_by_how_its_path_is_written(
    tmp_path, monkeypatch
):
    # (the path string was hashed: an edited corpus resumed with the old rows, and one corpus
    # named relative and absolute was two jobs, each refusing the other's folder)
    from hsa.eval.config import EvalConfig

    corpus = tmp_path / "bf" / "BFCL_v4_simple.json"
    corpus.parent.mkdir()
    corpus.write_text('{"id": "a", "question": "one?"}\n', "utf-8")
    monkeypatch.chdir(tmp_path)
    for config in (TeachConfig, EvalConfig):
        for path in (corpus, corpus.parent):  # a file, or a folder
            absolute = config(env="bfcl", env_options={"path": str(path)})
            relative = config(env="bfcl", env_options={"path": str(path.relative_to(tmp_path))})
            before = absolute.output_hash()
            assert relative.output_hash() == before
            assert absolute.public_dict()["env_options"]["path"] == str(path)  # (as given)
            corpus.write_text('{"id": "a", "question": "two?"}\n', "utf-8")  # same size
            assert absolute.output_hash() != before
            assert relative.output_hash() == absolute.output_hash()
            corpus.write_text('{"id": "a", "question": "one?"}\n', "utf-8")
            assert absolute.output_hash() == before


def _bfcl_corpus(folder, category="simple"):
    """A BFCL data folder with one question file, its answers and an API doc."""
    (folder / "possible_answer").mkdir(parents=True)
    (folder / "multi_turn_func_doc").mkdir()
    question = folder / f"BFCL_v4_{category}.json"
    question.write_text('{"id": "a", "question": "one?"}\n', "utf-8")
    (folder / "possible_answer" / question.name).write_text('{"id": "a"}\n', "utf-8")
    (folder / "multi_turn_func_doc" / "math_api.json").write_text('{"name": "f"}\n', "utf-8")
    return question


def _tau2_domain(folder):
    folder.mkdir(parents=True)
    for name in ("tools.json", "tasks.json", "policy.md"):
        (folder / name).write_text("[]", "utf-8")
    return folder


def test_a_job_writing_into_its_corpus_folder_is_the_same_job_before_and_after(
    tmp_path, monkeypatch
):
    # (every file under the corpus folder was hashed: a teach or eval job whose --out was
    # inside changed its own output_hash by writing there, and its rerun was refused as
    # another job's; an editor's swap file or .DS_Store did too)
    from hsa.eval.config import EvalConfig

    _bfcl_corpus(tmp_path / "bfD")
    _tau2_domain(tmp_path / "airline")
    monkeypatch.chdir(tmp_path / "airline")
    jobs = [
        (config(env="bfcl", env_options={"path": str(tmp_path / "bfD")}), tmp_path / "bfD")
        for config in (TeachConfig, EvalConfig)
    ] + [
        (config(env="tau2", env_options={"path": "."}), tmp_path / "airline")
        for config in (
            TeachConfig,
            EvalConfig,
        )
    ]
    before = [job.output_hash() for job, _ in jobs]
    for _, corpus in jobs:
        out = corpus / "run1"  # what a job writes into its --out
        (out / ".hsa" / "done").mkdir(parents=True, exist_ok=True)
        (out / ".hsa" / "lock").write_text("1", "utf-8")
        (out / "data" / "train").mkdir(parents=True, exist_ok=True)
        for name in ("teach.json", "summary.json", "cache.sqlite", "data/train/s.parquet"):
            (out / name).write_text("x", "utf-8")
        for name in (".DS_Store", ".tasks.json.swp"):
            (corpus / name).write_text("x", "utf-8")
        (corpus / ".hsa").mkdir(exist_ok=True)
        (corpus / ".hsa" / "lock").write_text("1", "utf-8")
    assert [job.output_hash() for job, _ in jobs] == before
    (tmp_path / "airline" / "policy.md").write_text("be kind", "utf-8")  # a file it reads
    assert [job.output_hash() for job, _ in jobs][2:] != before[2:]


def test_a_bfcl_question_file_is_its_job_with_its_answers_its_api_docs_and_its_category(
    tmp_path,
):
    # (only the question file was hashed: a job over it resumed with the old rows after its
    # possible_answer file was edited, though the importer reads that and scores by it)
    from hsa.eval.config import EvalConfig

    question = _bfcl_corpus(tmp_path / "bfA")
    answers = tmp_path / "bfA" / "possible_answer" / question.name
    for config in (TeachConfig, EvalConfig):
        job = config(env="bfcl", env_options={"path": str(question)})
        before = job.output_hash()
        answers.write_text('{"id": "b"}\n', "utf-8")  # (same size)
        assert job.output_hash() != before
        answers.write_text('{"id": "a"}\n', "utf-8")
        assert job.output_hash() == before
        doc = tmp_path / "bfA" / "multi_turn_func_doc" / "math_api.json"
        doc.write_text('{"name": "g"}\n', "utf-8")
        assert job.output_hash() != before
        doc.write_text('{"name": "f"}\n', "utf-8")
        # the same bytes as another category are scored otherwise
        other = _bfcl_corpus(tmp_path / config.__name__, category="irrelevance")
        assert config(env="bfcl", env_options={"path": str(other)}).output_hash() != before


def test_a_bfcl_corpus_reads_its_answers_through_a_linked_folder(tmp_path):
    # (rglob does not descend into a linked folder: its answers were not in the hash)
    question = _bfcl_corpus(tmp_path / "real")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / question.name).write_bytes(question.read_bytes())
    (linked / "possible_answer").symlink_to(tmp_path / "real" / "possible_answer")
    for path in (linked, linked / question.name):
        job = TeachConfig(env="bfcl", env_options={"path": str(path)})
        before = job.output_hash()
        (tmp_path / "real" / "possible_answer" / question.name).write_text('{"id": "c"}\n')
        assert job.output_hash() != before
        (tmp_path / "real" / "possible_answer" / question.name).write_text('{"id": "a"}\n')


@pytest.mark.parametrize(
    ("rule", "variants", "changed"),
    [
        ("hooks.neutral_extra", 1, True),
        ("hooks.neutral_extra", 0, False),  # (no variant: no hook added)
        ("hooks.wording", 1, False),
    ],
)
def test_a_job_whose_variants_may_add_hooks_is_identified_with_their_showing(
    tmp_path, monkeypatch, rule, variants, changed
):
    # episodes fire the hooks a variant adds since they are shown: a teach or eval job of
    # the code before (which showed none) is not resumed with rows of this one
    from hsa.eval.config import EvalConfig
    from hsa.teachers import config

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"rules:\n  - {{rule: {rule}, probability: 1.0}}\n")
    jobs = (
        TeachConfig(recipe=str(recipe), variants_per_task=variants),
        EvalConfig(recipe=str(recipe)),
    )
    now = [job.output_hash() for job in jobs]
    monkeypatch.setattr(config, "ADDS_HOOKS", frozenset())
    before = [job.output_hash() for job in jobs]
    assert (now[0] != before[0]) is changed
    assert (now[1] != before[1]) is (rule == "hooks.neutral_extra")
