"""docs/experiment.md holds a real run's figures: its results section is what ``write_doc``
writes from the summary committed beside it, and that summary has the format a run writes."""

from __future__ import annotations

import json
from pathlib import Path

from hsa.experiment.config import ARMS, METRICS
from hsa.experiment.report import BEGIN, END, results, write_doc

DOCS = Path(__file__).parents[2] / "docs"


def test_the_documents_figures_are_its_summarys():
    summary = json.loads((DOCS / "experiment-summary.json").read_text("utf-8"))
    text = (DOCS / "experiment.md").read_text("utf-8")
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert section.strip() == results(summary, "images/experiment-tiers.png").strip()
    assert (DOCS / "images" / "experiment-tiers.png").read_bytes()[:4] == b"\x89PNG"


def test_the_committed_summary_has_a_runs_format():
    summary = json.loads((DOCS / "experiment-summary.json").read_text("utf-8"))
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


def test_write_doc_replaces_only_the_results_section(tmp_path):
    summary = json.loads((DOCS / "experiment-summary.json").read_text("utf-8"))
    doc = tmp_path / "exp.md"
    doc.write_text(f"# Title\n\nintro\n\n{BEGIN}\nold figures\n{END}\n\nafter\n", "utf-8")
    write_doc(summary, doc)
    text = doc.read_text("utf-8")
    assert text.startswith("# Title\n\nintro\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert "old figures" not in text and "| canonical | name |" in text
    assert json.loads((tmp_path / "experiment-summary.json").read_text("utf-8")) == summary
    assert (tmp_path / "images" / "experiment-tiers.png").exists()
