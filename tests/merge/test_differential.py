"""Generate → merge in several runs (late files, redelivery) → the Hudi table equals the
state the events describe, for every event shape and both table types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.demo import delivery_batches
from cdclake_merge.export import rows_as_json
from cdclake_merge.generator import GeneratorOptions, generate_files
from cdclake_merge.job import MergeOptions, run_merge
from cdclake_merge.sink import open_sink
from cdclake_merge.storage import LocalFileSystem
from tests.merge.support import expected_rows, visible

pytestmark = [pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]


@pytest.mark.parametrize(
    ("shape", "seed", "table_type"),
    [
        # Each shape once, both table types among them: the shapes differ in the parser, the
        # table types in the sink, and the two do not interact.
        ("schema", 11, "COPY_ON_WRITE"),
        ("envelope", 13, "MERGE_ON_READ"),
        ("flat", 15, "COPY_ON_WRITE"),
    ],
)
def test_merge_generated_events_in_batches_equals_expected_state(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    shape: str,
    seed: int,
    table_type: str,
) -> None:
    source, changes = tmp_path / "generated", tmp_path / "changes"
    meta = generate_files(
        source, GeneratorOptions(events=1500, seed=seed, shape=shape, keys=120, flush_size=90)
    )
    fs = LocalFileSystem()
    sink, options = _table(
        spark, tmp_path, f"diff.orders_{shape}_{seed}", table_type, changes, meta["column_types"]
    )
    for batch in delivery_batches(source, 3):
        for path in batch:
            target = changes / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        result = run_merge(lambda: spark, fs, sink, options)
        assert result.quarantined == 0
    assert _rows(spark, sink) == expected_rows(source)


def _table(
    spark: Any,
    tmp_path: Path,
    table: str,
    table_type: str,
    changes: Path,
    column_types: dict[str, str],
    **options: Any,
) -> tuple[Any, MergeOptions]:
    """A table of generated events (key ``id``) and the options that merge into it."""
    sink = open_sink(
        warehouse=str(tmp_path / "warehouse"),
        table=table,
        key=("id",),
        fs=LocalFileSystem(),
        spark_factory=lambda: spark,
        table_type=table_type,
    )
    merge = MergeOptions(
        table=table, key=("id",), changes=str(changes), column_types=column_types, **options
    )
    return sink, merge


def _rows(spark: Any, sink: Any) -> list[dict[str, Any]]:
    live = sink.read_live(spark, sink.load())
    assert live is not None
    return visible([json.loads(r) for r in rows_as_json(live, ("id",))])


def test_merge_backlog_of_three_caps_lands_in_three_runs_as_one_uncapped_run(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # Truncate, redelivery and key changes in the generated history: the cut points fall
    # between them in each partition.
    source = tmp_path / "generated"
    meta = generate_files(
        source, GeneratorOptions(events=1200, seed=21, keys=80, flush_size=60, partitions=3)
    )
    fs = LocalFileSystem()
    files = sum(1 for path in (source / "topics").rglob("*.json"))
    cap = -(-files // 3)

    def merged(table: str, max_files: int | None) -> tuple[list[dict[str, Any]], list[int]]:
        sink, options = _table(
            spark,
            tmp_path,
            table,
            "COPY_ON_WRITE",
            source / "topics",
            meta["column_types"],
            max_files=max_files,
        )
        pending = []
        while True:
            result = run_merge(lambda: spark, fs, sink, options)
            if not result.committed:
                break
            pending.append(result.files_pending)
        return _rows(spark, sink), pending

    capped, capped_pending = merged("cap.orders_capped", cap)
    whole, whole_pending = merged("cap.orders_whole", None)
    assert capped_pending == [files - cap, files - 2 * cap, 0]
    assert whole_pending == [0]
    assert capped == whole == expected_rows(source)


def test_merge_key_changes_keeping_toast_in_one_run_equals_expected_state(
    spark,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # Each key change's create carries the placeholder for its unchanged long note, at its
    # delete's position, as PostgreSQL logs it; one run holds both events of each. Seed 48
    # without a truncate leaves 4 keys whose note only such a create's old key holds, and no
    # key moved twice so (a chain: its second move stays unresolved, docs/merge-job.md rule 4).
    source = tmp_path / "generated"
    meta = generate_files(
        source,
        GeneratorOptions(events=600, seed=48, keys=60, truncate=False, key_change_toast=True),
    )
    sink, options = _table(
        spark,
        tmp_path,
        "diff.orders_key_change_toast",
        "COPY_ON_WRITE",
        source / "topics",
        meta["column_types"],
    )
    result = run_merge(lambda: spark, LocalFileSystem(), sink, options)
    assert result.toast_unresolved == 0
    assert _rows(spark, sink) == expected_rows(source)
