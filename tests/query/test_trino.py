"""Issue 30: Trino (Athena's engine) on the local stack, and `cdclake query` through it.

Trino on the session's stack, started the way `cdclake query` starts it (the first query);
`cdclake local down` stops it with the stack after the last test using it, whose fixture
fails on any process left behind.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from cdclake.local import trino as local_trino
from cdclake.local.stack import LocalStack
from cdclake.query import engine_port
from tests.query.query_helpers import (
    bucket_keys,
    listening,
    metastore_tables,
    run_cli,
)

pytestmark = [pytest.mark.slow, pytest.mark.moto]

ORDERS = (
    "CREATE TABLE hive.shop.orders ("
    " id bigint, amount decimal(12, 2), placed_at timestamp(3), note varchar, day date)"
    " WITH (format = 'PARQUET', partitioned_by = ARRAY['day'])"
)
ROWS = (
    "INSERT INTO hive.shop.orders VALUES"
    " (1, 12.50, TIMESTAMP '2026-01-02 03:04:05.678', 'first', DATE '2026-01-02'),"
    " (2, -0.01, TIMESTAMP '2026-01-03 00:00:00.000', NULL, DATE '2026-01-03')"
)


@pytest.fixture(scope="module")
def port(stack: LocalStack) -> int:
    """Started as a person starts it: by the first `cdclake query`."""
    first = run_cli(stack.root, "query", "--json", "SELECT 1")
    assert first.returncode == 0, first.stderr
    state = stack.load_state()
    assert state is not None
    return state.ports[local_trino.PROCESS]


@pytest.fixture(scope="module")
def orders(stack: LocalStack, port: int) -> local_trino.Result:
    state = stack.load_state()
    assert state is not None
    schema = f"CREATE SCHEMA hive.shop WITH (location = 's3a://{state.bucket}/warehouse/shop')"
    for sql in (schema, ORDERS, ROWS):
        local_trino.run_query(port, sql)
    return local_trino.run_query(port, "SELECT * FROM hive.shop.orders ORDER BY id")


def test_trino_catalogs_metastore_uri_both_on_thrift() -> None:
    endpoints = local_trino.TrinoEndpoints(
        port=1, s3_endpoint="http://127.0.0.1:2", metastore_uri="thrift://127.0.0.1:3"
    )
    catalogs = local_trino.catalog_properties(endpoints)
    assert set(catalogs) == {"hive", "hudi"}
    for settings in catalogs.values():
        assert settings["hive.metastore.uri"] == "thrift://127.0.0.1:3"
        assert settings["s3.endpoint"] == "http://127.0.0.1:2"


def test_trino_select_one_answers(port: int) -> None:
    result = local_trino.run_query(port, "SELECT 1")
    assert (result.columns, result.types, result.rows) == (["_col0"], ["integer"], [[1]])


def test_trino_catalogs_hive_and_hudi_listed(port: int) -> None:
    catalogs = local_trino.run_query(port, "SHOW CATALOGS").rows
    assert {"hive", "hudi"} <= {row[0] for row in catalogs}


def test_trino_listens_loopback_only(stack: LocalStack, port: int) -> None:
    state = stack.load_state()
    assert state is not None
    ours = [a for a, p in listening(state.processes[local_trino.PROCESS].pid) if p == port]
    # 127.0.0.1 as /proc/net/tcp writes it, or as IPv4-mapped IPv6 (::ffff:127.0.0.1) in tcp6;
    # the any-address would be zeros.
    assert ours
    assert set(ours) <= {"0100007F", "0000000000000000FFFF00000100007F"}, ours


def test_trino_hive_table_read_back_types_kept(orders: local_trino.Result) -> None:
    assert orders.columns == ["id", "amount", "placed_at", "note", "day"]
    assert orders.types == ["bigint", "decimal(12, 2)", "timestamp(3)", "varchar", "date"]
    assert orders.rows == [
        [
            1,
            Decimal("12.50"),
            dt.datetime(2026, 1, 2, 3, 4, 5, 678000),
            "first",
            dt.date(2026, 1, 2),
        ],
        [2, Decimal("-0.01"), dt.datetime(2026, 1, 3), None, dt.date(2026, 1, 3)],
    ]


def test_trino_hive_table_files_in_moto_bucket(
    stack: LocalStack, orders: local_trino.Result
) -> None:
    keys = bucket_keys(stack, "warehouse/shop/orders/")
    partitions = {k.split("/")[3] for k in keys if k.split("/")[3].startswith("day=")}
    assert partitions == {"day=2026-01-02", "day=2026-01-03"}


def test_trino_hive_table_registered_in_stack_metastore(
    stack: LocalStack, orders: local_trino.Result
) -> None:
    assert ("shop", "orders") in metastore_tables(stack)


def test_trino_hudi_catalog_same_metastore_lists_table(
    port: int, orders: local_trino.Result
) -> None:
    tables = local_trino.run_query(port, "SHOW TABLES FROM hudi.shop").rows
    assert ["orders"] in tables


def test_trino_hive_table_file_location_read(stack: LocalStack, port: int) -> None:
    """The merge registers its Hudi tables at their file: location (the stack's warehouse)."""
    warehouse = stack.root / "warehouse" / "local_files"
    location = f"file://{warehouse}"
    for sql in (
        f"CREATE SCHEMA hive.local_files WITH (location = '{location}')",
        "CREATE TABLE hive.local_files.notes (id bigint, note varchar)",
        "INSERT INTO hive.local_files.notes VALUES (7, 'on disk')",
    ):
        local_trino.run_query(port, sql)
    read = local_trino.run_query(port, "SELECT id, note FROM hive.local_files.notes")
    assert read.rows == [[7, "on disk"]]
    assert [p.name for p in (warehouse / "notes").iterdir() if not p.name.startswith(".")]


def test_trino_engine_port_running_same_process(stack: LocalStack, port: int) -> None:
    state = stack.load_state()
    assert state is not None
    before = state.processes[local_trino.PROCESS]
    assert engine_port(stack) == port
    after = stack.load_state()
    assert after is not None
    assert after.processes[local_trino.PROCESS] == before


def test_query_cli_json_rows_and_types(stack: LocalStack, orders: local_trino.Result) -> None:
    result = run_cli(
        stack.root,
        "query",
        "--json",
        "SELECT id, amount, placed_at, day FROM hive.shop.orders WHERE id = 1",
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == {
        "columns": [
            {"name": "id", "type": "bigint"},
            {"name": "amount", "type": "decimal(12, 2)"},
            {"name": "placed_at", "type": "timestamp(3)"},
            {"name": "day", "type": "date"},
        ],
        "rows": [[1, "12.50", "2026-01-02T03:04:05.678000", "2026-01-02"]],
    }


def test_query_cli_table_printed(stack: LocalStack, orders: local_trino.Result) -> None:
    result = run_cli(stack.root, "query", "SELECT note FROM hive.shop.orders ORDER BY id")
    assert result.returncode == 0, result.stderr
    assert "note" in result.stdout
    assert "first" in result.stdout
    assert "NULL" in result.stdout
    assert "2 row(s)" in result.stdout


def test_query_cli_unknown_table_one_line_error(stack: LocalStack, port: int) -> None:
    result = run_cli(stack.root, "query", "SELECT * FROM hive.shop.nope")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: TABLE_NOT_FOUND"), lines[0]
    assert "hive.shop.nope" in lines[0]
