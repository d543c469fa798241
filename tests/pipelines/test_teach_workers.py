"""How a teacher job is dealt to its worker processes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hsa.pipelines.teach_workers import worker_shares


@given(st.integers(0, 40), st.integers(1, 8), st.integers(1, 64))
def test_workers_never_put_more_requests_in_flight_than_asked(shards, workers, concurrency):
    keys = [("train", i) for i in range(shards)]
    dealt = worker_shares(keys, workers, concurrency)
    assert sorted(k for share, _ in dealt for k in share) == keys  # every shard, once
    assert sum(c for _, c in dealt) == (concurrency if dealt else 0)
    assert all(share and c >= 1 for share, c in dealt)
    assert len(dealt) <= workers


def test_one_request_in_flight_is_one_worker():
    assert worker_shares([("train", 0), ("train", 1)], 2, 1) == [([("train", 0), ("train", 1)], 1)]
    assert worker_shares([("a", 0), ("a", 1), ("a", 2)], 2, 3) == [
        ([("a", 0), ("a", 2)], 2),
        ([("a", 1)], 1),
    ]
