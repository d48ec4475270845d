"""The fan-out handler under exactly the statements the fan-out stack gives its role."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from lambdas.fanout import handler
from tests.iam.iam_helpers.gate import Gate, World, principal, user_with
from tests.iam.iam_helpers.moto import REGION, MotoIam
from tests.iam.iam_helpers.runs import Run, assert_each_removal_denied, docs_row, lambda_context
from tests.iam.iam_helpers.templates import (
    function_environment,
    function_role,
    logical_id,
    role_policy,
)

pytestmark = [pytest.mark.moto, pytest.mark.cdk]


def kinesis_event(changes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Debezium change events as Lambda receives them from a Kinesis stream."""
    records = []
    for number, change in enumerate(changes):
        sequence = f"4954{number:052d}"
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": json.dumps({"id": number}),
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(json.dumps(change).encode()).decode(),
                    "approximateArrivalTimestamp": 1.7e9,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"shardId-000000000000:{sequence}",
                "eventName": "aws:kinesis:record",
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


def change_event(row_id: int, lsn: int, *, padding: int = 0) -> dict[str, Any]:
    """An insert into public.orders; ``padding`` characters make it large (a claim check)."""
    return {
        "before": None,
        "after": {"id": row_id, "status": "new", "note": "x" * padding},
        "source": {
            "connector": "postgresql",
            "db": "app",
            "schema": "public",
            "table": "orders",
            "lsn": lsn,
        },
        "op": "c",
        "ts_ms": 1_700_000_000_000,
    }


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message body in a queue, deleting them."""
    bodies = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


COMPONENT = "fan-out handler"
#: Three small events and one over the claim-check threshold (200,000 bytes in the template).
BATCH = [change_event(1, 1001), change_event(2, 1002), change_event(3, 1003, padding=250_000)]

Runner = Callable[..., Run]
EVERYTHING = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]


@pytest.fixture(scope="module")
def statements(templates: dict[str, Any], world: World) -> list[dict[str, Any]]:
    template = templates["fanout"]
    role = function_role(template, logical_id(template, "AWS::Lambda::Function", "FanOutFunction"))
    return list(world.resolve(list(role_policy(template, role).statements), "fanout"))


@pytest.fixture(scope="module")
def run(templates: dict[str, Any], world: World, moto_iam: MotoIam, account: str) -> Runner:
    template = templates["fanout"]
    function = logical_id(template, "AWS::Lambda::Function", "FanOutFunction")
    environment = function_environment(template, function, world.resolve, "fanout")
    sqs = moto_iam.client("sqs")

    def under(
        statements: Sequence[Mapping[str, Any]],
        gated: Sequence[Mapping[str, Any]] | None = None,
    ) -> Run:
        """The batch under ``statements``; the gate checks ``gated`` (default: the same)."""
        keys = user_with(moto_iam, "fanout", statements)
        gate = Gate(statements if gated is None else gated, account)
        drain(sqs, world.observer_queue)
        response: Any = None
        with principal(moto_iam, keys, gate, environment):
            # A fresh execution environment: its clients and its settings (read once per one).
            handler.client.cache_clear()
            handler.settings.cache_clear()
            try:
                response = handler.handler(kinesis_event(BATCH), lambda_context("fanout"))
            except BatchProcessingError as exc:  # every record failed: Lambda retries them all
                response = repr(exc)
            finally:
                handler.client.cache_clear()
                handler.settings.cache_clear()
        delivered = drain(sqs, world.observer_queue)
        ok = response == {"batchItemFailures": []} and len(delivered) == len(BATCH)
        return Run(ok, gate.calls, {"response": response, "delivered": delivered})

    return under


def test_fanout_template_statements_batch_delivered(full_run: Run, world: World) -> None:
    assert full_run.ok, full_run.detail
    assert not full_run.denied
    actions = {c.action for c in full_run.calls}
    assert actions == {"events:PutEvents", "s3:PutObject"}
    claim = [
        e["detail"]["claim_check"]
        for e in full_run.detail["delivered"]
        if "claim_check" in e["detail"]
    ]
    assert [c["bucket"] for c in claim] == [world.claim_check_bucket]


def test_fanout_each_needed_statement_removed_fails_access_denied(
    needed: dict[int, Run], statements: list[dict[str, Any]]
) -> None:
    needed_actions: set[str] = set()
    for index in needed:
        action = statements[index]["Action"]
        needed_actions |= {action} if isinstance(action, str) else set(action)
    assert {"events:PutEvents", "s3:PutObject"} <= needed_actions
    assert_each_removal_denied(needed, statements)


def test_fanout_needed_statements_match_docs_table(
    full_run: Run, needed: dict[int, Run], statements: list[dict[str, Any]], repo_root: Path
) -> None:
    row = docs_row(
        COMPONENT, "moto (S3), gate (EventBridge resource)", full_run, statements, needed
    )
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row


def test_fanout_moto_alone_denies_put_events_without_its_statement(
    run: Runner, statements: list[dict[str, Any]]
) -> None:
    """moto's own enforcement (not the gate's) refuses the action the user's policy lacks."""
    without = [s for s in statements if s["Action"] != "events:PutEvents"]
    result = run(without, gated=EVERYTHING)
    assert not result.ok
    assert {c.action for c in result.denied} == {"events:PutEvents"}


def test_fanout_put_events_scoped_to_another_bus_fails_access_denied(
    run: Runner, statements: list[dict[str, Any]]
) -> None:
    """The gate checks the resource: the same action on another bus's ARN does not do."""
    elsewhere = [
        {**s, "Resource": s["Resource"].replace(":event-bus/", ":event-bus/other-")}
        if s["Action"] == "events:PutEvents"
        else s
        for s in statements
    ]
    result = run(elsewhere)
    assert not result.ok
    assert {c.action for c in result.denied} == {"events:PutEvents"}
