"""Build configs: validated by the JSON Schema, paths relative to the file, built end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from hsa.datasets import iter_rows
from hsa.errors import ConfigError, DatasetError, HsaError
from hsa.pipelines import build, load_config, parse_config
from hsa.pipelines.build import build_schema
from hsa.teachers.make import decode_version


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


SMALL = {
    "name": "tiny",
    "out": "out",
    "seed": 1,
    "source": {"env": "livestream", "tasks": 12},
    "augment": {"variants_per_trajectory": 2, "batch_size": 8},
}


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        ({"source": {"env": "livestream"}, "sorce": 1}, r"\$\.sorce", "did you mean .source."),
        ({"source": {}}, r"\$\.source", "set exactly one of 'env' and 'trajectories'"),
        (
            {"source": {"env": "livestream"}, "augment": {"recipe": "nofile.yaml"}},
            r"\$\.augment\.recipe",
            "no recipe file",
        ),
        (
            {"source": {"env": "livestream", "trajectories": "x.parquet"}},
            r"\$\.source",
            "set exactly one of 'env' and 'trajectories'",
        ),
        (
            {"source": {"env": "livestream"}, "splits": {"tr ain": 1}},
            r"\$\.splits",
            "'tr ain' is not a split name: 1-64 letters, digits and _",
        ),
        (
            {"source": {"env": "livestream"}, "augment": {"batch_size": 0}},
            r"\$\.augment\.batch_size",
            "less than the minimum",
        ),
        (
            {
                "source": {"env": "livestream"},
                "augment": {"recipe": {"rules": [{"rule": "tools.teleport"}]}},
            },
            r"\$\.augment\.recipe\.rules\[0\]",
            "tools.teleport",
        ),
    ],
)
def test_bad_configs_name_the_place(tmp_path: Path, data, where: str, what: str) -> None:
    with pytest.raises(ConfigError, match=rf"build\.yaml: {where}.*{what}"):
        load_config(write(tmp_path, data))


def test_yaml_errors_and_missing_out(tmp_path: Path) -> None:
    path = tmp_path / "build.yaml"
    path.write_text("source: {env: [unclosed\n")
    with pytest.raises(ConfigError, match=r"build\.yaml: line \d+: invalid YAML"):
        load_config(path)
    config = parse_config({"source": {"env": "livestream"}})
    with pytest.raises(ConfigError, match="no output directory"):
        config.output()


def test_schema_is_published() -> None:
    schema = build_schema()
    assert schema["$schema"].endswith("2020-12/schema") and "source" in schema["required"]


def test_a_small_build_end_to_end_and_its_rerun(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, SMALL))
    stages: list[str] = []
    report = build(config, progress=lambda stage, done, total: stages.append(stage))
    out = tmp_path / "out"
    assert report.out == out and report.tasks == 12 and report.verified == 12
    assert {"tasks", "teacher", "augment"} <= set(stages)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"]["total"] == 12 * 3
    assert manifest["config"]["name"] == "tiny" and manifest["config"]["source"]["tasks"] == 12
    rows = list(iter_rows(out))
    assert {r["teacher"] for r in rows} == {"oracle/hsa-oracle"}
    assert all(r["verified"] for r in rows)
    assert (out / "README.md").read_text().startswith("---")
    # a teacher that ran every task under as many variants as asked says nothing
    assert report.short == 0 and "notes" not in manifest
    assert "short" not in json.loads((out / ".hsa" / "source" / "done.json").read_text())
    # a finished build is left as it is, its teacher's defaults written out or not
    again = build(config)
    assert again.teacher_skipped and again.augment.complete_already
    spelt = {**SMALL, "teach": {"backend": "oracle", "temperature": 0.0, "samples": 1}}
    assert build(load_config(write(tmp_path, spelt))).augment.complete_already
    # another config into the same directory is refused
    other = load_config(write(tmp_path, {**SMALL, "seed": 2}))
    with pytest.raises(Exception, match="holds another dataset"):
        build(other)


def test_a_corpus_with_a_harness_per_task_builds(tmp_path: Path, external) -> None:
    # BFCL: each entry taught and augmented under its own harness; its rows end at the calls
    path = external / "bfcl" / "BFCL_v4_parallel_multiple.json"
    source = {"env": "bfcl", "env_options": {"path": str(path)}, "tasks": 8}
    config = load_config(write(tmp_path, {**SMALL, "source": source}))
    report = build(config)
    assert report.tasks == 8 and report.verified == 8
    rows = list(iter_rows(tmp_path / "out"))
    assert len({r["source_id"] for r in rows}) == 8 and len(rows) == 8 * 3
    for row in rows:  # the calls (in tool_calls, or in the text under a text protocol)
        last = row["messages"][-1]
        assert last["role"] == "assistant" and (last["tool_calls"] or last["content"])
        assert "tool" not in {m["role"] for m in row["messages"]}


def test_a_lost_teacher_shard_is_taught_again_before_the_dataset_is_mended(
    tmp_path: Path,
) -> None:
    # the augment stage reads the teacher's output again to redo a batch: a source shard that
    # went missing is taught again first, never read as fewer trajectories
    small = {**SMALL, "source": {"env": "livestream", "tasks": 40}}
    small["augment"] = {**SMALL["augment"], "batch_size": 8}
    config = load_config(write(tmp_path, small))
    build(config)
    out = tmp_path / "out"

    def snapshot(root: Path) -> dict[str, bytes]:
        files = (f for f in root.rglob("*") if f.is_file() and ".hsa" not in f.parts)
        return {str(f.relative_to(root)): f.read_bytes() for f in files}

    before = snapshot(out)
    source = sorted((out / ".hsa" / "source" / "data").rglob("*.parquet"))
    source[0].unlink()
    next((out / "data").rglob("*.parquet")).unlink()
    again = build(config)
    assert not again.teacher_skipped
    assert snapshot(out) == before and source[0].is_file()


def test_recorded_trajectories_as_source(tmp_path: Path, livestream_table) -> None:
    import pyarrow.parquet as pq

    pq.write_table(livestream_table.slice(0, 10), tmp_path / "recorded.parquet")
    data = {
        "name": "recorded",
        "source": {"trajectories": "recorded.parquet"},
        "augment": {"variants_per_trajectory": 1, "keep_canonical": False},
    }
    report = build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    assert report.augment.rows == 10
    assert not any(r["canonical"] for r in iter_rows(tmp_path / "ds"))


def test_a_jsonl_source_is_read_with_progress(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "find", "parameters": {"type": "object"}}}
    with (tmp_path / "chats.jsonl").open("w") as handle:
        for i in range(5):
            messages = [
                {"role": "user", "content": f"find item {i}"},
                {"role": "assistant", "content": f"Item {i} is here."},
            ]
            handle.write(json.dumps({"messages": messages, "tools": [tool]}) + "\n")
    size = (tmp_path / "chats.jsonl").stat().st_size
    data = {"source": {"trajectories": "chats.jsonl"}, "augment": {"variants_per_trajectory": 1}}
    told: list[tuple[str, int, int]] = []
    report = build(
        load_config(write(tmp_path, data)),
        out=tmp_path / "ds",
        progress=lambda stage, done, total: told.append((stage, done, total)),
    )
    assert report.augment.rows == 10
    read = [(done, total) for stage, done, total in told if stage == "read"]
    assert read[0] == (0, size) and read[-1] == (size, size)


def _recorded(tmp_path: Path, table, name: str = "recorded.parquet") -> str:
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / name)
    return name


def test_recorded_trajectories_changed_after_the_identity_was_taken_are_refused(
    tmp_path: Path, livestream_table, monkeypatch
) -> None:
    import importlib

    import pyarrow.parquet as pq

    build_module = importlib.import_module("hsa.pipelines.build")  # (not hsa.pipelines.build())
    data = {
        "source": {"trajectories": _recorded(tmp_path, livestream_table.slice(0, 4))},
        "augment": {"variants_per_trajectory": 1},
    }
    config = load_config(write(tmp_path, data))
    opened = build_module.open_source

    def changed_first(path, **kwargs):  # between the build's identity and its read
        pq.write_table(livestream_table.slice(0, 5), path)
        return opened(path, **kwargs)

    monkeypatch.setattr(build_module, "open_source", changed_first)
    with pytest.raises(DatasetError, match="changed while this run read it; run again") as exc:
        build(config, out=tmp_path / "ds")
    assert exc.value.file == str(tmp_path / "recorded.parquet")
    assert not (tmp_path / "ds" / ".hsa" / "run.json").exists()  # nothing claimed
    monkeypatch.undo()
    assert build(load_config(write(tmp_path, data)), out=tmp_path / "ds").trajectories == 5


def test_the_recipe_seed_is_kept_unless_the_config_sets_one(
    tmp_path: Path, livestream_table
) -> None:
    from tests.datasets.conftest import RECIPE

    data = {
        "source": {"trajectories": _recorded(tmp_path, livestream_table.slice(0, 6))},
        "augment": {"recipe": {**RECIPE, "seed": 7}},
    }
    config = load_config(write(tmp_path, data))
    assert config.seed is None and config.augment.resolved()[1] == 7
    build(config, out=tmp_path / "recipe")
    assert json.loads((tmp_path / "recipe" / "manifest.json").read_text())["seed"] == 7
    build(load_config(write(tmp_path, {**data, "seed": 3})), out=tmp_path / "config")
    assert json.loads((tmp_path / "config" / "manifest.json").read_text())["seed"] == 3


@pytest.mark.parametrize(
    ("teach", "where", "what"),
    [
        ({"backend": "oracle", "concurency": 4}, "concurency", "did you mean 'concurrency'"),
        ({"modle": "x"}, "modle", "did you mean 'model'"),
        ({"backend": "oracle", "concurrency": 0}, "concurrency", "must be at least 1"),
        ({"tasks": 3}, "tasks", "source"),
        ({"backend": "openai", "model": "m"}, "base_url", "needs a base URL"),
    ],
)
def test_the_teach_section_is_checked_for_every_backend(
    tmp_path: Path, teach, where: str, what: str
) -> None:
    data = {"source": {"env": "livestream", "tasks": 2}, "teach": teach}
    with pytest.raises(ConfigError, match=rf"build\.yaml: \$\.teach\.{where}: .*{what}"):
        load_config(write(tmp_path, data))


def test_a_teacher_of_recorded_trajectories_is_refused(tmp_path: Path) -> None:
    # no teacher runs on them: the section would only be false lineage in the card
    data = {"source": {"trajectories": "t.parquet"}, "teach": {"backend": "openai"}}
    with pytest.raises(ConfigError, match=r"build\.yaml: \$\.teach: only an 'env' source"):
        load_config(write(tmp_path, data))


def test_settings_of_how_the_teacher_is_asked_are_not_the_datasets_identity(
    tmp_path: Path,
) -> None:
    # the backend left out is the oracle, as an empty section's is
    base = {"source": {"env": "livestream", "tasks": 2}}
    plain = load_config(write(tmp_path, base)).identity()
    patient = load_config(write(tmp_path, {**base, "teach": {"timeout_s": 5}})).identity()
    named = load_config(write(tmp_path, {**base, "teach": {"backend": "oracle"}})).identity()
    assert plain == patient == named


def test_a_teacher_setting_written_at_its_default_is_the_same_dataset(tmp_path: Path) -> None:
    # (temperature: 0.0 written out was "another dataset" of byte-identical data)
    base = {"source": {"env": "livestream", "tasks": 2}}

    def identity(teach) -> dict:
        return load_config(write(tmp_path, {**base, "teach": teach})).identity()

    plain = load_config(write(tmp_path, base)).identity()
    defaults = [
        {"backend": "oracle", "temperature": 0.0},
        {"temperature": 0, "top_p": 1, "max_tokens": 1024, "repair": False, "recipe": None},
        # a build's own: each task once, under its canonical harness
        {"variants_per_task": 0, "include_canonical": True, "chat_template_kwargs": {}},
    ]
    for teach in defaults:
        assert identity(teach) == plain, teach
    others = [{"samples": 2}, {"max_tokens": None}, {"variants_per_task": 1}, {"temperature": 1}]
    for teach in others:
        assert identity(teach) != plain, teach
    # a section that writes no default keeps the identity it always had: what it writes
    served = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    written = {**served, "temperature": 0.7, "max_tokens": None, "timeout_s": 5}
    assert identity(written)["teach"] == {
        "backend": "openai",
        "model": "m",
        "temperature": 0.7,
        "max_tokens": None,
    }
    assert plain["teach"] == {"backend": "oracle"}


def test_the_vllm_args_that_choose_the_engine_are_the_datasets_identity(tmp_path: Path) -> None:
    # another revision answered the teacher's rows: the same identity reused its output
    def identity(**vllm_args) -> dict:
        teach = {"backend": "vllm", "model": "org/model", "vllm_args": vllm_args}
        data = {"source": {"env": "livestream", "tasks": 2}, "teach": teach}
        return load_config(write(tmp_path, data)).identity()

    plain = identity()
    assert "vllm_args" not in plain["teach"]  # (as before the engine's arguments counted)
    assert identity(revision="a") != identity(revision="b") != plain
    # how fast and in how much memory it runs decides nothing written
    assert identity(gpu_memory_utilization=0.5, enforce_eager=True) == plain
    assert identity(revision="a", max_num_seqs=8) == identity(revision="a")
    # how the local backend decodes its answers is the dataset's too (teachers.make)
    assert plain["teach"]["decode_version"] == decode_version("vllm")


def test_teach_and_corpus_paths_are_the_configs_and_read_by_their_content(
    tmp_path: Path, external, monkeypatch
) -> None:
    # relative to the config's folder wherever it is read from, as every other path
    sub = tmp_path / "sub"
    (sub / "corpus").mkdir(parents=True)
    corpus = sub / "corpus" / "BFCL_v4_simple_python.json"
    lines = (external / "bfcl" / "BFCL_v4_simple_python.json").read_text("utf-8").splitlines()
    corpus.write_text("\n".join(lines[:5]) + "\n", "utf-8")
    (sub / "teach-recipe.yaml").write_text(yaml.safe_dump({"rules": [{"rule": "tools.rename"}]}))
    data = {
        "source": {"env": "bfcl", "env_options": {"path": "corpus"}, "tasks": 2},
        "teach": {"recipe": "teach-recipe.yaml", "cache": "cache.sqlite"},
    }
    (sub / "build.yaml").write_text(yaml.safe_dump(data))
    config = load_config(sub / "build.yaml")
    assert config.source.env_options["path"] == str(sub / "corpus")
    teach = config.teach_config()
    assert (teach.recipe, teach.cache) == (
        str(sub / "teach-recipe.yaml"),
        str(sub / "cache.sqlite"),
    )
    (sub / "models" / "m").mkdir(parents=True)
    data["teach"] |= {"backend": "transformers", "model": "models/m"}
    (sub / "other.yaml").write_text(yaml.safe_dump(data))
    assert load_config(sub / "other.yaml").teach["model"] == str(sub / "models" / "m")
    data["teach"]["model"] = "Qwen/Qwen2.5-0.5B"  # a hub id, no folder here: as written
    (sub / "other.yaml").write_text(yaml.safe_dump(data))
    assert load_config(sub / "other.yaml").teach["model"] == "Qwen/Qwen2.5-0.5B"
    # an endpoint's model is the name it serves, even where a folder of that name is here
    data["teach"] = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "models/m"}
    (sub / "other.yaml").write_text(yaml.safe_dump(data))
    assert load_config(sub / "other.yaml").teach["model"] == "models/m"
    # the same file named another way: the same paths, so the same teacher job and dataset
    monkeypatch.chdir(tmp_path)
    relative = load_config(Path("sub") / "build.yaml")
    assert relative.source.env_options["path"] == str(sub / "corpus")
    assert relative.teach_config() == config.teach_config()
    assert relative.identity() == config.identity()
    before = config.identity()
    # the same paths holding other content: another dataset, not "complete already"
    (sub / "teach-recipe.yaml").write_text(yaml.safe_dump({"rules": [{"rule": "hooks.wording"}]}))
    edited = load_config(sub / "build.yaml").identity()
    assert edited["teach"]["recipe"] != before["teach"]["recipe"]
    assert edited["source"] == before["source"]
    corpus.write_text("\n".join(lines[5:10]) + "\n", "utf-8")
    assert load_config(sub / "build.yaml").identity()["source"] != before["source"]
    shutil.rmtree(sub / "corpus")
    with pytest.raises(ConfigError, match="no such file or directory") as err:
        load_config(sub / "build.yaml").identity()
    assert err.value.where == "$.source.env_options.path"


def _unreadable(monkeypatch, name: str) -> None:
    """Every read of a file called ``name`` fails, as one on a failing disk or a device
    (/proc/self/mem) does: EIO from the build's one content hash."""
    import errno

    import hsa.config

    real = hsa.config.file_hash

    def failing(path: Path) -> str:
        if path.name == name:
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real(path)

    monkeypatch.setattr(hsa.config, "file_hash", failing)


@pytest.mark.parametrize(
    ("source", "where", "name"),
    [
        (
            {"env": "bfcl", "env_options": {"path": "corpus"}},
            "$.source.env_options.path",
            "BFCL_v4_mem.json",
        ),
        ({"trajectories": "corpus"}, "$.source.trajectories", "mem.parquet"),
    ],
)
def test_a_source_folder_with_a_file_that_cannot_be_read_is_one_error_at_its_key(
    tmp_path: Path, source, where: str, name: str, monkeypatch
) -> None:
    # (an OSError from hashing the folder, a traceback from hsa build; a file the source reads)
    (tmp_path / "corpus").mkdir()
    for written in ("a.json", name):
        (tmp_path / "corpus" / written).write_text("{}")
    _unreadable(monkeypatch, name)
    config = load_config(write(tmp_path, {"source": source, "out": "o"}))
    with pytest.raises(ConfigError, match=rf"cannot read .*corpus/{name}: Input/output"):
        config.identity()
    with pytest.raises(ConfigError) as err:
        config.identity()
    assert (err.value.file, err.value.where) == (str(tmp_path / "build.yaml"), where)


def test_a_file_gone_from_a_source_folder_while_it_is_hashed_is_one_error(
    tmp_path: Path, monkeypatch
) -> None:
    import hsa.config

    (tmp_path / "corpus").mkdir()
    for name in ("a.parquet", "b.parquet"):
        (tmp_path / "corpus" / name).write_text("{}")
    real = hsa.config.file_hash

    def another_job_removes(path: Path) -> str:
        path.unlink()  # between the listing and the hashing
        return real(path)

    monkeypatch.setattr(hsa.config, "file_hash", another_job_removes)
    config = load_config(write(tmp_path, {"source": {"trajectories": "corpus"}, "out": "o"}))
    with pytest.raises(ConfigError, match="is another job writing there") as err:
        config.identity()
    assert err.value.where == "$.source.trajectories"
    assert f"cannot read {tmp_path / 'corpus' / 'a.parquet'}: No such file" in err.value.message


def test_env_options_are_checked_before_a_folder_they_name_is_hashed(
    tmp_path: Path, monkeypatch
) -> None:
    # livestream takes no path: said before the folder was read whole (or failed to be)
    import sys

    def read(*args, **kwargs):
        raise AssertionError("the folder was read before the options were checked")

    monkeypatch.setattr(sys.modules["hsa.pipelines.build"], "_fingerprint", read)
    (tmp_path / "corpus").mkdir()
    data = {"source": {"env": "livestream", "env_options": {"path": "corpus"}}, "out": "o"}
    with pytest.raises(HsaError, match=r"takes no option\(s\) 'path'") as err:
        build(load_config(write(tmp_path, data)))
    assert err.value.where == "$.source.env_options"
    assert not (tmp_path / "o").exists()


def test_a_misspelt_required_key_is_named_with_its_nearest_key() -> None:
    # ("'source' is a required property" before, never naming the key written)
    with pytest.raises(ConfigError) as err:
        parse_config({"sorce": {"env": "livestream"}}, file="build.yaml")
    assert err.value.where == "$.sorce"
    assert err.value.message == "unknown setting 'sorce'; did you mean 'source'?"


@pytest.mark.parametrize("path", ["", "  "])
def test_an_env_path_that_is_blank_is_refused_at_its_key(path) -> None:
    # `""` was the config's own folder (a number or a list: hsa.envs.registry refuses them)
    config = {"source": {"env": "bfcl", "env_options": {"path": path}, "tasks": 2}}
    with pytest.raises(ConfigError) as err:
        parse_config(config, file="build.yaml")
    assert (err.value.file, err.value.where) == ("build.yaml", "$.source.env_options.path")


def test_recorded_input_with_nothing_to_augment(tmp_path: Path, livestream_table) -> None:
    data = {"source": {"trajectories": _recorded(tmp_path, livestream_table.slice(0, 0))}}
    with pytest.raises(HsaError, match=r"recorded\.parquet: holds no trajectories"):
        build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_a_build_that_failed_before_writing_data_does_not_block(
    tmp_path: Path, livestream_table
) -> None:
    rows = livestream_table.slice(0, 6).to_pylist()
    rows[4]["harness_id"] = "nowhere"
    bad = pa.Table.from_pylist(rows, schema=livestream_table.schema)
    data = {"source": {"trajectories": _recorded(tmp_path, bad, "bad.parquet")}}
    with pytest.raises(HsaError, match=r"bad\.parquet: row 4 .*no harness 'nowhere'"):
        build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    # nothing written, so nothing left that would pass for an unfinished build
    assert not (tmp_path / "ds").exists()
    fixed = {"source": {"trajectories": _recorded(tmp_path, livestream_table.slice(0, 6))}}
    report = build(load_config(write(tmp_path, fixed)), out=tmp_path / "ds")
    assert report.augment.trajectories == 6
    # and a finished build of recorded trajectories is left as it is
    again = build(load_config(write(tmp_path, fixed)), out=tmp_path / "ds")
    assert again.augment.complete_already


def test_more_variants_per_trajectory_than_the_recipe_plans(
    tmp_path: Path, livestream_table
) -> None:
    from tests.datasets.conftest import RECIPE

    data = {
        "source": {"trajectories": _recorded(tmp_path, livestream_table.slice(0, 4))},
        "augment": {"recipe": RECIPE, "variants_per_trajectory": 8, "keep_canonical": False},
    }
    report = build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["config"]["augment"]["recipe"]["variants_per_harness"] == 8
    assert report.augment.short == 0 and report.augment.rows == 4 * 8


def test_a_teacher_that_verified_nothing_is_refused_and_the_fix_reruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hsa.envs.base import Outcome
    from hsa.envs.livestream.env import LivestreamEnvironment

    # the teach job verifies with the environment's score: a judge that fails every task
    monkeypatch.setattr(
        LivestreamEnvironment, "score", lambda self, *a: Outcome(False, ("judged wrong",))
    )
    data = {"source": {"env": "livestream", "tasks": 3}}
    with pytest.raises(HsaError, match=r"all 3 trajectories are marked unverified"):
        build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    # the corrected config runs in the same folder, reusing the teacher's output
    fixed = {**data, "augment": {"include_unverified": True}}
    report = build(load_config(write(tmp_path, fixed)), out=tmp_path / "ds")
    assert report.teacher_skipped and report.augment.trajectories == 3
    # another source into that folder: the teacher's output is not reused for it
    other = {**fixed, "source": {"env": "livestream", "tasks": 2}}
    (tmp_path / "ds" / "manifest.json").unlink()
    with pytest.raises(HsaError, match="rm -r"):
        build(load_config(write(tmp_path, other)), out=tmp_path / "ds")


def test_a_rule_that_fails_after_the_teacher_leaves_its_output_for_the_corrected_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hsa.augment import Rule, registry

    def crash(harness, rng, params, context):
        raise ValueError("no such tool")

    monkeypatch.setitem(registry._RULES, "fake.crash", Rule("fake.crash", "1", crash, doc="C."))
    data = {
        "source": {"env": "livestream", "tasks": 3},
        "augment": {"workers": 1, "recipe": {"rules": [{"rule": "fake.crash"}]}},
    }
    with pytest.raises(HsaError, match=r"rule 'fake\.crash': raised ValueError"):
        build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    # the teacher's work is kept, and the config with the rule left out runs on it
    fixed = {**data, "augment": {"workers": 1, "recipe": {"rules": [{"rule": "tools.rename"}]}}}
    report = build(load_config(write(tmp_path, fixed)), out=tmp_path / "ds")
    assert report.teacher_skipped and report.augment.trajectories == 3


def test_a_teacher_that_ran_tasks_under_fewer_variants_says_so_and_a_reuse_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hsa.augment import Rule, registry

    # one rule at one setting: a task has one variant of its harness, however many are asked
    (tmp_path / "one.yaml").write_text(
        "seed: 0\nvariants_per_harness: 4\nrules:\n"
        "  - {rule: prompt.heading_style, probability: 1.0, params: {style: xml}}\n"
    )

    def crash(harness, rng, params, context):
        raise ValueError("no such tool")

    monkeypatch.setitem(registry._RULES, "fake.crash", Rule("fake.crash", "1", crash, doc="C."))
    teach = {"backend": "oracle", "variants_per_task": 3, "recipe": "one.yaml"}
    data = {
        "source": {"env": "livestream", "tasks": 2},
        "teach": teach,
        "augment": {"workers": 1, "recipe": {"rules": [{"rule": "fake.crash"}]}},
    }
    with pytest.raises(HsaError, match=r"fake\.crash"):
        build(load_config(write(tmp_path, data)), out=tmp_path / "ds")
    # the corrected config reuses the teacher's output, and what it fell short of
    fixed = {**data, "augment": {"workers": 1, "recipe": {"rules": [{"rule": "tools.rename"}]}}}
    report = build(load_config(write(tmp_path, fixed)), out=tmp_path / "ds")
    assert report.teacher_skipped and report.tasks == 4  # (rollouts: canonical and one variant)
    assert (report.variants_per_task, report.short) == (3, 2)
    note = (
        "the teacher ran 2 task(s) under fewer than 3 harness variants each (too few of its "
        "recipe's variants change their harness and differ from each other)"
    )
    assert note in json.loads((tmp_path / "ds" / "manifest.json").read_text())["notes"]
    assert f"Note: {note}" in (tmp_path / "ds" / "README.md").read_text()
    assert note in report.augment.notes  # (hsa build prints it)


def test_a_finished_build_copied_without_its_run_state_is_complete_already(
    tmp_path: Path,
) -> None:
    config = load_config(write(tmp_path, SMALL))
    first = build(config, out=tmp_path / "ds")
    # the teacher output is not read again for a finished dataset: damage there is no failure
    teacher_shard = sorted((tmp_path / "ds" / ".hsa" / "source" / "data").rglob("*.parquet"))[0]
    teacher_shard.write_bytes(teacher_shard.read_bytes()[:100])
    again = build(config, out=tmp_path / "ds")
    assert again.augment.complete_already and again.augment.rows == first.augment.rows
    assert "failed" not in json.loads((tmp_path / "ds" / ".hsa" / "run.json").read_text())
    shutil.rmtree(tmp_path / "ds" / ".hsa")  # as a copy without dot-folders leaves it
    again = build(config, out=tmp_path / "ds")
    assert again.augment.complete_already and again.augment.rows == first.augment.rows


def test_a_finished_build_whose_manifest_was_edited_is_written_again(tmp_path: Path) -> None:
    # its rerun said "complete already" with the edited numbers, and kept them
    config = load_config(write(tmp_path, SMALL))
    first = build(config, out=tmp_path / "ds")
    path = tmp_path / "ds" / "manifest.json"
    written = path.read_bytes()
    manifest = json.loads(written)
    manifest["rows"].update(train=999, total=5)
    manifest["trajectories"] = 7
    path.write_text(json.dumps(manifest))
    again = build(config, out=tmp_path / "ds")
    assert again.teacher_skipped and not again.augment.complete_already
    assert (again.augment.rows, again.augment.trajectories) == (
        first.augment.rows,
        first.augment.trajectories,
    )
    assert path.read_bytes() == written


def test_a_build_whose_first_shard_could_not_be_written_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    augment_module = sys.modules["hsa.pipelines.augment"]

    def disk_full(path: Path, table) -> dict:
        path.parent.mkdir(parents=True, exist_ok=True)  # as the writer makes its folder first
        raise DatasetError("cannot write: No space left on device", file=str(path))

    config = load_config(write(tmp_path, SMALL))
    with monkeypatch.context() as patched:
        patched.setattr(augment_module, "write_shard", disk_full)
        with pytest.raises(DatasetError, match="No space left"):
            build(config, out=tmp_path / "ds")
    # empty folders, which hold no one's data (a run stages its shards in its state folder
    # until it finishes: none under data/)
    assert (tmp_path / "ds" / ".hsa" / "staging").is_dir()
    assert not (tmp_path / "ds" / "data").exists()
    report = build(config, out=tmp_path / "ds")
    assert report.teacher_skipped and report.augment.rows


@pytest.mark.parametrize(
    ("source", "where", "what"),
    [
        ({"env": "livestream", "harness": "h.json"}, r"\$\.source\.harness", "take a harness"),
        ({"trajectories": "t.jsonl", "tasks": 3}, r"\$\.source\.tasks", "only an 'env'"),
    ],
)
def test_a_source_section_that_mixes_kinds_names_the_setting(
    tmp_path: Path, source, where: str, what: str
) -> None:
    with pytest.raises(ConfigError, match=rf"build\.yaml: {where}: .*{what}"):
        load_config(write(tmp_path, {"source": source, "out": "o"}))


def test_a_refused_config_leaves_the_unfinished_run_as_it_was(tmp_path: Path, monkeypatch) -> None:
    import sys

    build_module = sys.modules["hsa.pipelines.build"]

    config = load_config(write(tmp_path, SMALL))
    real = build_module.augment_locked

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the run dies after its teacher: no cleanup runs

    monkeypatch.setattr(build_module, "augment_locked", killed)
    with pytest.raises(KeyboardInterrupt):
        build(config)
    monkeypatch.setattr(build_module, "augment_locked", real)
    other = load_config(write(tmp_path, {**SMALL, "seed": 2}))
    # (or the run of this config as an earlier hsa hashed it: one that wrote temperature: 0.0
    # was told to rerun "that config", the one it was rerunning)
    said = "holds the unfinished run of another config .*or this config under another version"
    for _ in range(2):  # refused, and refused again: the refusal changed nothing
        with pytest.raises(HsaError, match=said):
            build(other)
    # where the teacher is served and how patiently it is asked decide nothing written
    patient = {**SMALL, "teach": {"backend": "oracle", "timeout_s": 600, "max_retries": 20}}
    report = build(load_config(write(tmp_path, patient)))
    assert report.teacher_skipped and report.augment.rows == 12 * 3
    assert build(config).augment.complete_already


def test_a_config_made_in_code_is_checked_as_one_read_from_a_file(tmp_path: Path) -> None:
    import dataclasses

    from hsa.pipelines.build import BuildConfig

    config = load_config(write(tmp_path, SMALL))
    assert isinstance(dataclasses.replace(config, out="elsewhere").out, Path)
    with pytest.raises(
        ConfigError, match=r"\$\.source\.tasks: expected an integer or null, got '5'"
    ):
        dataclasses.replace(config.source, tasks="5")
    with pytest.raises(ConfigError, match=r"\$\.source: expected a SourceConfig"):
        BuildConfig(source={"env": "livestream"}, out=tmp_path / "x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"\$\.augment: expected an AugmentConfig"):
        BuildConfig(source=config.source, augment={"seed": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"config must be a BuildConfig, got 'b.yaml'; hsa.build"):
        build("b.yaml")  # type: ignore[arg-type]


def test_a_build_from_an_import_is_one_build_however_its_source_was_named(tmp_path, monkeypatch):
    # (import.json, which records the source as typed, was hashed whole: one chat file
    # imported as /abs/chat.jsonl and as chat.jsonl gave two identities, manifests and cards)
    from hsa.harness.importers import import_source
    from hsa.harness.importers.write import write_import

    chat = tmp_path / "chat.jsonl"
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    chat.write_text(json.dumps({"messages": said}) + "\n")
    write_import(import_source(chat), tmp_path / "absolute")
    monkeypatch.chdir(tmp_path)
    write_import(import_source("chat.jsonl"), tmp_path / "relative")

    def identity(folder: str):
        config = load_config(write(tmp_path, {"source": {"trajectories": folder}, "out": "o"}))
        return config.identity()["source"]

    assert identity("absolute") == identity("relative")
    marker = json.loads((tmp_path / "relative" / "import.json").read_text())
    marker["notes"] = ["another note"]  # its notes go on to the dataset: they are input
    (tmp_path / "relative" / "import.json").write_text(json.dumps(marker))
    assert identity("absolute") != identity("relative")


def test_a_bfcl_question_file_is_a_build_s_input_with_its_answers(tmp_path):
    # (only the question file was hashed, though the environment scores by its answers)
    (tmp_path / "bf" / "possible_answer").mkdir(parents=True)
    (tmp_path / "bf" / "BFCL_v4_simple.json").write_text('{"id": "a"}\n')
    answers = tmp_path / "bf" / "possible_answer" / "BFCL_v4_simple.json"
    answers.write_text('{"id": "a"}\n')
    source = {"env": "bfcl", "env_options": {"path": "bf/BFCL_v4_simple.json"}}
    config = load_config(write(tmp_path, {"source": source, "out": "o"}))
    before = config.identity()
    answers.write_text('{"id": "b"}\n')
    assert config.identity() != before
    (tmp_path / "bf" / "out" / ".hsa").mkdir(parents=True)  # another job's output beside it
    answers.write_text('{"id": "a"}\n')
    assert config.identity() == before


def test_a_folder_of_teach_runs_is_a_build_s_input_by_every_shard_read_of_it(
    tmp_path: Path, livestream_table
) -> None:
    # (the folders of teach jobs inside it were left out of its hash, though their shards are
    # read: a run redone in place left the build "complete already" on the old rows)
    import pyarrow.parquet as pq

    from hsa.datasets.source import open_source

    run = tmp_path / "runs" / "t1"
    (run / ".hsa").mkdir(parents=True)
    pq.write_table(livestream_table.slice(0, 3), run / "train-00000.parquet")
    config = load_config(write(tmp_path, {"source": {"trajectories": "runs"}, "out": "o"}))
    before = config.identity()
    pq.write_table(livestream_table.slice(0, 6), run / "train-00000.parquet")
    assert open_source(tmp_path / "runs").total == 6
    assert config.identity() != before
    # what it does not read is no input; its manifest (a teach job's notes) is
    before = config.identity()
    (run / "cache.sqlite").write_text("x")
    (run / ".hsa" / "job.json").write_text("{}")
    (tmp_path / "runs" / "notes.txt").write_text("x")
    assert config.identity() == before
    (tmp_path / "runs" / "manifest.json").write_text("{}")
    assert config.identity() != before


def test_an_import_s_trajectories_file_is_a_build_s_input_with_its_harnesses(
    tmp_path: Path,
) -> None:
    # (only trajectories.parquet was hashed, though the import's harnesses are read with it:
    # an edited harness left the build "complete already" under the old one)
    from hsa.harness.importers import import_source
    from hsa.harness.importers.write import write_import

    chat = tmp_path / "chat.jsonl"
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    chat.write_text(json.dumps({"messages": said}) + "\n")
    write_import(import_source(chat), tmp_path / "imp")

    def identity(trajectories: str):
        data = {"source": {"trajectories": trajectories}, "out": "o"}
        return load_config(write(tmp_path, data)).identity()["source"]

    before = identity("imp/trajectories.parquet")
    with (tmp_path / "imp" / "harness.yaml").open("a") as harness:
        harness.write("# edited\n")
    assert identity("imp/trajectories.parquet") != before
    assert identity("imp/trajectories.parquet") == identity("imp")  # (one input, read one way)


def test_a_chat_file_is_a_build_s_input_by_its_content_and_its_name(tmp_path: Path) -> None:
    # (only its content was hashed, though its harnesses are named after it: a copy under
    # another name, whose rows are other-1's, not support-1's, left the build "complete
    # already" on the old rows)
    from hsa.datasets.source import open_source

    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    (tmp_path / "copy").mkdir()
    for name in ("support.jsonl", "other.jsonl", "copy/support.jsonl"):
        (tmp_path / name).write_text(json.dumps({"messages": said}) + "\n")

    def identity(trajectories: str):
        data = {"source": {"trajectories": trajectories}, "out": "o"}
        return load_config(write(tmp_path, data)).identity()["source"]

    assert identity("other.jsonl") != identity("support.jsonl")
    assert identity("copy/support.jsonl") == identity("support.jsonl")  # (named alike: one input)
    fingerprint = open_source(tmp_path / "support.jsonl").fingerprint
    assert identity("support.jsonl")["trajectories"] == fingerprint  # (as hsa augment's)
