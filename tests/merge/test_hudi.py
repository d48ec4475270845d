"""The Hudi write path: every option under unit test; the real write where the bundle exists."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cdclake_merge.hudi import (
    CHECKPOINT_KEY,
    PAYLOAD_CLASS,
    decode_checkpoint,
    encode_checkpoint,
    hudi_options,
    key_generator,
    latest_checkpoint,
)
from cdclake_merge.session import HUDI_JAR_ENV


def test_hudi_options_order_by_cdc_order_with_event_time_payload() -> None:
    options = hudi_options(database="lake", table="public_orders", record_key=["id"])
    assert options["hoodie.datasource.write.precombine.field"] == "_cdc_order"
    assert options["hoodie.payload.ordering.field"] == "_cdc_order"
    assert options["hoodie.datasource.write.payload.class"] == PAYLOAD_CLASS
    assert options["hoodie.datasource.write.operation"] == "upsert"
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"


def test_hudi_options_catalog_sync_is_hms_and_conditional() -> None:
    options = hudi_options(
        database="lake", table="public_orders", record_key=["id"], partition_fields=["order_date"]
    )
    assert options["hoodie.datasource.hive_sync.mode"] == "hms"
    assert options["hoodie.datasource.hive_sync.database"] == "lake"
    assert options["hoodie.datasource.hive_sync.table"] == "public_orders"
    assert options["hoodie.datasource.hive_sync.partition_fields"] == "order_date"
    assert options["hoodie.datasource.meta_sync.condition.sync"] == "true"
    assert options["hoodie.datasource.write.hive_style_partitioning"] == "true"


def test_hudi_options_without_sync_have_no_hive_keys() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], sync_catalog=False)
    assert not [k for k in options if "hive_sync" in k]


def test_hudi_options_checkpoint_goes_into_commit_metadata() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], checkpoint="{}")
    assert options["hoodie.datasource.write.commitmeta.key.prefix"] == "_cdclake."
    assert options[CHECKPOINT_KEY] == "{}"
    assert CHECKPOINT_KEY.startswith(options["hoodie.datasource.write.commitmeta.key.prefix"])


def test_hudi_options_merge_on_read_compacts_inline() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], table_type="MERGE_ON_READ")
    assert options["hoodie.datasource.write.table.type"] == "MERGE_ON_READ"
    assert options["hoodie.compact.inline"] == "true"


def test_hudi_options_global_record_index_moves_repartitioned_rows() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"])
    assert options["hoodie.index.type"] == "RECORD_INDEX"
    assert options["hoodie.metadata.record.index.enable"] == "true"
    assert options["hoodie.record.index.update.partition.path"] == "true"


def test_hudi_options_bad_table_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="COPY_ON_WRITE or MERGE_ON_READ"):
        hudi_options(database="d", table="t", record_key=["id"], table_type="COW")


@pytest.mark.parametrize(
    ("key", "partitions", "generator"),
    [
        (["id"], [], "NonpartitionedKeyGenerator"),
        (["id"], ["day"], "SimpleKeyGenerator"),
        (["a", "b"], ["day"], "ComplexKeyGenerator"),
        (["id"], ["y", "m"], "ComplexKeyGenerator"),
    ],
)
def test_key_generator_matches_key_and_partitions(
    key: list[str], partitions: list[str], generator: str
) -> None:
    assert key_generator(key, partitions).endswith(generator)
    options = hudi_options(database="d", table="t", record_key=key, partition_fields=partitions)
    assert options["hoodie.datasource.write.recordkey.field"] == ",".join(key)


def test_checkpoint_roundtrip_keeps_applied_files_and_truncation() -> None:
    files = frozenset(f"topics/t/partition=0/t+0+{i:010d}.json" for i in range(5000))
    text = encode_checkpoint(files, "0001", [("id", "int")], ["id"])
    assert len(text) < 60_000
    data = decode_checkpoint(text)
    assert (data["applied_files"], data["truncated_before"]) == (files, "0001")


def test_latest_checkpoint_reads_newest_completed_commit() -> None:
    def commit(files: set[str]) -> str:
        checkpoint = encode_checkpoint(frozenset(files), None, [], ["id"])
        return json.dumps({"extraMetadata": {CHECKPOINT_KEY: checkpoint}})

    timeline = {
        "20240101000000000.commit": commit({"a"}),
        "20240102000000000.commit": commit({"a", "b"}),
        "20240103000000000.inflight": "",
    }
    checkpoint = latest_checkpoint(timeline)
    assert checkpoint is not None and checkpoint["applied_files"] == {"a", "b"}


@pytest.mark.hudi
@pytest.mark.spark
@pytest.mark.skipif(
    not os.environ.get(HUDI_JAR_ENV),
    reason=f"Hudi Spark bundle not available: set {HUDI_JAR_ENV} to a local "
    "hudi-spark3.5-bundle_2.12-0.15.0.jar (Maven Central is unreachable here)",
)
def test_hudi_sink_merges_generated_events(tmp_path: Path) -> None:  # pragma: no cover
    from cdclake_merge.export import rows_as_json
    from cdclake_merge.generator import GeneratorOptions, generate_files
    from cdclake_merge.hudi import HudiTable
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.session import local_session
    from cdclake_merge.storage import LocalFileSystem

    source = tmp_path / "generated"
    generate_files(source, GeneratorOptions(events=800, seed=3, keys=80))
    shutil.copytree(source / "topics", tmp_path / "changes" / "topics")
    spark = local_session(tmp_path / "hudi-warehouse")
    sink = HudiTable(spark, str(tmp_path / "warehouse"), "hudi.orders", ["id"], sync_catalog=False)
    options = MergeOptions("hudi.orders", ("id",), str(tmp_path / "changes"))
    run_merge(lambda: spark, LocalFileSystem(), sink, options)
    assert run_merge(lambda: spark, LocalFileSystem(), sink, options).committed is False
    live = (
        spark.read.format("hudi")
        .load(sink.root)
        .drop(
            *[
                c
                for c in spark.read.format("hudi").load(sink.root).columns
                if c.startswith("_hoodie")
            ]
        )
    )
    actual = [
        {k: v for k, v in json.loads(r).items() if not k.startswith("_")}
        for r in rows_as_json(live, ("id",))
    ]
    expected = [json.loads(r) for r in (source / "expected.jsonl").read_text().splitlines()]
    assert actual == expected
