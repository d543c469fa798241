"""End to end: ``hsa eval run`` and ``hsa eval compare`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hsa.augment.recipe import load_recipe
from hsa.eval.suites import heldout_recipe
from tests.cli.test_teach_cli import HSA, SECRET, environ, oracle_server
from tests.eval.test_runner import ASSERTED, SCORED, tau2_domain

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = ROOT / "examples" / "eval-heldout.yaml"


def hsa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*HSA, *args], capture_output=True, text=True, env=environ(), timeout=300)


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text("utf-8"))


def test_the_example_held_out_recipe_is_the_built_in_one():
    assert load_recipe(HELDOUT) == heldout_recipe()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("eval")
    out = {}
    for policy in ("oracle", "fixed-oracle"):
        out[policy] = root / policy
        done = hsa(
            "eval", "run", "--policy", policy, "--tasks", "30", "--out", str(out[policy]),
            "--train-recipe", str(ROOT / "examples" / "livestream.yaml"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "canonical: success" in done.stdout and "variants: success" in done.stdout
    return out


def test_eval_run_writes_episodes_summary_and_report(runs):
    out = runs["oracle"]
    found = summary(out)
    assert found["suites"]["canonical"]["success"] == 1.0
    assert found["suites"]["variants"]["success"] == 1.0
    assert found["model"] == "oracle/hsa-oracle" and found["drop"] == 0.0
    episodes = pq.read_table(out / "episodes.parquet")
    assert episodes.num_rows == 30 + 4 * 30
    report = (out / "report.md").read_text("utf-8")
    assert "![success.png](success.png)" in report and (out / "success.png").is_file()


def test_the_fixed_oracle_drops_on_held_out_variants_and_compare_shows_it(runs, tmp_path):
    fixed = summary(runs["fixed-oracle"])
    assert fixed["suites"]["canonical"]["success"] == 1.0
    assert fixed["suites"]["variants"]["success"] < 0.9
    plot = tmp_path / "compare.png"
    done = hsa(
        "eval", "compare", str(runs["oracle"]), str(runs["fixed-oracle"]), "--plot", str(plot)
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| run | model | canonical")
    assert any(line.startswith("| oracle | oracle/hsa-oracle | 100.0") for line in lines)
    assert any(line.startswith("| fixed-oracle | fixed-oracle/") for line in lines)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_served_model_is_evaluated_and_a_rerun_asks_it_nothing(tmp_path):
    out = tmp_path / "served"
    args = ("--tasks", "12", "--variants", "2", "--recipe", str(HELDOUT), "--out", str(out))
    with oracle_server("--recipe", str(HELDOUT)) as (url, _):
        model = ("--policy", "openai", "--base-url", url, "--model", "hsa-oracle")
        first = hsa("eval", "run", *model, *args, "--tune-gc")  # the same episodes, faster
        assert first.returncode == 0, first.stderr
        again = hsa("eval", "run", *model, *args)
    assert again.returncode == 0, again.stderr
    assert summary(out)["suites"]["variants"]["success"] == 1.0
    assert "requests: 0 answered" in again.stdout
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_server_that_never_answers_fails_the_run_and_writes_nothing(tmp_path, refused):
    out = tmp_path / "down"
    done = hsa(
        "eval", "run", "--policy", "openai", "--base-url", f"{refused}/v1",
        "--model", "m", "--tasks", "2", "--max-retries", "0", "--timeout", "2", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line == (
        f"hsa: error: connection refused to {refused}/v1: nothing answers there (tried "
        "1 time); start the server or check --base-url, then rerun"
    )
    assert not out.exists()


def test_the_tasks_an_environment_left_out_are_said_on_stderr(tmp_path):
    domain = tau2_domain(tmp_path, [SCORED, ASSERTED])
    out = tmp_path / "out"
    args = ("--env", "tau2", "--env-path", str(domain), "--suite", "canonical", "--out", str(out))
    done = hsa("eval", "run", *args)
    assert done.returncode == 0, done.stderr
    assert "over 1 episodes (1 tasks)" in done.stdout
    note = "1 task(s) imported unscored (asserted): their reward_basis holds ENV_ASSERTION"
    assert f"left out: {note}" in done.stderr
    assert summary(out)["left_out"][0].startswith(note)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--suite", "canonical,nope"), "hsa: error: --suite: unknown suite(s) nope"),
        (("--max-steps", "0"), "hsa: error: --max-steps: must be at least 1"),  # not its setting
        (("--policy", "transformers", "--model", "/no/such/model"), "/no/such/model"),
        (("--recipe", "/no/such/recipe.yaml"), "/no/such/recipe.yaml"),
        (("--policy", "openai", "--model", "m"), "--base-url: the openai policy needs a base URL"),
        (("--tasks", "0"), "tasks"),
        (("--api-key-header", "api key"), "api_key_header: 'api key' is not an HTTP header name"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    done = hsa("eval", "run", "--out", str(tmp_path / "out"), *args)
    assert done.returncode == 1, done.stdout
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_held_out_recipe_that_overlaps_training_is_refused_naming_the_rule(tmp_path):
    """The error names the held-out recipe's file and rule, and the training rule by its
    file and JSON path: in a build config, under $.augment.recipe."""
    training = ROOT / "examples" / "livestream.yaml"
    default = ROOT / "hsa" / "augment" / "recipes" / "default.yaml"
    done = hsa(
        "eval", "run", "--recipe", str(default), "--train-recipe", str(training),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"hsa: error: {default}: $.rules[0]: the held-out recipe overlaps the training recipe: "
        f'skill_ids.rename {{"style":"any"}} overlaps training at {training}: '
        "$.augment.recipe.rules[0] "
    )
    # a build config without an augment section trains on the default recipe: the same
    plain = tmp_path / "build.yaml"
    plain.write_text("source: {env: livestream, tasks: 2}\nout: x\n")
    done = hsa(
        "eval", "run", "--recipe", str(default), "--train-recipe", str(plain),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 1
    assert f"{default}: $.rules[0]: the held-out recipe overlaps the training recipe" in (
        done.stderr
    )
    assert "overlaps training at hsa/augment/recipes/default.yaml: $.rules[0] " in done.stderr
    # one whose recipe is a file of its own, relative to the config
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mine.yaml").write_text(default.read_text("utf-8"))
    own = tmp_path / "own.yaml"
    own.write_text(
        "source: {env: livestream, tasks: 2}\nout: x\naugment: {recipe: recipes/mine.yaml}\n"
    )
    done = hsa(
        "eval", "run", "--recipe", str(default), "--train-recipe", str(own),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 1
    assert f"overlaps training at {tmp_path / 'recipes' / 'mine.yaml'}: $.rules[0] " in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_held_out_recipe_overlapping_training_as_the_rules_apply_it_is_refused(tmp_path):
    """skill_ids.namespace writes '/' as ':', and tools.add_optional draws one of its names:
    both draw what examples/livestream.yaml's training recipe draws."""
    training = ROOT / "examples" / "livestream.yaml"
    held = tmp_path / "held.yaml"
    held.write_text(
        "rules:\n"
        "  - {rule: tools.add_optional, params: {names: [audit_id, trace_id], fraction: 0.5}}\n"
        "  - {rule: skill_ids.namespace, params: {prefix: acme, separator: /}}\n"
    )
    done = hsa(
        "eval", "run", "--recipe", str(held), "--train-recipe", str(training),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"hsa: error: {held}: $.rules[0]: the held-out recipe overlaps the training recipe: "
        'tools.add_optional {"fraction":0.5,"names":["audit_id","trace_id"]} overlaps training '
        f"at {training}: $.augment.recipe.rules[8] "
    )
    assert "(and 1 more)" in done.stderr  # skill_ids.namespace, its '/' written as ':'
    assert not (tmp_path / "out").exists()


def test_compare_of_a_folder_without_a_run_names_it(tmp_path):
    done = hsa("eval", "compare", str(tmp_path))
    assert done.returncode == 1 and str(tmp_path) in done.stderr
    assert "summary.json is missing" in done.stderr


def test_suites_given_in_repeated_flags_are_all_run(tmp_path):
    # --suite a --suite b is --suite a,b (the last one alone was run), in any order
    out = tmp_path / "run"
    args = ["--policy", "oracle", "--tasks", "5", "--variants", "1", "--out", str(out)]
    done = hsa("eval", "run", "--suite", "variants", "--suite", "canonical", *args)
    assert done.returncode == 0, done.stderr
    assert list(summary(out)["suites"]) == ["canonical", "variants"]
    assert pq.read_table(out / "episodes.parquet").num_rows == 5 + 5


def test_the_summary_prints_an_interval_of_one_task_as_the_report_does(tmp_path):
    args = ["--policy", "oracle", "--tasks", "1", "--suite", "canonical"]
    done = hsa("eval", "run", *args, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "canonical: success 100.0 [one task] % over 1 episodes" in done.stdout
