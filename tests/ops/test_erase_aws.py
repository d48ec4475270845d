"""`cdclake erase` on AWS, against a moto server: the key goes to a request object in the
lake bucket (an expiring folder) and the Glue run is started with the request's id alone, so
the key is in no run's arguments (Glue keeps a job's run history beyond any erase's reach); a
run that does not start leaves no request behind.

The erase run itself (reading the request, erasing, removing it) is the Glue job's, under the
template's role in tests/iam/test_merge_job_least_privilege.py; the source check before it
needs a database (tests/bootstrap/test_erase_source.py).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest

from tests.ops.ops_helpers import config_in_region, create_merge_job

REGION = "ap-southeast-2"  # this module's own: no other module's jobs or buckets
TABLE = "public.orders"
KEY = {"id": "secret-4711"}  # a value that must not reach Glue

pytestmark = [pytest.mark.moto]


@pytest.fixture(scope="module")
def world(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """dev's public.orders with its Glue job, its lake in a bucket of the module's region."""
    from cdclake.ops import aws_place
    from environment.config import load_config

    config = load_config("dev", config_dir=config_in_region(tmp_path_factory.mktemp("e"), REGION))
    bucket = f"{config.prefix}-erase-lake"
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    glue = boto3.client("glue", region_name=REGION)
    create_merge_job(
        glue,
        config,
        TABLE,
        changes=f"s3://{bucket}/topics/{config.prefix}.{TABLE}/",
        warehouse=f"s3://{bucket}/warehouse/",
    )
    return {"glue": glue, "s3": s3, "bucket": bucket, "place": aws_place(config, TABLE, glue)}


def _requests(world: dict[str, Any]) -> dict[str, str]:
    """{object key: its text} of every erase request of the table."""
    from cdclake_merge.erase_request import request_folder

    folder = request_folder(world["place"].warehouse, world["place"].lake_table)
    prefix = folder.removeprefix(f"s3://{world['bucket']}/")
    listed = world["s3"].list_objects_v2(Bucket=world["bucket"], Prefix=prefix)
    return {
        item["Key"]: world["s3"]
        .get_object(Bucket=world["bucket"], Key=item["Key"])["Body"]
        .read()
        .decode()
        for item in listed.get("Contents", [])
    }


@pytest.fixture(scope="module")
def started(world: dict[str, Any]) -> dict[str, Any]:
    """An erase run started as the command starts it: its run and the requests then stored."""
    from cdclake.erase import start_erase

    run_id = start_erase(world["glue"], world["place"], KEY)
    run = world["glue"].get_job_run(JobName=world["place"].job_name, RunId=run_id)["JobRun"]
    return {"run": run, "requests": _requests(world)}


def test_erase_aws_run_arguments_name_the_request_not_the_key(started: dict[str, Any]) -> None:
    arguments = started["run"]["Arguments"]  # moto's: the job's defaults and the run's own
    (stored,) = started["requests"]
    request = stored.rsplit("/", 1)[1].removesuffix(".json")
    assert (arguments["--mode"], arguments["--erase_request"]) == ("erase", request)
    assert "secret-4711" not in json.dumps(started["run"], default=str)


def test_erase_aws_request_in_the_expiring_folder_holds_the_key(started: dict[str, Any]) -> None:
    ((stored, text),) = started["requests"].items()
    # Under the lake bucket's expire-erase-requests rule (tests/cdk), out of the dispatcher's reach.
    assert stored.startswith("warehouse/erase-requests/cdclake_dev.public_orders/")
    assert json.loads(text) == {"key": KEY}


def test_erase_aws_run_not_started_leaves_no_request(
    world: dict[str, Any], started: dict[str, Any]
) -> None:
    from cdclake.erase import start_erase

    gone = dataclasses.replace(world["place"], job_name="cdclake-dev-merge-public-gone")
    with pytest.raises(RuntimeError, match=r"^Glue job cdclake-dev-merge-public-gone did not"):
        start_erase(world["glue"], gone, KEY)
    assert list(_requests(world)) == list(started["requests"])


def test_erase_aws_glue_not_reached_leaves_no_request(
    world: dict[str, Any], started: dict[str, Any]
) -> None:
    from botocore.config import Config

    from cdclake.erase import start_erase

    # Nothing listens on port 1: the whole call fails, with no answer from Glue to word.
    unreachable = boto3.client(
        "glue",
        region_name=REGION,
        endpoint_url="http://127.0.0.1:1",
        config=Config(retries={"max_attempts": 1}, connect_timeout=2),
    )
    with pytest.raises(RuntimeError, match=r"^Glue job cdclake-dev-merge-public-orders did not"):
        start_erase(unreachable, world["place"], KEY)
    assert list(_requests(world)) == list(started["requests"])
