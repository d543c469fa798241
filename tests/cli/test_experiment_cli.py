"""``hsa experiment run`` as a user runs it: a tiny experiment end to end, its summary's
format, a rerun that redoes nothing, and refusals as one line."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from tests.cli.test_teach_cli import HSA, environ

TINY = {
    "seeds": [0],
    "env": "livestream",
    "env_options": {"compact": True, "n_tasks": 120},
    "base": [
        {"rule": "tools.drop_unused", "params": {"keep": 1}},
        {"rule": "skill_content.drop_unused", "params": {"keep": 0}},
    ],
    "arms": {
        "fixed": {"rules": []},
        "augmented": {
            "variants_per_trajectory": 2,
            "variants_per_harness": 4,
            "rules": [{"rule": "tools.rename", "probability": 0.7, "params": {"style": "any"}}],
        },
    },
    "model": {"hidden": 16, "layers": 1, "vocab_size": 400},
    "train": {"max_steps": 2, "per_device_train_batch_size": 4, "max_length": None},
    "eval": {"tasks": 4, "variants": 1, "max_tokens": 12},
    "tiers": {
        "canonical": {"seed": 1, "rules": []},
        "styles": {"seed": 2, "rules": "augmented"},
        "prompt": {
            "seed": 3,
            "held_out": True,
            "rules": [{"rule": "prompt.heading_style", "probability": 1.0}],
        },
    },
}


def hsa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HSA, *args], capture_output=True, text=True, env=environ(), timeout=600)


def write(path, data):
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("experiment")
    config = write(root / "tiny.yaml", TINY)
    doc = root / "doc.md"
    done = hsa("experiment", "run", str(config), "--out", str(root / "out"), "--doc", str(doc))
    assert done.returncode == 0, done.stderr
    return root, config, done


@pytest.mark.slow
def test_a_tiny_experiment_runs_end_to_end_and_writes_its_summary(finished):
    root, _, done = finished
    out = root / "out"
    assert "wrote the results section" in done.stdout
    assert "| canonical | name |" in (root / "doc.md").read_text("utf-8")
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    for arm in ("fixed", "augmented"):
        for tier in ("canonical", "styles", "prompt"):
            for metric in ("name", "keys", "exact"):
                cell = summary["arms"][arm]["tiers"][tier][metric]
                assert 0 <= cell["value"] <= 1 and cell["ci"][0] <= cell["value"] <= cell["ci"][1]
    for tier in ("canonical", "styles", "prompt"):
        assert set(summary["difference"][tier]) == {"name", "keys", "exact", "offered"}
        assert summary["tiers"][tier]["episodes"] > 0
    assert summary["steps"] == 2 and summary["seeds"] == [0]
    assert set(summary["data"]) == {"fixed", "augmented"}
    assert all(len(d["config_hash"]) == 64 for d in summary["data"].values())
    assert set(summary["wall_s"]) == {"data", "train", "eval", "total"}
    runs = summary["training"]
    assert runs["fixed-s0"]["steps"] == runs["augmented-s0"]["steps"] == 2
    assert runs["augmented-s0"]["rows"] == 2 * runs["fixed-s0"]["rows"]
    assert (out / "tiers.png").read_bytes()[:4] == b"\x89PNG"
    assert "| canonical | name |" in (out / "report.md").read_text("utf-8")
    assert "name accuracy, fixed -> augmented" in done.stdout
    # no terminal: each step's progress as lines, for a log
    said = done.stderr.splitlines()
    assert {"data: 2/2", "train: 2/2", "eval: 6/6"} <= set(said), done.stderr
    assert said.index("train: 0/2") < said.index("train: 2/2") < said.index("eval: 1/6")
    # both arms of a seed start from the same weights: one initial model per seed
    for arm in ("fixed", "augmented"):
        trained = yaml.safe_load((out / "runs" / f"{arm}-s0.yaml").read_text("utf-8"))
        assert trained["hsa"]["model"] == str(out / "init-s0")
        assert trained["hsa"]["view"] == "firstcall"


@pytest.mark.slow
def test_a_rerun_redoes_nothing_and_gives_the_same_figures(finished):
    root, config, _ = finished
    out = root / "out"
    before = json.loads((out / "summary.json").read_text("utf-8"))
    weights = (out / "runs" / "fixed-s0" / "model.safetensors").stat().st_mtime_ns
    done = hsa("experiment", "run", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    after = json.loads((out / "summary.json").read_text("utf-8"))
    assert (out / "runs" / "fixed-s0" / "model.safetensors").stat().st_mtime_ns == weights
    before.pop("wall_s"), after.pop("wall_s")
    assert after.pop("resumed") is True and "resumed" not in before  # (its times are its own)
    assert after == before


@pytest.mark.slow
def test_a_training_stopped_part_way_resumes_from_its_checkpoint(finished, tmp_path):
    root, config, _ = finished
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    folder = out / "runs" / "fixed-s0"
    assert not list(folder.glob("checkpoint-*"))  # a finished training keeps no checkpoint
    # fixed-s0 as a run killed after its first step leaves it: a checkpoint, no model yet
    shutil.rmtree(folder), shutil.rmtree(out / "eval" / "fixed-s0")
    (out / "summary.json").unlink()
    first = hsa(
        "train",
        "sft",
        "--config",
        str(out / "runs" / "fixed-s0.yaml"),
        "--out",
        str(folder),
        "--max-steps",
        "1",
    )
    assert first.returncode == 0, first.stderr
    assert [p.name for p in folder.glob("checkpoint-*")] == ["checkpoint-1"]
    (folder / "hsa-train.json").unlink(), (folder / "model.safetensors").unlink()

    done = hsa("experiment", "run", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    log = (out / "runs" / "fixed-s0.log").read_text("utf-8")
    assert f"resumed from {folder / 'checkpoint-1'}" in log
    resolved = json.loads((folder / "hsa-train.json").read_text("utf-8"))
    assert resolved["run"]["steps"] == 2
    assert not list(folder.glob("checkpoint-*"))
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["training"]["fixed-s0"]["steps"] == 2


@pytest.mark.slow
def test_what_was_made_from_an_old_dataset_or_by_an_older_hsa_is_made_again(finished, tmp_path):
    # data/fixed deleted and built again by a newer hsa (other splits): the training on the
    # old dataset, and its evaluations, were kept and reported beside the new dataset's hash;
    # and an evaluation of a model that stays, by an hsa that scored (rendered, planned)
    # otherwise, was kept as it was
    root, config, _ = finished
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    resolved = out / "runs" / "fixed-s0" / "hsa-train.json"
    trained = json.loads(resolved.read_text("utf-8"))
    trained["data"]["manifest_hash"] = "40cad805" * 8  # the deleted dataset's
    resolved.write_text(json.dumps(trained), "utf-8")
    kept = out / "runs" / "augmented-s0" / "model.safetensors"
    evaluated = out / "eval" / "fixed-s0" / "canonical" / "summary.json"
    other = out / "eval" / "augmented-s0" / "canonical" / "summary.json"
    older = out / "eval" / "augmented-s0" / "prompt" / "summary.json"
    scored = json.loads(older.read_text("utf-8"))
    older.write_text(json.dumps({**scored, "output_hash": "0ld" * 21}), "utf-8")
    stamps = {p: p.stat().st_mtime_ns for p in (kept, evaluated, other, older)}
    (out / "summary.json").unlink()

    done = hsa("experiment", "run", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    fixed = summary["data"]["fixed"]["config_hash"]
    assert summary["training"]["fixed-s0"]["manifest_hash"] == fixed
    assert json.loads(resolved.read_text("utf-8"))["data"]["manifest_hash"] == fixed
    assert evaluated.stat().st_mtime_ns != stamps[evaluated]  # the retrained model's
    assert all(p.stat().st_mtime_ns == stamps[p] for p in (kept, other))  # (its own data)
    # (and the folder was copied: the others, made at its first place, are kept)
    assert older.stat().st_mtime_ns != stamps[older]
    assert json.loads(older.read_text("utf-8"))["output_hash"] != "0ld" * 21


@pytest.mark.slow
def test_initial_weights_of_other_datasets_are_made_again_and_their_trainings_dropped(
    finished, tmp_path
):
    from hsa.experiment.config import load_config
    from hsa.experiment.run import INIT_RECORD, initial_model

    root, config, _ = finished
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    data = {arm: out / "data" / arm for arm in ("fixed", "augmented")}
    record = out / "init-s0" / INIT_RECORD
    made_from = json.loads(record.read_text("utf-8"))
    assert set(made_from["data"]) == set(data)
    assert initial_model(load_config(config), out, data, 0) == out / "init-s0"
    assert (out / "runs" / "fixed-s0").is_dir()  # (the same datasets: nothing redone)
    record.write_text(json.dumps({"data": {**made_from["data"], "fixed": "40cad805"}}))
    assert initial_model(load_config(config), out, data, 0) == out / "init-s0"
    assert json.loads(record.read_text("utf-8")) == made_from
    for arm in ("fixed", "augmented"):  # started from the old weights: trained again
        assert not (out / "runs" / f"{arm}-s0").exists()
        assert not (out / "eval" / f"{arm}-s0").exists()


@pytest.mark.slow
def test_another_experiment_in_the_same_folder_is_refused(finished):
    root, _, _ = finished
    other = write(root / "other.yaml", {**TINY, "seeds": [5]})
    done = hsa("experiment", "run", str(other), "--out", str(root / "out"))
    assert done.returncode == 1
    assert "holds another experiment" in done.stderr and "Traceback" not in done.stderr


def test_a_held_out_tier_that_training_draws_is_refused_naming_the_rule(tmp_path):
    tiers = {"leak": {"seed": 9, "held_out": True, "rules": "augmented"}}
    config = write(tmp_path / "leak.yaml", {**TINY, "tiers": tiers})
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "$.tiers.leak" in done.stderr and "tools.rename" in done.stderr
    assert "overlaps training" in done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_bad_training_key_is_refused_before_anything_runs(tmp_path):
    train = {**TINY["train"], "learning_rat": 0.1}
    config = write(tmp_path / "typo.yaml", {**TINY, "train": train})
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "$.train.learning_rat" in done.stderr and "learning_rate" in done.stderr
    assert not (tmp_path / "out").exists()


def test_bad_flags_are_one_line(tmp_path):
    config = write(tmp_path / "tiny.yaml", TINY)
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "o"), "--seeds", "a")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["hsa: error: --seeds: expected integers, got 'a'"]
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "o"), "--seeds", "0,,1")
    assert done.stderr.strip().splitlines() == [
        "hsa: error: --seeds: expected integers, got '0,,1'"
    ]
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "o"), "--steps", "0")
    assert done.returncode == 2 and "'--steps': 0 is not in the range" in done.stderr
    assert "max_steps" not in done.stderr and not (tmp_path / "o").exists()


def test_a_document_without_a_results_section_is_refused_before_running(tmp_path):
    config = write(tmp_path / "tiny.yaml", TINY)
    doc = tmp_path / "notes.md"
    doc.write_text("# my notes\n", "utf-8")
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "o"), "--doc", str(doc))
    assert done.returncode == 1 and "has no results section" in done.stderr
    assert not (tmp_path / "o").exists()
    assert doc.read_text("utf-8") == "# my notes\n"


def test_a_folder_holding_something_else_is_refused(tmp_path):
    config = write(tmp_path / "tiny.yaml", TINY)
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n", "utf-8")
    done = hsa("experiment", "run", str(config), "--out", str(out))
    assert done.returncode == 1 and "holds no experiment" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_an_output_folder_that_is_a_file_is_one_line(tmp_path):
    config = write(tmp_path / "tiny.yaml", TINY)
    (tmp_path / "notadir").write_text("")
    done = hsa("experiment", "run", str(config), "--out", str(tmp_path / "notadir" / "sub"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"hsa: error: {tmp_path / 'notadir'}: is a file, where the output folder should be"
    ]


def test_the_gpu_scale_refuses_a_missing_base_model_before_anything_runs(tmp_path):
    gpu = {"model": str(tmp_path / "no-model"), "train": {"max_steps": 2}}
    config = write(tmp_path / "gpu.yaml", {**TINY, "gpu": gpu})
    out = tmp_path / "out"
    done = hsa("experiment", "run", str(config), "--out", str(out), "--scale", "gpu")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "$.gpu.model" in done.stderr and "no config.json" in done.stderr
    assert not out.exists()


def test_the_gpu_scale_refuses_a_machine_without_a_cuda_gpu(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    gpu = {"model": str(model), "train": {"max_steps": 2}}
    config = write(tmp_path / "gpu.yaml", {**TINY, "gpu": gpu})
    out = tmp_path / "out"
    command = [*HSA, "experiment", "run", str(config), "--out", str(out), "--scale", "gpu"]
    hidden = environ() | {"CUDA_VISIBLE_DEVICES": ""}  # as on a machine without one
    done = subprocess.run(command, capture_output=True, text=True, env=hidden, timeout=600)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "needs a CUDA GPU" in done.stderr
    assert not out.exists()
