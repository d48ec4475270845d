"""The local event source mapping keeps Lambda's retry rules for Kinesis batches."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cdclake.local.event_source import Failure, Mapping, MappingSettings, failure_message
from cdclake.local.fanout import MAPPING


def _records(count: int, *, age_s: float = 1.0) -> list[dict[str, Any]]:
    return [
        {
            "kinesis": {
                "sequenceNumber": f"{i:056d}",
                "approximateArrivalTimestamp": time.time() - age_s,
                "partitionKey": "k",
                "data": "",
            },
            "eventID": f"shardId-000000000001:{i:056d}",
            "eventSourceARN": "arn:aws:kinesis:us-east-1:000000000000:stream/s",
        }
        for i in range(count)
    ]


class Function:
    """Records every batch it sees; fails the records named in ``poison`` every time."""

    def __init__(self, poison: set[int], *, raise_error: bool = False) -> None:
        self.poison = poison
        self.raise_error = raise_error
        self.batches: list[list[int]] = []

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        numbers = [int(r["kinesis"]["sequenceNumber"]) for r in event["Records"]]
        self.batches.append(numbers)
        failed = [n for n in numbers if n in self.poison]
        if failed and self.raise_error:
            raise RuntimeError("function error")
        return {"batchItemFailures": [{"itemIdentifier": f"{n:056d}"} for n in failed]}


def _run(
    function: Function, records: list[dict[str, Any]], **settings: Any
) -> tuple[list[Failure], Mapping]:
    failures: list[Failure] = []
    mapping = Mapping(
        MappingSettings(**{**MAPPING.to_dict(), **settings}), function, failures.append
    )
    mapping.process(records)
    return failures, mapping


def test_mapping_partial_failure_retries_from_the_lowest_failed_record_only() -> None:
    function = Function(poison=set())
    calls = iter([{"batchItemFailures": [{"itemIdentifier": f"{6:056d}"}]}])

    def flaky(event: dict[str, Any]) -> Any:
        function(event)
        return next(calls, {"batchItemFailures": []})

    failures: list[Failure] = []
    Mapping(MAPPING, flaky, failures.append).process(_records(10))
    assert function.batches == [list(range(10)), [6, 7, 8, 9]]
    assert failures == []


def test_mapping_function_error_bisects_until_the_poison_record_is_alone() -> None:
    function = Function(poison={5}, raise_error=True)
    failures, _ = _run(function, _records(8), retry_attempts=10)
    assert function.batches[:4] == [list(range(8)), [0, 1, 2, 3], [4, 5, 6, 7], [4, 5]]
    assert [int(r["kinesis"]["sequenceNumber"]) for f in failures for r in f.records] == [5]
    assert {n for batch in function.batches for n in batch if n != 5} == set(range(8)) - {5}


def test_mapping_exhausted_retries_go_to_the_on_failure_destination() -> None:
    function = Function(poison={2})
    failures, mapping = _run(function, _records(4), retry_attempts=5)
    assert mapping.invocations == 6  # the first try and five retries
    assert [f.condition for f in failures] == ["RetryAttemptsExhausted"]
    message = failure_message(failures[0], function_arn="arn:aws:lambda:us-east-1:0:function:f")
    assert message["KinesisBatchInfo"]["startSequenceNumber"] == f"{2:056d}"
    assert message["KinesisBatchInfo"]["batchSize"] == 2
    assert message["requestContext"]["condition"] == "RetryAttemptsExhausted"


@pytest.mark.parametrize("age_s", [7 * 3600.0])
def test_mapping_records_older_than_max_age_are_not_invoked(age_s: float) -> None:
    function = Function(poison=set())
    failures, mapping = _run(function, _records(3, age_s=age_s))
    assert mapping.invocations == 0
    assert [(f.condition, len(f.records)) for f in failures] == [("RecordAgeExceeded", 3)]
