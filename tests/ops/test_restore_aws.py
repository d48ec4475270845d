"""`cdclake restore --env dev` against a moto server: the savepoints listed from the table's
timeline on S3, the restore started as a run of the table's Glue job with ``--mode restore``,
a time before every savepoint refused without starting anything.

public.customers of dev in a region of these tests' own (the status and dispatch tests find
no job for it in theirs), with a Glue job and a timeline holding two savepoints (the CLI reads
only their file names; the restore itself is the Glue job's, test_glue_entry.py).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from tests.ops.ops_helpers import config_in_region, create_merge_job, run_cdclake

TABLE = "public.customers"
SAVEPOINTS = ("20261120010000000", "20261127010000000")
REGION = "eu-west-2"

pytestmark = [pytest.mark.moto]


@pytest.fixture(scope="module")
def customers(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A deployed merge job of public.customers whose table has two savepoints."""
    from environment.config import load_config

    config_dir = config_in_region(tmp_path_factory.mktemp("restore-config"), REGION)
    config = load_config("dev", config_dir=config_dir)
    table = config.lake_table(TABLE)
    bucket = f"{config.prefix}-restore-lake"
    s3 = boto3.client("s3", region_name=config.region)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": config.region})
    timeline = f"warehouse/{config.lake.glue_database}.db/{table.lake_table_name}/.hoodie"
    for name in (
        *(f"{s}.savepoint" for s in SAVEPOINTS),
        f"{SAVEPOINTS[0]}.commit",
        "20261128010000000.savepoint.inflight",  # not a savepoint yet
    ):
        s3.put_object(Bucket=bucket, Key=f"{timeline}/{name}", Body=b"{}")
    glue = boto3.client("glue", region_name=config.region)
    job = create_merge_job(
        glue,
        config,
        TABLE,
        changes=f"s3://{bucket}/topics/",
        warehouse=f"s3://{bucket}/warehouse/",
    )
    return {"glue": glue, "job": job, "config_dir": str(config_dir)}


def _restore(customers: dict[str, Any], *args: str) -> Any:
    return run_cdclake(
        "restore", "--env", "dev", "--table", TABLE, "--config-dir", customers["config_dir"], *args
    )


def _runs(customers: dict[str, Any]) -> list[dict[str, Any]]:
    return list(customers["glue"].get_job_runs(JobName=customers["job"])["JobRuns"])


def test_restore_aws_list_shows_the_completed_savepoints(customers: dict[str, Any]) -> None:
    result = _restore(customers, "--list")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["savepoints"] == list(SAVEPOINTS)


def test_restore_aws_before_every_savepoint_is_refused_and_starts_nothing(
    customers: dict[str, Any],
) -> None:
    before = len(_runs(customers))
    result = _restore(customers, "--to", "2026-11-01")
    assert result.returncode == 2
    assert "no savepoint at or before 2026-11-01" in result.stderr
    assert "the oldest is 2026-11-20T01:00:00" in result.stderr
    assert len(_runs(customers)) == before


def test_restore_aws_date_starts_the_job_in_restore_mode_at_that_days_savepoint(
    customers: dict[str, Any],
) -> None:
    result = _restore(customers, "--to", "2026-11-26", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["savepoint"] == SAVEPOINTS[0]
    [run] = [r for r in _runs(customers) if r["Id"] == shown["job_run"]]
    assert run["Arguments"]["--mode"] == "restore"
    assert run["Arguments"]["--restore_to"].startswith("2026-11-20T01:00:00")
