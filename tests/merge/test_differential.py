"""Generate → merge in several runs (late files, redelivery) → export equals the described state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cdclake_merge.demo import delivery_batches
from cdclake_merge.export import rows_as_json
from cdclake_merge.generator import GeneratorOptions, generate_files
from cdclake_merge.job import MergeOptions, run_merge
from cdclake_merge.snapshot_table import SnapshotTable
from cdclake_merge.storage import LocalFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize(
    ("shape", "seed"),
    [("schema", 11), ("schema", 12), ("envelope", 13), ("envelope", 14), ("flat", 15)],
)
def test_merge_generated_events_in_batches_equals_expected_state(
    spark,
    tmp_path: Path,
    shape: str,
    seed: int,  # type: ignore[no-untyped-def]
) -> None:
    source, changes = tmp_path / "generated", tmp_path / "changes"
    meta = generate_files(
        source, GeneratorOptions(events=1500, seed=seed, shape=shape, keys=120, flush_size=90)
    )
    fs = LocalFileSystem()
    table = f"diff.orders_{shape}_{seed}"
    sink = SnapshotTable(fs, str(tmp_path / "warehouse"), table)
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
    actual = [
        {k: v for k, v in json.loads(r).items() if not k.startswith("_")}
        for r in rows_as_json(live, ("id",))
    ]
    expected = [json.loads(r) for r in (source / "expected.jsonl").read_text().splitlines()]
    assert actual == expected
