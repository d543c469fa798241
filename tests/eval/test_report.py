"""``report.md`` and its plots from a summary, and the side-by-side comparison of runs."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest

from hsa.errors import EvalError
from hsa.eval.report import (
    REPORT,
    check_plot_path,
    compare_rows,
    compare_table,
    environment,
    plot_compare,
    plot_failures,
    plot_success,
    read_summary,
    render_report,
    run_labels,
    write_report,
)
from hsa.eval.suites import heldout_recipe

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _entry(success, low, high, n, **more):
    return {"success": success, "low": low, "high": high, "n": n, "tasks": n, **more}


SUMMARY = {
    "model": "oracle/hsa-oracle",
    "env": "livestream",
    "episodes": 1260,
    "suites": {
        "canonical": {
            **_entry(0.95, 0.9, 1.0, 252, verified=0.95),
            "failures": {"wrong_tool": 12},
            "by_protocol": {"openai-tools": _entry(0.95, 0.9, 1.0, 252)},
            "by_kind": {"lookup": _entry(0.95, 0.9, 1.0, 252)},
        },
        "variants": {
            **_entry(0.85, 0.75, 0.925, 1008, verified=0.8),
            "failures": {"unknown_tool": 100, "wrong_tool": 51},
            "by_family": {
                "prompt": _entry(0.9, 0.8, 1.0, 400),
                "tools": _entry(0.7, 0.55, 0.85, 608),
            },
            "by_rule": {
                "prompt.placement": _entry(0.9, 0.8, 1.0, 400),
                "tools.rename": _entry(0.7, 0.55, 0.85, 608),
            },
        },
    },
    "drop": 0.1,
    "latency": {
        "per_call": {"p50_ms": 12.0, "p95_ms": 30.5, "p99_ms": 41.0},
        "per_episode": {"p50_ms": 80.0, "p95_ms": 200.0, "p99_ms": 250.0},
    },
}


def _rows() -> list[dict]:
    return [
        {"suite": suite, "call_latencies_s": [0.01 * (i + 1), 0.02 * (i + 1)]}
        for suite in ("canonical", "variants")
        for i in range(5)
    ]


def _quiet(summary) -> dict:
    """``summary`` with nothing failed."""
    out = copy.deepcopy(summary)
    for entry in out["suites"].values():
        entry["failures"] = {}
    return out


def test_report_shows_each_suite_with_its_interval():
    text = render_report(SUMMARY, ["success.png"])
    assert text.startswith("# Evaluation: oracle/hsa-oracle on livestream\n")
    assert "1,260 episodes." in text
    assert "| canonical | 95.0 [90.0, 100.0] | 252 | 252 | 95.0 |" in text
    assert "| variants | 85.0 [75.0, 92.5] | 1,008 | 1,008 | 80.0 |" in text
    assert "Drop from canonical to held-out variants: **10.0** points." in text
    assert "![success.png](success.png)" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_report_has_per_family_rule_and_failure_tables():
    text = render_report(SUMMARY, [])
    family = text.index("## variants: per rule family")
    assert text.index("| `prompt` | 90.0 [80.0, 100.0] | 400 |") > family
    assert text.index("| `tools` | 70.0 [55.0, 85.0] | 608 |") > family
    rule = text.index("## variants: per rule\n")
    assert text.index("| `tools.rename` | 70.0 [55.0, 85.0] | 608 |") > rule > family
    assert "## canonical: per protocol" in text and "## canonical: per task kind" in text
    assert "## canonical: per rule family" not in text
    assert "## variants: failure classes" in text and "| unknown_tool | 100 |" in text
    assert "P50 12.0 ms, P95 30.5 ms" in text and "P50 80.0 ms, P95 200.0 ms" in text


def test_a_group_of_one_task_shows_no_interval_and_each_group_its_tasks():
    # resampling one task gives its own mean: "75.0 [75.0, 75.0]" claimed no uncertainty
    summary = {**SUMMARY, "suites": {"variants": {**SUMMARY["suites"]["variants"]}}}
    summary["suites"]["variants"]["by_kind"] = {
        "out_of_stock": {**_entry(0.75, 0.75, 0.75, 4), "tasks": 1},
        "lookup": {**_entry(0.5, 0.25, 0.75, 8), "tasks": 2},
    }
    text = render_report(summary, [])
    assert "| `out_of_stock` | 75.0 [one task] | 4 | 1 |" in text
    assert "| `lookup` | 50.0 [25.0, 75.0] | 8 | 2 |" in text


def test_report_without_a_drop_or_a_figure():
    summary = copy.deepcopy(SUMMARY)
    del summary["drop"]
    summary["suites"]["variants"].update(success=None, low=None, high=None)
    text = render_report(summary, [])
    assert "Drop from" not in text
    assert "| variants | – | 1,008 |" in text


def test_report_states_format_sensitivity():
    summary = copy.deepcopy(SUMMARY)
    summary["suites"]["bfcl"] = {
        **_entry(0.5, 0.4, 0.6, 16),
        "by_config": {"json": _entry(0.5, 0.25, 0.75, 4)},
        "format_sensitivity": {
            "configurations": 4,
            "mean": 0.5,
            "std": 0.176777,
            "max_delta": 0.5,
        },
    }
    text = render_report(summary, [])
    assert "## bfcl: per format configuration" in text
    assert (
        "Format sensitivity over 4 configurations: mean 50.0, standard deviation 17.7, "
        "max delta 50.0 points." in text
    )


def test_write_report_writes_the_report_and_pngs_byte_identically(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        out.mkdir()
        write_report(out, SUMMARY, _rows())
    names = sorted(p.name for p in first.iterdir())
    assert names == ["failures.png", "latency.png", REPORT, "success.png"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
        if name.endswith(".png"):
            assert (first / name).read_bytes().startswith(PNG_MAGIC)
    report = (first / REPORT).read_text("utf-8")
    for plot in ("success.png", "failures.png", "latency.png"):
        assert f"![{plot}]({plot})" in report


def test_nothing_failed_and_nothing_timed_means_no_such_plots(tmp_path):
    quiet = _quiet(SUMMARY)
    assert plot_failures(quiet) is None
    write_report(tmp_path, quiet, [{"suite": "canonical", "call_latencies_s": []}])
    assert sorted(p.name for p in tmp_path.iterdir()) == [REPORT, "success.png"]
    report = (tmp_path / REPORT).read_text("utf-8")
    assert "failures.png" not in report and "latency.png" not in report


def test_plot_failures_is_a_png_when_something_failed():
    assert plot_failures(SUMMARY).startswith(PNG_MAGIC)


def _outside(figure) -> None:
    """Assert that ``figure``'s legend lies outside its axes (covering none of its bars) and
    covers none of its tick labels."""
    (ax,) = figure.axes
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= box.x1 or legend.y1 <= box.y0, (legend, box)
    for label in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
        assert not legend.overlaps(label.get_window_extent()), label.get_text()


def test_the_failures_legend_covers_no_bar(figures):
    # (it was inside the axes, lower right, over the bottom bar's data)
    plot_failures(SUMMARY)
    _outside(figures[0])


def test_the_first_call_panel_says_it_plots_the_right_name(figures):
    # (it plotted the name-match rate under an axis labelled "success %")
    first = {"firstcall": {**_entry(0.3, 0.2, 0.4, 30), "name": _entry(0.8, 0.7, 0.9, 30)}}
    first["firstcall"]["by_family"] = {
        "tools": {**_entry(0.3, 0.2, 0.4, 30), "name": _entry(0.8, 0.7, 0.9, 30)}
    }
    plot_success({"suites": first})
    suites, families = figures[0].axes
    assert suites.get_xlabel() == "success %" and families.get_xlabel() == "right name %"


# compare


def _other() -> dict:
    other = copy.deepcopy(SUMMARY)
    other["model"] = "openai/tuned"
    other["suites"]["canonical"].update(success=0.9, low=0.85, high=0.95)
    other["suites"]["variants"].update(success=0.88, low=0.8, high=0.95)
    other["drop"] = 0.02
    return other


def test_compare_rows_has_one_row_per_run():
    rows = compare_rows([SUMMARY, _other()], ["base", "tuned"])
    assert [r["run"] for r in rows] == ["base", "tuned"]
    assert [r["model"] for r in rows] == ["oracle/hsa-oracle", "openai/tuned"]
    assert rows[0]["canonical"] is SUMMARY["suites"]["canonical"]
    assert rows[1]["variants"]["success"] == 0.88
    assert [r["drop"] for r in rows] == [0.1, 0.02]
    assert rows[0]["bfcl"] is None
    assert [r["env"] for r in rows] == ["livestream", "livestream"]


def test_compare_table_has_canonical_variants_and_drop_per_run():
    table = compare_table(compare_rows([SUMMARY, _other()], ["base", "tuned"]))
    lines = table.splitlines()
    assert len(lines) == 4
    assert lines[0] == "| run | model | canonical % [95% CI] | variants % [95% CI] | drop |"
    assert lines[2] == (
        "| base | oracle/hsa-oracle | 95.0 [90.0, 100.0] | 85.0 [75.0, 92.5] | 10.0 |"
    )
    assert lines[3] == "| tuned | openai/tuned | 90.0 [85.0, 95.0] | 88.0 [80.0, 95.0] | 2.0 |"


def test_compare_table_adds_bfcl_when_a_run_has_it():
    other = _other()
    other["suites"]["bfcl"] = _entry(0.5, 0.4, 0.6, 16)
    lines = compare_table(compare_rows([SUMMARY, other], ["base", "tuned"])).splitlines()
    assert lines[0].endswith("| drop | bfcl % [95% CI] |")
    assert lines[2].endswith("| 10.0 | – |")
    assert lines[3].endswith("| 2.0 | 50.0 [40.0, 60.0] |")


def test_compare_table_adds_the_first_call_name_when_a_run_has_it():
    other = _other()
    other["suites"]["firstcall"] = {**_entry(0.3, 0.2, 0.4, 30), "name": _entry(0.8, 0.7, 0.9, 30)}
    lines = compare_table(compare_rows([SUMMARY, other], ["base", "tuned"])).splitlines()
    assert lines[0].endswith("| drop | first call: name % [95% CI] |")
    assert lines[2].endswith("| 10.0 | – |")
    assert lines[3].endswith("| 2.0 | 80.0 [70.0, 90.0] |")


def test_compare_table_of_different_samples_says_so():
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": None, "seed": 0, "variants": 4, "recipe": None}
    other["config"] = {**base["config"], "tasks": 20, "seed": 7}
    lines = compare_table(compare_rows([base, other], ["base", "tuned"])).splitlines()
    assert lines[-1] == (
        "Note: these runs evaluate different samples (tasks all/20; seed 0/7; task_seed 0/7): "
        "their success rates are over different tasks or variants, not comparable side by side."
    )
    same = compare_table(compare_rows([base, {**other, "config": base["config"]}], ["a", "b"]))
    assert "Note:" not in same


def test_runs_of_other_task_versions_are_different_samples():
    # the same config, but the environment's splits changed between the runs (a summary of an
    # older hsa, without task_version, was of version 1)
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": None, "seed": 0, "variants": 4, "recipe": None}
    other["config"] = dict(base["config"])
    other["task_version"] = 2
    lines = compare_table(compare_rows([base, other], ["old", "new"])).splitlines()
    assert lines[-1] == (
        "Note: these runs evaluate different samples (task_version 1/2): "
        "their success rates are over different tasks or variants, not comparable side by side."
    )
    for pair in ([{**base, "task_version": 1}, base], [{**base, "task_version": 2}, other]):
        assert "Note:" not in compare_table(compare_rows(pair, ["a", "b"]))


def test_an_unset_task_seed_is_compared_as_the_seed_it_samples_by():
    # unset, --task-seed samples by --seed: seed 0 with task seed 0 is the same sample
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": 20, "seed": 0, "variants": 4, "recipe": None}
    other["config"] = {**base["config"], "task_seed": 0}
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))
    other["config"] = {**base["config"], "task_seed": 1}
    assert (
        compare_table(compare_rows([base, other], ["a", "b"]))
        .splitlines()[-1]
        .startswith("Note: these runs evaluate different samples (task_seed 0/1): ")
    )
    # other seeds (other variants), one task seed: the same tasks, other variants
    other["config"] = {**base["config"], "seed": 7, "task_seed": 0}
    assert "(seed 0/7)" in compare_table(compare_rows([base, other], ["a", "b"]))


def test_the_compare_plot_wraps_long_run_names_and_its_legend_covers_none(figures):
    # (names of ~30 characters ran into each other under the bars)
    names = ["qwen2.5-0.5b-instruct-sft-augmented-seed0", "qwen2.5-0.5b-instruct-sft-fixed-only"]
    plot_compare(compare_rows([SUMMARY, _other()], names))
    (ax,) = figures[0].axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert [label.replace("\n", "") for label in labels] == names
    assert all(len(line) <= 22 for label in labels for line in label.split("\n"))
    _outside(figures[0])


def test_read_summary_round_trips(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY), "utf-8")
    assert read_summary(tmp_path) == SUMMARY


def test_read_summary_of_a_missing_run_names_the_path(tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(EvalError) as caught:
        read_summary(missing)
    assert str(missing) in str(caught.value)
    assert "summary.json is missing" in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        '{"episodes": 3}',
        "[1, 2]",
        "{not json",
        '{"suites": null}',
        '{"suites": {"canonical": {"success": "x"}}}',
        '{"suites": {}, "drop": "5%"}',
        '{"suites": {"canonical": {"success": 5}}}',
        '{"suites": {"canonical": {"success": NaN}}}',
    ],
)
def test_read_summary_refuses_what_is_not_a_summary(tmp_path, text):
    (tmp_path / "summary.json").write_text(text, "utf-8")
    with pytest.raises(EvalError) as caught:
        read_summary(tmp_path)
    assert str(tmp_path / "summary.json") in str(caught.value)


def _on_tau2() -> dict:
    other = _other()
    other["env"] = "tau2"
    other["config"] = {"env_options": {"path": "tau2/retail"}}
    return other


def test_environment_names_the_options_a_run_was_built_with():
    assert environment(SUMMARY) == "livestream"
    assert environment(_on_tau2()) == "tau2 (path=tau2/retail)"
    assert environment({"suites": {}}) is None  # a summary that does not say


def test_compare_table_of_different_environments_has_an_env_column_and_a_note():
    lines = compare_table(compare_rows([SUMMARY, _on_tau2()], ["base", "tuned"])).splitlines()
    assert lines[0] == ("| run | model | env | canonical % [95% CI] | variants % [95% CI] | drop |")
    assert lines[1] == "|---|---|---|---|---|---:|"
    assert lines[2].startswith("| base | oracle/hsa-oracle | livestream | 95.0 [90.0, 100.0] |")
    assert lines[3].startswith("| tuned | openai/tuned | tau2 (path=tau2/retail) | 90.0 ")
    assert lines[4] == ""
    assert lines[5].startswith("Note: these runs are on different environments (livestream; tau2")
    assert "not comparable" in lines[5]


def test_the_same_environment_built_otherwise_is_another_environment():
    seeded = _other()
    seeded["config"] = {"env_options": {"seed": 1}}
    table = compare_table(compare_rows([SUMMARY, seeded], ["base", "tuned"]))
    assert "| livestream (seed=1) |" in table and "Note:" in table


def test_a_run_that_does_not_say_its_environment_is_not_told_apart():
    unknown = _other()
    del unknown["env"]
    table = compare_table(compare_rows([SUMMARY, unknown], ["base", "tuned"]))
    assert "env" not in table.splitlines()[0] and "Note:" not in table


def test_a_plot_under_a_file_is_refused_naming_the_file(tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    for plot in (afile / "x.png", afile / "sub" / "x.png"):
        with pytest.raises(EvalError) as caught:
            check_plot_path(plot)
        assert f"{afile} is not a directory" in str(caught.value)
    with pytest.raises(EvalError, match="is a directory; give a file name such as"):
        check_plot_path(tmp_path)
    check_plot_path(tmp_path / "new" / "compare.png")  # folders that are not there yet are made
    # a run's own files, and a file that is not a plot, are never written over
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(EvalError, match="inside the evaluation run"):
        check_plot_path(run / "summary.json", [run])
    (run / "summary.json").write_text("{}")
    with pytest.raises(EvalError, match="inside the evaluation run"):
        check_plot_path(run / "success.png")  # a run's plot, compared or not
    (tmp_path / "taken.png").write_text("my notes")
    with pytest.raises(EvalError, match="a file that is not a PNG is there already"):
        check_plot_path(tmp_path / "taken.png")
    with pytest.raises(EvalError, match=r"ending in \.png"):
        check_plot_path(tmp_path / "compare.jpg")


def _runs(tmp_path, *summaries) -> list[str]:
    paths = []
    for i, summary in enumerate(summaries):
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(summary), "utf-8")
        paths.append(str(run))
    return paths


def _compare(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "from hsa.cli import main; main()", "eval", "compare", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_compare_with_a_plot_under_a_file_says_so_in_one_line(tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    done = _compare(*_runs(tmp_path, SUMMARY, _other()), "--plot", str(afile / "x.png"))
    assert done.returncode == 1 and done.stdout == ""  # refused before the table
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("hsa: error: ") and line.endswith(f"{afile} is not a directory")


def test_compare_of_runs_on_different_environments_says_so(tmp_path):
    done = _compare(*_runs(tmp_path, SUMMARY, _on_tau2()))
    assert done.returncode == 0, done.stderr
    assert "| env |" in done.stdout and "different environments" in done.stdout


def test_the_built_in_recipe_given_as_a_file_is_the_same_sample():
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": 4, "seed": 0, "variants": 4, "recipe": None}
    base["recipe"] = heldout_recipe().to_dict()
    other["config"] = {**base["config"], "recipe": "elsewhere/eval-heldout.yaml"}
    other["recipe"] = heldout_recipe().to_dict()
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))
    other["config"] = {**base["config"], "recipe": "mine.yaml"}
    other["recipe"] = {**heldout_recipe().to_dict(), "rules": [{"rule": "tools.shuffle"}]}
    note = compare_table(compare_rows([base, other], ["a", "b"])).splitlines()[-1]
    assert note.startswith(
        "Note: these runs evaluate different samples (recipe built-in/mine.yaml ("
    )


def test_a_recipe_is_told_by_the_content_its_runs_recorded_not_by_its_file(tmp_path):
    """One file edited between two runs is two recipes; one recipe in two files is one. The
    file is not read at all: it may have changed since, or be relative to another folder."""
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": 4, "seed": 0, "variants": 4, "recipe": "rx.yaml"}
    other["config"] = dict(base["config"])
    base["recipe"] = {"seed": 1, "rules": [{"rule": "tools.shuffle", "probability": 1.0}]}
    other["recipe"] = {"seed": 1, "rules": [{"rule": "protocol.switch", "probability": 1.0}]}
    note = compare_table(compare_rows([base, other], ["a", "b"])).splitlines()[-1]
    assert note.startswith("Note: these runs evaluate different samples (recipe rx.yaml (")
    hashes = re.findall(r"rx\.yaml \(([0-9a-f]{8})\)", note)
    assert len(hashes) == 2 and hashes[0] != hashes[1]
    other["recipe"] = copy.deepcopy(base["recipe"])
    other["config"] = {**base["config"], "recipe": "copy/of-rx.yaml"}
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))


def test_a_summary_of_an_older_hsa_tells_its_recipe_by_its_path():
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": 4, "seed": 0, "variants": 4, "recipe": None}
    other["config"] = dict(base["config"])
    assert "recipe" not in base and "recipe" not in other
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))
    other["config"] = {**base["config"], "recipe": "no/such/file.yaml"}
    note = compare_table(compare_rows([base, other], ["a", "b"])).splitlines()[-1]
    assert "(recipe built-in/no/such/file.yaml)" in note
    base["config"] = dict(other["config"])
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))


def test_beside_a_summary_of_an_older_hsa_runs_are_told_by_their_recipes_path():
    # the newer run's recipe by its content, the older one's by its path: never equal, so
    # one file's two runs were "different samples"
    base, other = copy.deepcopy(SUMMARY), _other()
    base["config"] = {"split": "test", "tasks": 4, "seed": 0, "variants": 4, "recipe": "rx.yaml"}
    other["config"] = dict(base["config"])
    other["recipe"] = {"seed": 1, "rules": [{"rule": "tools.shuffle", "probability": 1.0}]}
    assert "Note:" not in compare_table(compare_rows([base, other], ["a", "b"]))
    other["config"] = {**base["config"], "recipe": "other.yaml"}
    assert "(recipe rx.yaml/other.yaml)" in compare_table(compare_rows([base, other], ["a", "b"]))


def test_run_labels_are_the_fewest_trailing_parts_that_tell_runs_apart():
    assert run_labels(["a/run", "b/run"]) == ["a/run", "b/run"]
    assert run_labels(["x/a/run", "y/a/run", "b/run"]) == ["x/a/run", "y/a/run", "b/run"]
    assert run_labels(["run", "a/run", "base"]) == ["run", "a/run", "base"]
    assert run_labels(["/abs/run", "b/run/"]) == ["abs/run", "b/run"]
    assert run_labels(["same", "same", "."]) == ["same", "same", "."]


def test_compare_of_runs_by_one_name_in_two_folders_tells_them_apart(tmp_path):
    runs = []
    for folder, summary in (("a", SUMMARY), ("b", _other())):
        run = tmp_path / folder / "run"
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps(summary), "utf-8")
        runs.append(str(run))
    done = _compare(*runs)
    assert done.returncode == 0, done.stderr
    named = [line.split(" | ")[0] for line in done.stdout.splitlines()[2:4]]
    assert named == ["| a/run", "| b/run"]
