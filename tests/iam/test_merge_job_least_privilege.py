"""The Glue merge job (``glue_jobs/merge_job.py``, merge, replay and erase) checked against
exactly the S3 and CloudWatch statements the lake stack gives its role.

moto refuses every request of Spark's S3A client once it enforces IAM (docs/iam.md), so the
job runs in the shared SparkSession against a moto server that records every request and
enforces nothing; each recorded request (S3A's and boto3's) is mapped to what AWS authorizes
it with (action, resource, ``s3:prefix``/``cloudwatch:namespace``) and checked against the
role's statements from the template. SSE-KMS adds what S3 asks KMS for, as the caller. The job's
arguments are the template's for public.orders, resolved to the moto buckets.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import runpy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.iam.iam_helpers.moto import REGION, recorder, recording_moto_server, use_recording_moto
from tests.iam.iam_helpers.recorded import lake_world, recorded_accesses, sse_kms_accesses
from tests.iam.iam_helpers.runs import Call, Run, docs_row
from tests.iam.iam_helpers.statements import (
    Access,
    denied_lines,
    needed_for,
    needed_sids,
    sid,
    unallowed,
)
from tests.iam.iam_helpers.templates import logical_id, role_policy

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.spark,
    pytest.mark.hudi,
    pytest.mark.slow,
]


@contextmanager
def spark_s3(spark: Any, endpoint: str, region: str) -> Iterator[None]:
    """The shared SparkSession's S3A client on ``endpoint`` (a JVM started before the server:
    settings go into its Hadoop configuration, S3A's cache off), then back as it was."""
    from cdclake_merge.session import s3_settings

    settings = {
        **s3_settings({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": region}),
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "merge-job",
        "fs.s3a.secret.key": "merge-job",
        "fs.s3.impl.disable.cache": "true",
        "fs.s3a.impl.disable.cache": "true",
    }
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    before = {key: conf.get(key) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


ENV = "dev"
TABLE = "public.orders"
JOB = "MergeJobsJobPublicOrders"
BUCKETS = ("StorageChanges", "StorageLake", "StorageQuarantine", "StorageGlueAssets")
# One Hive metastore is shared by every Spark test of the session: the table is synced into a
# database of this module's own, not the template's cdclake_dev (only the catalog's name, not
# an S3 path outside warehouse/, changes).
DATABASE = "cdclake_iam"
HUGE = 10**25  # fits no decimal(38,18): the line the merge quarantines
FIX = {"discount": "string"}  # the fix the replay applies it with
COMPONENT = "Glue merge job (merge, replay and erase)"
ERASED = 20_000  # a key inserted and deleted in the change files, then erased
TABLE_NAME = "public_orders"  # TableConfig.lake_table_name of TABLE
CHECKED_BY = "recorded requests (moto recorder) against the statements, conditions included"
#: Found by removal (test_merge_job_each_needed_statement_removed_denies_a_request_it_grants).
NEEDED = {
    "ListChangeFiles",
    "ReadChangeFiles",
    "RewriteChangeFiles",
    "ListLake",
    "WriteLake",
    "ProbeWarehouse",
    "ListQuarantine",
    "WriteQuarantine",
    "JobMetrics",
    "kms:Decrypt, kms:Encrypt, kms:GenerateDataKey",
}
ENTRY = Path(__file__).resolve().parents[2] / "glue_jobs" / "merge_job.py"


def _bad_line(line: str, row_id: int) -> str:
    """A schema-included insert with a ``discount`` column whose value no decimal holds."""
    event = json.loads(line)
    for envelope_field in event["schema"]["fields"]:
        if envelope_field["field"] in ("before", "after"):
            envelope_field["fields"].append(
                {
                    "field": "discount",
                    "type": "struct",
                    "optional": True,
                    "name": "io.debezium.data.VariableScaleDecimal",
                }
            )
    raw = HUGE.to_bytes((HUGE.bit_length() + 8) // 8, "big", signed=True)
    payload = event["payload"]
    payload.update(op="c", before=None)
    payload["after"] = {
        **payload["after"],
        "id": row_id,
        "discount": {"scale": 0, "value": base64.b64encode(raw).decode()},
    }
    return json.dumps(event)


def _inserted_and_deleted(line: str, row_id: int) -> list[str]:
    """An insert of ``row_id`` and its delete, schema included as ``line``'s."""
    event = json.loads(line)
    payload = event["payload"]
    row = {**payload["after"], "id": row_id}
    payload.update(op="c", before=None, after=row)
    insert = json.dumps(event)
    payload.update(op="d", before=row, after=None)
    return [insert, json.dumps(event)]


def _main_json(main: Any, argv: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0, out.getvalue()
    return dict(json.loads(out.getvalue().strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def lake(templates: dict[str, Any]) -> dict[str, Any]:
    return templates["lake"]


@pytest.fixture(scope="module")
def job_runs(
    templates: dict[str, Any],
    lake: dict[str, Any],
    account: str,
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """A merge run, a replay run with the fix, then an erase run of a deleted key, of the
    template's public.orders job."""
    from cdclake_merge.erase_request import request_path, write_request
    from cdclake_merge.generator import GeneratorOptions, generate_files
    from cdclake_merge.storage import S3FileSystem
    from environment.config import load_config

    folder = tmp_path_factory.mktemp("merge-iam")
    with (
        recording_moto_server(folder / "moto.log", folder / "recording", account) as endpoint,
        pytest.MonkeyPatch.context() as patch,
    ):
        use_recording_moto(patch, endpoint, "merge-job")
        # local_session makes its warehouse folder where it is told, s3:// paths included.
        patch.chdir(folder)
        world = lake_world(templates, account, BUCKETS, "iam")
        resolve = world.resolve
        res = lake["Resources"]
        s3 = boto3.client("s3", region_name=REGION)

        job = logical_id(lake, "AWS::Glue::Job", JOB)
        arguments = resolve(res[job]["Properties"]["DefaultArguments"], "lake")
        role = res[job]["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = resolve(list(role_policy(lake, role).statements), "lake")

        config = load_config(ENV)
        generated = folder / "generated"
        generate_files(
            generated,
            GeneratorOptions(table=TABLE, events=120, keys=4, partitions=1, prefix=config.prefix),
        )
        changes = arguments["--changes_path"].removeprefix("s3://")
        bucket, _, topic_folder = changes.partition("/")
        files = sorted((generated / "topics").rglob("*.json"))
        last = files[-1]
        first = files[0].read_text().splitlines()[0]
        added = [_bad_line(first, 10_000), *_inserted_and_deleted(first, ERASED)]
        last.write_text(last.read_text() + "".join(f"{a}\n" for a in added))
        for path in files:
            relative = path.relative_to(generated / "topics" / f"{config.prefix}.{TABLE}")
            s3.put_object(
                Bucket=bucket, Key=f"{topic_folder}{relative.as_posix()}", Body=path.read_bytes()
            )

        argv = ["merge_job.py", "--JOB_NAME", str(res[job]["Properties"]["Name"])]
        for name, value in {**arguments, "--database": DATABASE}.items():
            argv += [name, str(value)]
        warehouse, lake_table = arguments["--warehouse_path"], f"{DATABASE}.{TABLE_NAME}"
        replay = ["--mode", "replay", "--column_types", json.dumps(FIX), "--JOB_RUN_ID", "jr_iam"]
        main = runpy.run_path(str(ENTRY))["main"]
        runs: dict[str, Any] = {}
        with spark_s3(spark, endpoint, REGION):
            for mode in ("merge", "replay", "erase"):
                extra = {"merge": [], "replay": replay}.get(mode)
                if extra is None:
                    # What `cdclake erase` writes right before it starts the run (not earlier:
                    # the merge's first writes would find the folders it made).
                    request = write_request(
                        S3FileSystem(s3), warehouse, lake_table, {"id": str(ERASED)}
                    )
                    extra = ["--mode", "erase", "--erase_request", request]
                recorder(endpoint, "reset-recording")
                output = _main_json(main, argv + extra)
                recording = recorder(endpoint, "download-recording")
                runs[mode] = {"output": output, "recording": recording}
        request_key = request_path(warehouse, lake_table, request).removeprefix("s3://")
        runs["erase"]["request"] = request_key.partition("/")[2]
        runs["erase"]["request_left"] = S3FileSystem(s3).exists(f"s3://{request_key}")
        yield {"statements": statements, "runs": runs, "bucket_keys": world.bucket_keys}


def _accesses(job_runs: dict[str, Any], mode: str) -> list[Access]:
    """The run's recorded requests as IAM authorizations, and the KMS calls SSE-KMS adds."""
    accesses = recorded_accesses(job_runs["runs"][mode]["recording"])
    return accesses + sse_kms_accesses(accesses, job_runs["bucket_keys"])


@pytest.fixture(scope="module")
def accesses(job_runs: dict[str, Any]) -> dict[str, list[Access]]:
    return {mode: _accesses(job_runs, mode) for mode in job_runs["runs"]}


@pytest.fixture(scope="module")
def needed(job_runs: dict[str, Any], accesses: dict[str, list[Access]]) -> dict[int, list[Access]]:
    return needed_for(job_runs["statements"], [a for run in accesses.values() for a in run])


def test_merge_job_merge_run_template_arguments_commits_and_quarantines(
    job_runs: dict[str, Any],
) -> None:
    merged = job_runs["runs"]["merge"]["output"]["cdclake_merge"]
    assert merged["committed"] and merged["quarantined"] == 1, merged


def test_merge_job_replay_run_with_fix_applies_quarantined_line(job_runs: dict[str, Any]) -> None:
    replayed = job_runs["runs"]["replay"]["output"]["cdclake_replay"]
    assert replayed["applied"] == 1 and replayed["still_failing"] == 0, replayed


def test_merge_job_erase_run_rewrites_the_change_file(job_runs: dict[str, Any]) -> None:
    erased = job_runs["runs"]["erase"]["output"]["cdclake_erase"]
    assert (erased["change_files"], erased["change_lines"]) == (1, 2), erased


def test_merge_job_erase_run_reads_its_request_then_removes_it(
    job_runs: dict[str, Any], accesses: dict[str, list[Access]]
) -> None:
    erase = job_runs["runs"]["erase"]
    on_request = {a.action for a in accesses["erase"] if a.resource.endswith(erase["request"])}
    assert (erase["request_left"], on_request) == (False, {"s3:GetObject", "s3:DeleteObject"})


@pytest.mark.parametrize("mode", ["merge", "replay", "erase"])
def test_merge_job_run_every_request_allowed_by_template_statements(
    job_runs: dict[str, Any], accesses: dict[str, list[Access]], mode: str
) -> None:
    run = accesses[mode]
    assert {a.action for a in run} >= {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}
    denied = unallowed(job_runs["statements"], run)
    assert not denied, denied_lines(denied)


def test_merge_job_each_needed_statement_removed_denies_a_request_it_grants(
    job_runs: dict[str, Any], needed: dict[int, list[Access]]
) -> None:
    assert needed_sids(job_runs["statements"], needed) == NEEDED


def test_merge_job_unneeded_statements_are_glues_own(
    job_runs: dict[str, Any], needed: dict[int, list[Access]]
) -> None:
    """What these S3 runs do not need is what Glue itself uses (code, logs), the Data
    Catalog, whose calls test_catalog_sync_least_privilege.py records (docs/iam.md), and a
    rebuild run's invoke of the bootstrap function (moto runs no Lambda code without Docker:
    tests/bootstrap/test_rebuild_signal.py runs the handler, tests/cdk the statement's one ARN)."""
    statements = job_runs["statements"]
    unneeded = {sid(s) for i, s in enumerate(statements) if i not in needed}
    assert unneeded == {
        "ReadJobCode",
        "JobLogs",
        "CatalogDefaultDatabase",
        "CatalogSessionLookups",
        "CatalogSync",
        "SignalRebuildSnapshot",
    }


def test_merge_job_change_listing_of_another_prefix_denied(
    job_runs: dict[str, Any], accesses: dict[str, list[Access]]
) -> None:
    """ListChangeFiles' s3:prefix condition is evaluated: the job's own listings pass, the same
    listings without a prefix or under another environment's topics do not."""
    listings = [
        a for a in accesses["merge"] if a.action == "s3:ListBucket" and "-changes-" in a.resource
    ]
    assert listings and not unallowed(job_runs["statements"], listings)
    elsewhere = [
        Access(
            a.action, a.resource, (("s3:prefix", "topics/cdclake-prod.public.orders/"),), a.request
        )
        for a in listings
    ] + [Access(a.action, a.resource, (), a.request) for a in listings]
    assert unallowed(job_runs["statements"], elsewhere) == elsewhere


def test_merge_job_needed_statements_match_docs_table(
    job_runs: dict[str, Any],
    accesses: dict[str, list[Access]],
    needed: dict[int, list[Access]],
    repo_root: Path,
) -> None:
    calls = [Call(a.action, (a.resource,)) for run in accesses.values() for a in run]
    failed = {index: Run(False, []) for index in needed}
    row = docs_row(COMPONENT, CHECKED_BY, Run(True, calls), job_runs["statements"], failed)
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
