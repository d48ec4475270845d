"""Lake freshness as CloudWatch metrics: what one merge run of one table publishes.

The contract other readers rely on (``cdclake status``, the dashboard, the alarms)::

    namespace   CdcLake
    dimensions  Environment = <environment name>, Table = <schema.table of the source>
    metrics     EventsApplied, Upserts, Deletes, Quarantined   (Count, per run)
                RunDurationSeconds                              (Seconds, per run)
                LagSeconds = now - the newest source commit time the table holds

``LagSeconds`` is published on every run, also one that found no new change file,
so a table whose changes stop arriving shows its lag growing. A table that has
never applied an event has no lag to publish; its alarm treats missing data as
breaching, which is also what a job that never runs looks like.

Publishing is done by the entry points (the Glue script, ``cdclake merge --env``)
after the commit, never by the merge stages: a failure to publish is one logged
line and does not fail a merge that has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "CdcLake"
ENVIRONMENT = "Environment"  # dimension names
TABLE = "Table"

EVENTS_APPLIED = "EventsApplied"
UPSERTS = "Upserts"
DELETES = "Deletes"
QUARANTINED = "Quarantined"
RUN_DURATION = "RunDurationSeconds"
LAG = "LagSeconds"
METRIC_NAMES = (EVENTS_APPLIED, UPSERTS, DELETES, QUARANTINED, RUN_DURATION, LAG)
UNITS = {
    EVENTS_APPLIED: "Count",
    UPSERTS: "Count",
    DELETES: "Count",
    QUARANTINED: "Count",
    RUN_DURATION: "Seconds",
    LAG: "Seconds",
}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableRun:
    """What one run of one table reports; ``newest_source_ts_ms`` None: nothing applied yet."""

    environment: str
    table: str  # the source's schema.table, e.g. public.orders
    events_applied: int
    upserts: int
    deletes: int
    quarantined: int
    duration_seconds: float
    newest_source_ts_ms: int | None

    @classmethod
    def from_result(
        cls,
        result: Mapping[str, Any],
        *,
        environment: str,
        table: str,
        duration_seconds: float,
    ) -> TableRun:
        """From :meth:`cdclake_merge.job.RunResult.as_dict` (a dict: no Spark import here)."""
        newest = result.get("newest_source_ts_ms")
        return cls(
            environment=environment,
            table=table,
            events_applied=int(result.get("applied", 0)),
            upserts=int(result.get("upserts", 0)),
            deletes=int(result.get("deletes", 0)),
            quarantined=int(result.get("quarantined", 0)),
            duration_seconds=float(duration_seconds),
            newest_source_ts_ms=int(newest) if newest is not None else None,
        )

    def lag_seconds(self, now: datetime) -> float | None:
        if self.newest_source_ts_ms is None:
            return None
        return max(now.timestamp() - self.newest_source_ts_ms / 1000.0, 0.0)


def dimensions(environment: str, table: str) -> list[dict[str, str]]:
    return [{"Name": ENVIRONMENT, "Value": environment}, {"Name": TABLE, "Value": table}]


def metric_data(run: TableRun, now: datetime) -> list[dict[str, Any]]:
    """The ``MetricData`` of one PutMetricData call for ``run``, stamped ``now``."""
    values: dict[str, float | None] = {
        EVENTS_APPLIED: run.events_applied,
        UPSERTS: run.upserts,
        DELETES: run.deletes,
        QUARANTINED: run.quarantined,
        RUN_DURATION: run.duration_seconds,
        LAG: run.lag_seconds(now),
    }
    return [
        {
            "MetricName": name,
            "Dimensions": dimensions(run.environment, run.table),
            "Timestamp": now,
            "Value": float(value),
            "Unit": UNITS[name],
        }
        for name, value in values.items()
        if value is not None
    ]


def publish(run: TableRun, *, client: Any = None, now: datetime | None = None) -> bool:
    """PutMetricData for ``run``; True when CloudWatch accepted it, False (one log line) if not.

    ``client`` defaults to ``boto3.client("cloudwatch")``, which honours
    ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_CLOUDWATCH`` and the usual region settings.
    """
    moment = now or datetime.now(UTC)
    try:
        if client is None:
            import boto3

            client = boto3.client("cloudwatch")
        client.put_metric_data(Namespace=NAMESPACE, MetricData=metric_data(run, moment))
    except Exception as exc:  # the merge has committed: a metric failure must not undo that
        log.warning("cdclake metrics not published for %s: %s", run.table, _one_line(exc))
        return False
    return True


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
