"""`cdclake dispatch --env dev` against a moto server: the decision from a real Hudi table's
last commit (the merge's checkpoint read without Spark) and its Glue job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.ops.ops_helpers import run_cdclake

pytestmark = [pytest.mark.moto, pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]


@pytest.fixture(scope="module")
def decided(deployed: dict[str, Any]) -> dict[str, Any]:
    args = ("dispatch", "--env", "dev", "--config-dir", str(deployed["config_dir"]))
    result = run_cdclake(*args, "--dry-run", "--json")
    # The other lake tables have no Glue job on this moto: each says so, and the exit says 1.
    assert result.returncode == 1, result.stderr
    return {t["table"]: t for t in json.loads(result.stdout)["tables"]}


def test_dispatch_aws_file_after_the_commit_starts_the_table(decided: dict[str, Any]) -> None:
    orders = decided["public.orders"]
    assert orders["start"] is True and orders["reason"] == "1 change files wait"
    assert len(orders["files_pending"]) == 1 and orders["files_pending"][0].startswith("s3://")


def test_dispatch_aws_table_without_job_is_not_started(decided: dict[str, Any]) -> None:
    customers = decided["public.customers"]
    assert customers["start"] is False and customers["failed"] is True
    assert "cdclake-dev-merge-public-customers not found" in customers["reason"]


def test_dispatch_aws_json_lag_of_read_tables_only(decided: dict[str, Any]) -> None:
    # orders' file waits: its lag is that file's age; customers (no job) has none to report.
    assert decided["public.orders"]["lag_seconds"] >= 0  # None would not compare
    assert decided["public.customers"]["lag_seconds"] is None
