"""`cdclake erase`'s check that the source no longer holds the key, on the session's
PostgreSQL: a parameterized SELECT on the key columns, each value read as its column's type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg8000.native import Connection

from cdclake.erase import source_holds

TABLE = "erase_source.order_lines"


@pytest.fixture(scope="module")
def source(admin: Connection) -> Iterator[Connection]:
    """A two-column key (text, bigint) whose row ('eu', 7) is still at the source."""
    admin.run("CREATE SCHEMA erase_source")
    admin.run(f"CREATE TABLE {TABLE} (region text, id bigint, v text, PRIMARY KEY (region, id))")
    admin.run(f"INSERT INTO {TABLE} VALUES ('eu', 7, 'kept')")
    yield admin
    admin.run("DROP SCHEMA erase_source CASCADE")


def test_source_holds_present_key_refused(source: Connection) -> None:
    assert source_holds(source, TABLE, {"region": "eu", "id": "7"})


def test_source_holds_deleted_key_passes(source: Connection) -> None:
    assert not source_holds(source, TABLE, {"region": "eu", "id": "8"})


def test_source_holds_value_as_parameter_not_sql(source: Connection) -> None:
    assert not source_holds(source, TABLE, {"region": "x' OR 'a'='a", "id": "7"})
