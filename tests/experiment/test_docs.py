"""docs/experiment.md holds real runs' figures: each results section is what ``write_doc``
writes from the summary committed beside it, and that summary has the format a run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hsa.errors import ExperimentError
from hsa.experiment.config import ARMS, METRICS
from hsa.experiment.report import check_doc, markers, results, write_doc

DOCS = Path(__file__).parents[2] / "docs"
EXAMPLES = Path(__file__).parents[2] / "examples"
#: the configs whose runs docs/experiment.md quotes (the default, and the GPU run's)
SECTIONS = ("experiment", "experiment-random-wide")


def summary_of(name: str) -> dict:
    return json.loads((DOCS / f"{name}-summary.json").read_text("utf-8"))


@pytest.mark.parametrize("name", SECTIONS)
def test_the_documents_figures_are_its_summarys(name):
    assert (EXAMPLES / f"{name}.yaml").is_file()  # a section is named by its config
    begin, end = markers(name)
    text = (DOCS / "experiment.md").read_text("utf-8")
    section = text.split(begin, 1)[1].split(end, 1)[0]
    assert section.strip() == results(summary_of(name), f"images/{name}-tiers.png").strip()
    assert (DOCS / "images" / f"{name}-tiers.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", SECTIONS)
def test_the_committed_summary_has_a_runs_format(name):
    summary = summary_of(name)
    assert len(summary["seeds"]) >= 2 and summary["steps"] > 0
    tiers = list(summary["tiers"])
    assert tiers[0] == "canonical" and "random" in tiers
    for tier in tiers:
        for metric in METRICS:
            for arm in ARMS:
                cell = summary["arms"][arm]["tiers"][tier][metric]
                assert cell["ci"][0] <= cell["value"] <= cell["ci"][1]
            diff = summary["difference"][tier][metric]
            assert diff["ci"][0] <= diff["value"] <= diff["ci"][1]
        for seed in map(str, summary["seeds"]):
            assert summary["per_seed"][seed]["difference"][tier]["name"]["value"] is not None
    assert set(summary["data"]) == set(ARMS)
    assert summary["wall_s"]["total"] > 0


def test_write_doc_replaces_only_its_own_results_section(tmp_path):
    summary = summary_of("experiment")
    begin, end = markers()
    other = "\n".join(markers("wide"))
    doc = tmp_path / "exp.md"
    doc.write_text(f"# Title\n\n{begin}\nold figures\n{end}\n\n{other}\nafter\n", "utf-8")
    write_doc(summary, doc)
    text = doc.read_text("utf-8")
    assert text.startswith("# Title\n\n") and text.endswith(f"{end}\n\n{other}\nafter\n")
    assert "old figures" not in text and "| canonical | name |" in text
    assert json.loads((tmp_path / "experiment-summary.json").read_text("utf-8")) == summary
    assert (tmp_path / "images" / "experiment-tiers.png").exists()
    write_doc(summary, doc, "wide")
    assert text.count("| canonical | name |") == 1
    assert doc.read_text("utf-8").count("| canonical | name |") == 2
    assert (tmp_path / "wide-summary.json").exists()
    assert (tmp_path / "images" / "wide-tiers.png").exists()


def test_a_document_without_the_configs_section_is_refused(tmp_path):
    doc = tmp_path / "exp.md"
    doc.write_text("\n".join(markers()) + "\n", "utf-8")
    check_doc(doc)
    with pytest.raises(ExperimentError, match=r"no results section for wide .*\(wide\)"):
        check_doc(doc, "wide")


def test_a_resumed_runs_wall_times_say_they_are_its_own():
    # the times of a rerun that went on from earlier work are not the experiment's cost
    found = summary_of("experiment")
    assert "\nWall time: data " in results(found, "p.png")
    resumed = results({**found, "resumed": True}, "p.png")
    assert "Wall time of this invocation, which went on from an earlier one's work" in resumed
    # a resumed training's own time is carried over all its parts (hsa.train.clock)
    assert "a resumed training's over all its parts" in resumed
    assert "from its resumption" not in resumed
