"""Schema changes without downtime (issue #49) on real Hudi 0.15: a stored column's type change
the table cannot take in place ends the run as one line that needs a rebuild, with nothing
written and the change files left waiting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.job import TableNeedsRebuild, scan_changes
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
