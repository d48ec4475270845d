"""Start the merge jobs whose waiting changes are due, within the environment's budget of runs.

An EventBridge schedule (one per environment) invokes this; the event itself says nothing.
The environment's merge jobs are the Glue jobs tagged ``cdclake:merge-jobs`` =
``MERGE_JOB_PREFIX`` (``ListJobs``: any number of tables). Each job's default arguments say
where its changes and its Hudi table are; the decision
(:mod:`cdclake_merge.dispatch`) lists what waits as the merge does, asks Glue for runs in
progress, and starts the tables whose waiting changes are due (they would miss the table's
freshness objective after one more turn of ``TURN_SECONDS`` and an expected run, or they reach
the run's byte cap), oldest first, while the runs in progress stay within
``MAX_CONCURRENT_RUNS``. A table with nothing waiting or not due yet starts nothing. A table
whose runs fail is parked or backs off (``BACKOFF_UNIT_SECONDS`` the first wait), and retries
take at most ``RETRY_SHARE`` of the budget (:mod:`cdclake_merge.failures`). Each run
starts with the workers its pending bytes need, within the bounds in its job's default
arguments (``--dispatch_min_workers``, ``NumberOfWorkers``). A table being rebuilt starts
its job with ``--mode rebuild`` each turn it has no run in progress (its decision's ``mode``).

Each turn it also publishes ``CdcLake/LagSeconds`` for every table it could read: 0 when
nothing waits, the age of the oldest waiting change file otherwise (the table's watermark,
:mod:`cdclake_merge.dispatch`), with ``Environment`` = ``METRICS_ENVIRONMENT``. A quiet,
caught-up table so stays below its lag alarm, a stuck one rises above it, and one that could
not be read gets no datapoint (its alarm treats missing data as breaching). It publishes
``CdcLake/HeartbeatAgeSeconds`` for the environment too: how long ago the lake capture's newest
heartbeat change file under ``HEARTBEAT_CHANGES`` was written (:mod:`cdclake_merge.heartbeat`),
which grows while the Debezium source or the S3 sink is stopped and every lag stays 0. Without
``HEARTBEAT_CHANGES`` (the stack always sets it) no heartbeat age is published, and the
environment's heartbeat alarm, which treats missing data as breaching, pages.

A job that cannot be read or started is logged and the others go on; the invocation then
fails, so that Lambda's error metric shows it. The next schedule decides afresh: a start
missed now is made then.

Environment: ``MERGE_JOB_PREFIX``, ``MAX_CONCURRENT_RUNS``, ``RETRY_SHARE``, ``TURN_SECONDS``,
``BACKOFF_UNIT_SECONDS``, ``METRICS_ENVIRONMENT``, ``HEARTBEAT_CHANGES``. AWS
clients honour the standard ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from cdclake_merge.dispatch import (
    Decision,
    Target,
    dispatch,
    merge_jobs,
    one_line,
    target_from_job,
)
from cdclake_merge.heartbeat import publish_heartbeat_age
from cdclake_merge.metrics import publish_lags
from cdclake_merge.storage import S3FileSystem

logger = Logger()


class DispatchFailed(RuntimeError):
    """Some jobs could not be read or started (the rest were dispatched), or the lag was not
    published."""


def targets_of(glue: Any, jobs: Sequence[str]) -> tuple[list[Target], list[str]]:
    """Each job's table, and a one-line reason for each job that cannot be read."""
    targets: list[Target] = []
    failures: list[str] = []
    for job in jobs:
        try:
            targets.append(target_from_job(glue, job))
        except Exception as exc:
            failures.append(f"{job}: {one_line(exc)}")
    return targets, failures


def log_decision(decision: Decision) -> None:
    extra = {
        "table": decision.table,
        "job": decision.job,
        "start": decision.start,
        "reason": decision.reason,
        "mode": decision.mode,
        "files_pending": len(decision.files_pending),
        "run_id": decision.run_id,
        "workers": decision.workers,
        "watermark": decision.watermark,
    }
    logger.info("merge started" if decision.start else "merge not started", extra=extra)


def publish_lag(
    environment: str, decisions: Sequence[Decision], *, cloudwatch: Any, now: float
) -> bool:
    """Each read table's lag as of ``now`` (epoch seconds), stamped ``now``; False when
    CloudWatch did not take it."""
    lags = {d.table: d.lag_seconds(now) for d in decisions}
    return publish_lags(
        environment, lags, client=cloudwatch, now=dt.datetime.fromtimestamp(now, dt.UTC)
    )


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    budget = int(os.environ["MAX_CONCURRENT_RUNS"])
    environment = os.environ["METRICS_ENVIRONMENT"]
    glue = boto3.client("glue")
    jobs = merge_jobs(glue, os.environ["MERGE_JOB_PREFIX"])
    targets, failures = targets_of(glue, jobs)
    fs = S3FileSystem()
    decisions = dispatch(
        targets,
        fs=fs,
        glue=glue,
        budget=budget,
        retry_share=float(os.environ["RETRY_SHARE"]),
        turn_seconds=float(os.environ["TURN_SECONDS"]),
        backoff_unit_seconds=float(os.environ["BACKOFF_UNIT_SECONDS"]),
        environment=environment,
    )
    for decision in decisions:
        log_decision(decision)
        if decision.failed:
            failures.append(f"{decision.job}: {decision.reason}")
    now, cloudwatch = time.time(), boto3.client("cloudwatch")
    published = publish_lag(environment, decisions, cloudwatch=cloudwatch, now=now)
    heartbeats = os.environ.get("HEARTBEAT_CHANGES")
    heartbeat_failure = (
        publish_heartbeat_age(environment, fs=fs, folder=heartbeats, client=cloudwatch, now=now)
        if heartbeats is not None
        else None
    )
    for failure in failures:
        logger.error("merge job not dispatched", extra={"detail": failure})
    if heartbeat_failure is not None:
        logger.error("capture heartbeat age not published", extra={"detail": heartbeat_failure})
    if failures:
        raise DispatchFailed(f"{len(failures)} of {len(jobs)} jobs: {failures[0]}")
    if not published:  # the lag alarms now see missing data and page: say why here too
        raise DispatchFailed("LagSeconds not published (the warning above says why)")
    if heartbeat_failure is not None:  # its alarm now sees missing data and pages: say why
        raise DispatchFailed(heartbeat_failure)
    return {
        "jobs": len(jobs),
        "started": sum(1 for d in decisions if d.start),
        "pending": sum(1 for d in decisions if d.files_pending),
    }
