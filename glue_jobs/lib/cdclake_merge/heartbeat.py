"""How long ago the lake capture last delivered anything: the age of its newest heartbeat
change file, which the dispatcher publishes each turn for the environment.

A table's ``LagSeconds`` is 0 whenever none of its change files waits, so a stopped Debezium
source or S3 sink leaves every lag at 0 until Kafka's retention drops the data. The lake
capture's Debezium source writes a heartbeat row every ``connect.heartbeat_interval_ms``
(``heartbeat.action.query``) and captures the heartbeat table beside the lake tables, and the
S3 sink writes its changes like theirs (``topics/<prefix>.<heartbeat table>/``,
``connectors.configs.heartbeat_changes_topic``): a new file there needs the database, the
source, Kafka and the sink all working. Its age grows past the smallest freshness objective of
the lake tables only when one of them stopped (``stacks/components/lake_alarms.py``).

Nothing merges these files; a lifecycle rule expires them after a day, so the listing stays a
few pages. Nothing here imports Spark.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from cdclake_merge import metrics
from cdclake_merge.storage import FileSystem, join

log = logging.getLogger(__name__)


def newest_heartbeat(fs: FileSystem, folder: str) -> float | None:
    """When the newest file under ``folder`` (its partition folders included) was written,
    in epoch seconds; None where there is none."""
    listing = fs.list_folder(folder)
    written = [f.modified for f in listing.files]
    written += [w for sub in listing.folders if (w := newest_heartbeat(fs, join(folder, sub)))]
    return max(written, default=None)


def heartbeat_data(environment: str, age: float, now: dt.datetime) -> list[dict[str, Any]]:
    """The ``HeartbeatAgeSeconds`` datum of ``environment``, stamped ``now``."""
    return [
        {
            "MetricName": metrics.HEARTBEAT_AGE,
            "Dimensions": metrics.environment_dimensions(environment),
            "Timestamp": now,
            "Value": max(age, 0.0),
            "Unit": metrics.UNITS[metrics.HEARTBEAT_AGE],
        }
    ]


def publish_heartbeat_age(
    environment: str, *, fs: FileSystem, folder: str, client: Any, now: float
) -> str | None:
    """Publish ``now`` minus the newest heartbeat's time. The dispatcher's own failure to
    (listing, publishing) is returned as one line, else None. Without any heartbeat file
    nothing is published (a warning says so): the capture never delivered, which the alarm's
    missing data, treated as breaching, pages like a dispatcher that stopped publishing."""
    try:
        newest = newest_heartbeat(fs, folder)
    except Exception as exc:  # the listing failed: say so, the turn's other work is done
        return f"heartbeats not listed under {folder}: {metrics.one_line(exc)}"
    if newest is None:
        log.warning("no heartbeat change file under %s: the lake capture delivered none", folder)
        return None
    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    data = heartbeat_data(environment, now - newest, moment)
    if not metrics.put(data, client=client, what="the capture's heartbeat age"):
        return f"{metrics.HEARTBEAT_AGE} not published (the warning above says why)"
    return None
