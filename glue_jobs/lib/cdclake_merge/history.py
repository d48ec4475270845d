"""A lake table's history: every version of each row, as SCD2 rows (config's ``history``).

Pure DataFrame transforms, as :mod:`cdclake_merge.transforms`: the merge run hands them the
events it decoded and the stored state it read, and the sink upserts what they return into
``<table>_history`` beside the table (:meth:`cdclake_merge.hudi.HudiTable.write_history`). A
history row's record key is the table's key and ``_cdc_order``: a change is one row however
often a run is repeated, and a version closed later is the same row upserted again.

The rules (docs/lake.md "History"):

* One row per change the table's rules take (c, u, r, d), stale redeliveries skipped against
  the stored row or tombstone as :func:`~cdclake_merge.transforms.fresh_events` skips them; a
  change a truncate in the same run removes from the table still happened, and is a row.
* A version is valid from its source commit time to the next change's (``_cdc_valid_to`` null
  while current). A delete is a row of its own whose validity is empty (``_cdc_valid_to`` =
  ``_cdc_valid_from``) holding the last image, and closes the version before it: an "as of"
  query never sees it and a deleted key has no current row. A key change is a delete of the
  old key and a create of the new one, so it closes the old key the same way.
* A truncate closes every version open at it, at its source commit time, and is no row itself.
* The stored row of a key the run changes (or a truncate closes) is that key's open version:
  it is upserted again, closed; a table that kept no history before gets it as its first row.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from cdclake_merge.schema import Column as ColumnDef
from cdclake_merge.transforms import (
    DELETED,
    METADATA_COLUMNS,
    OP,
    ORDER,
    SOURCE_TS,
    TOAST,
    fresh_events,
)

HISTORY_SUFFIX = "_history"  # <table>_history beside <table>, in the same database
VALID_FROM = "_cdc_valid_from"  # the version's source commit time
VALID_TO = "_cdc_valid_to"  # the next change's source commit time; null while current
CURRENT = "_cdc_current"
SOURCE_DATE = "_cdc_source_date"  # yyyy-MM-dd of _cdc_valid_from (UTC): the partition
# In place of the table's _hoodie_is_deleted in the history's column layout, so that columns
# the source adds later land at the end of both tables' layouts.
HISTORY_COLUMNS = (VALID_FROM, VALID_TO, CURRENT, SOURCE_DATE)

# A run's truncate: its order and its source commit time (ms since the epoch, as Debezium's).
Truncate = tuple[str, int]


def history_rows(
    events: DataFrame,
    state: DataFrame,
    key: Sequence[str],
    columns: Sequence[ColumnDef],
    truncates: Sequence[Truncate] = (),
) -> DataFrame:
    """The run's history rows: one per fresh change and one per open version it closes.

    ``events``: the run's decoded changes (``decode_events``' layout, truncates excluded)
    newer than the table's truncation horizon; ``state``: the stored rows and tombstones of
    the keys they name (all keys where the run truncates), in the state layout, with every
    column (a delete's last image and a closed version are whole rows); ``truncates``: the
    run's truncates newer than the table's horizon. Returns the columns, the metadata
    columns and :data:`HISTORY_COLUMNS`.
    """
    fresh = fresh_events(events, state, key).dropDuplicates([*key, ORDER])
    live = state.where(~F.col(DELETED))
    run_keys = fresh.select(*key).distinct().withColumn("_run", F.lit(True))
    opened = live.join(run_keys, list(key), "left")
    closes = F.col("_run").isNotNull()
    if truncates:
        closes = closes | (F.col(ORDER) < F.lit(max(order for order, _ in truncates)))
    names = [name for name, _ in columns]
    stored = opened.where(closes).select(
        *names, *METADATA_COLUMNS, F.array().cast("array<string>").alias(TOAST)
    )
    versions = fresh.select(*names, *METADATA_COLUMNS, TOAST).unionByName(stored)

    by_key = Window.partitionBy(*key).orderBy(ORDER)
    before = by_key.rowsBetween(Window.unboundedPreceding, -1)
    is_delete = F.col(OP) == "d"
    valid_to = F.when(is_delete, F.col(SOURCE_TS)).otherwise(
        F.least(F.lead(SOURCE_TS).over(by_key), _truncated_at(truncates))
    )
    return versions.select(
        *[name if name in key else _last_image(name, before).alias(name) for name in names],
        *METADATA_COLUMNS,
        F.col(SOURCE_TS).alias(VALID_FROM),
        valid_to.alias(VALID_TO),
        valid_to.isNull().alias(CURRENT),
        F.date_format(SOURCE_TS, "yyyy-MM-dd").alias(SOURCE_DATE),
    )


def _last_image(name: str, before: WindowSpec) -> Column:
    """Column ``name`` of a version: its own value, or where the change carried none (a
    delete, a TOAST placeholder) the newest real value of the key before it, in the run or
    stored; a delete that finds none keeps what its event held (its before image)."""
    is_delete = F.col(OP) == "d"
    real = ~is_delete & ~F.array_contains(TOAST, name)
    previous = F.last(F.when(real, F.struct(F.col(name).alias("v"))), ignorenulls=True).over(before)
    return (
        F.when(real, F.col(name))
        .when(previous.isNotNull(), previous["v"])
        .when(is_delete, F.col(name))
    )


def _truncated_at(truncates: Sequence[Truncate]) -> Column:
    """The source commit time of the first of ``truncates`` after a version (null: none)."""
    closing: Column = F.lit(None).cast("timestamp")
    for order, at_ms in sorted(truncates, reverse=True):
        at = F.timestamp_millis(F.lit(at_ms))
        closing = F.when(F.col(ORDER) < F.lit(order), at).otherwise(closing)
    return closing
