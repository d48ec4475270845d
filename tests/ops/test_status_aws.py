"""`cdclake status --env dev` against a moto server: Glue, S3 and CloudWatch through boto3."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.ops.ops_helpers import cdclake_json

pytestmark = [pytest.mark.moto, pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]


@pytest.fixture(scope="module")
def screen(deployed: dict[str, Any]) -> dict[str, Any]:
    asked_at = time.time()  # the lag is checked against this, not the time a test runs
    shown = cdclake_json("status", "--env", "dev", "--config-dir", str(deployed["config_dir"]))
    return {**shown, "_asked_at": asked_at}


def _orders(screen: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in screen["tables"] if t["table"] == "public.orders")


def test_status_aws_last_commit_read_from_the_lake_bucket(screen: dict[str, Any]) -> None:
    orders = _orders(screen)
    assert orders["version"] == 1 and orders["errors"] == []
    assert orders["lake_table"] == "cdclake_dev.public_orders"
    assert orders["last_commit"]["instant"].isdigit()


def test_status_aws_pending_files_listed_after_the_commit(screen: dict[str, Any]) -> None:
    assert _orders(screen)["pending_files"] == 1


def test_status_aws_fresh_waiting_file_dated_without_warning(screen: dict[str, Any]) -> None:
    row = _orders(screen)
    assert row["oldest_waiting"] is not None and row["warnings"] == []


def test_status_aws_quarantined_line_counted(screen: dict[str, Any]) -> None:
    assert _orders(screen)["quarantined_lines"] == 1


def test_status_aws_last_run_from_glue(screen: dict[str, Any], deployed: dict[str, Any]) -> None:
    run = _orders(screen)["last_run"]
    assert run["outcome"] == "SUCCEEDED" and run["detail"] == deployed["run_id"]


def test_status_aws_lag_from_the_cloudwatch_metric(
    screen: dict[str, Any], deployed: dict[str, Any]
) -> None:
    orders = _orders(screen)
    newest = deployed["result"]["newest_source_ts_ms"] / 1000
    assert orders["lag_from"] == "cloudwatch"
    # Published lag plus the datapoint's age: at least the lag at publishing time.
    assert orders["lag_seconds"] >= screen["_asked_at"] - newest - 120


def test_status_aws_table_without_job_says_so(screen: dict[str, Any]) -> None:
    customers = next(t for t in screen["tables"] if t["table"] == "public.customers")
    assert customers["errors"] == [
        "Glue job cdclake-dev-merge-public-customers not found: is dev deployed?"
    ]


def test_status_aws_connectors_unreachable_reported_not_fatal(screen: dict[str, Any]) -> None:
    # moto does not serve MSK Connect (kafkaconnect): the screen says so and shows the rest.
    assert screen["connectors"]["error"].startswith("not reachable:")
