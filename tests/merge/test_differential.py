"""Generate → merge in several runs (late files, redelivery) → the Hudi table equals the
state the events describe, for every event shape and both table types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
    table = f"diff.orders_{shape}_{seed}"
    sink = open_sink(
        warehouse=str(tmp_path / "warehouse"),
        table=table,
        key=("id",),
        fs=fs,
        spark_factory=lambda: spark,
        table_type=table_type,
    )
    options = MergeOptions(
        table=table, key=("id",), changes=str(changes), column_types=meta["column_types"]
    )
    for batch in delivery_batches(source, 3):
        for path in batch:
            target = changes / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        result = run_merge(lambda: spark, fs, sink, options)
        assert result.quarantined == 0
    live = sink.read_live(spark, sink.load())
    assert live is not None
    actual = visible([json.loads(r) for r in rows_as_json(live, ("id",))])
    assert actual == expected_rows(source)
