"""The history transform (issue #51), one rule a test, on tiny inline DataFrames: a row per
change with SCD2 validity, the stored version closed, deletes, TOAST, truncates."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from chispa import assert_df_equality

from cdclake_merge.history import history_rows
from cdclake_merge.transforms import fill_key_changes, order_key
from tests.merge.support import COLUMNS, EVENT_DDL, KEY, STATE_DDL

pytestmark = pytest.mark.spark

HISTORY_DDL = (
    "id int, name string, bio string, _cdc_order string, _cdc_lsn bigint, _cdc_op string, "
    "_cdc_source_ts timestamp, _cdc_valid_from timestamp, _cdc_valid_to timestamp, "
    "_cdc_current boolean, _cdc_source_date string"
)
T0 = dt.datetime(2024, 1, 1, 10, 0, 0)
PLACEHOLDER = ("bio",)  # the event's bio carried the TOAST placeholder


def at(lsn: int) -> dt.datetime:
    """Each change commits ``lsn`` seconds after T0: validity reads as the LSNs."""
    return T0 + dt.timedelta(seconds=lsn)


def ev(id_: int, name: str | None, lsn: int, op: str = "u", bio: str | None = None, toast=()):  # type: ignore[no-untyped-def]
    return (id_, name, bio, order_key(lsn, lsn), lsn, op, at(lsn), list(toast))


def st(id_: int, name: str | None, lsn: int, bio: str | None = None, deleted: bool = False):  # type: ignore[no-untyped-def]
    return (id_, name, bio, order_key(lsn, lsn), lsn, "d" if deleted else "u", at(lsn), deleted)


def history(spark, events, state=(), truncates=()):  # type: ignore[no-untyped-def]
    events_df = spark.createDataFrame(list(events), EVENT_DDL)
    state_df = spark.createDataFrame(list(state), STATE_DDL)
    moved = fill_key_changes(events_df, state_df, KEY, list(PLACEHOLDER))  # as the fold does
    return history_rows(moved, state_df, KEY, COLUMNS, list(truncates))


def versions(frame) -> list[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
    """(id, lsn, op, name, bio, valid_from, valid_to, current) with times as LSNs."""

    def lsn(time: dt.datetime | None) -> int | None:
        return None if time is None else int((time - T0).total_seconds())

    found = [
        (
            r["id"],
            r["_cdc_lsn"],
            r["_cdc_op"],
            r["name"],
            r["bio"],
            lsn(r["_cdc_valid_from"]),
            lsn(r["_cdc_valid_to"]),
            r["_cdc_current"],
        )
        for r in frame.collect()
    ]
    # a change doubled in a run would tie on all but a null
    return sorted(found, key=lambda v: (v[0], v[1], repr(v)))


# One frame the rule tests judge, each rule under keys of its own (one Spark job, not one a
# rule): the run's events and the stored state (rows and tombstones) they meet.
EVENTS = [
    *(ev(1, "a", 10, op="c"), ev(1, "c", 30), ev(1, "b", 20)),  # versions
    ev(2, "new", 30),  # closes the stored row
    *(ev(3, "redelivered", 20), ev(3, "late", 15)),  # stale
    *(ev(4, "ghost", 35), ev(4, "back", 45, op="c")),  # after a tombstone
    *(ev(5, "a", 10, op="c"), ev(5, "a", 10, op="c")),  # delivered twice
    *(ev(6, "a", 10, op="c", bio="x"), ev(6, None, 20, op="d")),  # delete in the run
    ev(7, None, 20, op="d"),  # delete of a stored row
    *(ev(8, "a", 10, op="c", bio="long"), ev(8, "b", 20, toast=PLACEHOLDER)),  # TOAST in run
    ev(8, "c", 30, toast=PLACEHOLDER),
    ev(9, "b", 20, toast=PLACEHOLDER),  # TOAST from the stored row
    # key change 11 -> 12: one WAL record, the create's unchanged bio a placeholder
    *(ev(11, None, 25, op="d"), ev(12, "moved", 25, op="c", toast=PLACEHOLDER)),
]
STATE = [
    st(2, "stored", 20),
    st(3, "stored", 20),
    st(4, None, 40, deleted=True),
    st(7, "stored", 10, bio="x"),
    st(9, "a", 10, bio="long"),
    st(10, "untouched", 20),  # no change: stays open, no row
    st(11, "moved", 10, bio="long"),
]


@pytest.fixture(scope="module")
def rules(spark) -> dict[int, list[tuple[Any, ...]]]:  # type: ignore[no-untyped-def]
    """The versions of the shared frame, by key."""
    by_key: dict[int, list[tuple[Any, ...]]] = {}
    for row in versions(history(spark, EVENTS, STATE)):
        by_key.setdefault(row[0], []).append(row)
    return by_key


def test_history_rows_each_change_a_version_valid_until_the_next(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, "a", 10, op="c"), ev(1, "c", 30), ev(1, "b", 20)]
    expected = spark.createDataFrame(
        [
            (1, "a", None, order_key(10, 10), 10, "c", at(10), at(10), at(20), False, "2024-01-01"),
            (1, "b", None, order_key(20, 20), 20, "u", at(20), at(20), at(30), False, "2024-01-01"),
            (1, "c", None, order_key(30, 30), 30, "u", at(30), at(30), None, True, "2024-01-01"),
        ],
        HISTORY_DDL,
    )
    assert_df_equality(
        history(spark, events), expected, ignore_row_order=True, ignore_nullable=True
    )


def test_history_rows_stored_open_version_is_closed_by_the_runs_first_change(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[2] == [
        (2, 20, "u", "stored", None, 20, 30, False),
        (2, 30, "u", "new", None, 30, None, True),
    ]


def test_history_rows_stored_version_of_a_key_not_changed_is_no_row(rules) -> None:  # type: ignore[no-untyped-def]
    assert 10 not in rules


def test_history_rows_stale_redelivery_is_no_row(rules) -> None:  # type: ignore[no-untyped-def]
    assert 3 not in rules


def test_history_rows_change_after_a_tombstone_is_a_version(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[4] == [(4, 45, "c", "back", None, 45, None, True)]


def test_history_rows_change_delivered_twice_in_a_run_is_one_row(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[5] == [(5, 10, "c", "a", None, 10, None, True)]


def test_history_rows_delete_is_an_empty_version_holding_the_last_image(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[6] == [
        (6, 10, "c", "a", "x", 10, 20, False),
        (6, 20, "d", "a", "x", 20, 20, False),
    ]


def test_history_rows_delete_of_a_stored_row_holds_the_stored_image(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[7] == [
        (7, 10, "u", "stored", "x", 10, 20, False),
        (7, 20, "d", "stored", "x", 20, 20, False),
    ]


def test_history_rows_toast_placeholder_takes_the_previous_version_in_the_run(rules) -> None:  # type: ignore[no-untyped-def]
    assert [(r[3], r[4]) for r in rules[8]] == [("a", "long"), ("b", "long"), ("c", "long")]


def test_history_rows_toast_placeholder_takes_the_stored_value(rules) -> None:  # type: ignore[no-untyped-def]
    assert [(r[1], r[4]) for r in rules[9]] == [(10, "long"), (20, "long")]


def test_history_rows_key_change_first_version_of_new_key_takes_old_keys_value(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules[12] == [(12, 25, "c", "moved", "long", 25, None, True)]


def test_history_rows_truncate_closes_every_open_version_before_it(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, "before", 20), ev(1, "after", 40, op="c")]
    state = [st(1, "stored", 10), st(2, "untouched", 10), st(3, "gone", 5, deleted=True)]
    truncate = (order_key(30, 30), int((at(30) - dt.datetime(1970, 1, 1)).total_seconds() * 1000))
    assert versions(history(spark, events, state, [truncate])) == [
        (1, 10, "u", "stored", None, 10, 20, False),
        (1, 20, "u", "before", None, 20, 30, False),
        (1, 40, "c", "after", None, 40, None, True),
        (2, 10, "u", "untouched", None, 10, 30, False),
    ]
