"""The Hudi sink's rules, without Spark: the writer options and key generator it gives Hudi 0.15,
the stored column layout, the newest checkpoint's name, and the schema changes Hudi 0.15 and
its catalog sync accept. The sink on real Hudi: tests/merge/test_hudi.py."""

from __future__ import annotations

import json

import pytest

from cdclake_merge.hudi import CHECKPOINT_KEY, stored_layout
from cdclake_merge.hudi_options import PAYLOAD_CLASS, hudi_options, key_generator
from cdclake_merge.pending import newest_checkpoint_name
from cdclake_merge.schema import SchemaChangeError, unify

# --- writer options -----------------------------------------------------------------------------


def test_hudi_options_order_by_cdc_order_with_event_time_payload() -> None:
    options = hudi_options(database="lake", table="public_orders", record_key=["id"])
    assert options["hoodie.datasource.write.precombine.field"] == "_cdc_order"
    assert options["hoodie.payload.ordering.field"] == "_cdc_order"
    assert options["hoodie.datasource.write.operation"] == "upsert"
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"


def test_hudi_options_payload_is_default_hoodie_record_payload_by_name() -> None:
    options = hudi_options(database="lake", table="t", record_key=["id"])
    expected = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    assert options["hoodie.datasource.write.payload.class"] == expected == PAYLOAD_CLASS


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


def test_hudi_options_merge_on_read_syncs_table_without_ro_suffix() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], table_type="MERGE_ON_READ")
    assert options["hoodie.datasource.hive_sync.skip_ro_suffix"] == "true"
    assert options["hoodie.compact.inline"] == "true"


def test_hudi_options_without_sync_have_no_hive_keys() -> None:
    options = hudi_options(database="d", table="t", record_key=["id"], sync_catalog=False)
    assert not [k for k in options if "hive_sync" in k]


def test_hudi_options_partition_path_update_only_for_partitioned_tables() -> None:
    flat = hudi_options(database="d", table="t", record_key=["id"])
    partitioned = hudi_options(database="d", table="t", record_key=["id"], partition_fields=["p"])
    assert "hoodie.record.index.update.partition.path" not in flat
    assert partitioned["hoodie.record.index.update.partition.path"] == "true"
    assert flat["hoodie.index.type"] == partitioned["hoodie.index.type"] == "RECORD_INDEX"


def test_hudi_options_commit_metadata_needs_the_prefix() -> None:
    options = hudi_options(
        database="d", table="t", record_key=["id"], commit_metadata={CHECKPOINT_KEY: "x.json"}
    )
    assert options[CHECKPOINT_KEY] == "x.json"
    assert CHECKPOINT_KEY.startswith(options["hoodie.datasource.write.commitmeta.key.prefix"])
    with pytest.raises(ValueError, match=r"must start with _cdclake\."):
        hudi_options(database="d", table="t", record_key=["id"], commit_metadata={"k": "v"})


def test_hudi_options_bad_table_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="COPY_ON_WRITE or MERGE_ON_READ"):
        hudi_options(database="d", table="t", record_key=["id"], table_type="COW")


@pytest.mark.parametrize(
    ("key", "partitions", "generator"),
    [
        (["id"], [], "NonpartitionedKeyGenerator"),
        (["id"], ["day"], "SimpleKeyGenerator"),
        (["a", "b"], ["day"], "ComplexKeyGenerator"),
        (["id"], ["y", "m"], "CustomKeyGenerator"),
        (["a", "b"], ["y", "m"], "ComplexKeyGenerator"),
    ],
)
def test_key_generator_matches_key_and_partitions(
    key: list[str], partitions: list[str], generator: str
) -> None:
    assert key_generator(key, partitions).endswith(generator)


def test_stored_layout_appends_new_columns_after_metadata_columns() -> None:
    first = stored_layout([], [("id", "int"), ("name", "string")])
    assert first == ["id", "name", "_cdc_order", "_cdc_lsn", "_cdc_op", "_cdc_source_ts",
                     "_hoodie_is_deleted"]  # fmt: skip
    later = stored_layout(first, [("id", "int"), ("email", "string"), ("name", "string")])
    assert later == [*first, "email"]


def test_newest_checkpoint_name_skips_commits_without_one() -> None:
    def commit(name: str | None) -> str:
        return json.dumps({"extraMetadata": {CHECKPOINT_KEY: name} if name else {}})

    timeline = {
        "20240101000000000.commit": commit("checkpoints/v00000001.json"),
        "20240102000000000.deltacommit": commit("checkpoints/v00000002.json"),
        "20240103000000000.commit": commit(None),  # an inline compaction
        "20240104000000000.inflight": "",
    }
    assert newest_checkpoint_name(timeline) == "checkpoints/v00000002.json"


# --- schema rules (what Hudi 0.15 and its catalog sync accept) --------------------------------


@pytest.mark.parametrize(
    ("stored", "incoming", "result"),
    [("smallint", "int", "int"), ("int", "bigint", "bigint"), ("float", "double", "double"),
     ("bigint", "int", "bigint"), ("double", "float", "double")],
)  # fmt: skip
def test_unify_stored_column_takes_hudi_promotions(stored: str, incoming: str, result: str) -> None:
    assert unify("d.t", [("v", stored)], [("v", incoming)]) == [("v", result)]


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [("int", "double"), ("bigint", "double"), ("decimal(10,2)", "decimal(12,2)"),
     ("decimal(10,2)", "decimal(12,4)"), ("string", "int")],
)  # fmt: skip
def test_unify_stored_column_other_change_fails_naming_table_and_column(
    stored: str, incoming: str
) -> None:
    with pytest.raises(SchemaChangeError, match=r"table d\.t: column 'v' changed type from "):
        unify("d.t", [("v", stored)], [("v", incoming)])


def test_unify_new_column_takes_widest_type_of_the_run() -> None:
    assert unify("d.t", [], [("v", "decimal(10,2)")], [("v", "decimal(12,4)")]) == [
        ("v", "decimal(12,4)")
    ]


def test_unify_keeps_stored_columns_first() -> None:
    assert unify("d.t", [("id", "int"), ("a", "string")], [("b", "int"), ("id", "int")]) == [
        ("id", "int"),
        ("a", "string"),
        ("b", "int"),
    ]
