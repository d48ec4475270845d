"""How long each copy of a change outlives its row: the Kafka topics' retention, the lake
bucket's noncurrent object versions, and the dates an erased key's copies that an erase cannot
reach age out (issue #51 item 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from environment.config import EnvironmentConfig
from environment.tables import TableConfig

# CDC topics keep a week so a stopped sink can catch up; the offsets topic is compacted.
TOPIC_RETENTION_MS = 7 * 24 * 3600 * 1000
# Kafka deletes a whole segment only once its newest record is past retention; a topic's
# segment rolls after a week (segment.ms's default), so a record may stay up to both.
TOPIC_SEGMENT_MS = 7 * 24 * 3600 * 1000
# An erase request (`cdclake erase` on AWS: the key, until its run erased) whose run failed and
# was never run again expires after this: long enough for a rerun from the console after a
# weekend, short enough that a forgotten key does not outlive the erase's other deadlines.
ERASE_REQUEST_DAYS = 7
# The fan-out's claim checks (full events too large for EventBridge) expire after at least this.
CLAIM_CHECK_MIN_DAYS = 7


def noncurrent_version_days(retain_hours: int) -> int:
    """Days an overwritten or deleted lake object's old version is kept: ``retain_hours`` in
    whole days (S3 lifecycle counts days), rounded up so a restore reaches as far as Hudi's
    cleaner keeps; at least one."""
    return max(1, math.ceil(retain_hours / 24))


def claim_check_days(archive_retention_days: int) -> int:
    """Days a claim check is kept: as long as the bus archive, at least a week."""
    return max(CLAIM_CHECK_MIN_DAYS, archive_retention_days)


LAKE_VERSIONS = "S3 noncurrent versions of the lake table's files and of the erase's request"


@dataclass(frozen=True)
class Deadline:
    """A place an erase cannot reach, and when the last copy there is gone at the latest."""

    place: str
    until: datetime
    why: str


def _next_midnight(at: datetime) -> datetime:
    # S3 lifecycle counts whole days from the next midnight UTC after the object changed.
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


def erase_deadlines(
    config: EnvironmentConfig, table: TableConfig, erased_at: datetime
) -> tuple[Deadline, ...]:
    """The dates the erased key's copies an erase leaves age out. Every copy was written before
    ``erased_at`` (the key was deleted at the source first), so each date is a bound."""
    deadlines = [
        Deadline(
            "Kafka topics",
            erased_at + timedelta(milliseconds=TOPIC_RETENTION_MS + TOPIC_SEGMENT_MS),
            "topic retention plus a segment's age",
        )
    ]
    if table.lake:
        # The bucket's rule (one for every table): a table's own retain_hours is Hudi's.
        days = noncurrent_version_days(config.lake.retain_hours)
        deadlines.append(
            Deadline(
                LAKE_VERSIONS,
                _next_midnight(erased_at) + timedelta(days=days),
                # The request object (AWS) is removed when its run has erased, not before.
                f"the lake bucket's noncurrent version expiry ({days} d); the erase's request "
                "counts from the day the run that erased removed it (a failed run keeps it, "
                f"{ERASE_REQUEST_DAYS} d after the next midnight at most)",
            )
        )
        # The merge remembers a deleted key (its values) so a redelivered older change cannot
        # bring the row back; erasing it sooner would let one. Dropped by the first commit
        # after the retention: a table with no change after that keeps it until its next one.
        days = config.lake.tombstone_retention_days
        deadlines.append(
            Deadline(
                "the merge's tombstones (the table's _cdclake sidecar)",
                erased_at + timedelta(days=days),
                f"tombstone retention ({days} d), at the table's first merge commit after it",
            )
        )
    if table.fanout:
        deadlines.append(
            Deadline(
                "Kinesis change stream",
                erased_at + timedelta(hours=config.kinesis.retention_hours),
                "the stream's retention",
            )
        )
        days = claim_check_days(config.fanout.archive_retention_days)
        deadlines.append(
            Deadline(
                "EventBridge archive and its claim checks",
                # The claim checks outlast the archive; S3 counts from the next midnight.
                _next_midnight(erased_at) + timedelta(days=days),
                f"the archive's retention ({config.fanout.archive_retention_days} d), claim "
                f"checks' expiry ({days} d)",
            )
        )
    return tuple(deadlines)
