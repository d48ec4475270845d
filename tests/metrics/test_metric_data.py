"""The lake metrics of one run, without Spark: what a run reports and what CloudWatch receives.

Publishing goes to a CloudWatch client whose requests botocore's Stubber checks against the
service model (moto's in-process backends are shared with other tests' servers, and
``mock_aws`` resets them on exit).
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdclake_merge import metrics

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TABLE = "public.orders"


def run(**changes: Any) -> metrics.TableRun:
    values: dict[str, Any] = {
        "environment": "dev",
        "table": TABLE,
        "events_applied": 7,
        "upserts": 5,
        "deletes": 2,
        "quarantined": 1,
        "duration_seconds": 3.5,
        "newest_source_ts_ms": int((NOW - timedelta(seconds=90)).timestamp() * 1000),
    }
    return metrics.TableRun(**{**values, **changes})


def test_table_run_from_result_takes_counts_and_newest_source_time() -> None:
    result = {"applied": "7", "upserts": 5, "deletes": 2, "quarantined": 1}
    made = metrics.TableRun.from_result(
        {**result, "newest_source_ts_ms": "1700000000000"},
        environment="dev",
        table=TABLE,
        duration_seconds=3,
    )
    assert made == metrics.TableRun("dev", TABLE, 7, 5, 2, 1, 3.0, 1_700_000_000_000)
    assert isinstance(made.duration_seconds, float)


def test_table_run_from_result_of_a_run_without_changes_is_zero_and_no_source_time() -> None:
    made = metrics.TableRun.from_result({}, environment="prod", table=TABLE, duration_seconds=0.5)
    assert made == metrics.TableRun("prod", TABLE, 0, 0, 0, 0, 0.5, None)


def test_table_run_lag_seconds_is_now_minus_newest_source_commit() -> None:
    assert run().lag_seconds(NOW) == 90.0
    assert run(newest_source_ts_ms=int(NOW.timestamp() * 1000) - 1500).lag_seconds(NOW) == 1.5


def test_table_run_lag_seconds_source_clock_ahead_is_zero_not_negative() -> None:
    ahead = int((NOW + timedelta(seconds=5)).timestamp() * 1000)
    assert run(newest_source_ts_ms=ahead).lag_seconds(NOW) == 0.0


def test_table_run_lag_seconds_nothing_applied_yet_is_none() -> None:
    assert run(newest_source_ts_ms=None).lag_seconds(NOW) is None


def test_table_run_lag_seconds_run_without_events_is_none() -> None:
    assert run(events_applied=0).lag_seconds(NOW) is None


def test_lag_data_one_lag_datum_per_read_table_none_left_out() -> None:
    data = metrics.lag_data("prod", {TABLE: 42.0, "public.items": None, "public.x": -1}, NOW)
    assert data == [
        {
            "MetricName": "LagSeconds",
            "Dimensions": [
                {"Name": "Environment", "Value": "prod"},
                {"Name": "Table", "Value": table},
            ],
            "Timestamp": NOW,
            "Value": value,
            "Unit": "Seconds",
        }
        for table, value in [(TABLE, 42.0), ("public.x", 0.0)]
    ]


def test_metric_data_one_datum_per_metric_with_unit_dimensions_and_time() -> None:
    data = metrics.metric_data(run(), NOW)
    dimensions = [{"Name": "Environment", "Value": "dev"}, {"Name": "Table", "Value": TABLE}]
    assert data == [
        {
            "MetricName": name,
            "Dimensions": dimensions,
            "Timestamp": NOW,
            "Value": value,
            "Unit": unit,
        }
        for name, value, unit in [
            ("EventsApplied", 7.0, "Count"),
            ("Upserts", 5.0, "Count"),
            ("Deletes", 2.0, "Count"),
            ("Quarantined", 1.0, "Count"),
            ("RunDurationSeconds", 3.5, "Seconds"),
            ("LagSeconds", 90.0, "Seconds"),
        ]
    ]


def test_metric_data_without_source_time_leaves_lag_out() -> None:
    names = [d["MetricName"] for d in metrics.metric_data(run(newest_source_ts_ms=None), NOW)]
    assert names == [name for name in metrics.METRIC_NAMES if name != metrics.LAG]


def test_publish_sends_one_put_metric_data_in_the_lake_namespace() -> None:
    client = boto3.client("cloudwatch", region_name="eu-west-1")
    with Stubber(client) as stub:
        expected = {"Namespace": "CdcLake", "MetricData": metrics.metric_data(run(), NOW)}
        stub.add_response("put_metric_data", {}, expected)
        assert metrics.publish(run(), client=client, now=NOW) is True
        stub.assert_no_pending_responses()


def test_publish_refused_call_logs_one_line_naming_table_and_returns_false(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = boto3.client("cloudwatch", region_name="eu-west-1")
    with Stubber(client) as stub, caplog.at_level(logging.WARNING, logger=metrics.__name__):
        stub.add_client_error("put_metric_data", "InvalidParameterValue", "bad\n  dimension")
        assert metrics.publish(run(), client=client, now=NOW) is False
    (record,) = [r for r in caplog.records if r.name == metrics.__name__]
    assert record.getMessage().startswith(f"cdclake metrics not published for {TABLE}: ")
    assert record.getMessage().endswith("bad dimension")


def test_publish_default_client_follows_the_endpoint_setting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # bound, never listening: the connection is refused
        sock.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
        monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
        with caplog.at_level(logging.WARNING, logger=metrics.__name__):
            assert metrics.publish(run(), now=NOW) is False
    (record,) = [r for r in caplog.records if r.name == metrics.__name__]
    assert endpoint in record.getMessage()  # it tried CloudWatch there, and said so in one line
    assert "\n" not in record.getMessage()


def test_one_line_joins_lines_and_names_a_silent_exception() -> None:
    assert metrics.one_line(RuntimeError("first\n  second\tthird")) == "first second third"
    assert metrics.one_line(TimeoutError()) == "TimeoutError"


def test_publish_without_a_time_stamps_now_in_utc() -> None:
    client = boto3.client("cloudwatch", region_name="eu-west-1")
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.cloudwatch.PutMetricData", lambda params, **_: sent.append(params)
    )
    with Stubber(client) as stub:
        stub.add_response("put_metric_data", {})
        before = datetime.now(UTC)
        assert metrics.publish(run(), client=client) is True
    stamps = {d["Timestamp"] for d in sent[0]["MetricData"]}
    (stamp,) = stamps
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(UTC)
