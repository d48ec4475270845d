"""PostgreSQL → Debezium → Kafka → S3 sink → merge → Hudi, checked by ``cdclake validate``.

One seeded random workload on two tables runs against the real local stack while the stack
does the things CDC pipelines get wrong: a table read by the connector's initial snapshot and
another joining with an incremental snapshot, both while writes continue, a Connect worker
SIGKILLed mid-stream, a TRUNCATE, a column added mid-stream, the connector's offsets lost (it
snapshots every table again; rows deleted meanwhile have no delete event), TOAST placeholders,
primary-key changes, merges between and during the writes.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import pytest

from cdclake.local.stack import LocalStack
from tests.e2e.e2e_helpers import (
    CUSTOMERS_DDL,
    CUSTOMERS_TOPIC,
    ORDERS_DDL,
    ORDERS_TOPIC,
    Workload,
    capture_starts,
    change_events,
    merge,
    upload_change_file,
    validate,
    wait_for_event,
    with_offsets_lost,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.spark,
    pytest.mark.hudi,
    pytest.mark.moto,
]
TABLES = ("public.orders", "public.customers")
SEED = 20240614
PLACEHOLDER = "__debezium_unavailable_value"


@dataclass
class Pipeline:
    stack: LocalStack
    workload: Workload
    merges: list[dict[str, Any]]
    timings: dict[str, float]
    unseen: list[int]  # orders deleted while the connector was stopped, its offsets lost


@pytest.fixture(scope="module")
def pipeline(e2e_stack: LocalStack) -> Pipeline:
    stack = e2e_stack
    started = time.monotonic()
    timings: dict[str, float] = {}

    def mark(label: str) -> None:
        timings[label] = round(time.monotonic() - started, 1)

    w = Workload(stack, SEED)
    merges: list[dict[str, Any]] = []
    try:
        # customers has rows before the connector first starts: its initial snapshot reads
        # them while the writer keeps changing them (reconcile only publishes the table: the
        # worker is not running yet).
        w.sql(CUSTOMERS_DDL)
        w.insert_customers(50)
        stack.reconcile()
        w.order_writes, w.customer_writes = False, True
        w.during(40, lambda: stack.up(timeout=300))
        mark("capture started (initial snapshot of customers)")

        # orders exists before it is published: its first rows reach the lake only through
        # reconcile's incremental snapshot, which runs while the writer keeps going.
        w.sql(ORDERS_DDL)
        w.insert_orders(80)
        w.order_writes = True
        w.during(40, stack.reconcile)
        mark("orders joined")

        merges.append(w.during(40, lambda: merge(stack, "public.orders")))
        mark("merge 1 (orders)")

        # A crash of the worker between two flushes: changes are read again, none is lost.
        w.run(40)
        time.sleep(1)
        stack.kill("connect")
        time.sleep(2)
        stack.up(timeout=300)
        w.wait()
        mark("connect killed and restarted")

        w.sql("ALTER TABLE public.customers ADD COLUMN tier smallint")
        w.tier = True
        w.sql("BEGIN")
        w.sql("TRUNCATE public.orders")
        w.orders.clear()
        w.insert_orders(5)
        w.sql("COMMIT")
        merges.append(w.during(40, lambda: merge(stack, "public.customers")))
        mark("merge 2 (customers)")

        # The connector's offsets lost (deleted while it is stopped): it snapshots every table
        # again, and rows deleted meanwhile have no delete event, only their absence from it.
        unseen = sorted(w.orders)[:3]

        def delete_unseen() -> None:
            for key in unseen:
                w.sql("DELETE FROM public.orders WHERE id = :id", id=key)
                del w.orders[key]

        with_offsets_lost(stack, delete_unseen)
        mark("offsets lost, snapshot again")

        w.run(30)
        w.wait()
        # The last change of each table: once its file has landed, so has every earlier one.
        w.sql("UPDATE public.orders SET status = 'final' WHERE id = :id", id=max(w.orders))
        last_customer = max(w.customers)
        w.sql("UPDATE public.customers SET name = 'final' WHERE id = :id", id=last_customer)
        wait_for_event(stack, ORDERS_TOPIC, lambda p: _after(p).get("status") == "final")
        wait_for_event(stack, CUSTOMERS_TOPIC, lambda p: _after(p).get("name") == "final")
        mark("all change files landed")
        for table in TABLES:
            merges.append(merge(stack, table))
        mark("final merges")
    finally:
        w.close()
    return Pipeline(stack, w, merges, timings, unseen)


def _after(payload: dict[str, Any]) -> dict[str, Any]:
    return dict(payload.get("after") or {})


def _diff_summary(report: dict[str, Any]) -> str:
    return (
        f"{report['table']}: source {report['source_rows']} lake {report['lake_rows']}, "
        f"missing {report['missing_keys']} {report['missing_key_examples']}, "
        f"extra {report['extra_keys']} {report['extra_key_examples']}, "
        f"differing {report['differing_rows']}: {report['columns']}; notes {report['notes']}"
    )


def test_pipeline_every_merge_run_succeeds(pipeline: Pipeline) -> None:
    failed = [m for m in pipeline.merges if "error" in m]
    assert not failed, failed


def test_pipeline_random_workload_validate_reports_no_difference(pipeline: Pipeline) -> None:
    stack, w = pipeline.stack, pipeline.workload
    # The workload did reach the paths it is meant to exercise.
    orders = [r["payload"] for _, r in change_events(stack, ORDERS_TOPIC)]
    customers = [r["payload"] for _, r in change_events(stack, CUSTOMERS_TOPIC)]
    ops = {p["op"] for p in orders} | {p["op"] for p in customers}
    # A capture that started again without offsets snapshots again: its TRUNCATE is no event.
    assert {"r", "c", "u", "d", "t"} <= ops, (ops, capture_starts(stack))
    assert any(p["source"].get("snapshot") == "incremental" for p in orders)
    # The snapshot after the offsets were lost ended, and no delete of its unseen rows exists.
    ends = {"last", "last_in_data_collection"}
    assert any(p["op"] == "r" and p["source"].get("snapshot") in ends for p in orders)
    deleted = {(p.get("before") or {}).get("id") for p in orders if p["op"] == "d"}
    assert pipeline.unseen and not deleted & set(pipeline.unseen), pipeline.unseen
    initial = {"true", "first", "first_in_data_collection", "last_in_data_collection", "last"}
    assert any(p["op"] == "r" and p["source"].get("snapshot") in initial for p in customers)
    assert any(_after(p).get("notes") == PLACEHOLDER for p in orders)
    assert any("tier" in _after(p) for p in customers)
    # The data of every run is committed even where its catalog sync failed (see above).
    assert all("error" not in m or "is committed" in m["error"] for m in pipeline.merges)
    print("timings", pipeline.timings, "operations", w.ops)
    assert w.ops >= 200, w.ops

    for table in TABLES:
        code, report = validate(stack, table, wait=60)
        assert code == 0 and report["equal"], _diff_summary(report)
        assert report["source_rows"] > 0
        assert "password_hash" not in report["compared_columns"]


def test_pipeline_corrupted_lake_row_validate_names_table_key_and_column(
    pipeline: Pipeline,
) -> None:
    stack = pipeline.stack
    # A change the database never made, through the merge's own path: the newest real
    # record of one live key, with another status and a position after every real change.
    records = [r for _, r in change_events(stack, ORDERS_TOPIC)]
    live = max(pipeline.workload.orders)
    newest = [r for r in records if _after(r["payload"]).get("id") == live][-1]
    forged = copy.deepcopy(newest)
    payload = forged["payload"]
    payload["op"] = "u"
    payload["after"]["status"] = "corrupted"
    payload["source"]["lsn"] = 99_999_999_999
    payload["source"]["sequence"] = '["99999999999","99999999999"]'
    payload["source"]["snapshot"] = "false"
    upload_change_file(stack, ORDERS_TOPIC, [forged])
    result = merge(stack, "public.orders")
    assert "error" not in result, result

    code, report = validate(stack, "public.orders")
    assert code == 1 and not report["equal"]
    assert report["table"] == "public.orders"
    assert report["differing_rows"] == 1 and not report["missing_keys"] and not report["extra_keys"]
    assert list(report["columns"]) == ["status"], report["columns"]
    example = report["columns"]["status"]["examples"][0]
    assert example == {"key": {"id": str(live)}, "source": "final", "lake": "corrupted"}
