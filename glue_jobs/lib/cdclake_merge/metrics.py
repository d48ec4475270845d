"""Lake freshness as CloudWatch metrics: what one merge run of one table publishes, and the
lag the environment's dispatcher publishes for every lake table each turn.

The contract other readers rely on (``cdclake status``, the dashboard, the alarms)::

    namespace   CdcLake
    dimensions  Environment = <environment name>, Table = <schema.table of the source>
    metrics     EventsApplied, Upserts, Deletes, Quarantined   (Count, per run)
                RunDurationSeconds                              (Seconds, per run)
                LagSeconds                                      (Seconds, two publishers)
    dimensions  Environment = <environment name>
    metrics     HeartbeatAgeSeconds                             (Seconds, the dispatcher)

``LagSeconds`` comes from two places that agree:

* a merge run that applied events: now minus the newest source commit time the table holds
  (the lag right after its commit). A run that applied nothing (a catalog registration, a
  console rerun of a quiet table) publishes no lag: the newest source commit of a quiet table
  is old although nothing waits, and with the alarm's ``Maximum`` that would page;
* the dispatcher, every turn, for each table it could read (:func:`lag_data`): now minus its
  watermark, the moment up to which every change file is applied: 0 when nothing waits, the
  age of the oldest waiting change file otherwise. A table stuck behind waiting files grows
  past its objective; a quiet, caught-up one does not, nor does one that never received a
  change file (nothing waits for it: an empty table must not page). A table it could not read
  gets no datapoint: its alarm treats missing data as breaching.

``HeartbeatAgeSeconds`` is the age of the lake capture's newest heartbeat change file, which
the dispatcher publishes every turn for the whole environment (:mod:`cdclake_merge.heartbeat`):
it grows while the Debezium source or the S3 sink is stopped, when every table's lag stays 0.

Publishing is done by the entry points (the Glue script, ``cdclake merge --env``, the
dispatcher) after their work, never by the merge stages: a failure to publish is one logged
line and does not fail a merge that has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
HEARTBEAT_AGE = "HeartbeatAgeSeconds"
METRIC_NAMES = (EVENTS_APPLIED, UPSERTS, DELETES, QUARANTINED, RUN_DURATION, LAG)
UNITS = {
    EVENTS_APPLIED: "Count",
    UPSERTS: "Count",
    DELETES: "Count",
    QUARANTINED: "Count",
    RUN_DURATION: "Seconds",
    LAG: "Seconds",
    HEARTBEAT_AGE: "Seconds",
}
MAX_DATA_PER_CALL = 1000  # CloudWatch's limit of metrics in one PutMetricData request

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
        """None where the run applied no event: the dispatcher's watermark speaks for it."""
        if self.newest_source_ts_ms is None or self.events_applied == 0:
            return None
        return max(now.timestamp() - self.newest_source_ts_ms / 1000.0, 0.0)


def dimensions(environment: str, table: str) -> list[dict[str, str]]:
    return [*environment_dimensions(environment), {"Name": TABLE, "Value": table}]


def environment_dimensions(environment: str) -> list[dict[str, str]]:
    """The dimensions of an environment's own metrics (no table)."""
    return [{"Name": ENVIRONMENT, "Value": environment}]


def datum(
    name: str, value: float, *, environment: str, table: str, now: datetime
) -> dict[str, Any]:
    """One ``MetricData`` entry of ``table``, stamped ``now``."""
    return {
        "MetricName": name,
        "Dimensions": dimensions(environment, table),
        "Timestamp": now,
        "Value": float(value),
        "Unit": UNITS[name],
    }


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
        datum(name, value, environment=run.environment, table=run.table, now=now)
        for name, value in values.items()
        if value is not None
    ]


def lag_data(
    environment: str, lags: Mapping[str, float | None], now: datetime
) -> list[dict[str, Any]]:
    """``LagSeconds`` of each table in ``lags`` (``{schema.table: seconds}``); a table whose
    lag is None (not read) gets no datum."""
    return [
        datum(LAG, max(lag, 0.0), environment=environment, table=table, now=now)
        for table, lag in lags.items()
        if lag is not None
    ]


def publish(run: TableRun, *, client: Any = None, now: datetime | None = None) -> bool:
    """PutMetricData for ``run``; True when CloudWatch accepted it, False (one log line) if not.

    ``client`` defaults to ``boto3.client("cloudwatch")``, which honours
    ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_CLOUDWATCH`` and the usual region settings.
    """
    moment = now or datetime.now(UTC)
    return put(metric_data(run, moment), client=client, what=run.table)


def publish_lags(
    environment: str,
    lags: Mapping[str, float | None],
    *,
    client: Any = None,
    now: datetime | None = None,
) -> bool:
    """PutMetricData of :func:`lag_data`, as :func:`publish` puts a run's metrics."""
    data = lag_data(environment, lags, now or datetime.now(UTC))
    return put(data, client=client, what=f"the lag of {len(data)} tables")


def put(data: Sequence[dict[str, Any]], *, client: Any, what: str) -> bool:
    """PutMetricData of ``data`` in the lake namespace, at most :data:`MAX_DATA_PER_CALL` a
    call; False (one log line naming ``what``) when CloudWatch did not take all of it."""
    try:
        if client is None:
            import boto3

            client = boto3.client("cloudwatch")
        for start in range(0, len(data), MAX_DATA_PER_CALL):
            chunk = list(data[start : start + MAX_DATA_PER_CALL])
            client.put_metric_data(Namespace=NAMESPACE, MetricData=chunk)
    except Exception as exc:  # the merge has committed: a metric failure must not undo that
        log.warning("cdclake metrics not published for %s: %s", what, one_line(exc))
        return False
    return True


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
