"""End to end as a user runs it: hsa build (small) -> hsa train tiny-model -> sft, distill,
rl -> hsa eval (the transformers policy), as the README writes the commands."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli.test_teach_cli import HSA, environ


def hsa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HSA, *args], capture_output=True, text=True, env=environ(), timeout=600)


@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """``hsa teach`` on 2 tasks and its augmented dataset: (teach, data), built once for the
    tests that only read them (tiny-model reads its --data and writes only its --out)."""
    root = tmp_path_factory.mktemp("taught")
    teach, data = root / "teach", root / "data"
    assert hsa("teach", "--tasks", "2", "--out", str(teach)).returncode == 0
    assert hsa("augment", "--input", str(teach), "--out", str(data)).returncode == 0
    return teach, data


def test_a_bad_training_config_is_one_line(tmp_path):
    config = tmp_path / "sft.yaml"
    config.write_text("learning_rat: 0.1\n", "utf-8")
    done = hsa("train", "sft", "--config", str(config), "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "did you mean 'learning_rate'?" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["sft", "distill", "rl"])
def test_a_resumed_run_says_from_which_checkpoint(command, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hsa.cli import app
    from hsa.train.distill import DistillReport
    from hsa.train.rl import RlReport
    from hsa.train.sft import TrainReport

    out, checkpoint = tmp_path / "out", str(tmp_path / "out" / "checkpoint-2")
    module, function, report = {
        "sft": ("sft", "train_sft", TrainReport),
        "distill": ("distill", "train_distill", DistillReport),
        "rl": ("rl", "train_rl", RlReport),
    }[command]
    monkeypatch.setattr(
        f"hsa.train.{module}.{function}",
        lambda *args, resume, **kw: report(out=out, resumed_from=checkpoint if resume else None),
    )
    shown = CliRunner().invoke(app, ["train", command, "--out", str(out), "--resume"])
    assert shown.exit_code == 0, shown.output
    assert f"resumed from {checkpoint}" in shown.output
    shown = CliRunner().invoke(app, ["train", command, "--out", str(out)])
    assert "resumed from" not in shown.output


def test_the_sft_summary_counts_the_rows_cut_short_and_dropped(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hsa.cli import app
    from hsa.train.sft import TrainReport

    counts = {"train": 2, "canonical": 0, "variants": 2, "truncated": 1, "dropped": 6}
    report = TrainReport(out=tmp_path, counts=counts)
    monkeypatch.setattr("hsa.train.sft.train_sft", lambda *args, **kwargs: report)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert (
        "on 2 rows (0 canonical, 2 variants; 1 of them cut short at max_length; 6 more "
        "dropped at max_length, see README.md)"
    ) in shown.output
    counts.update(truncated=0, dropped=0)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert "on 2 rows (0 canonical, 2 variants); loss" in shown.output
    # packing that loses no token (bfd_split, wrapped) splits rows into pieces trained apart
    counts.update(split=1)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert (
        "on 2 rows (0 canonical, 2 variants; 1 of them split into pieces at max_length, see "
        "README.md)"
    ) in shown.output


def test_the_sft_run_warns_of_reasoning_its_chat_template_does_not_render(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hsa.cli import app
    from hsa.train.sft import TrainReport

    counts = {"train": 4, "canonical": 4, "variants": 0, "reasoning": 2}
    report = TrainReport(out=tmp_path, counts=counts)
    monkeypatch.setattr("hsa.train.sft.train_sft", lambda *args, **kwargs: report)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "warning" not in shown.output  # rendered, and trained on
    counts["reasoning_not_trained"] = 2
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert (
        "warning: 2 of the rows trained on carry reasoning (reasoning_content) that the chat "
        "template does not render: trained on without it, see README.md"
    ) in shown.output


def test_the_sft_summary_counts_the_rows_by_verification(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hsa.cli import app
    from hsa.train.sft import TrainReport

    # a recorded corpus: no teacher checked its rows, and the summary says so
    counts = {"train": 4, "canonical": 1, "variants": 3, "verified": 0, "never_checked": 4}
    report = TrainReport(out=tmp_path, counts=counts)
    monkeypatch.setattr("hsa.train.sft.train_sft", lambda *args, **kwargs: report)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "on 4 rows (1 canonical, 3 variants; 4 never checked by a teacher); loss" in shown.output
    counts.update(verified=3, never_checked=0, unverified=1, unverified_left_out=0)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert "(1 canonical, 3 variants; 3 verified, 1 unverified); loss" in shown.output
    counts.update(verified=4, unverified=0, unverified_left_out=2)
    shown = CliRunner().invoke(app, ["train", "sft", "--out", str(tmp_path)])
    assert "(1 canonical, 3 variants; 4 verified, 2 unverified left out); loss" in shown.output


def test_the_rl_summary_counts_the_tasks_under_fewer_variants_than_asked(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from hsa.cli import app
    from hsa.train.rl import RlReport

    report = RlReport(out=tmp_path, variants_per_task=3, short=2)
    monkeypatch.setattr("hsa.train.rl.train_rl", lambda *args, **kwargs: report)
    shown = CliRunner().invoke(app, ["train", "rl", "--out", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "under fewer than 3 variants: 2 tasks (too few of the recipe's variants" in said
    report.short = 0
    shown = CliRunner().invoke(app, ["train", "rl", "--out", str(tmp_path)])
    assert "under fewer than" not in shown.output


def readme_commands() -> list[str]:
    """The bash block of README.md's "With `hsa train`" section, line by line."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
    section = text.split("### With `hsa train`", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_training_commands_run_as_written(tmp_path):
    """In a folder holding a (small) out/livestream and the example configs, every line of
    the README's block runs as a user types it."""
    import shlex
    import shutil
    from pathlib import Path

    root = Path(__file__).parents[2]
    shutil.copytree(root / "examples" / "train", tmp_path / "examples" / "train")
    import yaml

    # the Quickstart's build, on fewer tasks
    config = yaml.safe_load((root / "examples" / "livestream.yaml").read_text("utf-8"))
    config.update({"out": "out/livestream", "source": {"env": "livestream", "tasks": 40}})
    build = tmp_path / "build.yaml"
    build.write_text(json.dumps(config), "utf-8")
    assert hsa("build", str(build)).returncode == 0
    commands = readme_commands()
    assert len(commands) == 5
    for line in commands:
        args = shlex.split(line)
        assert args[0] == "hsa"
        done = subprocess.run(
            [*HSA, *args[1:]], capture_output=True, text=True, env=environ(), timeout=600,
            cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\\n{done.stderr[-2000:]}"
        # a log, not a terminal: lines, not bars redrawn with carriage returns (TRL's,
        # datasets', transformers')
        assert "\r" not in done.stdout + done.stderr, line
    out = tmp_path / "out"
    for folder in ("sft-tiny", "distill-tiny", "rl-tiny"):
        assert (out / folder / "README.md").is_file() and (
            out / folder / "hsa-train.json"
        ).is_file()
        assert (out / folder / "model.safetensors").is_file(), folder
    assert (out / "rl-tiny" / "rollouts.jsonl").is_file()
    summary = json.loads((out / "eval-tiny" / "summary.json").read_text("utf-8"))
    assert summary["model"] == "transformers/out/sft-tiny"
    assert set(summary["suites"]) == {"canonical", "variants"}


def test_teacher_output_is_refused_with_the_command_that_makes_a_dataset_of_it(taught, tmp_path):
    teach, _ = taught
    done = hsa("train", "tiny-model", "--data", str(teach), "--out", str(tmp_path / "tiny"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "is hsa teach output" in line and f"hsa augment --input {teach}" in line
    assert not (tmp_path / "tiny").exists()


def test_a_model_folder_without_its_tokenizer_is_one_line(tmp_path):
    # (rl reads no dataset: the quickest command that loads a model's tokenizer)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    out = tmp_path / "out"
    done = hsa("train", "rl", "--env", "livestream", "--model", str(bare), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"{bare}: no tokenizer here (hsa.model, --model)" in line
    assert not out.exists()


def test_a_model_is_never_written_over_other_files(taught, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes")
    (tmp_path / "notes.yaml").write_text("x: 1")
    for out in (mine, tmp_path / "notes.yaml"):
        done = hsa("train", "tiny-model", "--data", str(tmp_path), "--out", str(out))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "--out names a new or empty folder" in done.stderr
    assert (mine / "README.md").read_text() == "my notes"
    # a folder that cannot be made is one error
    _, data = taught
    under_a_file = tmp_path / "notes.yaml" / "m"
    done = hsa("train", "tiny-model", "--data", str(data), "--out", str(under_a_file))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{under_a_file}: cannot create" in done.stderr


def test_a_rerun_rewrites_the_model_it_wrote_and_never_other_files(taught, tmp_path):
    # the README's tiny-model line, run twice, was refused: "is a folder of other files"
    (_, data), out = taught, tmp_path / "tiny"
    command = ("train", "tiny-model", "--data", str(data), "--out", str(out))
    assert hsa(*command).returncode == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "hsa-tiny-model.json" in first and "model.safetensors" in first
    done = hsa(*command)
    assert done.returncode == 0, done.stderr
    assert f"rewrote the tiny model (32 hidden, 2 layers) to {out}" in done.stdout
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # the same model
    # another size replaces it whole; the record says how it was made
    assert hsa(*command, "--hidden", "16", "--layers", "1").returncode == 0
    record = json.loads((out / "hsa-tiny-model.json").read_text("utf-8"))
    assert (record["hidden"], record["layers"]) == (16, 1)
    assert set(record["files"]) | {"hsa-tiny-model.json"} == {p.name for p in out.iterdir()}
    assert json.loads((out / "config.json").read_text("utf-8"))["hidden_size"] == 16
    # a file of the user's beside the model: the folder is no longer only the model's
    (out / "notes.md").write_text("mine")
    done = hsa(*command)
    assert done.returncode == 1 and "--out names a new or empty folder" in done.stderr
    assert (out / "notes.md").read_text() == "mine"


def test_the_current_folder_and_a_link_to_a_model_folder_take_the_model(taught, tmp_path):
    _, data = taught
    here = tmp_path / "here"
    here.mkdir()
    done = subprocess.run(
        [*HSA, "train", "tiny-model", "--data", str(data), "--out", "."],
        capture_output=True, text=True, cwd=here, env=environ(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (here / "model.safetensors").is_file() and (here / "hsa-tiny-model.json").is_file()
    link = tmp_path / "link"
    link.symlink_to(here)
    again = hsa("train", "tiny-model", "--data", str(data), "--out", str(link))
    assert again.returncode == 0, again.stderr
    assert link.is_symlink() and (link / "model.safetensors").is_file()


def test_off_a_terminal_the_trainers_bar_is_off_unless_the_config_says(tmp_path):
    from pathlib import Path

    from hsa.cli.train import _run_args

    said = tmp_path / "said.yaml"
    said.write_text("disable_tqdm: false\nmax_steps: 1\n")
    silent = tmp_path / "silent.yaml"
    silent.write_text("max_steps: 1\n")
    # (a forced override beat a config's own disable_tqdm: false)
    assert "disable_tqdm" not in _run_args(said, None, Path("out"))[1]
    assert _run_args(silent, None, Path("out"))[1] == {"disable_tqdm": True}
    assert _run_args(None, 3, Path("out"))[1] == {"max_steps": 3, "disable_tqdm": True}
