"""The fan-out handler end to end against a moto server: Kinesis records in, SQS messages out."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from lambdas.fanout import handler
from tests.fanout.fanout_helpers import (
    BUCKET,
    Bus,
    FakeContext,
    PutEventsOutage,
    change_event,
    kinesis_event,
    kinesis_record,
)

pytestmark = pytest.mark.moto


class FlakyEvents:
    """The real EventBridge client, except chosen entries are rejected the first N times."""

    def __init__(self, failures: dict[int, int]) -> None:
        self.real = boto3.client("events")
        self.failures = dict(failures)  # lsn -> how many times to reject it
        self.calls: list[int] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(len(Entries))
        results: list[dict[str, Any] | None] = [None] * len(Entries)
        forward = []
        for i, entry in enumerate(Entries):
            lsn = json.loads(entry["Detail"])["source"]["lsn"]
            if self.failures.get(lsn, 0) > 0:
                self.failures[lsn] -= 1
                results[i] = {"ErrorCode": "InternalFailure", "ErrorMessage": "injected"}
            else:
                forward.append(i)
        if forward:
            response = self.real.put_events(Entries=[Entries[i] for i in forward])
            for i, result in zip(forward, response["Entries"], strict=True):
                results[i] = result
        failed = sum(1 for r in results if r and r.get("ErrorCode"))
        return {"FailedEntryCount": failed, "Entries": results}


def _orders(count: int, start_lsn: int = 1000) -> list[dict[str, Any]]:
    return [
        kinesis_record(change_event(row_id=i, lsn=start_lsn + i), sequence=i) for i in range(count)
    ]


def _lsns(events: list[dict[str, Any]]) -> list[int]:
    return sorted(e["detail"]["source"]["lsn"] for e in events)


def test_handler_batch_of_26_with_one_malformed_delivers_25(
    empty_bus: Bus, context: FakeContext
) -> None:
    records = _orders(26)
    records[13] = kinesis_record(b'{"op": "c", "after": {"id"', sequence=13)
    response = handler.handler(kinesis_event(records), context)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": records[13]["kinesis"]["sequenceNumber"]}]
    }
    assert _lsns(empty_bus.drain()) == [1000 + i for i in range(26) if i != 13]


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        json.dumps({"op": "x", "source": {}}).encode(),
        json.dumps({"op": "c", "after": {"id": 1}}).encode(),
    ],
    ids=["binary", "array", "unknown-op", "no-source"],
)
def test_handler_malformed_record_reported_others_delivered(
    empty_bus: Bus, context: FakeContext, data: bytes
) -> None:
    records = [*_orders(2), kinesis_record(data, sequence=2)]
    response = handler.handler(kinesis_event(records), context)
    assert response["batchItemFailures"] == [
        {"itemIdentifier": records[2]["kinesis"]["sequenceNumber"]}
    ]
    assert _lsns(empty_bus.drain()) == [1000, 1001]


def test_handler_invalid_base64_reported_as_failure(empty_bus: Bus, context: FakeContext) -> None:
    bad = kinesis_record(b"{}", sequence=1)
    bad["kinesis"]["data"] = "%%% not base64 %%%"
    response = handler.handler(kinesis_event([*_orders(1), bad]), context)
    assert response["batchItemFailures"] == [{"itemIdentifier": bad["kinesis"]["sequenceNumber"]}]
    assert len(empty_bus.drain()) == 1


def test_handler_schema_wrapped_and_bare_envelopes_give_same_detail(
    empty_bus: Bus, context: FakeContext
) -> None:
    records = [
        kinesis_record(change_event(lsn=1, wrapped=True), sequence=0),
        kinesis_record(change_event(lsn=1, wrapped=False), sequence=1),
    ]
    assert handler.handler(kinesis_event(records), context) == {"batchItemFailures": []}
    wrapped, bare = (e["detail"] for e in empty_bus.drain())
    assert wrapped == bare
    assert wrapped["after"]["status"] == "new"


def test_handler_routed_table_uses_configured_source_and_detail_type(
    empty_bus: Bus, context: FakeContext
) -> None:
    handler.handler(kinesis_event(_orders(1)), context)
    (event,) = empty_bus.drain()
    assert (event["source"], event["detail-type"]) == ("shop.orders", "OrderChanged")


def test_handler_unrouted_table_defaults_to_cdc_schema_table(
    empty_bus: Bus, context: FakeContext
) -> None:
    record = kinesis_record(change_event(table="customers"), sequence=0)
    handler.handler(kinesis_event([record]), context)
    (event,) = empty_bus.drain()
    assert (event["source"], event["detail-type"]) == (
        "cdc.public.customers",
        "public.customers changed",
    )


def test_handler_detail_carries_op_key_images_and_position(
    empty_bus: Bus, context: FakeContext
) -> None:
    handler.handler(
        kinesis_event([kinesis_record(change_event("u", row_id=7, lsn=4242), 0)]), context
    )
    (event,) = empty_bus.drain()
    detail = event["detail"]
    assert detail["op"] == "u"
    assert detail["table"] == "public.orders"
    assert detail["key"] == {"id": 7}
    assert detail["after"]["id"] == 7 and detail["before"] is None
    assert (detail["source"]["lsn"], detail["source"]["txId"]) == (4242, 507)
    assert detail["source"]["sequence"] == '["4234","4242"]'


def test_handler_key_falls_back_to_json_partition_key(empty_bus: Bus, context: FakeContext) -> None:
    record = kinesis_record(change_event(table="customers", row_id=3), 0, key='{"id":3}')
    handler.handler(kinesis_event([record]), context)
    (event,) = empty_bus.drain()
    assert event["detail"]["key"] == {"id": 3}


def test_handler_delete_reaches_op_filtered_rule_only(empty_bus: Bus, context: FakeContext) -> None:
    records = [
        kinesis_record(change_event("c", lsn=1), 0),
        kinesis_record(change_event("d", lsn=2), 1),
    ]
    handler.handler(kinesis_event(records), context)
    deletes = empty_bus.drain("deletes")
    assert [e["detail"]["op"] for e in deletes] == ["d"]
    assert deletes[0]["detail"]["key"] == {"id": 1}
    assert len(empty_bus.drain("all")) == 2


def test_handler_truncate_published_without_row(empty_bus: Bus, context: FakeContext) -> None:
    handler.handler(kinesis_event([kinesis_record(change_event("t", lsn=9), 0, key="")]), context)
    (event,) = empty_bus.drain()
    assert event["detail"]["op"] == "t"
    assert (event["detail"]["before"], event["detail"]["after"], event["detail"]["key"]) == (
        None,
        None,
        None,
    )


def test_handler_tombstone_skipped_without_failure(empty_bus: Bus, context: FakeContext) -> None:
    records = [kinesis_record(b"null", 0), kinesis_record({"schema": None, "payload": None}, 1)]
    assert handler.handler(kinesis_event(records), context) == {"batchItemFailures": []}
    assert empty_bus.drain() == []


def test_handler_oversized_event_delivered_as_claim_check(
    empty_bus: Bus, context: FakeContext
) -> None:
    big_row = {"id": 5, "status": "new", "notes": "x" * 300_000}
    records = [kinesis_record(change_event(row_id=5, lsn=77, after=big_row), 0), *_orders(1)]
    assert handler.handler(kinesis_event(records), context) == {"batchItemFailures": []}
    events = {e["detail"]["source"]["lsn"]: e for e in empty_bus.drain()}
    pointer = events[77]["detail"]
    assert "after" not in pointer and pointer["key"] == {"id": 5} and pointer["op"] == "c"
    assert pointer["claim_check"]["bucket"] == BUCKET
    stored = json.loads(
        empty_bus.s3.get_object(Bucket=BUCKET, Key=pointer["claim_check"]["key"])["Body"].read()
    )
    assert stored["detail"]["after"] == big_row
    assert (stored["source"], stored["detail-type"]) == ("shop.orders", "OrderChanged")
    assert pointer["claim_check"]["bytes"] > 300_000
    assert "claim_check" not in events[1000]["detail"]


def test_handler_put_events_partial_failures_retried_exactly_once(
    empty_bus: Bus, context: FakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = FlakyEvents({1003: 1, 1011: 2, 1024: 1})
    monkeypatch.setattr(handler, "events_client", lambda: flaky)
    response = handler.handler(kinesis_event(_orders(25)), context)
    assert response == {"batchItemFailures": []}
    assert _lsns(empty_bus.drain()) == [1000 + i for i in range(25)]
    # First pass 10+10+5; then only the rejected entries: 3, then 1.
    assert flaky.calls == [10, 10, 5, 3, 1]


def test_handler_put_events_persistent_failure_reports_only_that_record(
    empty_bus: Bus, context: FakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = FlakyEvents({1002: 99})
    monkeypatch.setattr(handler, "events_client", lambda: flaky)
    records = _orders(5)
    response = handler.handler(kinesis_event(records), context)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": records[2]["kinesis"]["sequenceNumber"]}]
    }
    assert _lsns(empty_bus.drain()) == [1000, 1001, 1003, 1004]
    assert flaky.calls == [5, 1, 1]  # PUT_EVENTS_MAX_ATTEMPTS=3


def test_chunk_entries_respects_count_and_request_size() -> None:
    small = {"Source": "s", "DetailType": "d", "Detail": "{}"}
    large = {"Source": "s", "DetailType": "d", "Detail": "x" * 100_000}
    chunks = list(handler.chunk_entries([(i, small) for i in range(23)]))
    assert [len(c) for c in chunks] == [10, 10, 3]
    sized = list(handler.chunk_entries([(i, large) for i in range(5)]))
    assert [len(c) for c in sized] == [2, 2, 1]
    assert all(sum(handler.entry_size(e) for _, e in c) <= 256 * 1024 for c in sized)


def _sequence_numbers(records: list[dict[str, Any]]) -> list[str]:
    return sorted(r["kinesis"]["sequenceNumber"] for r in records)


def test_handler_put_events_call_throttled_mid_batch_reports_that_chunk_delivers_rest(
    empty_bus: Bus, context: FakeContext, outage_events: Any
) -> None:
    outage = PutEventsOutage(lsns=frozenset({1010}))
    outage_events.meta.events.register("before-send.events.PutEvents", outage)
    records = _orders(25)
    response = handler.handler(kinesis_event(records), context)
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    assert sorted(failed) == _sequence_numbers(records[10:20])
    assert _lsns(empty_bus.drain()) == [1000 + i for i in range(25) if not 10 <= i < 20]
    # The throttled chunk is retried as a whole on each of the 3 attempts; the others go once.
    assert outage.calls == [(10, False), (10, True), (5, False), (10, True), (10, True)]


def test_handler_put_events_network_error_once_retried_and_delivered(
    empty_bus: Bus, context: FakeContext, outage_events: Any
) -> None:
    outage = PutEventsOutage(lsns=frozenset({1012}), times=1, network=True)
    outage_events.meta.events.register("before-send.events.PutEvents", outage)
    response = handler.handler(kinesis_event(_orders(25)), context)
    assert response == {"batchItemFailures": []}
    assert _lsns(empty_bus.drain()) == [1000 + i for i in range(25)]
    assert outage.calls == [(10, False), (10, True), (5, False), (10, False)]
