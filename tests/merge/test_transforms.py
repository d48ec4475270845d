"""One test per CDC rule, on tiny inline DataFrames (the pure transforms)."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from cdclake_merge.debezium import TableSpec
from cdclake_merge.job import line_offsets
from cdclake_merge.transforms import (
    changed_rows,
    created_placeholders,
    decode_events,
    drop_truncated,
    fill_key_changes,
    fill_toast,
    fresh_events,
    latest_per_key,
    order_key,
    parse_lines,
    place_after_snapshots,
    run_summary,
    snapshot_horizon,
    snapshot_starts,
    truncated_rows,
)
from tests.merge.support import (
    COLUMNS,
    EVENT_DDL,
    KEY,
    STATE_DDL,
    envelope,
    line,
    lines_frame,
    parsed_in_python,
)

pytestmark = pytest.mark.spark

TS = dt.datetime(2024, 1, 1, 10, 0, 0)


def o(lsn: int, commit: int | None = None) -> str:
    return order_key(lsn if commit is None else commit, lsn)


def ev(id_, name, bio, lsn, op="u", commit=None, toast=(), ts=TS):  # type: ignore[no-untyped-def]
    return (id_, name, bio, o(lsn, commit), lsn, op, ts, list(toast))


def st(id_, name, bio, lsn, op="u", deleted=False):  # type: ignore[no-untyped-def]
    return (id_, name, bio, o(lsn), lsn, op, TS, deleted)


def fold(spark, events, state=(), toast=()):  # type: ignore[no-untyped-def]
    events_df = spark.createDataFrame(list(events), EVENT_DDL)
    state_df = spark.createDataFrame(list(state), STATE_DDL)
    fresh = fill_key_changes(fresh_events(events_df, state_df, KEY), state_df, KEY, list(toast))
    latest = fill_toast(
        latest_per_key(fresh, KEY, COLUMNS, list(toast)), state_df, KEY, list(toast)
    )
    return latest, state_df


def names(frame):  # type: ignore[no-untyped-def]
    return sorted((r["id"], r["name"]) for r in frame.collect())


def test_latest_per_key_higher_lsn_wins_over_later_ts_ms(spark) -> None:  # type: ignore[no-untyped-def]
    later_clock = TS + dt.timedelta(seconds=5)
    latest, _ = fold(spark, [ev(1, "new", None, 20), ev(1, "old", None, 10, ts=later_clock)])
    assert names(latest) == [(1, "new")]


def test_latest_per_key_commit_lsn_orders_before_change_lsn(spark) -> None:  # type: ignore[no-untyped-def]
    # The second transaction committed later although its change LSN is lower.
    events = [ev(1, "first-tx", None, 95, commit=50), ev(1, "second-tx", None, 90, commit=100)]
    latest, _ = fold(spark, events)
    assert names(latest) == [(1, "second-tx")]


def test_latest_per_key_redelivered_duplicate_changes_nothing(spark) -> None:  # type: ignore[no-untyped-def]
    once, _ = fold(spark, [ev(1, "a", None, 10), ev(1, "b", None, 20)])
    twice, _ = fold(spark, [ev(1, "a", None, 10), ev(1, "b", None, 20), ev(1, "b", None, 20)])
    assert_df_equality(once.drop("_events"), twice.drop("_events"), ignore_row_order=True)
    assert [r["_events"] for r in twice.collect()] == [3]


def test_fresh_events_older_than_stored_row_are_ignored(spark) -> None:  # type: ignore[no-untyped-def]
    latest, _ = fold(spark, [ev(1, "late-old", None, 10)], state=[st(1, "stored", None, 30)])
    assert latest.count() == 0


def test_fresh_events_same_order_as_stored_row_are_ignored(spark) -> None:  # type: ignore[no-untyped-def]
    latest, _ = fold(spark, [ev(1, "stored", None, 30)], state=[st(1, "stored", None, 30)])
    assert latest.count() == 0


def test_fresh_events_older_than_tombstone_do_not_resurrect(spark) -> None:  # type: ignore[no-untyped-def]
    tombstone = st(1, None, None, 40, op="d", deleted=True)
    latest, _ = fold(spark, [ev(1, "ghost", None, 35, op="c")], state=[tombstone])
    assert latest.count() == 0


def test_fresh_events_newer_than_tombstone_reinsert(spark) -> None:  # type: ignore[no-untyped-def]
    tombstone = st(1, None, None, 40, op="d", deleted=True)
    latest, _ = fold(spark, [ev(1, "back", None, 45, op="c")], state=[tombstone])
    assert names(latest) == [(1, "back")]


def test_changed_rows_delete_becomes_tombstone_with_key_only(spark) -> None:  # type: ignore[no-untyped-def]
    latest, _ = fold(spark, [ev(1, "x", "y", 10, op="c"), ev(1, "x", "y", 20, op="d")])
    row = changed_rows(latest, KEY, COLUMNS).collect()[0]
    assert (row["id"], row["name"], row["bio"], row["_cdc_deleted"], row["_cdc_op"]) == (
        1,
        None,
        None,
        True,
        "d",
    )


def test_changed_rows_primary_key_change_deletes_old_key_and_writes_new(spark) -> None:  # type: ignore[no-untyped-def]
    state = [st(1, "row", None, 5)]
    moved = [ev(1, None, None, 10, op="d"), ev(2, "row", None, 10, op="c")]
    latest, _ = fold(spark, moved, state)
    changed = changed_rows(latest, KEY, COLUMNS)
    assert sorted((r["id"], r["name"], r["_cdc_deleted"]) for r in changed.collect()) == [
        (1, None, True),
        (2, "row", False),
    ]


def test_fill_toast_takes_earlier_value_from_same_run(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, "a", "long bio", 10), ev(1, "b", None, 20, toast=["bio"])]
    latest, _ = fold(spark, events, toast=["bio"])
    row = latest.collect()[0]
    assert (row["name"], row["bio"], row["_cdc_toast"]) == ("b", "long bio", [])


def test_fill_toast_takes_stored_value_when_run_has_none(spark) -> None:  # type: ignore[no-untyped-def]
    latest, _ = fold(
        spark, [ev(1, "b", None, 20, toast=["bio"])], [st(1, "a", "stored bio", 5)], ["bio"]
    )
    assert latest.collect()[0]["bio"] == "stored bio"


def test_fill_toast_keeps_real_null_that_is_newer(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, "a", None, 10), ev(1, "b", None, 20, toast=["bio"])]
    latest, _ = fold(spark, events, [st(1, "s", "stored", 5)], ["bio"])
    assert latest.collect()[0]["bio"] is None  # bio was set to NULL at lsn 10


def test_fill_toast_without_any_previous_value_is_flagged(spark) -> None:  # type: ignore[no-untyped-def]
    latest, _ = fold(spark, [ev(1, "b", None, 20, toast=["bio"])], toast=["bio"])
    assert latest.collect()[0]["_cdc_toast"] == ["bio"]


def _moved_row(spark, events, state=()):  # type: ignore[no-untyped-def]
    """The new key's (2) bio and unresolved columns after ``events`` move key 1 to it."""
    latest, _ = fold(spark, events, state, ["bio"])
    return latest.where(F.col("id") == 2).select("id", "bio", "_cdc_toast")


def _expected_moved(spark, bio, toast):  # type: ignore[no-untyped-def]
    return spark.createDataFrame([(2, bio, toast)], "id int, bio string, _cdc_toast array<string>")


# A key change (UPDATE ... SET id = 2 WHERE id = 1) is one WAL record: the delete of the old
# key and the create of the new one share its position, the create's unchanged bio a placeholder.
def _key_change(lsn: int) -> list:
    return [ev(1, None, None, lsn, op="d"), ev(2, "row", None, lsn, op="c", toast=["bio"])]


def test_created_placeholders_key_change_names_only_the_creates_columns(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, None, "bio", 10, toast=["name"]), *_key_change(20)]
    frame = spark.createDataFrame(events, EVENT_DDL)
    assert [r["column"] for r in created_placeholders(frame).collect()] == ["bio"]


def test_created_placeholders_updates_alone_name_none(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, None, "bio", 10, toast=["name"]), ev(2, "row", None, 11, op="c")]
    assert created_placeholders(spark.createDataFrame(events, EVENT_DDL)).collect() == []


def test_fill_key_changes_old_key_value_from_run_fills_new_key(spark) -> None:  # type: ignore[no-untyped-def]
    events = [ev(1, "row", "long bio", 10), *_key_change(20)]
    assert_df_equality(
        _moved_row(spark, events, [st(1, "row", "older bio", 5)]),
        _expected_moved(spark, "long bio", []),
        ignore_nullable=True,
    )


def test_fill_key_changes_old_key_stored_row_fills_new_key(spark) -> None:  # type: ignore[no-untyped-def]
    assert_df_equality(
        _moved_row(spark, _key_change(20), [st(1, "row", "stored bio", 5)]),
        _expected_moved(spark, "stored bio", []),
        ignore_nullable=True,
    )


def test_fill_key_changes_old_key_without_value_stays_unresolved(spark) -> None:  # type: ignore[no-untyped-def]
    assert_df_equality(
        _moved_row(spark, _key_change(20)),
        _expected_moved(spark, None, ["bio"]),
        ignore_nullable=True,
    )


def test_fill_key_changes_old_key_deleted_earlier_in_run_takes_no_stored_value(spark) -> None:  # type: ignore[no-untyped-def]
    # key 1 deleted at 12, moved in from 3 (no value anywhere) at 14, moved on to 2 at 20
    events = [
        ev(1, None, None, 12, op="d"),
        ev(3, None, None, 14, op="d"),
        ev(1, "row", None, 14, op="c", toast=["bio"]),
        *_key_change(20),
    ]
    assert_df_equality(
        _moved_row(spark, events, [st(1, "row", "stored bio", 5)]),
        _expected_moved(spark, None, ["bio"]),
        ignore_nullable=True,
    )


def test_fill_toast_after_a_delete_in_the_run_takes_no_stored_value(spark) -> None:  # type: ignore[no-untyped-def]
    # key 2 deleted at 10, then moved in from 1 (no value anywhere) at 20
    events = [ev(2, None, None, 10, op="d"), *_key_change(20)]
    assert_df_equality(
        _moved_row(spark, events, [st(2, "row", "stored bio", 5)]),
        _expected_moved(spark, None, ["bio"]),
        ignore_nullable=True,
    )


def test_drop_truncated_removes_rows_changed_before_the_truncate(spark) -> None:  # type: ignore[no-untyped-def]
    state = spark.createDataFrame([st(1, "before", None, 5), st(2, "after", None, 50)], STATE_DDL)
    assert names(drop_truncated(state, o(20))) == [(2, "after")]


def test_truncated_rows_are_deletions_for_change_sinks(spark) -> None:  # type: ignore[no-untyped-def]
    state = spark.createDataFrame([st(1, "before", None, 5), st(2, "after", None, 50)], STATE_DDL)
    changed = changed_rows(fold(spark, [ev(3, "new", None, 60, op="c")])[0], KEY, COLUMNS)
    removed = truncated_rows(state, changed, KEY, o(20)).collect()
    assert [(r["id"], r["_cdc_deleted"]) for r in removed] == [(1, True)]


def test_parse_lines_counts_earlier_splits_of_the_file(spark) -> None:  # type: ignore[no-untyped-def]
    second = 1 << 33  # a row id of the scan's second partition
    read = spark.createDataFrame(
        [
            ("f", 0, 10, "a"),
            ("f", 0, 11, "b"),
            ("g", 0, 12, "c"),
            ("f", 64, second, "d"),
            ("f", 64, second + 1, "e"),
            ("f", 128, 2 * second, "f"),
        ],
        "file string, _split bigint, _row bigint, text string",
    )
    offsets = line_offsets(read)
    rows = parse_lines(read, TableSpec(("id",)), offsets).where("kind = 'bad'").collect()
    numbered = sorted((r["file"], r["line"], r["raw"]) for r in rows)
    assert numbered == [
        ("f", 1, "a"),
        ("f", 2, "b"),
        ("f", 3, "d"),
        ("f", 4, "e"),
        ("f", 5, "f"),
        ("g", 1, "c"),
    ]


def test_parse_lines_keeps_line_numbers_and_raw_text_of_bad_lines(spark) -> None:  # type: ignore[no-untyped-def]
    lines = lines_frame(spark, ["a\r", "", "b"]).unionByName(lines_frame(spark, ["null"], "g"))
    rows = parsed_in_python(lines, TableSpec(("id",))).orderBy("file", "line").collect()
    outcomes = [(r["file"], r["line"], r["kind"], r["raw"]) for r in rows]
    assert outcomes == [
        ("f", 1, "bad", "a\r"),
        ("f", 2, "skip", None),
        ("f", 3, "bad", "b"),
        ("g", 1, "skip", None),
    ]


def test_parse_lines_reports_columns_and_toast_in_schema_row(spark) -> None:  # type: ignore[no-untyped-def]
    text = line(envelope("u", lsn=5, after={"id": 1, "bio": "__debezium_unavailable_value"}))
    parsed = parsed_in_python(lines_frame(spark, [text, "null"]), TableSpec(("id",))).collect()
    kinds = sorted(r["kind"] for r in parsed)
    assert kinds == ["event", "schema", "skip"]
    schema_row = next(r for r in parsed if r["kind"] == "schema")
    assert '"toast":["bio"]' in schema_row["row_json"]


def test_decode_events_casts_to_table_types(spark) -> None:  # type: ignore[no-untyped-def]
    row_json = '{"id":1,"d":19000,"t":1704103200123456,"m":"12.50","b":"AQI="}'
    parsed = spark.createDataFrame(
        [("event", "f", 1, "c", o(1), 1, 1_700_000_000_000, row_json, [], None, None, None)],
        "kind string, file string, line bigint, op string, `order` string, lsn bigint, "
        "source_ts_ms bigint, row_json string, toast array<string>, reason string, raw string, "
        "head int",
    )
    columns = [
        ("id", "int"),
        ("d", "date"),
        ("t", "timestamp"),
        ("m", "decimal(5,2)"),
        ("b", "binary"),
    ]
    row = decode_events(parsed, columns).collect()[0]
    assert row["d"] == dt.date(2022, 1, 8)
    assert str(row["m"]) == "12.50"
    assert bytes(row["b"]) == b"\x01\x02"
    assert row["_cdc_op"] == "c"


def test_decode_events_image_column_decodes_as_its_row_json_would(spark) -> None:  # type: ignore[no-untyped-def]
    """A line the JVM decoded (its image a typed struct) and the same values as the Python
    parser writes them: one row each, equal; a float32 widened to double keeps its text."""
    parsed = spark.createDataFrame(
        [
            ("event", "f", None, "c", o(1), 1, 0, None, [], None, None, 0, (1, 1.1, "12.50")),
            ("event", "f", 2, "c", o(2), 2, 0, '{"id":1,"v":1.1,"m":"12.50"}', [], *[None] * 4),
        ],
        "kind string, file string, line bigint, op string, `order` string, lsn bigint, "
        "source_ts_ms bigint, row_json string, toast array<string>, reason string, raw string, "
        "head int, _image_0_after struct<id:int,v:float,m:string>",
    )
    columns = [("id", "bigint"), ("v", "double"), ("m", "decimal(5,2)")]
    rows = decode_events(parsed, columns).select("id", "v", F.col("m").cast("string")).collect()
    assert [tuple(r) for r in rows] == [(1, 1.1, "12.50")] * 2


def test_run_summary_counts_outcomes_and_finds_newest_truncate(spark) -> None:  # type: ignore[no-untyped-def]
    texts = [line(envelope("t", lsn=30)), "null", line(envelope("t", lsn=70)), "{"]
    parsed = parsed_in_python(lines_frame(spark, texts), TableSpec(("id",)))
    summary = {(r["kind"], r["op"]): r for r in run_summary(parsed).collect()}
    assert summary[("event", "t")]["count"] == 2
    assert summary[("event", "t")]["order"] == o(70)
    assert summary[("skip", None)]["count"] == summary[("bad", None)]["count"] == 1
    assert summary[("schema", None)]["meta"] == ['{"signatures":[[]],"toast":[]}']


def _read(lsn: int) -> dict[str, object]:
    return envelope("r", lsn=lsn, after={"id": lsn, "name": "read"})


def _first(lsn: int) -> dict[str, object]:
    """A change of the first transaction after a snapshot: no commit position."""
    return envelope("u", lsn=lsn, after={"id": 1, "name": "open"}, first_after_snapshot=True)


CHANGES = "topics/app.public.orders/partition=0"


def placed_orders(spark, events, earlier=(), file=f"{CHANGES}/b.json"):  # type: ignore[no-untyped-def]
    """The events' orders once placed, in the order of their lines (one file)."""
    texts = [line(e) for e in events]
    parsed = parsed_in_python(lines_frame(spark, texts, file), TableSpec(("id",)))
    starts = [(r["lsn"], tuple(r["first"])) for r in snapshot_starts(parsed).collect()]
    placed = place_after_snapshots(parsed, starts, earlier).where("kind = 'event'")
    return [r["order"] for r in placed.orderBy("_row").collect()]


def test_place_after_snapshots_change_before_the_snapshot_goes_after_its_reads(spark) -> None:  # type: ignore[no-untyped-def]
    # Open when the snapshot began (its change at 90, before it at 100), committed after.
    assert placed_orders(spark, [_read(100), _first(90)]) == [
        order_key(100, 0),
        order_key(100, 90),
    ]


def test_place_after_snapshots_later_snapshot_in_the_same_file_stays_after_it(spark) -> None:  # type: ignore[no-untyped-def]
    # A snapshot taken again after the transaction (offsets lost) read what it committed.
    orders = placed_orders(spark, [_read(100), _first(90), _read(200)])
    assert orders == [order_key(100, 0), order_key(100, 90), order_key(200, 0)]


def test_place_after_snapshots_snapshot_of_an_earlier_file_goes_before_it(spark) -> None:  # type: ignore[no-untyped-def]
    earlier = [(100, f"{CHANGES}/a.json")]
    assert placed_orders(spark, [_first(90), _read(200)], earlier)[0] == order_key(100, 90)


def test_place_after_snapshots_snapshot_of_a_later_file_leaves_it(spark) -> None:  # type: ignore[no-untyped-def]
    # A file written again after a later one's snapshot was applied: it keeps its place.
    assert placed_orders(spark, [_first(90)], [(100, f"{CHANGES}/c.json")]) == [order_key(90, 90)]


def test_place_after_snapshots_snapshot_of_another_folder_leaves_it(spark) -> None:  # type: ignore[no-untyped-def]
    # Another Kafka partition: its order against this one's is unknown, and a key's changes
    # are all in one partition.
    earlier = [(100, "topics/app.public.orders/partition=1/a.json")]
    assert placed_orders(spark, [_first(90)], earlier) == [order_key(90, 90)]


def test_place_after_snapshots_change_past_the_snapshot_keeps_its_own_lsn(spark) -> None:  # type: ignore[no-untyped-def]
    assert placed_orders(spark, [_read(100), _first(150)])[1] == order_key(150, 150)


def test_place_after_snapshots_no_snapshot_known_keeps_its_own_lsn(spark) -> None:  # type: ignore[no-untyped-def]
    assert placed_orders(spark, [_first(90)]) == [order_key(90, 90)]


def test_place_after_snapshots_named_commit_never_moves(spark) -> None:  # type: ignore[no-untyped-def]
    # Below the snapshot: streamed before it (a line written again), whatever its place.
    named = envelope("u", lsn=110, commit=80, after={"id": 1, "name": "x"})
    assert placed_orders(spark, [_read(100), named])[1] == order_key(80, 110)


def test_snapshot_horizon_just_below_its_reads_keeps_what_follows() -> None:
    horizon = snapshot_horizon(order_key(100, 0))
    # Everything before the snapshot's position is older; its reads and what is placed
    # after them (the first transaction, at (100, its LSN)) are newer.
    assert order_key(99, 10**19) < horizon < order_key(100, 0) < order_key(100, 1)


def test_snapshot_horizon_of_a_streamed_change_refused() -> None:
    with pytest.raises(ValueError, match="not a snapshot read"):
        snapshot_horizon(order_key(100, 90))
