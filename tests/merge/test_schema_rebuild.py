"""Schema changes without downtime (issue #49) on real Hudi 0.15: a stored column's type change
the table cannot take in place ends the run as one line that needs a rebuild, with nothing
written and the change files left waiting; so does a config asking for a type, key,
partitioning or record index the stored table was not created with, which ``cdclake status``
says too."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.job import TableNeedsRebuild, run_merge, scan_changes
from cdclake_merge.layout import LayoutNeedsRebuild
from tests.merge.support import Lake, decimal_b64, envelope, with_schema

pytestmark = [pytest.mark.spark, pytest.mark.hudi]


def _amount(precision: int, scale: int) -> dict[str, Any]:
    return {
        "field": "amount",
        "optional": True,
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
    }


def _order(id_: int, lsn: int, amount: str, precision: int, scale: int) -> dict[str, Any]:
    """An insert as the JsonConverter writes ``numeric(precision,scale)``."""
    return with_schema(
        envelope("c", lsn=lsn, after={"id": id_, "amount": decimal_b64(amount, scale)}),
        [{"field": "id", "type": "int32"}, _amount(precision, scale)],
    )


@pytest.fixture(scope="module")
def widened(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, TableNeedsRebuild]:
    """A table of numeric(10,2) amounts whose source column became numeric(14,4), and the
    failure of the run that met it."""
    lake = Lake(spark, tmp_path_factory.mktemp("widened"))
    lake.write("a.json", [_order(1, 10, "1.25", 10, 2)])
    lake.merge()
    lake.write("b.json", [_order(2, 20, "2.5000", 14, 4)])
    with pytest.raises(TableNeedsRebuild) as failed:
        lake.merge()
    return lake, failed.value


def test_run_merge_decimal_scale_change_needs_rebuild_in_one_line(
    widened: tuple[Lake, TableNeedsRebuild],
) -> None:
    lake, failure = widened
    line = str(failure)
    assert "\n" not in line
    assert line.startswith(
        f"table {lake.table}: column 'amount' changed type from decimal(10,2) to decimal(14,4), "
    )
    assert "needs a rebuild" in line
    assert (failure.change.column, failure.change.stored, failure.change.incoming) == (
        "amount",
        "decimal(10,2)",
        "decimal(14,4)",
    )


def test_run_merge_needs_rebuild_writes_nothing_and_leaves_the_files_waiting(
    widened: tuple[Lake, TableNeedsRebuild],
) -> None:
    lake, _ = widened
    state = lake.sink.load()
    assert state.version == 1
    assert [Path(f.path).name for f in scan_changes(lake.fs, str(lake.changes), state).pending] == [
        "b.json"
    ]
    assert lake.visible() == [{"id": 1, "amount": "1.25"}]


# --- config that only a rebuild gives the stored table ------------------------------------------


@pytest.fixture(scope="module")
def created(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A COPY_ON_WRITE table keyed by id, unpartitioned, its record index of 2 file groups."""
    lake = Lake(
        spark,
        tmp_path_factory.mktemp("created"),
        services={"record_index_file_groups": 2},
    )
    lake.write("a.json", [_order(1, 10, "1.25", 10, 2)])
    lake.merge()
    return lake


def _reopened(lake: Lake, **spec: Any) -> Any:
    """The stored table opened as a config asking for ``spec`` would open it."""
    from cdclake_merge.sink import open_sink

    return open_sink(
        warehouse=str(lake.warehouse),
        table=lake.table,
        fs=lake.fs,
        spark_factory=lambda: lake.spark,
        **{"key": ("id",), "record_index_file_groups": 2, **spec},
    )


@pytest.mark.parametrize(
    ("spec", "difference"),
    [
        ({"table_type": "MERGE_ON_READ"}, "table type COPY_ON_WRITE -> MERGE_ON_READ"),
        ({"partition_fields": ("amount",)}, "partitioning none -> [amount]"),
        ({"key": ("id", "amount")}, "record key [id] -> [id, amount]"),
        ({"record_index_file_groups": 4}, "record index file groups 2 -> 4"),
    ],
    ids=["table-type", "partitioning", "key", "record-index"],
)
def test_run_merge_config_the_stored_table_lacks_is_refused_in_one_line(
    created: Lake, spec: dict[str, Any], difference: str
) -> None:
    with pytest.raises(LayoutNeedsRebuild) as refused:
        run_merge(lambda: created.spark, created.fs, _reopened(created, **spec), created.options)
    assert str(refused.value) == (
        f"table {created.table} was created otherwise than its config says ({difference}): "
        "needs a rebuild; nothing was committed"
    )


def test_run_merge_record_index_larger_than_config_asks_is_kept(created: Lake) -> None:
    result = run_merge(
        lambda: created.spark,
        created.fs,
        _reopened(created, record_index_file_groups=1),
        created.options,
    )
    assert (result.version, result.committed) == (1, False)


def test_table_status_config_the_stored_table_lacks_warns_naming_the_command(
    created: Lake,
) -> None:
    from cdclake.status import table_status

    place = created.place(
        quarantine_root=str(created.root / "quarantine"),
        table_type="MERGE_ON_READ",
        record_index_file_groups=2,
    )
    row = table_status(place, fs=created.fs, now=dt.datetime.now(dt.UTC), expiration_days=30)
    assert row["warnings"] == [
        "needs rebuild: table type COPY_ON_WRITE -> MERGE_ON_READ (config differs from the stored "
        "table; its merge runs are refused): run cdclake rebuild --env local --table public.orders"
    ]
