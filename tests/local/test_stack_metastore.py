"""The local stack's Hive metastore service: what a merge registers there, read over thrift.

This module sorts after test_local_stack.py, whose tests create public.orders themselves.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hive_metastore_client import HiveMetastoreClient

from cdclake.local import processes
from cdclake.local.stack import LocalStack
from tests.local.local_helpers import (
    metastore_client,
    missing_merge_prerequisite,
    row_ids,
    run_cdclake,
    wait_for_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.moto]
ORDERS = "cdclake-local.public.orders"
ROWS = {3000: "2026-01-02", 3001: "2026-01-03"}


def _status(stack: LocalStack) -> dict[str, Any]:
    result = run_cdclake(stack, "local", "status", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    status: dict[str, Any] = json.loads(result.stdout)
    return status


@pytest.fixture(scope="module")
def client(local_stack: LocalStack) -> Iterator[HiveMetastoreClient]:
    with metastore_client(_status(local_stack)["metastore_uri"]) as opened:
        yield opened


@pytest.fixture(scope="module")
def merged_orders(local_stack: LocalStack) -> tuple[str, str]:
    """public.orders with two new rows (a decimal and a timestamptz column among them), merged
    by ``cdclake merge --env local`` in a process of its own; (database, table) in the lake."""
    reason = missing_merge_prerequisite()
    if reason:
        pytest.skip(f"the merge: {reason}")
    with local_stack.connect() as conn:
        conn.run("CREATE TABLE IF NOT EXISTS public.orders (id int PRIMARY KEY, order_date date)")
        conn.run(
            "ALTER TABLE public.orders ADD COLUMN IF NOT EXISTS note text, "
            "ADD COLUMN IF NOT EXISTS amount numeric(10,2), "
            "ADD COLUMN IF NOT EXISTS placed_at timestamptz"
        )
    reconciled = run_cdclake(local_stack, "local", "reconcile", timeout=300)
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    with local_stack.connect() as conn:
        for key, day in ROWS.items():
            conn.run(
                "INSERT INTO public.orders (id, order_date, note, amount, placed_at) "
                "VALUES (:k, CAST(:d AS date), 'metastore', 12.50, now())",
                k=key,
                d=day,
            )
    wait_for_events(local_stack, ORDERS, lambda e: set(ROWS) <= row_ids(e, "c"))
    merged = run_cdclake(
        local_stack, "merge", "--env", "local", "--table", "public.orders", "--json", timeout=600
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    table = local_stack.config.lake_table("public.orders")
    return local_stack.config.lake.glue_database, table.lake_table_name


def test_metastore_status_shows_its_thrift_uri_which_answers(
    local_stack: LocalStack, client: HiveMetastoreClient
) -> None:
    status = _status(local_stack)
    state = local_stack.load_state()
    assert state is not None
    assert status["metastore_uri"] == f"thrift://127.0.0.1:{state.ports['metastore']}"
    assert status["processes"]["metastore"]["running"] is True
    warehouse = client.get_database("default").locationUri
    assert warehouse == f"s3a://{state.bucket}/warehouse"


def test_metastore_merge_registers_columns_types_and_partitions(
    local_stack: LocalStack, client: HiveMetastoreClient, merged_orders: tuple[str, str]
) -> None:
    database, name = merged_orders
    table = client.get_table(database, name)
    columns = {c.name: c.type for c in table.sd.cols}
    assert {k: columns.get(k) for k in ("id", "note", "amount", "placed_at")} == {
        "id": "int",
        "note": "string",
        "amount": "decimal(10,2)",
        "placed_at": "timestamp",
    }
    assert [(k.name, k.type) for k in table.partitionKeys] == [("order_date", "date")]
    assert "order_date" not in columns
    assert table.tableType == "EXTERNAL_TABLE"
    assert table.sd.inputFormat == "org.apache.hudi.hadoop.HoodieParquetInputFormat"
    partitions = set(client.get_partition_names(database, name, -1))
    assert {f"order_date={day}" for day in ROWS.values()} <= partitions


def test_metastore_locations_are_the_lake_table_and_the_stack_s3(
    local_stack: LocalStack, client: HiveMetastoreClient, merged_orders: tuple[str, str]
) -> None:
    database, name = merged_orders
    status = _status(local_stack)
    location = client.get_table(database, name).sd.location
    assert location == f"file:{status['warehouse']}/{database}.db/{name}"
    for partition in client.get_partitions(database, name, -1):
        assert partition.sd.location == f"{location}/order_date={partition.values[0]}"
    # A database the sync creates gets its folder in the metastore's warehouse on moto S3.
    assert client.get_database(database).locationUri == (
        f"s3a://{status['s3_bucket']}/warehouse/{database}.db"
    )
    listed = local_stack.s3_client().list_objects_v2(
        Bucket=status["s3_bucket"], Prefix=f"warehouse/{database}.db"
    )
    assert listed.get("KeyCount", 0) >= 1


def test_metastore_stops_on_down(own_local_stack: Any) -> None:
    with own_local_stack("metastore") as stack:
        state = stack.up(capture=False, timeout=300)
        metastore = state.processes["metastore"]
        port = state.ports["metastore"]
        assert processes.is_running(metastore) and processes.port_open(port)
        assert "metastore" in stack.down()
        assert not processes.is_running(metastore)
        assert not processes.port_open(port)


def test_metastore_start_on_a_taken_port_fails_fast_with_its_log(local_stack: LocalStack) -> None:
    """Hive's service does not exit when it cannot serve (its other threads keep the JVM up):
    ``start`` must stop it and say so, so that ``up`` chooses another port."""
    from dataclasses import replace

    from cdclake.local import metastore
    from cdclake.local.processes import ProcessExited

    state = local_stack.load_state()
    assert state is not None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: nothing answers, nothing else binds
        ports = {**state.ports, "metastore": taken.getsockname()[1]}
        started = time.monotonic()
        with pytest.raises(ProcessExited) as failed:
            metastore.start(local_stack, replace(state, ports=ports, processes={}))
    assert failed.value.port_taken, failed.value.tail
    assert time.monotonic() - started < 90
    assert not processes.is_running(failed.value.proc)
