"""`cdclake quarantine replay --env dev` and the Glue job's `--mode replay`, against a moto server.

The whole runbook on AWS: a merge run of the table's Glue job quarantines two lines; the fix
(``column_types: {balance: string}``) is deployed; ``cdclake quarantine replay`` starts a run of
the job with ``--mode replay``; the run itself is ``glue_jobs/merge_job.py`` executed here, in
the shared SparkSession on real Hudi, with the arguments moto holds for that run (the job's
defaults and ``--mode replay``) and its run id, as Glue would execute it; ``--run-id … --wait``
then reports the run from its ledger in the quarantine bucket.

moto's Glue runs no script: a run is STARTING, RUNNING, then SUCCEEDED (at once here: the
server's transitions are immediate, see ops_helpers.moto_server), never FAILED; the failing
run and the polling are checked against botocore's Stubber (test_quarantine_glue_run.py).

Its own region and buckets, so the status tests' job and runs (eu-west-1) are left alone.
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
from typing import Any

import boto3
import pytest
import yaml

from tests.ops.ops_helpers import (
    MOTO_ACCOUNT,
    REPO_ROOT,
    cdclake_json,
    job_argv,
    order_line,
    run_cdclake,
    spark_on_s3,
)

ENTRY = REPO_ROOT / "glue_jobs" / "merge_job.py"
REGION = "eu-west-3"
TABLE = "public.orders"
DATABASE = "cdclake_replay"  # not the merge tests' cdclake_dev: one shared metastore
HUGE = "1e25"  # fits no decimal(38,18)
BALANCE_ID, FEE_ID = 10, 11
FIX = {"balance": "string"}

pytestmark = [pytest.mark.moto, pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]


@pytest.fixture(scope="module")
def replay_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """config/dev.yaml in moto's account and a region of these tests' own."""
    from environment.config import load_config

    folder = tmp_path_factory.mktemp("replay-config")
    raw = yaml.safe_load((REPO_ROOT / "config" / "dev.yaml").read_text())
    raw["account"], raw["region"] = MOTO_ACCOUNT, REGION
    (folder / "dev.yaml").write_text(yaml.safe_dump(raw))
    config = load_config("dev", config_dir=folder)
    job = config.lake_table(TABLE).merge_job_name(config.prefix)
    return {"dir": folder, "job": job, "prefix": config.prefix}


def _stdout_json(call: Any) -> dict[str, Any]:
    """Run ``call()`` (the entry point's main), expect 0, return its last stdout line's JSON."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = call()
    assert code == 0, out.getvalue()
    return dict(json.loads(out.getvalue().strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def deployed_job(
    aws_env: None,
    moto_endpoint: str,
    replay_config: dict[str, Any],
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """public.orders after one merge run quarantined two lines, then the fix deployed."""
    prefix, job = replay_config["prefix"], replay_config["job"]
    s3 = boto3.client("s3", region_name=REGION)
    buckets = {k: f"{prefix}-replay-{k}" for k in ("changes", "quarantine")}
    for bucket in buckets.values():
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    topic = f"{prefix}.{TABLE}"
    lines = [order_line(i, lsn=100 + i) for i in range(1, 5)]  # before the numeric columns
    lines += [
        order_line(BALANCE_ID, lsn=200, balance=HUGE, fee=None),
        order_line(FEE_ID, lsn=201, balance="1", fee=HUGE),
    ]
    s3.put_object(
        Bucket=buckets["changes"],
        Key=f"topics/{topic}/partition=0/{topic}+0+0000000000.json",
        Body="".join(f"{line}\n" for line in lines).encode(),
    )
    quarantine = f"s3://{buckets['quarantine']}/public_orders/"
    defaults = {
        "--table": TABLE,
        "--changes_path": f"s3://{buckets['changes']}/topics/{topic}/",
        # The warehouse stays on disk: Hudi on S3 is the merge's own path, not the replay's.
        "--warehouse_path": str(tmp_path_factory.mktemp("replay-warehouse")),
        "--database": DATABASE,
        "--record_key": "id",
        "--partition_fields": "order_date",
        "--table_type": "COPY_ON_WRITE",
        "--quarantine_path": quarantine,
        "--max_bad_fraction": "0.5",  # two bad lines of six
    }
    glue = boto3.client("glue", region_name=REGION)

    def deploy(arguments: dict[str, str]) -> None:  # moto has no UpdateJob
        with contextlib.suppress(glue.exceptions.EntityNotFoundException):
            glue.delete_job(JobName=job)
        glue.create_job(
            Name=job,
            Role=f"arn:aws:iam::{MOTO_ACCOUNT}:role/merge",
            Command={"Name": "glueetl", "ScriptLocation": "s3://assets/merge_job.py"},
            GlueVersion="5.0",
            ExecutionProperty={"MaxConcurrentRuns": 1},
            DefaultArguments=arguments,
        )

    deploy(defaults)
    main = runpy.run_path(str(ENTRY))["main"]
    with spark_on_s3(spark, moto_endpoint, REGION):
        merged = _stdout_json(lambda: main(job_argv(defaults, job=job)))["cdclake_merge"]
    assert merged["committed"] and merged["quarantined"] == 2, merged
    deploy({**defaults, "--column_types": json.dumps(FIX)})  # the fix, deployed
    return {
        "glue": glue,
        "s3": s3,
        "main": main,
        "merge": merged,
        "quarantine": quarantine,
        "bucket": buckets["quarantine"],
    }


def _cli(*args: str) -> list[str]:
    return ["quarantine", *args, "--env", "dev", "--table", TABLE]


def _config_dir(replay_config: dict[str, Any]) -> list[str]:
    return ["--config-dir", str(replay_config["dir"])]


def _execute(
    deployed_job: dict[str, Any], job: str, run_id: str, spark: Any, endpoint: str
) -> dict[str, Any]:
    """Glue executing run ``run_id``: the entry point with the run's arguments and id."""
    run = deployed_job["glue"].get_job_run(JobName=job, RunId=run_id)["JobRun"]
    argv = job_argv(run["Arguments"], job=job, run_id=run_id)
    with spark_on_s3(spark, endpoint, REGION):
        return _stdout_json(lambda: deployed_job["main"](argv))["cdclake_replay"]


@pytest.fixture(scope="module")
def started(deployed_job: dict[str, Any], replay_config: dict[str, Any]) -> dict[str, Any]:
    """`cdclake quarantine replay --env dev`: starts the job; the run as moto holds it."""
    shown = cdclake_json(*_cli("replay"), *_config_dir(replay_config))
    run = deployed_job["glue"].get_job_run(JobName=shown["job"], RunId=shown["job_run"])
    return {"shown": shown, "run": run["JobRun"]}


@pytest.fixture(scope="module")
def replayed(
    deployed_job: dict[str, Any],
    replay_config: dict[str, Any],
    started: dict[str, Any],
    spark: Any,
    moto_endpoint: str,
) -> dict[str, Any]:
    run_id = started["shown"]["job_run"]
    return _execute(deployed_job, replay_config["job"], run_id, spark, moto_endpoint)


@pytest.fixture(scope="module")
def replayed_again(
    deployed_job: dict[str, Any],
    replay_config: dict[str, Any],
    replayed: dict[str, Any],
    spark: Any,
    moto_endpoint: str,
) -> dict[str, Any]:
    job = replay_config["job"]
    run_id = deployed_job["glue"].start_job_run(JobName=job, Arguments={"--mode": "replay"})
    return _execute(deployed_job, job, run_id["JobRunId"], spark, moto_endpoint)


# --- the CLI starts the table's Glue job in replay mode ---------------------------------------


def test_quarantine_replay_aws_starts_job_from_config_in_replay_mode(
    started: dict[str, Any], replay_config: dict[str, Any]
) -> None:
    assert started["shown"]["job"] == replay_config["job"] == "cdclake-dev-merge-public-orders"
    assert started["run"]["JobName"] == replay_config["job"]
    assert started["run"]["Arguments"]["--mode"] == "replay"
    # moto merges the job's defaults into the run's arguments, as Glue hands them the script.
    assert started["run"]["Arguments"]["--column_types"] == json.dumps(FIX)


def test_quarantine_replay_aws_without_json_prints_the_run_id(
    deployed_job: dict[str, Any], replay_config: dict[str, Any], replayed_again: dict[str, Any]
) -> None:
    result = run_cdclake(*_cli("replay"), *_config_dir(replay_config))
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    run = deployed_job["glue"].get_job_run(JobName=replay_config["job"], RunId=run_id)
    assert run["JobRun"]["Arguments"]["--mode"] == "replay"
    assert f"replay started as run {run_id} of Glue job {replay_config['job']}" in result.stderr


# --- the Glue job run with --mode replay --------------------------------------------------------


def test_glue_entry_replay_mode_applies_the_line_the_fix_reads(replayed: dict[str, Any]) -> None:
    assert replayed["replay"] == "r00000002" and replayed["version"] == 2, replayed
    assert replayed["applied"] == 1 and replayed["still_failing"] == 1, replayed
    assert replayed["merge"]["upserts"] == 1 and replayed["merge"]["quarantined"] == 0
    (failing,) = replayed["still_failing_lines"]
    assert "column 'fee'" in failing["reason"] and "decimal(38,18)" in failing["reason"]


def test_glue_entry_replay_mode_row_lands_with_the_fixed_type(
    replayed: dict[str, Any], spark: Any
) -> None:
    rows = spark.table(f"{DATABASE}.public_orders").where(f"id = {BALANCE_ID}").collect()
    assert [(r["id"], r["balance"]) for r in rows] == [(BALANCE_ID, "1" + "0" * 25)]
    types = dict(spark.table(f"{DATABASE}.public_orders").dtypes)
    assert types["balance"] == "string"


def test_glue_entry_replay_mode_ledger_names_the_run_in_the_bucket(
    deployed_job: dict[str, Any], started: dict[str, Any], replayed: dict[str, Any]
) -> None:
    body = deployed_job["s3"].get_object(
        Bucket=deployed_job["bucket"], Key="public_orders/replays/r00000002/_ledger.json"
    )["Body"]
    ledger = json.loads(body.read())
    assert ledger["job_run"] == started["shown"]["job_run"]
    assert ledger["version"] == 2 and len(ledger["applied"]) == 1
    lines = deployed_job["s3"].get_object(
        Bucket=deployed_job["bucket"], Key="public_orders/replays/r00000002/lines.json"
    )["Body"]
    assert [json.loads(x)["payload"]["after"]["id"] for x in lines.read().splitlines()] == [
        BALANCE_ID
    ]


def test_glue_entry_replay_mode_second_run_commits_nothing(
    replayed_again: dict[str, Any], deployed_job: dict[str, Any], replay_config: dict[str, Any]
) -> None:
    assert replayed_again["replay"] is None and replayed_again["applied"] == 0, replayed_again
    assert replayed_again["still_failing"] == 1
    replays = deployed_job["s3"].list_objects_v2(
        Bucket=deployed_job["bucket"], Prefix="public_orders/replays/"
    )
    assert {o["Key"].split("/")[2] for o in replays["Contents"]} == {"r00000002"}
    listed = cdclake_json(*_cli("list"), *_config_dir(replay_config))
    (line,) = listed["lines"]
    assert line["quarantined_by"] == "v00000001" and "column 'fee'" in line["reason"]


# --- --run-id / --wait: the run's outcome, from its ledger --------------------------------------


def test_quarantine_replay_aws_run_report_reads_the_ledger(
    replayed: dict[str, Any], started: dict[str, Any], replay_config: dict[str, Any]
) -> None:
    run_id = started["shown"]["job_run"]
    report = cdclake_json(*_cli("replay"), "--run-id", run_id, *_config_dir(replay_config))
    assert report["state"] == "SUCCEEDED" and report["job_run"] == run_id
    assert (report["replay"], report["version"], report["applied"]) == ("r00000002", 2, 1)
    assert report["still_failing"] == 1 and report["merge"]["upserts"] == 1


def test_quarantine_replay_aws_wait_run_without_ledger_lists_what_still_fails(
    replayed_again: dict[str, Any], replay_config: dict[str, Any]
) -> None:
    # moto's run ends SUCCEEDED having run nothing: like a replay that found no readable line.
    report = cdclake_json(*_cli("replay"), "--wait", *_config_dir(replay_config))
    assert report["state"] == "SUCCEEDED" and report["job_run"].startswith("jr_")
    assert report["replay"] is None and report["applied"] == 0
    (failing,) = report["still_failing_lines"]
    assert "column 'fee'" in failing["reason"]


def test_quarantine_replay_aws_run_id_of_a_merge_refused(
    deployed_job: dict[str, Any], replay_config: dict[str, Any], replayed_again: dict[str, Any]
) -> None:
    merge_run = deployed_job["glue"].start_job_run(JobName=replay_config["job"])["JobRunId"]
    result = run_cdclake(*_cli("replay"), "--run-id", merge_run, *_config_dir(replay_config))
    assert result.returncode == 2 and "is not a replay" in result.stderr
