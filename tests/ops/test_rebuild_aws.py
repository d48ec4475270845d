"""`cdclake rebuild --env dev` against a moto server: a rebuild already signalled is continued
as a run of the table's Glue job with ``--mode rebuild`` (no database needed, no second
signal); one not signalled yet is refused without a DSN before anything is begun or started;
``--wait`` follows the runs until the state object names the generation live.

Tables of dev in a region of these tests' own (the status and dispatch tests find no job for
them in theirs), each with a Glue job; the rebuild runs themselves are the Glue job's
(tests/merge), and the signal through a database the local stack's (tests/local).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
import yaml

from cdclake_merge.pending import CHECKPOINT_KEY
from tests.ops.ops_helpers import config_in_region, create_merge_job, run_cdclake

REGION = "eu-central-1"
SIGNALLED = "public.orders"  # a rebuild begun and signalled before
FRESH = "public.customers"  # no rebuild yet
# Keeps its history (set here) and is stored COPY_ON_WRITE, while config says MERGE_ON_READ.
HISTORY = "public.order_lines"
STATE = "generations.json"  # cdclake_merge.generations.STATE

pytestmark = [pytest.mark.moto]


@pytest.fixture(scope="module")
def world(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A bucket with the two tables' change folders, each table's Glue job, and orders' state
    object: generation 2 being built, its snapshot signalled."""
    from environment.config import load_config

    config_dir = config_in_region(tmp_path_factory.mktemp("rebuild-config"), REGION)
    dev = config_dir / "dev.yaml"
    raw = yaml.safe_load(dev.read_text())
    (entry,) = [t for t in raw["tables"] if t["name"] == HISTORY]
    entry["history"] = True
    dev.write_text(yaml.safe_dump(raw))
    config = load_config("dev", config_dir=config_dir)
    assert config.lake_table(HISTORY).hudi_table_type == "MERGE_ON_READ"
    bucket = f"{config.prefix}-rebuild-lake"
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    glue = boto3.client("glue", region_name=REGION)
    database = config.lake.glue_database
    jobs, sidecars = {}, {}
    for name in (SIGNALLED, FRESH, HISTORY):
        table = config.lake_table(name)
        changes = f"s3://{bucket}/topics/{config.prefix}.{name}/"
        warehouse = f"s3://{bucket}/warehouse/"
        jobs[name] = create_merge_job(glue, config, name, changes=changes, warehouse=warehouse)
        sidecars[name] = f"warehouse/{database}.db/_cdclake/{table.lake_table_name}"
    building = {"live": 1, "building": 2, "start": {}, "snapshot_id": "snapshot-1"}
    _store_copy_on_write(s3, bucket, f"warehouse/{database}.db", config.lake_table(HISTORY))
    s3.put_object(
        Bucket=bucket, Key=f"{sidecars[SIGNALLED]}/{STATE}", Body=json.dumps(building).encode()
    )
    return {
        "glue": glue,
        "s3": s3,
        "bucket": bucket,
        "jobs": jobs,
        "sidecars": sidecars,
        "config_dir": str(config_dir),
    }


def _store_copy_on_write(s3: Any, bucket: str, database: str, table: Any) -> None:
    """``table`` as the merge left it after one commit, stored COPY_ON_WRITE: Hudi's properties,
    the commit naming its checkpoint, the checkpoint (no Spark reads any of it here)."""
    name, key = table.lake_table_name, ",".join(table.primary_key)
    files = {
        f"{name}/.hoodie/hoodie.properties": (
            f"hoodie.table.type=COPY_ON_WRITE\nhoodie.table.recordkey.fields={key}\n"
        ),
        f"{name}/.hoodie/20261204000000000.commit": json.dumps(
            {"extraMetadata": {CHECKPOINT_KEY: "checkpoints/v00000001.json"}}
        ),
        f"_cdclake/{name}/checkpoints/v00000001.json": json.dumps(
            {
                "version": 1,
                "columns": [["id", "int"]],
                "layout": ["id"],
                "truncated_before": None,
                "tombstones": [],
                "positions": {},
            }
        ),
    }
    for path, body in files.items():
        s3.put_object(Bucket=bucket, Key=f"{database}/{path}", Body=body.encode())


def _rebuild(world: dict[str, Any], table: str, *args: str) -> Any:
    return run_cdclake(
        "rebuild", "--env", "dev", "--table", table, "--config-dir", world["config_dir"], *args
    )


def _runs(world: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return list(world["glue"].get_job_runs(JobName=world["jobs"][table])["JobRuns"])


@pytest.fixture(scope="module")
def continued(world: dict[str, Any]) -> dict[str, Any]:
    """`cdclake rebuild --json` of the signalled table, without a DSN: its output and run."""
    result = _rebuild(world, SIGNALLED, "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    run = world["glue"].get_job_run(JobName=world["jobs"][SIGNALLED], RunId=shown["job_run"])
    return {"shown": shown, "run": run["JobRun"], "stderr": result.stderr}


def test_rebuild_aws_signalled_rebuild_starts_job_in_rebuild_mode(
    continued: dict[str, Any],
) -> None:
    assert continued["run"]["Arguments"]["--mode"] == "rebuild"
    assert continued["shown"]["generation"] == 2


def test_rebuild_aws_signalled_rebuild_is_continued_not_signalled_again(
    world: dict[str, Any], continued: dict[str, Any]
) -> None:
    state = world["s3"].get_object(
        Bucket=world["bucket"], Key=f"{world['sidecars'][SIGNALLED]}/{STATE}"
    )
    assert json.loads(state["Body"].read())["snapshot_id"] == "snapshot-1"
    assert continued["shown"]["snapshot_id"] == "snapshot-1"
    assert "rebuild of generation 2 continued (snapshot snapshot-1)" in continued["stderr"]


def test_rebuild_aws_unsignalled_without_dsn_refused_before_anything(
    world: dict[str, Any],
) -> None:
    result = _rebuild(world, FRESH)
    assert result.returncode == 2, result.stderr
    assert "the rebuild's snapshot signal needs the database: give --dsn" in result.stderr
    assert _runs(world, FRESH) == []
    listed = world["s3"].list_objects_v2(Bucket=world["bucket"], Prefix=world["sidecars"][FRESH])
    assert listed.get("KeyCount", 0) == 0  # no rebuild begun: no state object


def test_rebuild_aws_wait_still_building_when_time_is_up_exits_1(
    world: dict[str, Any], continued: dict[str, Any]
) -> None:
    # moto's runs succeed at once, and nothing here swaps the generation in.
    result = _rebuild(world, SIGNALLED, "--wait", "--timeout", "0")
    assert result.returncode == 1, result.stderr
    assert "public.orders: generation 2 still building after 0 s" in result.stderr


@pytest.fixture(scope="module")
def copy_begun(world: dict[str, Any]) -> dict[str, Any]:
    """`cdclake rebuild --json` of the table keeping its history: its output, state and runs."""
    result = _rebuild(world, HISTORY, "--json")
    assert result.returncode == 0, result.stderr
    return {"stderr": result.stderr, "state": _state(world, HISTORY), "runs": _runs(world, HISTORY)}


def _state(world: dict[str, Any], table: str) -> dict[str, Any]:
    state = world["s3"].get_object(
        Bucket=world["bucket"], Key=f"{world['sidecars'][table]}/{STATE}"
    )
    stored: dict[str, Any] = json.loads(state["Body"].read())
    return stored


def test_rebuild_aws_history_table_layout_change_begun_as_a_copy_without_dsn(
    copy_begun: dict[str, Any],
) -> None:
    # A copy signals no snapshot: no database is needed, and the state object says copy.
    assert "rebuild of generation 2 begun (a copy of generation 1)" in copy_begun["stderr"]
    stored = copy_begun["state"]
    assert (stored["building"], stored["copy"], stored["snapshot_id"]) == (2, True, None)
    (run,) = copy_begun["runs"]
    assert run["Arguments"]["--mode"] == "rebuild"


def test_rebuild_aws_abandon_leaves_no_rebuild_in_progress(
    world: dict[str, Any], copy_begun: dict[str, Any]
) -> None:
    result = _rebuild(world, HISTORY, "--abandon")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"table": HISTORY, "abandoned": 2}
    stored = _state(world, HISTORY)
    assert (stored["live"], stored["building"], stored["copy"]) == (1, None, False)
    again = _rebuild(world, HISTORY, "--abandon")
    assert again.returncode == 2 and "no rebuild is in progress" in again.stderr


@pytest.fixture(scope="module")
def swapped_already(world: dict[str, Any]) -> Any:
    """`cdclake rebuild --json` of a table whose rebuild swapped before its command could say
    so (killed, or its output lost): generation 2 live, its catalog update not done yet."""
    key = f"{world['sidecars'][FRESH]}/{STATE}"
    swapped = {"live": 2, "catalog_pending": True, "retired": 1, "swapped_version": 3}
    world["s3"].put_object(Bucket=world["bucket"], Key=key, Body=json.dumps(swapped).encode())
    yield _rebuild(world, FRESH, "--json")
    world["s3"].delete_object(Bucket=world["bucket"], Key=key)


def test_rebuild_aws_run_again_after_the_swap_reports_it_and_begins_nothing(
    world: dict[str, Any], swapped_already: Any
) -> None:
    assert swapped_already.returncode == 0, swapped_already.stderr
    assert json.loads(swapped_already.stdout) == {"table": FRESH, "live": 2, "swapped": True}
    assert "rebuild of generation 2 already swapped in; generation 1 is removed" in (
        swapped_already.stderr
    )
    assert "the catalog update is finished by the table's next run" in swapped_already.stderr
    assert _runs(world, FRESH) == []
    assert _state(world, FRESH)["live"] == 2 and _state(world, FRESH).get("building") is None
