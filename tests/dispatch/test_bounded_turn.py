"""A dispatcher turn reads a bounded number of objects per table on moto's S3, however long the
table's timeline: the newest commit that names a checkpoint is found by walking the completed
instants newest first, reading each commit file only when it is reached."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths, table_pending
from cdclake_merge.storage import S3FileSystem, join
from tests.dispatch.dispatch_helpers import (
    DATABASE,
    WAREHOUSE,
    World,
    changes_of,
    commit_everything_listed,
    put_change_file,
)

pytestmark = pytest.mark.moto

ORDERS = "public.orders"
LAKE_TABLE = f"{DATABASE}.public_orders"
# More commits than the old search window (50) read every turn.
COMMITS = 60


def _long_timeline(world: World, *, compactions: int = 0) -> None:
    """``COMMITS`` commits of the merge, each naming its own checkpoint, then ``compactions``
    MERGE_ON_READ compactions (completed ``.commit`` instants that name none)."""
    put_change_file(world, ORDERS, 0)
    commit_everything_listed(world, ORDERS)
    paths = TablePaths.of(WAREHOUSE, LAKE_TABLE)
    fs = S3FileSystem(world.s3)
    (first,) = fs.list_dir(paths.timeline)
    named = fs.read_text(join(paths.timeline, first))
    base = int(first.split(".")[0])
    for i in range(1, COMMITS):
        fs.write_text(join(paths.timeline, f"{base + i:017d}.deltacommit"), named)
    for i in range(compactions):
        compaction = {"extraMetadata": {"schema": "{}"}}
        fs.write_text(
            join(paths.timeline, f"{base + COMMITS + i:017d}.commit"), json.dumps(compaction)
        )
    assert CHECKPOINT_KEY in named


def _timeline_reads(world: World) -> list[str]:
    """The keys of the table's timeline files read while a turn's listing of the table runs."""
    read: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        if "/.hoodie/" in params["Key"]:
            read.append(params["Key"])

    world.s3.meta.events.register("before-parameter-build.s3.GetObject", record)
    try:
        table_pending(
            S3FileSystem(world.s3),
            warehouse=WAREHOUSE,
            table=LAKE_TABLE,
            changes=changes_of(ORDERS),
        )
    finally:
        world.s3.meta.events.unregister("before-parameter-build.s3.GetObject", record)
    return read


def test_table_pending_long_timeline_reads_only_the_newest_commit(world: World) -> None:
    _long_timeline(world)
    assert len(_timeline_reads(world)) == 1


def test_table_pending_compaction_newest_reads_back_to_the_commit_naming_a_checkpoint(
    world: World,
) -> None:
    _long_timeline(world, compactions=1)
    assert len(_timeline_reads(world)) == 2
