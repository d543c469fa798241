"""End to end as a user runs it: hsa build (small) -> hsa train sft (tiny) -> hsa eval."""

from __future__ import annotations

import json
import subprocess

from hsa.datasets.export import to_hf
from tests.cli.test_teach_cli import HSA, environ
from tests.tinymodels import save_tiny, texts_of


def hsa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HSA, *args], capture_output=True, text=True, env=environ(), timeout=600)


def test_build_then_train_then_evaluate(tmp_path):
    data, trained, evaluated = tmp_path / "data", tmp_path / "sft", tmp_path / "eval"
    build = tmp_path / "build.yaml"
    build.write_text(
        json.dumps(
            {
                "name": "tiny",
                "out": str(data),
                "source": {"env": "livestream", "tasks": 30},
                "augment": {"variants_per_trajectory": 1, "keep_canonical": True},
            }
        ),
        "utf-8",
    )
    done = hsa("build", str(build))
    assert done.returncode == 0, done.stderr
    model = save_tiny(tmp_path / "tiny", texts_of(to_hf(data, "train", cache_dir=tmp_path / "hf")))
    config = tmp_path / "sft.yaml"
    config.write_text(
        json.dumps({"max_length": None, "per_device_train_batch_size": 1, "logging_steps": 1}),
        "utf-8",
    )
    done = hsa(
        "train", "sft", "--config", str(config), "--data", str(data), "--model", str(model),
        "--out", str(trained), "--max-steps", "3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sft: 3 steps on" in done.stdout
    assert (trained / "README.md").is_file() and (trained / "model.safetensors").is_file()
    done = hsa(
        "eval", "run", "--policy", "transformers", "--model", str(trained), "--tasks", "2",
        "--variants", "1", "--max-tokens", "16", "--max-steps", "2", "--out", str(evaluated),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((evaluated / "summary.json").read_text("utf-8"))
    assert summary["model"] == f"transformers/{trained}"
    assert (evaluated / "report.md").is_file()


def test_a_bad_training_config_is_one_line(tmp_path):
    config = tmp_path / "sft.yaml"
    config.write_text("learning_rat: 0.1\n", "utf-8")
    done = hsa("train", "sft", "--config", str(config), "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "did you mean 'learning_rate'?" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_rl_runs_a_step_from_the_command_line(tmp_path):
    from hsa.envs.registry import get
    from tests.tinymodels import qwen_model, qwen_tokenizer

    tokenizer = qwen_tokenizer([t.turns[0] for t in get("livestream").tasks("train")[:40]])
    model = tmp_path / "model"
    qwen_model(tokenizer).save_pretrained(model)
    tokenizer.save_pretrained(model)
    config = tmp_path / "rl.yaml"
    config.write_text(
        json.dumps(
            {
                "hsa": {"tasks": 1, "variants_per_task": 1, "max_steps_per_turn": 1},
                "num_generations": 2,
                "per_device_train_batch_size": 2,
                "max_completion_length": 16,
                "save_strategy": "no",
                "logging_steps": 1,
            }
        ),
        "utf-8",
    )
    out = tmp_path / "rl"
    done = hsa(
        "train", "rl", "--config", str(config), "--model", str(model), "--out", str(out),
        "--max-steps", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "rl: 1 steps, 2 episodes on 2 prompts" in done.stdout
    assert (out / "rollouts.jsonl").is_file() and (out / "README.md").is_file()
