"""The dates an erased key's copies age out where an erase cannot reach, from the config."""

from __future__ import annotations

from datetime import UTC, datetime

from environment.config import EnvironmentConfig
from environment.retention import LAKE_VERSIONS, erase_deadlines

from .config_helpers import minimal

ERASED_AT = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)


def _deadlines(**settings: object) -> dict[str, datetime]:
    data = minimal(**settings.pop("table", {}))  # type: ignore[arg-type]
    data.update(settings)
    config = EnvironmentConfig.model_validate(data)
    return {d.place: d.until for d in erase_deadlines(config, config.tables[0], ERASED_AT)}


def test_erase_deadlines_kafka_topics_retention_plus_segment() -> None:
    assert _deadlines()["Kafka topics"] == datetime(2026, 3, 24, 15, 30, tzinfo=UTC)


def test_erase_deadlines_noncurrent_versions_whole_days_from_midnight() -> None:
    until = _deadlines(lake={"retain_hours": 25})[LAKE_VERSIONS]
    assert until == datetime(2026, 3, 13, tzinfo=UTC)


def test_erase_deadlines_noncurrent_versions_by_the_buckets_rule_not_the_tables_hours() -> None:
    # The lake bucket expires old versions after lake.retain_hours for every table.
    until = _deadlines(table={"retain_hours": 25})[LAKE_VERSIONS]
    assert until == datetime(2026, 3, 12, tzinfo=UTC)


def test_erase_deadlines_bus_archive_claim_checks_outlast_archive() -> None:
    until = _deadlines(table={"fanout": True}, fanout={"archive_retention_days": 3})[
        "EventBridge archive and its claim checks"
    ]
    assert until == datetime(2026, 3, 18, tzinfo=UTC)


def test_erase_deadlines_kinesis_stream_retention_hours() -> None:
    until = _deadlines(table={"fanout": True}, kinesis={"retention_hours": 48})[
        "Kinesis change stream"
    ]
    assert until == datetime(2026, 3, 12, 15, 30, tzinfo=UTC)


def test_erase_deadlines_lake_only_table_no_bus_places() -> None:
    assert "Kinesis change stream" not in _deadlines()


def test_erase_deadlines_tombstones_after_their_retention() -> None:
    until = _deadlines(lake={"tombstone_retention_days": 3})[
        "the merge's tombstones (the table's _cdclake sidecar)"
    ]
    assert until == datetime(2026, 3, 13, 15, 30, tzinfo=UTC)
