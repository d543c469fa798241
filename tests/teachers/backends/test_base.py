"""The latency percentiles every teacher report states: nearest rank, in milliseconds."""

from __future__ import annotations

from pathlib import Path

from hsa.pipelines.teach import TeachReport
from hsa.teachers.backends.base import BackendStats, latency_percentiles


def test_percentiles_are_latencies_some_request_had():
    latencies = [i / 1000 for i in range(100, 0, -1)]  # 1 ms .. 100 ms, in reverse order
    assert latency_percentiles(latencies) == {"p50_ms": 51.0, "p90_ms": 91.0, "p99_ms": 100.0}
    assert latency_percentiles([0.25]) == {"p50_ms": 250.0, "p90_ms": 250.0, "p99_ms": 250.0}
    assert latency_percentiles([]) == {}


def test_backend_stats_and_the_teach_report_state_the_same_figures():
    latencies = [0.0123, 0.5, 0.041, 0.0009, 2.25, 0.3]
    stats = BackendStats(latencies_s=list(latencies))
    report = TeachReport(out=Path("out"), latencies_s=list(latencies))
    assert stats.latency_percentiles() == report.latency == latency_percentiles(latencies)
    assert report.latency == {"p50_ms": 300.0, "p90_ms": 2250.0, "p99_ms": 2250.0}
