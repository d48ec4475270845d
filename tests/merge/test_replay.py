"""A replayed line of the first transaction after a snapshot: placed by where it was first
read (its change file), since the replay's own folder has no stream of reads."""

from __future__ import annotations

import pytest

from cdclake_merge.debezium import TableSpec, parse_line
from cdclake_merge.replay import named_commit, snapshot_before

from .support import compact_line, envelope, line, with_schema

FOLDER = "file:///w/changes/topics/app.public.orders/partition=0"
FIELDS = [{"field": "id", "type": "int32"}, {"field": "name", "type": "string"}]
SPEC = TableSpec(("id",))


def test_snapshot_before_read_in_an_earlier_file_places_it() -> None:
    assert snapshot_before(f"{FOLDER}/b.json", 90, [(100, f"{FOLDER}/a.json")]) == 100


def test_snapshot_before_read_in_its_own_file_places_it() -> None:
    # The reads and the transaction streamed after them, in one file of the sink.
    assert snapshot_before(f"{FOLDER}/a.json", 90, [(100, f"{FOLDER}/a.json")]) == 100


def test_snapshot_before_later_snapshot_of_a_later_file_left_out() -> None:
    # The transaction followed the snapshot at 100 and changed its row at 150; a snapshot at
    # 200 read later restates what it left: placed after 200 it would go stale over it.
    snapshots = [(100, f"{FOLDER}/a.json"), (200, f"{FOLDER}/c.json")]
    assert snapshot_before(f"{FOLDER}/b.json", 150, snapshots) is None


def test_snapshot_before_change_past_the_position_keeps_its_own_lsn() -> None:
    assert snapshot_before(f"{FOLDER}/b.json", 150, [(100, f"{FOLDER}/a.json")]) is None


def test_snapshot_before_another_folder_left_out() -> None:
    other = "file:///w/changes/topics/app.public.orders/partition=1/a.json"
    assert snapshot_before(f"{FOLDER}/b.json", 90, [(100, other)]) is None


@pytest.mark.parametrize("schema", [False, True], ids=["bare", "with-schema"])
def test_named_commit_line_ordered_after_the_snapshot(schema: bool) -> None:
    event = envelope("u", lsn=90, after={"id": 1, "name": "open"}, first_after_snapshot=True)
    raw = compact_line(with_schema(event, FIELDS)) if schema else line(event)
    outcome = parse_line(named_commit(raw, 100, SPEC), SPEC)
    assert outcome.change is not None
    assert outcome.change.order == (100, 90)


def test_named_commit_line_naming_a_commit_unchanged() -> None:
    raw = line(envelope("u", lsn=90, commit=80, after={"id": 1, "name": "x"}))
    assert named_commit(raw, 100, SPEC) == raw


def test_snapshot_before_later_snapshot_read_first_in_its_own_file_left_out() -> None:
    # Both snapshots' first reads in the line's file: the checkpoint keeps no line of them,
    # so whether the line precedes the one at 200 is unknown; named after it, it would
    # overwrite that snapshot's reads.
    snapshots = [(100, f"{FOLDER}/a.json"), (200, f"{FOLDER}/a.json")]
    assert snapshot_before(f"{FOLDER}/a.json", 150, snapshots) is None


def test_named_commit_column_of_that_name_unchanged() -> None:
    # A row's column named sequence, before the source block in the line: only the source's
    # sequence names the commit.
    row = {"id": 1, "sequence": "[null,1]"}
    event = envelope("u", lsn=90, after=row, first_after_snapshot=True)
    outcome = parse_line(named_commit(line(event), 100, SPEC), SPEC)
    assert outcome.change is not None
    assert (outcome.change.order, dict(outcome.change.row or {})) == ((100, 90), row)
