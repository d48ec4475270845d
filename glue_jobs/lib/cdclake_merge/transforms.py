"""Pure DataFrame → DataFrame transforms of the merge: parse, decode, fold, apply.

Nothing here reads or writes storage or triggers a Spark action; the entry points
(:mod:`cdclake_merge.job`, ``glue_jobs/merge_job.py``) do that. Each function's
docstring names the CDC rule it implements.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, FloatType, StructType

from cdclake_merge.debezium import SNAPSHOT_END, UNKNOWN_COMMIT, TableSpec, dumps, parse_line
from cdclake_merge.schema import Column as ColumnDef
from cdclake_merge.schema import decode_sql, raw_ddl, raw_type
from cdclake_merge.storage import folder_of

# Metadata columns kept in the lake table so users can audit every row.
ORDER = "_cdc_order"  # zero-padded commit LSN + change LSN: the per-key order, a string
LSN = "_cdc_lsn"  # the change's own LSN
OP = "_cdc_op"  # c, u, r (live rows) or d (tombstones)
SOURCE_TS = "_cdc_source_ts"  # commit time in the source database, UTC
DELETED = "_cdc_deleted"  # internal: marks tombstones in the state
TOAST = "_cdc_toast"  # internal: columns that carried the unavailable-value placeholder
METADATA_COLUMNS = (ORDER, LSN, OP, SOURCE_TS)
# Where a line read sits: its split's start in the file, and a row id (see job.line_offsets).
SPLIT, ROW = "_split", "_row"
METADATA_DDL = f"`{ORDER}` string, `{LSN}` bigint, `{OP}` string, `{SOURCE_TS}` timestamp"

# A parsed line's outcome. Only lines the Python parser read carry their number (``line``):
# they are the only ones quarantined, and the splits' offsets it takes cost a job. Every
# line carries where it was read (``file``, ``_split``, ``_row``: their order is the
# stream's), which places a change of unknown commit after the snapshot before it.
PARSED_DDL = (
    "kind string, file string, line bigint, op string, `order` string, lsn bigint, "
    "source_ts_ms bigint, row_json string, toast array<string>, reason string, raw string, "
    f"head int, {SPLIT} bigint, {ROW} bigint"
)
_PARSED_NAMES = [part.split()[0].strip("`") for part in PARSED_DDL.split(", ")]
# Lines the JVM decoded carry no ``row_json``: their image is a struct of its raw values in a
# column of its plan's, named with this prefix (see jvm_parse.image_column).
IMAGE_PREFIX = "_image_"
_OUTPUT_BATCH_ROWS = 10_000  # parsed rows per Arrow batch back to the JVM
# The kind of reasons counted together when there are too many kinds to list.
MANY_REASONS = "reasons of too many kinds to list"


def order_key(commit_lsn: int, lsn: int) -> str:
    return f"{commit_lsn:020d}{lsn:020d}"


_NO_LSN = order_key(UNKNOWN_COMMIT, 0)[:20]  # 20 zeros: an order's half that names no LSN


def snapshot_read(op: Column, order: Column) -> Column:
    """Whether a parsed event is a read of an initial or blocking snapshot: ordered
    (position, 0); an incremental snapshot's reads are at a stream position."""
    return (op == "r") & order.endswith(_NO_LSN)


def change_folder(file: Column) -> Column:
    """The folder of a change file: one Kafka partition's, in which a key's changes all are
    (:func:`cdclake_merge.storage.folder_of` of one path)."""
    return F.regexp_replace(file, "/[^/]*$", "")


def snapshot_starts(parsed: DataFrame) -> DataFrame:
    """Each snapshot the lines hold reads of, per change folder: its position (``lsn``) and
    where its first read there is (``first``: ``file``, ``_split``, ``_row``, whose order
    within a folder is the stream's). One row a snapshot and folder."""
    events = parsed.where(F.col("kind") == "event")
    reads = events.where(snapshot_read(F.col("op"), F.col("order")))
    first = F.min(F.struct("file", SPLIT, ROW)).alias("first")
    return reads.groupBy(change_folder(F.col("file")).alias("folder"), "lsn").agg(first)


def place_after_snapshots(
    parsed: DataFrame,
    starts: Sequence[tuple[int, tuple[str, int, int]]],
    earlier: Sequence[tuple[int, str]],
) -> DataFrame:
    """Changes of unknown commit ordered after the snapshot read before them.

    Debezium streams after a snapshot from the snapshot's position, so the first transaction
    it streams then committed after the snapshot began; it names no commit
    (:data:`~cdclake_merge.debezium.UNKNOWN_COMMIT`), and a change of it may precede the
    snapshot's position (a transaction open when the snapshot began: not in its reads). Its
    commit becomes the position of the latest snapshot read before it in its change folder
    (``starts``: this run's, :func:`snapshot_starts`' rows; ``earlier``: (position, file of
    its first read) of snapshots earlier runs read, for lines in a later file), or its own
    LSN when that is later or no such snapshot is known: after that snapshot's reads
    (ordered (position, 0)), before the next transaction, whose commit is past its commit.
    Nothing else moves: a line before the snapshot in the stream, written again or replayed
    from the quarantine, keeps its place.
    """
    at, file = F.struct("file", SPLIT, ROW), F.col("file")
    folder = change_folder(file)
    after: list[Column] = []
    for lsn, (first_file, split, row) in starts:
        first = F.struct(
            F.lit(first_file).alias("file"),
            F.lit(split).cast("bigint").alias(SPLIT),
            F.lit(row).cast("bigint").alias(ROW),
        )
        read_before = (folder == F.lit(folder_of(first_file))) & (at > first)
        after.append(F.when(read_before, F.lit(lsn).cast("bigint")))
    for lsn, first_file in earlier:
        read_before = (folder == F.lit(folder_of(first_file))) & (file > F.lit(first_file))
        after.append(F.when(read_before, F.lit(lsn).cast("bigint")))
    own = F.col("lsn")
    commit = F.greatest(own, *after) if after else own  # greatest skips nulls
    order = F.concat(F.lpad(commit.cast("string"), 20, "0"), F.substring("order", 21, 20))
    unknown = (F.col("kind") == "event") & F.col("order").startswith(_NO_LSN)
    return parsed.withColumn("order", F.when(unknown, order).otherwise(F.col("order")))


def snapshot_horizon(order: str) -> str:
    """The horizon of a snapshot whose reads are at ``order`` (position, 0): the greatest
    order below it, so a truncate there removes every row older than the snapshot and keeps
    its reads and what is placed after them (:func:`place_after_snapshots`)."""
    commit, within = int(order[:20]), int(order[20:])
    if within != 0:
        raise ValueError(f"order {order} is not a snapshot read's (position, 0)")
    return order_key(commit - 1, 10**20 - 1)


def decoded_lines(classified: DataFrame) -> DataFrame:
    """The lines :func:`~cdclake_merge.jvm_parse.classify_lines` decided, as ``PARSED_DDL``
    (unnumbered: none is quarantined, no ``row_json``) and their plans' image columns."""
    fast = F.col("fast")
    images = [c for c in classified.columns if c.startswith(IMAGE_PREFIX)]
    return classified.where(fast["ok"]).select(
        fast["kind"].alias("kind"),
        "file",
        F.lit(None).cast("bigint").alias("line"),
        fast["op"].alias("op"),
        fast["order"].alias("order"),
        fast["lsn"].alias("lsn"),
        fast["source_ts_ms"].alias("source_ts_ms"),
        F.lit(None).cast("string").alias("row_json"),
        fast["toast"].alias("toast"),
        fast["reason"].alias("reason"),
        F.lit(None).cast("string").alias("raw"),
        fast["head"].alias("head"),
        SPLIT,
        ROW,
        *images,
    )


def undecided_lines(classified: DataFrame) -> DataFrame:
    """The lines left for :func:`parse_lines`, where they were read (``file``, ``_split``,
    ``_row``, ``text``)."""
    undecided = classified.where(~F.coalesce(F.col("fast")["ok"], F.lit(False)))
    return undecided.select("file", SPLIT, ROW, "text")


def parse_lines(
    lines: DataFrame, spec: TableSpec, offsets: Mapping[tuple[str, int], int]
) -> DataFrame:
    """Lines as read (``file``, ``_split``, ``_row``, ``text``) → parsed outcomes
    (``PARSED_DDL``), in Python.

    Each line is numbered within its file, as an editor shows it, from its split's
    ``offsets`` (:func:`cdclake_merge.job.line_offsets` of all the lines read, not only of
    these): numbered here, where the lines pass anyway, rather than joined with the offsets
    in Spark, which cost a small run a fifth of a second.

    Every line becomes an ``event``, a ``skip`` (with reason) or ``bad`` (with reason and
    the raw text, for the quarantine). Each Python worker also emits one ``schema`` row per
    partition listing the distinct column signatures and TOAST columns it saw, which the
    driver unifies into the table schema. ``head`` is null: no plan decoded these lines.
    """

    def parse_batches(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        text, long = pa.string(), pa.int64()
        arrow_schema = pa.schema(
            [
                ("kind", text),
                ("file", text),
                ("line", long),
                ("op", text),
                ("order", text),
                ("lsn", long),
                ("source_ts_ms", long),
                ("row_json", text),
                ("toast", pa.list_(text)),
                ("reason", text),
                ("raw", text),
                ("head", pa.int32()),
                (SPLIT, long),
                (ROW, long),
            ]
        )

        signatures: set[tuple[tuple[str, str], ...]] = set()
        toast_seen: set[str] = set()
        out: dict[str, list[Any]] = {name: [] for name in _PARSED_NAMES}
        for batch in batches:
            files = batch.column("file").to_pylist()
            splits = batch.column(SPLIT).to_pylist()
            rows = batch.column(ROW).to_pylist()
            texts = batch.column("text").to_pylist()
            for path, split, row_id, line in zip(files, splits, rows, texts, strict=True):
                outcome = parse_line(line or "", spec)
                change = outcome.change
                out["kind"].append(outcome.kind)
                out["file"].append(path)
                out["line"].append(row_id - offsets[(path, split)])
                out["reason"].append(outcome.reason)
                out["raw"].append(line if outcome.kind == "bad" else None)
                out["head"].append(None)
                out[SPLIT].append(split)
                out[ROW].append(row_id)
                if change is None:
                    for name in ("op", "order", "lsn", "source_ts_ms", "row_json", "toast"):
                        out[name].append(None)
                    continue
                signatures.add(change.columns)
                toast_seen.update(change.toast_columns)
                out["op"].append(change.op)
                out["order"].append(order_key(*change.order))
                out["lsn"].append(change.lsn)
                out["source_ts_ms"].append(change.source_ts_ms)
                out["row_json"].append(None if change.row is None else dumps(change.row))
                out["toast"].append(list(change.toast_columns))
                if len(out["kind"]) >= _OUTPUT_BATCH_ROWS:
                    yield pa.RecordBatch.from_pydict(out, schema=arrow_schema)
                    out = {name: [] for name in _PARSED_NAMES}
        if out["kind"]:
            yield pa.RecordBatch.from_pydict(out, schema=arrow_schema)
        if signatures or toast_seen:
            meta = {"signatures": [list(s) for s in signatures], "toast": sorted(toast_seen)}
            row: dict[str, list[Any]] = {name: [None] for name in _PARSED_NAMES}
            row["kind"] = ["schema"]
            row["row_json"] = [dumps(meta)]
            yield pa.RecordBatch.from_pydict(row, schema=arrow_schema)

    return lines.mapInArrow(parse_batches, PARSED_DDL)


def decode_events(parsed: DataFrame, columns: Sequence[ColumnDef]) -> DataFrame:
    """Parsed row/change events → typed columns plus the metadata columns.

    A column's raw value comes from the event's ``row_json`` (the Python parser's lines) or
    from its plan's image column (the JVM's, see :data:`IMAGE_PREFIX`), then is decoded to
    the column's type the same way for both. Columns absent from an event (added later, or
    dropped by then) are null. Truncates are excluded here (see :func:`drop_truncated`).
    """
    # image column -> its fields' types
    images = {
        f.name: {g.name: g.dataType for g in cast(StructType, f.dataType).fields}
        for f in parsed.schema.fields
        if f.name.startswith(IMAGE_PREFIX)
    }
    events = parsed.where((F.col("kind") == "event") & (F.col("op") != "t"))
    with_row = events.select(
        F.from_json("row_json", raw_ddl(columns)).alias("r"),
        *[F.col(f"`{image}`") for image in images],
        F.col("order").alias(ORDER),
        F.col("lsn").alias(LSN),
        F.col("op").alias(OP),
        F.timestamp_millis("source_ts_ms").alias(SOURCE_TS),
        F.coalesce("toast", F.array().cast("array<string>")).alias(TOAST),
    )
    raw = with_row.select(
        *[_raw_value(name, t, images).alias(f"_raw_{i}") for i, (name, t) in enumerate(columns)],
        *METADATA_COLUMNS,
        TOAST,
    )
    return raw.select(
        *[
            F.expr(decode_sql(name, t, f"_raw_{i}")).cast(t).alias(name)
            for i, (name, t) in enumerate(columns)
        ],
        *METADATA_COLUMNS,
        TOAST,
    )


def _raw_value(name: str, spark_type: str, images: Mapping[str, Mapping[str, DataType]]) -> Column:
    """Column ``name``'s raw value (``raw_type``) from whichever source the event has.

    An image's value is cast to the column's raw type as ``from_json`` would read its JSON
    text: a float held as a double takes its shortest decimal text (``1.1``, not
    ``1.100000023841858``), as the Python parser's rows do.
    """
    wanted = raw_type(spark_type)
    sources = []
    for image, fields in images.items():
        if name in fields:
            value = F.col(f"`{image}`")[name]
            if isinstance(fields[name], FloatType) and wanted != "float":
                value = value.cast("string")
            sources.append(value.cast(wanted))
    return F.coalesce(*sources, F.col(f"r.`{name}`")) if sources else F.col(f"r.`{name}`")


def drop_truncated(frame: DataFrame, truncated_before: str | None) -> DataFrame:
    """Rule: a truncate removes every row whose last change precedes it, across runs."""
    if truncated_before is None:
        return frame
    return frame.where(F.col(ORDER) > F.lit(truncated_before))


def fresh_events(events: DataFrame, state: DataFrame, key: Sequence[str]) -> DataFrame:
    """Rule: an event not newer than what the table holds for its key changes nothing.

    Covers redelivered duplicates (same order) and late older events, against live
    rows and tombstones of deleted keys alike.
    """
    held = state.select(*key, F.col(ORDER).alias("_held"))
    joined = events.join(held, list(key), "left")
    return joined.where(F.col("_held").isNull() | (F.col(ORDER) > F.col("_held"))).drop("_held")


def created_placeholders(events: DataFrame) -> DataFrame:
    """The columns a create carried the unavailable-value placeholder in, one row each.

    Only a key change's create carries one (a new tuple without its unchanged TOAST value),
    so most runs have none: :func:`fill_key_changes` needs only these columns, and none of
    its joins when there are none.
    """
    return (
        events.where((F.col(OP) == "c") & (F.size(TOAST) > 0))
        .select(F.explode(TOAST).alias("column"))
        .distinct()
    )


def fill_key_changes(
    events: DataFrame, state: DataFrame, key: Sequence[str], toast: Sequence[str]
) -> DataFrame:
    """Rule: a key change's create takes a placeholder column from the old key.

    PostgreSQL logs an ``UPDATE`` of the key as one WAL record, and its new tuple omits an
    unchanged out-of-line TOAST value; Debezium emits it as a delete of the old key and a
    create of the new one at that one position (same ``source.lsn`` and ``sequence``), so a
    create whose ``_cdc_order`` is a delete's of another key is that key moved. Its
    placeholder column takes the old key's previous value, as the same key's change would:
    the newest real value before it in the run, else the old key's stored row. Unresolved
    there, the placeholder stays for :func:`fill_toast` (null, counted). Both events must be
    in the run: Kafka partitions by key, so a run that holds one without the other cannot
    pair them.
    """
    if not toast:
        return events
    old = [f"_old_{j}" for j in range(len(key))]
    as_old = [F.col(name).alias(alias) for name, alias in zip(key, old, strict=True)]
    moves = (
        events.where(F.col(OP) == "d")
        .select(F.col(ORDER).alias("_moved_at"), *as_old)
        .dropDuplicates()
    )
    # the old key's delete before the move ends an earlier life: its values and stored row
    # are not the moved row's
    ended = (
        moves.join(moves.select(*old, F.col("_moved_at").alias("_del_at")), old)
        .where(F.col("_del_at") < F.col("_moved_at"))
        .groupBy("_moved_at", *old)
        .agg(F.max("_del_at").alias("_since"))
    )
    moves = moves.join(ended, ["_moved_at", *old], "left")
    earlier = events.where(F.col(OP) != "d").select(
        *as_old, F.col(ORDER).alias("_at"), TOAST, *toast
    )
    from_run = (
        moves.join(earlier, old)
        .where(
            (F.col("_at") < F.col("_moved_at"))
            & (F.col("_since").isNull() | (F.col("_at") > F.col("_since")))
        )
        .groupBy("_moved_at", *old)
        .agg(
            *[
                F.max(
                    F.when(
                        ~F.array_contains(TOAST, name),
                        F.struct(F.col("_at").alias("o"), F.col(name).alias("v")),
                    )
                ).alias(f"_run_{i}")
                for i, name in enumerate(toast)
            ]
        )
    )
    stored = state.where(~F.col(DELETED)).select(
        *as_old, *[F.col(name).alias(f"_stored_{i}") for i, name in enumerate(toast)]
    )
    stored = stored.join(moves.where(F.col("_since").isNull()).select(*old, "_moved_at"), old)
    previous = moves.join(from_run, ["_moved_at", *old], "left").join(
        stored, ["_moved_at", *old], "left"
    )
    previous = previous.select(
        "_moved_at",
        *[
            F.when(F.col(f"_run_{i}").isNotNull(), F.col(f"_run_{i}.v"))
            .otherwise(F.col(f"_stored_{i}"))
            .alias(f"_moved_{i}")
            for i in range(len(toast))
        ],
        *[
            (F.col(f"_run_{i}").isNotNull() | F.col(f"_stored_{i}").isNotNull()).alias(
                f"_found_{i}"
            )
            for i in range(len(toast))
        ],
    )
    creates = events.where(F.col(OP) == "c").join(
        previous, F.col(ORDER) == F.col("_moved_at"), "inner"
    )
    filled = {
        name: F.array_contains(TOAST, name) & F.col(f"_found_{i}") for i, name in enumerate(toast)
    }
    value = {
        name: F.when(filled[name], F.col(f"_moved_{i}")).otherwise(F.col(name))
        for i, name in enumerate(toast)
    }
    value[TOAST] = F.array_except(
        TOAST, F.array(*[F.when(found, F.lit(name)) for name, found in filled.items()])
    )
    moved = creates.select(*[value.get(c, F.col(c)).alias(c) for c in events.columns])
    rest = events.join(
        previous.select("_moved_at"),
        (F.col(ORDER) == F.col("_moved_at")) & (F.col(OP) == "c"),
        "left_anti",
    )
    return rest.unionByName(moved)


def latest_per_key(
    events: DataFrame, key: Sequence[str], columns: Sequence[ColumnDef], toast: Sequence[str]
) -> DataFrame:
    """Rule: per key, the change with the highest (commit LSN, LSN) wins; never ``ts_ms``.

    One aggregation (``max`` over a struct led by the order) instead of a window:
    rows leave it folded, with no ranking column to filter afterwards. Ties are
    identical redeliveries; the full struct makes the pick deterministic anyway.
    ``_events`` counts the changes folded into each key. For each TOAST-able column
    the newest real value in the run is kept alongside, for :func:`fill_toast`.
    """
    value_columns = [name for name, _ in columns if name not in key]
    last = F.max(F.struct(ORDER, OP, LSN, SOURCE_TS, TOAST, *value_columns)).alias("_last")
    fills = [
        F.max(
            F.when(
                (F.col(OP) != "d") & ~F.array_contains(TOAST, name),
                F.struct(F.col(ORDER).alias("o"), F.col(name).alias("v")),
            )
        ).alias(f"_fill_{i}")
        for i, name in enumerate(toast)
    ]
    gone = F.max(F.when(F.col(OP) == "d", F.col(ORDER))).alias("_gone")
    folded = events.groupBy(*key).agg(last, F.count(F.lit(1)).alias("_events"), gone, *fills)
    return folded.select(
        *key,
        *[
            F.col(f"_last.{name}").alias(name)
            for name in (*value_columns, *METADATA_COLUMNS, TOAST)
        ],
        "_events",
        "_gone",
        *[f"_fill_{i}" for i in range(len(toast))],
    )


def fill_toast(
    latest: DataFrame, state: DataFrame, key: Sequence[str], toast: Sequence[str]
) -> DataFrame:
    """Rule: a column carrying ``__debezium_unavailable_value`` keeps its previous value.

    The previous value is the newest real value earlier in this run, else the
    table's current value. Where neither exists the column is null and the row is
    flagged in ``_cdc_toast`` for the run's counts.
    """
    if not toast:
        return latest.withColumn(TOAST, F.array().cast("array<string>")).drop("_gone")
    previous = state.where(~F.col(DELETED)).select(
        *key, *[F.col(name).alias(f"_prev_{i}") for i, name in enumerate(toast)]
    )
    joined = latest.join(previous, list(key), "left")
    unresolved: list[Column] = []
    # a delete in the run ends the key's earlier life: neither its values before the delete
    # nor the stored row are the previous value of a later create's placeholder
    gone = F.col("_gone")
    for i, name in enumerate(toast):
        placeholder = F.array_contains(TOAST, name)
        fill = F.col(f"_fill_{i}")
        from_run = fill.isNotNull() & (gone.isNull() | (fill["o"] > gone))
        stored = F.when(gone.isNull(), F.col(f"_prev_{i}"))
        value = F.when(placeholder, F.when(from_run, fill["v"]).otherwise(stored)).otherwise(
            F.col(name)
        )
        joined = joined.withColumn(name, value)
        unresolved.append(F.when(placeholder & ~from_run & stored.isNull(), F.lit(name)))
    drop = ["_gone"] + [f"_fill_{i}" for i in range(len(toast))]
    drop += [f"_prev_{i}" for i in range(len(toast))]
    return joined.withColumn(TOAST, F.filter(F.array(*unresolved), lambda c: c.isNotNull())).drop(
        *drop
    )


def changed_rows(latest: DataFrame, key: Sequence[str], columns: Sequence[ColumnDef]) -> DataFrame:
    """Rules: ``c``/``u``/``r`` upsert the row; ``d`` deletes the key (kept as a tombstone).

    The result has the state layout: every column, the metadata columns and
    ``_cdc_deleted``. Tombstones keep only the key and the order, so a late older
    change can never bring a deleted row back.
    """
    is_delete = F.col(OP) == "d"
    return latest.select(
        *[
            name
            if name in key
            else F.when(is_delete, F.lit(None)).otherwise(F.col(name)).alias(name)
            for name, _ in columns
        ],
        *METADATA_COLUMNS,
        is_delete.alias(DELETED),
    )


def truncated_rows(
    state: DataFrame, changed: DataFrame, key: Sequence[str], truncated_before: str | None
) -> DataFrame:
    """Live rows a truncate removes, as deletions, for sinks that store only changes."""
    if truncated_before is None:
        return changed.limit(0)
    removed = state.where(~F.col(DELETED) & (F.col(ORDER) <= F.lit(truncated_before)))
    removed = removed.join(changed.select(*key), list(key), "left_anti")
    return removed.select(*changed.columns).withColumn(DELETED, F.lit(True))


def align(frame: DataFrame, columns: Sequence[ColumnDef], extra: Sequence[str] = ()) -> DataFrame:
    """Cast/extend a stored table to the run's unified columns (added columns are null)."""
    present = set(frame.columns)
    return frame.select(
        *[
            (F.col(f"`{name}`") if name in present else F.lit(None)).cast(t).alias(name)
            for name, t in columns
        ],
        *[F.col(name) for name in extra if name in present],
    )


def empty_state(spark: Any, columns: Sequence[ColumnDef]) -> DataFrame:
    """The state before the first commit.

    ``limit(0)`` lets the optimizer see that it is empty (an empty local relation),
    so the first run's joins against it are planned away instead of shuffled.
    """
    ddl = ", ".join(f"`{n}` {t}" for n, t in columns)
    meta = f"{METADATA_DDL}, `{DELETED}` boolean"
    return spark.createDataFrame([], f"{ddl}, {meta}").limit(0)


def reason_kind(reason: Column) -> Column:
    """A reason without its particulars: the part before the first ``:``.

    ``column 'amount': expected a number, got 'x'`` is of kind ``column 'amount'``: one a
    column, not one a value, so that counting reasons stays small whatever the data holds.
    """
    return F.substring_index(reason, ":", 1)


def run_summary(parsed: DataFrame, *, by_reason: bool = True) -> DataFrame:
    """What the driver needs before folding, in one small aggregation (one Spark action).

    One row per outcome: events by op, skips and quarantined lines by reason kind
    (:func:`reason_kind`; the quarantine keeps each line's full reason), with ``count``;
    ``by_reason=False`` counts skips and bad lines under :data:`MANY_REASONS` instead.
    The ``t`` row's ``order`` is the newest truncate of the run, the ``r`` row's
    ``snapshot_end`` the newest end of a snapshot (:data:`~cdclake_merge.debezium.SNAPSHOT_END`);
    event rows' ``source_ts_ms`` is their newest source commit time (lake freshness),
    ``unknown`` how many name no commit (:func:`place_after_snapshots`) and the ``r`` rows'
    ``snapshot_lsn`` the newest snapshot position their reads are at; the
    ``schema`` row's ``meta`` lists every worker's column signatures and TOAST columns. Events
    the JVM decoded are counted per ``head`` (their plan knows their columns), with the
    TOAST columns they carried in ``toast``.
    """
    is_schema = F.col("kind") == "schema"
    is_event = F.col("kind") == "event"
    read = snapshot_read(F.col("op"), F.col("order"))
    reason = reason_kind(F.col("reason")) if by_reason else F.lit(MANY_REASONS)
    return parsed.groupBy(
        "kind",
        F.when(F.col("kind") == "event", F.col("op")).alias("op"),
        F.when(F.col("kind").isin("skip", "bad"), reason).alias("reason"),
        "head",
    ).agg(
        F.count(F.lit(1)).alias("count"),
        F.max("order").alias("order"),
        F.max(F.when(F.col("reason") == SNAPSHOT_END, F.col("order"))).alias("snapshot_end"),
        F.max("source_ts_ms").alias("source_ts_ms"),
        F.count(F.when(is_event & F.col("order").startswith(_NO_LSN), 1)).alias("unknown"),
        F.max(F.when(is_event & read, F.col("lsn"))).alias("snapshot_lsn"),
        F.collect_list(F.when(is_schema, F.col("row_json"))).alias("meta"),
        F.array_distinct(
            F.flatten(F.collect_set(F.when(F.size("toast") > 0, F.col("toast"))))
        ).alias("toast"),
    )
