"""One environment's lake on moto (in process): change files, the merge's commits, Glue jobs."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from cdclake_merge.dispatch import MERGE_JOB_TAG, Decision, Target, dispatch, target_from_job
from cdclake_merge.generations import STATE, generation_folder
from cdclake_merge.layout import LayoutNeedsRebuild
from cdclake_merge.pending import CATALOG_UNSYNCED, CHECKPOINT_KEY, TablePaths
from cdclake_merge.positions import advance, positions_as_json, scan
from cdclake_merge.schema import NeedsRebuild, unify
from cdclake_merge.storage import S3FileSystem, join
from tests.cdk.stack_helpers import lake_alarms

REGION = "us-east-1"
PREFIX = "cdclake-dev"


def handler_environment(
    monkeypatch: Any, *, budget: int, environment: str, heartbeats: str | None = None
) -> None:
    """The dispatcher Lambda's environment, as its stack sets it (tests/cdk holds the stack's)."""
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", str(budget))
    monkeypatch.setenv("RETRY_SHARE", "0.5")
    monkeypatch.setenv("TURN_SECONDS", "900")
    monkeypatch.setenv("BACKOFF_UNIT_SECONDS", "900")
    monkeypatch.setenv("METRICS_ENVIRONMENT", environment)
    monkeypatch.setenv("MERGE_JOB_PREFIX", f"{PREFIX}-merge-")
    if heartbeats is not None:
        monkeypatch.setenv("HEARTBEAT_CHANGES", heartbeats)


JOB_TAGS = {MERGE_JOB_TAG: f"{PREFIX}-merge-"}  # as the stack tags each merge job
DATABASE = "cdclake_dev"
CHANGES = "cdclake-dev-changes"
LAKE = "cdclake-dev-lake"
WAREHOUSE = f"s3://{LAKE}/warehouse/"
# The replication bootstrap's function, named by the stack in every merge job's --signal_function.
SIGNAL_FUNCTION = "cdclake-dev-database-bootstrap"
# S3 keeps LastModified to the second: files this far apart are told apart by age.
AGE_STEP_SECONDS = 1.1


@dataclass(frozen=True)
class World:
    s3: Any
    glue: Any


@contextmanager
def lake_on_moto() -> Iterator[World]:
    """A fresh lake on moto in process: the change and lake buckets, no Glue job, no metric.

    moto's backends belong to the process, and an in-process moto server of another area
    (tests/fanout's session bus) shares them; ``mock_aws`` would reset every one on start and
    stop. Only what this area writes is made fresh: Glue and CloudWatch, and its two buckets.
    """
    import moto
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.glue.models import glue_backends

    mock = moto.mock_aws()
    mock.start(reset=False)
    try:
        for backends in (glue_backends, cloudwatch_backends):
            for account in list(backends.values()):
                account.reset()
        s3 = boto3.client("s3", region_name=REGION)
        _remove_buckets(s3)  # left by a test that stopped before its cleanup
        for bucket in (CHANGES, LAKE):
            s3.create_bucket(Bucket=bucket)
        try:
            yield World(s3, boto3.client("glue", region_name=REGION))
        finally:
            _remove_buckets(s3)
    finally:
        mock.stop(remove_data=False)


def _remove_buckets(s3: Any) -> None:
    existing = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    for bucket in {CHANGES, LAKE} & existing:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=item["Key"])
        s3.delete_bucket(Bucket=bucket)


def job_name(table: str) -> str:
    return f"{PREFIX}-merge-{table.replace('.', '-').replace('_', '-')}"


def changes_of(table: str) -> str:
    return f"s3://{CHANGES}/topics/{PREFIX}.{table}/"


def _define_job(
    world: World,
    table: str,
    arguments: dict[str, str] | None = None,
    *,
    worker_type: str | None = None,
    workers: int | None = None,
) -> str:
    """The table's merge job as the stack defines it: its default arguments and ``arguments``
    (the dispatcher's, a byte cap), with ``workers`` of ``worker_type`` where given (Glue's
    default capacity otherwise)."""
    name = job_name(table)
    capacity: dict[str, Any] = (
        {} if worker_type is None else {"WorkerType": worker_type, "NumberOfWorkers": workers}
    )
    world.glue.create_job(
        Name=name,
        Role="arn:aws:iam::123456789012:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/merge_job.py"},
        GlueVersion="5.0",
        ExecutionProperty={"MaxConcurrentRuns": 1},
        Tags=JOB_TAGS,
        DefaultArguments={
            "--table": table,
            "--changes_path": changes_of(table),
            "--warehouse_path": WAREHOUSE,
            "--database": DATABASE,
            "--record_key": "id",
            **(arguments or {}),
        },
        **capacity,
    )
    return name


def create_job(world: World, table: str) -> str:
    """The table's merge job with the default arguments the stack gives it, but none of the
    dispatcher's (once): as a job defined before objectives, its table starts whenever work
    waits."""
    name = job_name(table)
    if name in world.glue.list_jobs()["JobNames"]:
        return name
    return _define_job(world, table)


def put_change_file(world: World, table: str, offset: int, partition: int = 0) -> str:
    """One change file where the S3 sink writes it; its s3:// path."""
    topic = f"{PREFIX}.{table}"
    key = f"topics/{topic}/partition={partition}/{topic}+{partition}+{offset:010d}.json"
    world.s3.put_object(Bucket=CHANGES, Key=key, Body=b'{"payload": {}}\n')
    return f"s3://{CHANGES}/{key}"


def commit_everything_listed(
    world: World, table: str, version: int = 1, generation: int = 1
) -> None:
    """What the merge's commit leaves: a checkpoint whose positions cover every change file
    listed now (the merge's own listing and advance) and a Hudi commit naming it, in the
    table's ``generation`` (cdclake_merge.generations)."""
    fs = S3FileSystem(world.s3)
    listed = scan(fs, changes_of(table), {})
    positions = advance({}, listed.pending, listed.parents)
    name = generation_folder(table.replace(".", "_"), generation)
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{name}")
    checkpoint = f"checkpoints/v{version:08d}.json"
    fs.write_text(
        join(paths.sidecar, checkpoint),
        json.dumps({"version": version, "key": ["id"], "positions": positions_as_json(positions)}),
    )
    instant = time.strftime("%Y%m%d%H%M%S000", time.gmtime())
    fs.write_text(
        join(paths.timeline, f"{instant}.commit"),
        json.dumps({"extraMetadata": {CHECKPOINT_KEY: checkpoint}}),
    )


def write_generations_state(world: World, table: str, **state: Any) -> None:
    """The table's state object (cdclake_merge.generations.Generations' fields), as
    ``cdclake rebuild`` and the rebuild's runs write it."""
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    S3FileSystem(world.s3).write_text(join(paths.sidecar, STATE), json.dumps(state))


def commit_legacy(world: World, table: str, applied: list[str]) -> None:
    """A commit of an older merge, whose checkpoint names the change files it applied
    (``applied``: their paths under the table's changes folder) instead of positions."""
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    fs = S3FileSystem(world.s3)
    fs.write_text(
        join(paths.sidecar, "checkpoints/v00000001.json"),
        json.dumps({"version": 1, "key": ["id"], "applied_files": applied}),
    )
    fs.write_text(
        join(paths.timeline, "20260101000000000.commit"),
        json.dumps({"extraMetadata": {CHECKPOINT_KEY: "checkpoints/v00000001.json"}}),
    )


def commit_standalone(world: World, table: str, version: int = 1) -> None:
    """What a run leaves whose change files held no row yet (no Hudi table to commit to): the
    standalone checkpoint in the sidecar, covering every change file listed now."""
    fs = S3FileSystem(world.s3)
    listed = scan(fs, changes_of(table), {})
    positions = advance({}, listed.pending, listed.parents)
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    fs.write_text(
        join(paths.sidecar, "checkpoints", "standalone.json"),
        json.dumps({"version": version, "key": ["id"], "positions": positions_as_json(positions)}),
    )


def mark_catalog_unsynced(world: World, table: str, version: int) -> None:
    """What a commit of ``version`` leaves until its catalog registration has finished."""
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    fs = S3FileSystem(world.s3)
    fs.write_text(join(paths.sidecar, CATALOG_UNSYNCED), json.dumps({"version": version}))


@contextmanager
def hold_runs() -> Iterator[None]:
    """Glue runs stay STARTING (moto's job runs advance only when asked this many times)."""
    from moto.moto_api import state_manager

    state_manager.set_transition(
        model_name="glue::job_run", transition={"progression": "manual", "times": 1000}
    )
    try:
        yield
    finally:
        state_manager.unset_transition("glue::job_run")


@dataclass
class FakeContext:
    function_name: str = "dispatcher"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:dispatcher"
    aws_request_id: str = "req-1"


@contextmanager
def handler_log() -> Iterator[io.StringIO]:
    """What the dispatcher handler's Powertools logger writes meanwhile (a JSON object a line)."""
    from lambdas.dispatcher import handler

    stream = io.StringIO()
    # Not setStream, which flushes the stream it replaces: the logger was made in an earlier
    # pytest session of this process (mutmut runs several), whose captured output is closed.
    log_handler = handler.logger.logger_handler
    previous, log_handler.stream = log_handler.stream, stream
    try:
        yield stream
    finally:
        log_handler.stream = previous


# --- the dispatcher's lag (CdcLake/LagSeconds) ---------------------------------------------------


def make_unreadable(world: World, table: str) -> None:
    """A Hudi table the merge did not write in the table's place: its commit names no
    checkpoint, so the dispatcher cannot tell what waits."""
    lake_table = table.replace(".", "_")
    world.s3.put_object(
        Bucket=LAKE,
        Key=f"warehouse/{DATABASE}.db/{lake_table}/.hoodie/20260101000000000.commit",
        Body=b"{}",
    )


def metric_values(metric: str, dims: list[dict[str, str]], around: float) -> list[float]:
    """The datapoints (maximum a minute) of the lake metric ``metric`` with ``dims`` on
    moto's CloudWatch within a day of ``around`` (epoch seconds), oldest first."""
    from datetime import UTC, datetime, timedelta

    from cdclake_merge.metrics import NAMESPACE

    moment = datetime.fromtimestamp(around, UTC)
    answer = boto3.client("cloudwatch", region_name=REGION).get_metric_data(
        MetricDataQueries=[
            {
                "Id": "found",
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dims},
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=moment - timedelta(days=1),
        EndTime=moment + timedelta(days=1),
        ScanBy="TimestampAscending",
    )
    (result,) = answer["MetricDataResults"]
    return [float(v) for v in result["Values"]]


def lag_values(environment: str, table: str, around: float) -> list[float]:
    """The ``LagSeconds`` datapoints of ``table`` (:func:`metric_values`)."""
    from cdclake_merge.metrics import LAG, dimensions

    return metric_values(LAG, dimensions(environment, table), around)


def lag_dimensions() -> list[dict[str, str]]:
    """The dimensions of every ``LagSeconds`` metric on moto's CloudWatch, as a dict each."""
    from cdclake_merge.metrics import LAG, NAMESPACE

    listed = boto3.client("cloudwatch", region_name=REGION).list_metrics(
        Namespace=NAMESPACE, MetricName=LAG
    )["Metrics"]
    return [{d["Name"]: d["Value"] for d in m["Dimensions"]} for m in listed]


def lag_alarm_threshold(template: dict[str, Any], table: str) -> float:
    """The threshold (seconds) of the lag alarm on ``table`` in a synthesized template."""
    from cdclake_merge.metrics import LAG

    # The freshness alarm; the table's ChangeFilesExpiring alarm watches the same metric.
    alarm = lake_alarms(template)["Lag"][table]
    assert alarm["MetricName"] == LAG, alarm
    return float(alarm["Threshold"])


# --- right-sized runs (a run's workers from the bytes waiting) ----------------------------------


def create_sized_job(
    world: World,
    table: str,
    *,
    min_workers: int,
    max_workers: int,
    bytes_per_executor: int,
    max_bytes_per_run: int | None = None,
    compaction: dict[str, str] | None = None,
) -> str:
    """The table's merge job as the stack defines it with worker bounds: G.1X workers up to
    ``max_workers`` (auto scaling on) and the dispatcher's sizing arguments (``compaction``: a
    MERGE_ON_READ job's), but no objective: its table starts whenever work waits."""
    arguments = {
        "--enable-auto-scaling": "true",
        "--dispatch_min_workers": str(min_workers),
        "--dispatch_bytes_per_executor": str(bytes_per_executor),
        **(
            {"--max_bytes_per_run": str(max_bytes_per_run)} if max_bytes_per_run is not None else {}
        ),
        **(compaction or {}),
    }
    return _define_job(world, table, arguments, worker_type="G.1X", workers=max_workers)


def create_objective_job(
    world: World, table: str, freshness_minutes: int, *, max_bytes_per_run: int | None = None
) -> str:
    """The table's merge job as the stack defines it from config/dev.yaml with the table's
    freshness objective ``freshness_minutes``: its workers, the per-run byte cap (or
    ``max_bytes_per_run``) and every dispatcher argument ``LakeConfig.dispatch_of`` gives."""
    from environment.config import load_config

    config = load_config("dev")
    own = config.lake_table("public.orders").model_copy(
        update={"name": table, "freshness_minutes": freshness_minutes}
    )
    job = config.lake.glue_job_of(own)
    cap = job.bytes_per_run() if max_bytes_per_run is None else max_bytes_per_run
    arguments = {
        "--max_bytes_per_run": str(cap),
        **{f"--{k}": str(v) for k, v in config.lake.dispatch_of(own).items()},
    }
    return _define_job(
        world, table, arguments, worker_type=job.worker_type, workers=job.number_of_workers
    )


def written_at(world: World, path: str) -> float:
    """When S3 says the object at ``path`` (s3://bucket/key) was written, epoch seconds."""
    bucket, _, key = path.removeprefix("s3://").partition("/")
    return float(world.s3.head_object(Bucket=bucket, Key=key)["LastModified"].timestamp())


def put_change_bytes(world: World, table: str, offset: int, size: int) -> str:
    """A change file of ``size`` bytes (JSON lines) where the S3 sink writes it; its path."""
    topic = f"{PREFIX}.{table}"
    key = f"topics/{topic}/partition=0/{topic}+0+{offset:010d}.json"
    line = b'{"payload": {}}\n'
    body = (line * (size // len(line) + 1))[:size]
    world.s3.put_object(Bucket=CHANGES, Key=key, Body=body)
    return f"s3://{CHANGES}/{key}"


# --- cdclake dispatch's screen ------------------------------------------------------------------


def rendered_rows(decisions: list[Any], runs: dict[str, Any]) -> dict[str, list[str]]:
    """``cdclake dispatch``'s table as printed: each table's cells, by table, and the header's
    under ``"table"``."""
    from rich.console import Console

    from cdclake.dispatch import render

    console = Console(record=True, width=250, color_system=None)
    render(decisions, runs, console)
    rows: dict[str, list[str]] = {}
    for line in console.export_text().splitlines():
        cells = [
            cell.strip() for cell in line.strip().strip("│┃").split("│" if "│" in line else "┃")
        ]
        if len(cells) == 7:
            rows[cells[0]] = cells
    return rows


# --- failed runs (parked, backing off) -----------------------------------------------------------

ACCOUNT = "123456789012"  # moto's default
# The entry's failure line (glue_jobs/merge_job.py) around cdclake_merge.job's gate message.
BAD_FRACTION_ERROR = (
    "cdclake merge failed:\n3 of 10 lines of public.orders could not be applied (30.00% > "
    "max_bad_fraction 1.00%); nothing committed; the bad lines are in "
    "s3://q/public_orders/failed-v00000002; e.g. s3://c/a.json line 2: not JSON"
)


def end_run(
    world: World,
    table: str,
    state: str,
    *,
    ended: float,
    started: float | None = None,
    error: str = "",
) -> str:
    """A run of the table's job that ended ``state`` at ``ended`` (epoch seconds), started at
    ``started`` (default a minute before), with Glue's ``ErrorMessage``. moto's runs only
    succeed: the run is started through the API and its record in moto's backend given the
    end Glue would record."""
    from datetime import UTC, datetime

    from moto.glue.models import FakeJobRun, glue_backends

    class EndedRun(FakeJobRun):
        def as_dict(self) -> dict[str, Any]:
            return {**super().as_dict(), "ErrorMessage": error} if error else super().as_dict()

    name = job_name(table)
    run_id = str(world.glue.start_job_run(JobName=name)["JobRunId"])
    job = glue_backends[ACCOUNT][REGION].jobs[name]
    (run,) = [r for r in job.job_runs if r.job_run_id == run_id]
    run.__class__ = EndedRun
    run.status = state
    run.started_on = datetime.fromtimestamp(ended - 60 if started is None else started, UTC)
    run.completed_on = datetime.fromtimestamp(ended, UTC)
    return run_id


def touch_job(world: World, table: str, at: float) -> None:
    """The job's definition deployed again at ``at`` (epoch seconds), as UpdateJob records it
    (moto has no UpdateJob: its backend's job is given the time)."""
    from datetime import UTC, datetime

    from moto.glue.models import glue_backends

    job = glue_backends[ACCOUNT][REGION].jobs[job_name(table)]
    job.last_modified_on = datetime.fromtimestamp(at, UTC)


def write_delta_commits(world: World, table: str, count: int) -> None:
    """``count`` MERGE_ON_READ delta commits after the table's last commit, each naming the
    newest checkpoint (what waits stays as it was)."""
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    fs = S3FileSystem(world.s3)
    (commit,) = [n for n in fs.list_dir(paths.timeline) if n.endswith(".commit")]
    named = fs.read_text(join(paths.timeline, commit))
    for i in range(count):
        instant = f"{int(commit.split('.')[0]) + 1 + i:017d}"
        fs.write_text(join(paths.timeline, f"{instant}.deltacommit"), named)


def create_mor_job(world: World, table: str, *, compaction_io_mb: int) -> str:
    """A MERGE_ON_READ table's sized merge job: G.1X up to 10 workers, an executor per MiB
    merged and per MiB compacted, and the compaction's IO budget."""
    return create_sized_job(
        world,
        table,
        min_workers=2,
        max_workers=10,
        bytes_per_executor=1024**2,
        compaction={
            "--compaction_io_mb": str(compaction_io_mb),
            "--dispatch_compaction_bytes_per_executor": str(1024**2),
        },
    )


# --- the capture's heartbeat (CdcLake/HeartbeatAgeSeconds) ---------------------------------------

HEARTBEAT_TOPIC = f"{PREFIX}.cdclake.heartbeat"  # connectors.configs.heartbeat_changes_topic
HEARTBEATS = f"s3://{CHANGES}/topics/{HEARTBEAT_TOPIC}/"


def put_heartbeat(world: World, offset: int, *, written: float | None = None) -> None:
    """A heartbeat change file where the S3 sink writes it, last modified at ``written`` (epoch
    seconds; default now). moto stamps an object with its put: its backend's record is given
    the time S3 would have kept for a file written then."""
    from datetime import UTC, datetime

    from moto.s3.models import s3_backends

    key = f"topics/{HEARTBEAT_TOPIC}/partition=0/{HEARTBEAT_TOPIC}+0+{offset:010d}.json"
    world.s3.put_object(Bucket=CHANGES, Key=key, Body=b'{"payload": {}}\n')
    if written is not None:
        stored = s3_backends[ACCOUNT]["aws"].buckets[CHANGES].keys[key]
        stored.last_modified = datetime.fromtimestamp(written, UTC).replace(tzinfo=None)


def heartbeat_ages(environment: str, around: float) -> list[float]:
    """The ``HeartbeatAgeSeconds`` datapoints of ``environment`` (:func:`metric_values`)."""
    from cdclake_merge.metrics import HEARTBEAT_AGE, environment_dimensions

    return metric_values(HEARTBEAT_AGE, environment_dimensions(environment), around)


def heartbeat_alarm(template: dict[str, Any]) -> dict[str, Any]:
    """The properties of the one alarm on the capture's heartbeat age in a template."""
    from cdclake_merge.metrics import HEARTBEAT_AGE

    (alarm,) = [
        resource["Properties"]
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        and resource["Properties"].get("MetricName") == HEARTBEAT_AGE
    ]
    return dict(alarm)


# --- a stored column's type change that needs a rebuild (issue #49) ---------------------------

ORDERS = "public.orders"


def needs_rebuild_line(stored: str, incoming: str) -> str:
    """The Glue run's ErrorMessage of a merge that met ``amount`` changing type."""
    with pytest.raises(NeedsRebuild) as refused:
        unify(ORDERS, [("id", "int"), ("amount", stored)], [("id", "int"), ("amount", incoming)])
    return f"RunFailed: cdclake merge failed: {refused.value}"


def failed_on_type_change(
    world: World,
    policy: str | None,
    *,
    signals: bool = False,
    history: bool = False,
    layout: tuple[str, ...] = (),
) -> float:
    """A change file, then a run that failed on ``amount`` decimal(10,2) -> decimal(14,4)
    under the table's ``policy`` (None: the job says none, as the default omits it); its end.
    ``signals``: the job names the function its rebuild runs signal through, as the stack's;
    ``history``: the table keeps its history (the job's ``--history 1``); ``layout``: the run
    failed on these differences of config from the stored table instead."""
    arguments = {} if policy is None else {"--dispatch_schema_changes": policy}
    if signals:
        arguments["--signal_function"] = SIGNAL_FUNCTION
    if history:
        arguments["--history"] = "1"
    _define_job(world, ORDERS, arguments)
    put_change_file(world, ORDERS, 0)
    started = time.time()
    refused = LayoutNeedsRebuild("cdclake_dev.public_orders", layout)
    error = (
        f"RunFailed: cdclake merge failed: {refused}"
        if layout
        else needs_rebuild_line("decimal(10,2)", "decimal(14,4)")
    )
    end_run(world, ORDERS, "FAILED", started=started, ended=started + 0.001, error=error)
    return started + 0.001


def orders_turn(world: World) -> Decision:
    """One dispatcher turn of dev over public.orders' job alone: its decision."""
    targets: list[Target] = [target_from_job(world.glue, create_job(world, ORDERS))]
    (decision,) = dispatch(
        targets,
        fs=S3FileSystem(world.s3),
        glue=world.glue,
        budget=10,
        backoff_unit_seconds=900.0,
        environment="dev",
    )
    return decision


def orders_status(world: World, *, history: bool = False) -> dict[str, Any]:
    """``cdclake status``'s row of public.orders, read from this world's Glue and S3
    (``history``: config says the table keeps its history)."""
    from cdclake.ops import LakePlace
    from cdclake.status import table_status

    place = LakePlace(
        env="dev",
        source_table=ORDERS,
        lake_table=f"{DATABASE}.public_orders",
        warehouse=WAREHOUSE,
        changes=changes_of(ORDERS),
        quarantine_root=f"{WAREHOUSE}_quarantine/",
        key=("id",),
        job_name=job_name(ORDERS),
        history=history,
    )
    return table_status(
        place,
        fs=S3FileSystem(world.s3),
        now=dt.datetime.now(dt.UTC),
        expiration_days=30,
        glue=world.glue,
    )


def when(epoch: float) -> str:
    """``epoch`` as the dispatcher's reasons write a time."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")
