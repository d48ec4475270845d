"""The fan-out end to end on the local stack: PostgreSQL -> Debezium Server -> Kinesis (moto)
-> the fan-out handler under a Lambda-like event source mapping -> EventBridge (moto) -> SQS.

One seeded workload runs once for the module (inserts, updates, deletes, a primary-key change,
a row over the claim-check threshold, a TRUNCATE) with Debezium Server SIGKILLed mid-workload
and started again by ``cdclake local up``; the tests then look at what each consumer got.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from cdclake.local.cli import app
from cdclake.local.fanout import AwsClients, api_destination_request
from cdclake.local.runtime import AWS_ENV
from cdclake.local.stack import LocalStack
from tests.fanout_e2e.fanout_e2e_helpers import (
    BIG_NOTE_CHARS,
    Delivered,
    Workload,
    aws_client,
    deliveries,
    drain,
    kinesis_records,
    token_endpoint,
    wait_for_count,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.moto]

SEED = 20261123
PAYMENTS = "public.payments"
REFUNDS = "public.refunds"


@dataclass
class Run:
    workload: Workload
    billing: Delivered
    ledger: Delivered
    big_id: int
    key_change: tuple[int, int]
    restart_log: str
    first_pid: int
    second_pid: int
    failed_records: list[dict[str, Any]]
    dead_letters: dict[str, list[dict[str, Any]]]


def _wait_for_offsets(stack: LocalStack, timeout: float = 30) -> None:
    """Debezium Server flushes offsets every 5 s (offset.flush.interval.ms)."""
    offsets = stack.root / "fanout" / "offsets.dat"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if offsets.exists() and offsets.stat().st_size > 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"Debezium Server wrote no offsets to {offsets} in {timeout:.0f}s")


@pytest.fixture(scope="module")
def run(fanout_stack: LocalStack) -> Run:
    stack = fanout_stack
    config = stack.config
    workload = Workload(stack, SEED)
    workload.steps(40)
    key_change = workload.change_key()
    big_id = workload.big_row()
    workload.steps(20)
    _wait_for_offsets(stack)
    state = stack.load_state()
    assert state is not None
    first_pid = state.processes["debezium-server"].pid
    # Killed right after it sent a burst to Kinesis: its offsets (flushed every 5 s) are then
    # most likely behind what it sent, so the slot sends those changes again after the restart.
    workload.steps(30)
    sent = workload.expected.count({PAYMENTS, REFUNDS}, {"c", "u", "d"})
    deadline = time.monotonic() + 60
    while kinesis_records(stack) < sent and time.monotonic() < deadline:
        time.sleep(0.2)
    stack.kill("debezium-server")
    workload.steps(30)  # written while it is down: the slot keeps them
    log = Path(stack.root / "logs" / "debezium-server.log")
    before_restart = log.stat().st_size
    restarted = CliRunner().invoke(app, ["up", "--state-dir", str(stack.root)])
    assert restarted.exit_code == 0, restarted.output
    state = stack.load_state()
    assert state is not None
    second_pid = state.processes["debezium-server"].pid
    workload.steps(20)
    workload.truncate_refunds()
    workload.steps(10)

    status = stack.status()
    sqs, s3 = aws_client(stack, "sqs"), aws_client(stack, "s3")
    received: dict[str, list[dict[str, Any]]] = {"billing": [], "ledger": []}
    expected = {
        "billing": workload.expected.count({PAYMENTS, REFUNDS}, {"c", "u", "d", "t"}),
        "ledger": workload.expected.count({PAYMENTS}, {"c", "u", "d"}),
    }
    for name, into in received.items():
        url = status["consumers"][name]["queue_url"]
        wait_for_count(sqs, url, expected[name], timeout=120, into=into)
    with log.open("rb") as handle:
        handle.seek(before_restart)
        restart_log = handle.read().decode(errors="replace")
    return Run(
        workload=workload,
        billing=deliveries(config, s3, received["billing"]),
        ledger=deliveries(config, s3, received["ledger"]),
        big_id=big_id,
        key_change=key_change,
        restart_log=restart_log,
        first_pid=first_pid,
        second_pid=second_pid,
        failed_records=drain(sqs, status["failed_records_queue_url"]),
        dead_letters={
            name: drain(sqs, consumer["dead_letter_queue_url"])
            for name, consumer in status["consumers"].items()
        },
    )


def _expected(run: Run, tables: set[str]) -> dict[tuple[str, str], list[Any]]:
    return {k: v for k, v in run.workload.expected.changes.items() if k[0] in tables}


def test_fanout_billing_gets_every_change_of_both_tables_in_lake_order(run: Run) -> None:
    assert run.billing.per_key() == _expected(run, {PAYMENTS, REFUNDS})


def test_fanout_ledger_gets_every_payment_change_and_nothing_else(run: Run) -> None:
    assert run.ledger.per_key() == _expected(run, {PAYMENTS})
    assert run.ledger.ops()["t"] == 0


def test_fanout_truncate_reaches_the_consumer_subscribed_to_it_once(run: Run) -> None:
    truncates = [d for k, d in run.billing.unique.items() if k[3] == "t"]
    assert [(d["table"], d["key"], d["before"], d["after"]) for d in truncates] == [
        (REFUNDS, None, None, None)
    ]


def test_fanout_events_carry_source_and_detail_type_from_config(
    run: Run, fanout_stack: LocalStack
) -> None:
    seen = set()
    for event in run.billing.events + run.ledger.events:
        table = fanout_stack.config.table(event["detail"]["table"])
        assert (event["source"], event["detail-type"]) == (
            table.event_source,
            table.event_detail_type,
        )
        seen.add((event["source"], event["detail-type"]))
    assert seen == {
        ("shop.payments", "PaymentChanged"),
        ("cdc.public.refunds", "public.refunds changed"),
    }


def test_fanout_primary_key_change_is_a_delete_and_a_create_at_one_position(run: Run) -> None:
    old, new = run.key_change
    delete = [
        k
        for k in run.billing.unique
        if k[:2] == (PAYMENTS, json.dumps({"id": old})) and k[3] == "d"
    ]
    create = [
        k
        for k in run.billing.unique
        if k[:2] == (PAYMENTS, json.dumps({"id": new})) and k[3] == "c"
    ]
    assert len(delete) == len(create) == 1
    assert delete[0][2] == create[0][2]  # one UPDATE: the same order key on both keys


def test_fanout_large_row_arrives_as_claim_check_with_full_row_in_s3(run: Run) -> None:
    key = json.dumps({"id": run.big_id})
    for delivered in (run.billing, run.ledger):
        events = [e for e in delivered.events if json.dumps(e["detail"]["key"]) == key]
        created = [e for e in events if e["detail"]["op"] == "c"]
        assert created and all("claim_check" in e["detail"] for e in created)
        assert "after" not in created[0]["detail"]
        full = [d for k, d in delivered.unique.items() if k[1] == key and k[3] == "c"]
        assert len(full) == 1
        assert len(full[0]["after"]["note"]) == BIG_NOTE_CHARS


def test_fanout_debezium_server_sigkill_resumes_from_offsets_losing_nothing(
    run: Run, record_property: Any
) -> None:
    assert run.second_pid != run.first_pid
    # Resumed from the offsets file: no new snapshot, streaming from the stored position.
    assert "Snapshot step 1" not in run.restart_log
    assert "from stored offset" in run.restart_log
    # Nothing lost is the ordered per-key equality above; duplicates are what the slot sent
    # again after the kill (read, sent to Kinesis, offsets not yet flushed).
    record_property("billing_duplicates", run.billing.duplicates)
    record_property("ledger_duplicates", run.ledger.duplicates)
    assert run.billing.per_key() == _expected(run, {PAYMENTS, REFUNDS})
    print(
        f"redelivered duplicates: billing {run.billing.duplicates}, ledger {run.ledger.duplicates}"
    )


def test_fanout_no_record_reaches_a_failure_or_dead_letter_queue(run: Run) -> None:
    assert run.failed_records == []
    assert run.dead_letters == {"billing": [], "ledger": []}


def test_fanout_status_json_lists_aws_endpoint_and_consumer_queues(
    fanout_stack: LocalStack,
) -> None:
    result = CliRunner().invoke(app, ["status", "--json", "--state-dir", str(fanout_stack.root)])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["aws_endpoint"].startswith("http://127.0.0.1:")
    assert set(status["consumers"]) == {"billing", "ledger"}
    for consumer in status["consumers"].values():
        assert consumer["queue_url"].startswith(status["aws_endpoint"])
    assert {"debezium-server", "fanout-lambda"} <= set(status["processes"])


def test_fanout_http_consumer_request_carries_the_api_key(
    run: Run, fanout_stack: LocalStack
) -> None:
    """moto 5.2 does not deliver to API destinations (MOTO_EVENTS_INVOKE_HTTP sends neither the
    event nor the Connection's key), so the request EventBridge would send is built from the
    rule's target, the API destination and its Connection as stored on moto, and sent to a
    local server that accepts only the consumer's key."""
    config = fanout_stack.config
    aws = AwsClients(
        endpoint=fanout_stack.status()["aws_endpoint"], region=config.region, credentials=AWS_ENV
    )
    event = run.ledger.events[0]
    request = api_destination_request(config, aws, "ledger", event)
    http = config.fanout.consumers[1].http
    assert http is not None
    assert (request.method, request.url) == (http.method, http.endpoint)
    token = (fanout_stack.root / "secrets" / "ledger.api-key").read_text()
    with token_endpoint("x-api-key", token) as endpoint:
        sent = requests.request(
            request.method, endpoint.url, headers=request.headers, data=request.body, timeout=10
        )
        forged = requests.request(
            request.method,
            endpoint.url,
            headers={**request.headers, "x-api-key": "forged"},
            data=request.body,
            timeout=10,
        )
    assert (sent.status_code, forged.status_code) == (200, 401)
    assert json.loads(endpoint.received[0][2]) == event
