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


@pytest.fixture(scope="module")
def started_by_dry_run(deployed: dict[str, Any]) -> set[str]:
    """The Glue runs of orders' job that `cdclake dispatch --dry-run` started (none, or the
    run ids of those it did)."""
    import boto3

    from environment.config import load_config

    region = load_config("dev", config_dir=deployed["config_dir"]).region
    glue = boto3.client("glue", region_name=region)

    def run_ids() -> set[str]:
        return {run["Id"] for run in glue.get_job_runs(JobName=deployed["job"])["JobRuns"]}

    before = run_ids()
    args = ("dispatch", "--env", "dev", "--config-dir", str(deployed["config_dir"]))
    result = run_cdclake(*args, "--dry-run")
    assert result.returncode == 1, result.stderr  # the tables without a job, as above
    return run_ids() - before


def test_dispatch_aws_dry_run_starts_no_run(
    decided: dict[str, Any], started_by_dry_run: set[str]
) -> None:
    # orders would start (a file waits): the dry run says so and starts nothing.
    assert decided["public.orders"]["start"] is True and decided["public.orders"]["run_id"] is None
    assert started_by_dry_run == set()
