"""Real Debezium events from ../shared/debezium-samples parse and decode to documented values."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.debezium import UNKNOWN_COMMIT, Outcome, TableSpec, parse_line, parse_value
from cdclake_merge.export import rows_as_json
from cdclake_merge.job import MergeOptions, run_merge
from cdclake_merge.sink import open_sink
from cdclake_merge.storage import LocalFileSystem

EPOCH = dt.datetime(1970, 1, 1)


def lines(samples: Path, name: str) -> list[str]:
    return (samples / name).read_text().split("\n")


def outcomes(samples: Path, name: str, spec: TableSpec) -> list[Outcome]:
    return [parse_line(text, spec) for text in lines(samples, name)]


def ops(results: list[Outcome]) -> Counter[str]:
    return Counter(r.change.op for r in results if r.change is not None)


def micros(moment: dt.datetime) -> int:
    return (moment - EPOCH) // dt.timedelta(microseconds=1)


def test_flink_schema_include_ops_match_source(samples_dir: Path) -> None:
    results = outcomes(
        samples_dir,
        "flink-pg-schema-include/debezium-postgres-data-schema-include.txt",
        TableSpec(("id",)),
    )
    assert ops(results) == Counter({"r": 9, "u": 4, "c": 2, "d": 1})
    first = results[0].change
    assert first is not None and dict(first.columns) == {
        "id": "int",
        "name": "string",
        "description": "string",
        "weight": "double",
    }


def test_flink_schema_exclude_trailing_space_is_kept(samples_dir: Path) -> None:
    results = outcomes(
        samples_dir,
        "flink-pg-schema-exclude/debezium-postgres-data-schema-exclude.txt",
        TableSpec(("id",)),
    )
    rows = [r.change.row for r in results if r.change is not None and r.change.row]
    assert any(row.get("description") == "Big 2-wheel scooter " for row in rows)


def test_flink_replica_identity_delete_without_images_is_quarantined(samples_dir: Path) -> None:
    results = outcomes(
        samples_dir,
        "flink-pg-replica-identity/debezium-postgres-data-replica-identity.txt",
        TableSpec(("id",)),
    )
    bad = [r for r in results if r.kind == "bad"]
    assert [r.reason for r in bad] == [
        "delete without a 'before' image: the deleted key is unknown"
    ]
    assert ops(results)["u"] == 4  # updates with before=null still apply


def test_risingwave_neworder_crlf_tombstones_are_skipped(samples_dir: Path) -> None:
    spec = TableSpec(("no_o_id", "no_d_id", "no_w_id"))
    results = outcomes(samples_dir, "risingwave-ch-benchmark/neworder.1", spec)
    assert ops(results) == Counter({"c": 90, "d": 45})
    assert Counter(r.reason for r in results if r.kind == "skip")["blank line"] >= 45
    assert not [r for r in results if r.kind == "bad"]


def test_risingwave_district_float_columns_are_float(samples_dir: Path) -> None:
    results = outcomes(
        samples_dir, "risingwave-ch-benchmark/district.1", TableSpec(("d_id", "d_w_id"))
    )
    assert ops(results) == Counter({"c": 10, "u": 4})
    change = results[0].change
    assert change is not None and dict(change.columns)["d_tax"] == "float"


def test_risingwave_connect_time_kafka_connect_types_decode(samples_dir: Path) -> None:
    (outcome,) = [
        o
        for o in outcomes(
            samples_dir, "risingwave-connect-time/debezium_timestamp.1", TableSpec(("id",))
        )
        if o.kind != "skip"
    ]
    assert outcome.change is not None and outcome.change.row is not None
    row, types = outcome.change.row, dict(outcome.change.columns)
    assert row["ts"] == micros(EPOCH + dt.timedelta(milliseconds=1666147762800))
    assert row["d"] == 19284 and types["d"] == "date"
    assert row["t"] == "02:49:22.800000" and types["t"] == "string"


def test_risingwave_mess_key_value_after_caret_parses(samples_dir: Path) -> None:
    spec = TableSpec(("order_id",))
    texts = [
        t.split("^", 1)[1]
        for t in lines(samples_dir, "risingwave-mess-key/debezium_mess_key.1")
        if t
    ]
    results = [parse_line(t, spec) for t in texts]
    assert [r.change.op for r in results if r.change] == ["r", "r", "r", "u"]
    update = results[-1].change
    assert update is not None and update.row is not None and update.row["price"] is None


def test_morling_toast_placeholder_and_negative_micro_timestamp(samples_dir: Path) -> None:
    spec = TableSpec(("id",), column_types={"dob": "timestamp"})
    value = json.loads((samples_dir / "morling-toast/DERIVED.toast-update-value.json").read_text())
    change = parse_value(value, spec).change
    assert change is not None and change.row is not None
    assert change.toast_columns == ("biography",)
    assert change.row["dob"] == micros(dt.datetime(1930, 3, 1))
    # Its sequence is [null, lsn]: the first transaction streamed after a snapshot.
    assert change.order == (UNKNOWN_COMMIT, 34415840)


def test_seatunnel_rounded_lsn_is_quarantined_with_reason(samples_dir: Path) -> None:
    (text,) = lines(samples_dir, "seatunnel-pg-alltypes/debezium-postgresql.txt")
    outcome = parse_line(text, TableSpec(("f1",)))
    # -9223372036854776000 is Long.MIN_VALUE rounded through a double: it fits no 64-bit
    # integer (so no LSN either), and the line is refused whichever JSON reader reads it.
    assert outcome.kind == "bad"
    assert outcome.reason == "not valid JSON: integer -9223372036854776000 does not fit 64 bits"


def test_pulsar_legacy_source_block_orders_and_times(samples_dir: Path) -> None:
    value = json.loads(
        (
            samples_dir / "pulsar-legacy-0.9/DERIVED.io-cdc-debezium.md.postgres-update-value.json"
        ).read_text()
    )
    change = parse_value(value, TableSpec(("id",))).change
    assert change is not None and change.row is not None
    assert (change.op, change.lsn, change.source_ts_ms) == ("u", 23862872, 1559208957661)
    assert change.row["name"] == "1111111111"


def test_memiiso_unwrap_flattened_record_decodes_date(samples_dir: Path) -> None:
    value = json.loads((samples_dir / "memiiso-unwrap/unwrap-with-schema.json").read_text())
    change = parse_value(value, TableSpec(("id",))).change
    assert change is not None and change.row is not None
    assert (change.op, change.lsn) == ("r", 33832960)
    assert change.row["order_date"] == 16850 and dict(change.columns)["order_date"] == "date"
    assert not any(name.startswith("__") for name in change.row)


@pytest.mark.parametrize("name", ["serde-with-schema_geom.json", "serde-with-array.json"])
def test_memiiso_flattened_without_lsn_is_quarantined(samples_dir: Path, name: str) -> None:
    value = json.loads((samples_dir / "memiiso-unwrap" / name).read_text())
    outcome = parse_value(value, TableSpec(("id",)))
    assert outcome.kind == "bad" and "__lsn" in (outcome.reason or "")


def test_debezium_docs_create_uses_sequence_commit_lsn(samples_dir: Path) -> None:
    value = json.loads((samples_dir / "debezium-docs/create-with-schema.json").read_text())
    change = parse_value(value, TableSpec(("id",))).change
    assert change is not None
    assert (change.op, change.commit_lsn, change.lsn) == ("c", 24023119, 24023128)


def _merge_sample(
    spark: Any, tmp_path: Path, source: Path, key: tuple[str, ...]
) -> list[dict[str, Any]]:
    changes = tmp_path / "changes" / "topics" / "t" / "partition=0"
    changes.mkdir(parents=True)
    shutil.copy(source, changes / "t+0+0000000000.json")
    fs = LocalFileSystem()
    sink = open_sink(
        warehouse=str(tmp_path / "warehouse"),
        table=f"samples{tmp_path.name[-3:]}.products",
        key=key,
        fs=fs,
        spark_factory=lambda: spark,
    )
    run_merge(
        lambda: spark,
        fs,
        sink,
        MergeOptions(sink.table, key, str(tmp_path / "changes")),  # type: ignore[attr-defined]
    )
    live = sink.read_live(spark, sink.load())
    assert live is not None
    return [json.loads(r) for r in rows_as_json(live, key)]


@pytest.mark.spark
@pytest.mark.parametrize(
    "name",
    [
        "flink-pg-schema-include/debezium-postgres-data-schema-include.txt",
        "flink-pg-schema-exclude/debezium-postgres-data-schema-exclude.txt",
    ],
)
def test_flink_products_merge_to_the_documented_final_table(
    spark,
    samples_dir: Path,
    tmp_path: Path,
    name: str,  # type: ignore[no-untyped-def]
) -> None:
    rows = _merge_sample(spark, tmp_path, samples_dir / name, ("id",))
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == list(range(101, 111))  # 111 was inserted, updated, deleted
    assert (by_id[106]["description"], by_id[106]["weight"]) == ("18oz carpenter hammer", 1.0)
    assert by_id[107]["weight"] == 5.1
    assert (by_id[110]["description"], by_id[110]["weight"]) == (
        "new water resistent white wind breaker",
        0.5,
    )
