"""bench/dispatch_turn.py on its full 500 tables with a short history: one turn decides every
table and fails none. What the turn takes is the bench's figure (docs/cost.md), never asserted."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.moto, pytest.mark.slow]

TABLES = 500


def _bench(repo_root: Path) -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_dispatch_turn", repo_root / "bench" / "dispatch_turn.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dispatch_turn_bench_500_tables_decided_none_failed(repo_root: Path) -> None:
    bench = _bench(repo_root)
    figures = bench.bench(TABLES, commits=2)
    assert figures["decisions"] == TABLES
    assert figures["failed"] == []
    assert figures["waiting"] == TABLES // bench.WAITING_EVERY
    assert figures["started"] == bench.BUDGET  # more wait than the budget starts
    # Per table: GetJob, GetJobRuns, the timeline's and two change folders' listings, the
    # catalog marker's, the rebuild state object, the newest commit and its checkpoint;
    # nothing grows with the history.
    assert figures["requests"]["GetObject"] == 3 * TABLES
    # The change folders listed with the turn's own client, not one made a listing.
    assert figures["requests"]["ListObjectsV2"] == 4 * TABLES
