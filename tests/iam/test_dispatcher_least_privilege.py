"""The merge dispatcher (``lambdas/dispatcher``) checked against exactly the statements the lake
stack gives its role.

The handler runs in process against a moto server that records every request and enforces
nothing (as the merge job's check does: conditions such as ``s3:prefix`` and
``cloudwatch:namespace`` are evaluated here, moto's enforcement ignores them). The world is dev's
template: its buckets, its merge jobs (names, tags, default arguments) and the function's
environment. One table has a commit and files after it, one has never been merged; the turn
lists both, reads the commit's checkpoint, starts both jobs and publishes their lag. Each
recorded request is mapped to what AWS authorizes it with; SSE-KMS adds what S3 asks KMS for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.iam.iam_helpers.moto import REGION, recorder, recording_moto_server, use_recording_moto
from tests.iam.iam_helpers.recorded import lake_world, recorded_accesses, sse_kms_accesses
from tests.iam.iam_helpers.runs import Call, Run, docs_row, lambda_context
from tests.iam.iam_helpers.statements import (
    Access,
    denied_lines,
    needed_for,
    needed_sids,
    sid,
    unallowed,
)
from tests.iam.iam_helpers.templates import (
    function_environment,
    function_role,
    logical_id,
    role_policy,
)

pytestmark = [pytest.mark.moto, pytest.mark.cdk]

ENV = "dev"
BUCKETS = ("StorageChanges", "StorageLake", "StorageQuarantine", "StorageGlueAssets")
COMMITTED, NEW, QUIET = "public.orders", "public.customers", "public.order_lines"
COMPONENT = "merge dispatcher"
CHECKED_BY = "recorded requests (moto recorder) against the statements, conditions included"
#: Found by removal (test_dispatcher_each_needed_statement_removed_denies_a_request_it_grants).
NEEDED = {
    "ListChangeFiles",
    "ListLakeTables",
    "ReadCheckpoints",
    "FindMergeJobs",
    "StartMergeJobs",
    "PublishLag",
    "kms:Decrypt",
}


def _put_change_file(s3: Any, changes: str, offset: int) -> None:
    bucket, _, folder = changes.removeprefix("s3://").partition("/")
    topic = folder.rstrip("/").rsplit("/", 1)[-1]
    key = f"{folder}partition=0/{topic}+0+{offset:010d}.json"
    s3.put_object(Bucket=bucket, Key=key, Body=b'{"payload": {}}\n')


def _commit_everything_listed(arguments: dict[str, str]) -> None:
    """What a merge's commit leaves, written with the merge's own listing and checkpoint
    format: a checkpoint covering every change file listed now and a Hudi commit naming it."""
    from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths
    from cdclake_merge.positions import advance, positions_as_json, scan
    from cdclake_merge.storage import S3FileSystem, join

    fs = S3FileSystem(boto3.client("s3", region_name=REGION))
    listed = scan(fs, arguments["--changes_path"], {})
    positions = advance({}, listed.pending, listed.parents)
    table = arguments["--table"].replace(".", "_")
    paths = TablePaths.of(arguments["--warehouse_path"], f"{arguments['--database']}.{table}")
    checkpoint = "checkpoints/v00000001.json"
    fs.write_text(
        join(paths.sidecar, checkpoint),
        json.dumps({"version": 1, "key": ["id"], "positions": positions_as_json(positions)}),
    )
    instant = time.strftime("%Y%m%d%H%M%S000", time.gmtime())
    fs.write_text(
        join(paths.timeline, f"{instant}.commit"),
        json.dumps({"extraMetadata": {CHECKPOINT_KEY: checkpoint}}),
    )


@pytest.fixture(scope="module")
def turn(
    templates: dict[str, Any], account: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One dispatcher turn on dev's lake and merge jobs in moto, recorded."""
    from lambdas.dispatcher import handler

    lake = templates["lake"]
    res = lake["Resources"]
    folder = tmp_path_factory.mktemp("dispatcher-iam")
    with (
        recording_moto_server(folder / "moto.log", folder / "recording", account) as endpoint,
        pytest.MonkeyPatch.context() as patch,
    ):
        use_recording_moto(patch, endpoint, "dispatcher")
        world = lake_world(templates, account, BUCKETS, "dispatch-iam")
        resolve = world.resolve
        s3 = boto3.client("s3")

        glue = boto3.client("glue")
        arguments: dict[str, dict[str, str]] = {}
        jobs: dict[str, str] = {}
        for resource in res.values():
            if resource["Type"] != "AWS::Glue::Job" or "--table" not in str(resource):
                continue
            job = resource["Properties"]
            table_arguments = resolve(job["DefaultArguments"], "lake")
            # A byte cap every waiting change file reaches: a table whose file was just
            # written is due at once instead of near its freshness objective, so the turn
            # starts it (and so records StartJobRun) whatever the objective.
            table_arguments["--max_bytes_per_run"] = "1"
            arguments[table_arguments["--table"]] = table_arguments
            jobs[table_arguments["--table"]] = job["Name"]
            glue.create_job(
                Name=job["Name"],
                Role="arn:aws:iam::000000000000:role/merge",  # not this role's concern
                Command={"Name": "glueetl", "ScriptLocation": "s3://assets/merge_job.py"},
                GlueVersion=job["GlueVersion"],
                WorkerType=job["WorkerType"],
                NumberOfWorkers=job["NumberOfWorkers"],
                DefaultArguments=table_arguments,
                Tags=job["Tags"],
            )
        _put_change_file(s3, arguments[COMMITTED]["--changes_path"], 0)
        _commit_everything_listed(arguments[COMMITTED])
        for table in (COMMITTED, NEW):
            _put_change_file(s3, arguments[table]["--changes_path"], 1)

        function = logical_id(lake, "AWS::Lambda::Function", "DispatcherFunction")
        environment = function_environment(lake, function, resolve, "lake")
        for name, value in environment.items():
            patch.setenv(name, value)
        statements = resolve(
            list(role_policy(lake, function_role(lake, function)).statements), "lake"
        )
        boto3.setup_default_session(region_name=REGION)
        recorder(endpoint, "reset-recording")
        try:
            answer = handler.handler({}, lambda_context("dispatcher"))
        finally:
            boto3.DEFAULT_SESSION = None
        recording = recorder(endpoint, "download-recording")
        started = {t: glue.get_job_runs(JobName=name)["JobRuns"] for t, name in jobs.items()}
        accesses = recorded_accesses(recording, account)
        yield {
            "answer": answer,
            "started": started,
            "statements": statements,
            "accesses": accesses + sse_kms_accesses(accesses, world.bucket_keys),
        }


@pytest.fixture(scope="module")
def needed(turn: dict[str, Any]) -> dict[int, list[Access]]:
    return needed_for(turn["statements"], turn["accesses"])


def test_dispatcher_turn_template_world_starts_both_waiting_tables(turn: dict[str, Any]) -> None:
    assert turn["answer"]["started"] == 2, turn["answer"]
    started = {table: len(runs) for table, runs in turn["started"].items()}
    assert started == {COMMITTED: 1, NEW: 1, QUIET: 0}


def test_dispatcher_turn_every_request_allowed_by_template_statements(
    turn: dict[str, Any],
) -> None:
    actions = {a.action for a in turn["accesses"]}
    assert {"glue:ListJobs", "glue:StartJobRun", "s3:GetObject", "kms:Decrypt"} <= actions
    denied = unallowed(turn["statements"], turn["accesses"])
    assert not denied, denied_lines(denied)


def test_dispatcher_each_needed_statement_removed_denies_a_request_it_grants(
    turn: dict[str, Any], needed: dict[int, list[Access]]
) -> None:
    assert needed_sids(turn["statements"], needed) == NEEDED


def test_dispatcher_every_statement_is_needed(
    turn: dict[str, Any], needed: dict[int, list[Access]]
) -> None:
    unneeded = [sid(s) for i, s in enumerate(turn["statements"]) if i not in needed]
    assert unneeded == [], unneeded


def test_dispatcher_job_start_outside_the_merge_jobs_denied(turn: dict[str, Any]) -> None:
    """StartMergeJobs' ARN is the merge jobs' prefix: another job's start is not allowed."""
    starts = [a for a in turn["accesses"] if a.action == "glue:StartJobRun"]
    elsewhere = [
        Access(a.action, a.resource.replace("-merge-", "-other-"), a.context, a.request)
        for a in starts
    ]
    assert starts and unallowed(turn["statements"], elsewhere) == elsewhere


def test_dispatcher_needed_statements_match_docs_table(
    turn: dict[str, Any], needed: dict[int, list[Access]], repo_root: Path
) -> None:
    calls = [Call(a.action, (a.resource,)) for a in turn["accesses"]]
    failed = {index: Run(False, []) for index in needed}
    row = docs_row(COMPONENT, CHECKED_BY, Run(True, calls), turn["statements"], failed)
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
