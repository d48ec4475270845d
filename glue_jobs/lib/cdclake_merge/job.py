"""One merge run: new change files in, one atomic commit out (or nothing at all).

Shared by the ``cdclake merge`` CLI and the Glue entry script; they differ only
in how the SparkSession and the filesystem are made. :func:`run_merge` reads as
its stages: read and count, bad-fraction gate, schema, fold, commit, recovery points.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.debezium import SNAPSHOT_END, TableSpec
from cdclake_merge.generations import kept_columns
from cdclake_merge.history import Truncate, history_rows
from cdclake_merge.jvm_parse import HeadPlan, classify_lines, heads_in, plan_heads
from cdclake_merge.positions import FolderPosition, Scan, advance, cut, scan
from cdclake_merge.schema import Column, NeedsRebuild, SchemaChangeError, unify
from cdclake_merge.sink import Changes, Sink, TableState
from cdclake_merge.storage import FileSystem, folder_of, join
from cdclake_merge.transforms import (
    DELETED,
    METADATA_COLUMNS,
    ROW,
    SPLIT,
    TOAST,
    align,
    changed_rows,
    created_placeholders,
    decode_events,
    decoded_lines,
    drop_truncated,
    empty_state,
    fill_key_changes,
    fill_toast,
    fresh_events,
    latest_per_key,
    parse_lines,
    place_after_snapshots,
    run_summary,
    snapshot_horizon,
    snapshot_starts,
    truncated_rows,
    undecided_lines,
)

DEFAULT_MAX_BAD_FRACTION = 0.01
KEPT_SNAPSHOTS = 16  # per table, for the changes of unknown commit of later runs
HEAD_SAMPLE_FILES = 16  # change files whose start is read to find the run's schemas
HEAD_SAMPLE_BYTES = 256 * 1024
MAX_SUMMARY_ROWS = 10_000  # rows of the run's summary collected to the driver, at most
MAX_EXAMPLE_CHARS = 500  # of the bad line an error names as an example
# Deleted keys are remembered this long after the run that saw the delete. Topics keep
# records 7 days, and Kafka deletes a segment only once its newest record is that old (a
# segment rolls at the latest after 7 days), so no redelivery is older than 14 days.
DEFAULT_TOMBSTONE_RETENTION_DAYS = 14.0


class MergeError(RuntimeError):
    """A run that stopped before committing; the message is the one-line reason."""


class TooManyBadRecords(MergeError):
    pass


class TableNeedsRebuild(MergeError):
    """A stored column changed type in a way the table cannot take in place: nothing is
    written and the change files wait for the rebuild (``change`` says which column, from
    which type to which)."""

    def __init__(self, change: NeedsRebuild) -> None:
        self.change = change
        super().__init__(str(change))


@dataclass(frozen=True)
class MergeOptions:
    table: str
    key: tuple[str, ...]
    changes: str
    column_types: dict[str, str] = field(default_factory=dict)
    exclude_columns: frozenset[str] = frozenset()
    max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION
    tombstone_retention_days: float = DEFAULT_TOMBSTONE_RETENTION_DAYS
    # A run applies at most this many change files / bytes of them, and leaves the rest
    # to the next run (None: no cap). Keeps a backlog's run within the job's timeout.
    max_files: int | None = None
    max_bytes: int | None = None
    # Where a table with no commit yet starts reading its change folders (None: from their
    # start): a rebuild's generation reads nothing older than its snapshot's signal.
    start_positions: Mapping[str, FolderPosition] | None = None
    # The columns a table with no stored column yet starts from, each taking the type its
    # events carry where they carry it: a rebuild keeping the live generation's columns.
    start_columns: tuple[Column, ...] | None = None

    @property
    def spec(self) -> TableSpec:
        return TableSpec(self.key, dict(self.column_types), frozenset(self.exclude_columns))


@dataclass
class RunResult:
    table: str
    version: int
    files_applied: int = 0
    files_pending: int = 0  # left for the next run by the per-run cap
    lines: int = 0
    events_read: int = 0
    applied: int = 0
    upserts: int = 0
    deletes: int = 0
    truncates: int = 0
    stale_skipped: int = 0
    skipped: int = 0
    quarantined: int = 0
    toast_unresolved: int = 0
    skipped_reasons: dict[str, int] = field(default_factory=dict)
    quarantine_reasons: dict[str, int] = field(default_factory=dict)
    committed: bool = False
    catalog_synced: bool = False  # a run without new files registered the last commit
    # Newest source commit time (ms) of any event applied so far, this run or before:
    # carried in the checkpoint so that a run without new changes still measures lag.
    newest_source_ts_ms: int | None = None
    savepoint_created: str | None = None  # the day's savepoint, made after the commit
    savepoints_deleted: list[str] = field(default_factory=list)  # past lake.savepoint_days

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def relative(root: str, path: str) -> str:
    root_norm = root.rstrip("/")
    for prefix in (root_norm, "file:" + root_norm, "file://" + root_norm):
        if path.startswith(prefix + "/"):
            return path[len(prefix) + 1 :]
    return path


def scan_changes(fs: FileSystem, changes: str, previous: TableState) -> Scan:
    """The change files under ``changes`` that the table's last commit has not applied.

    Listed from the commit's positions (see :mod:`cdclake_merge.positions`); none is opened.
    """
    return scan(fs, changes, previous.positions, previous.legacy_applied)


def read_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """The change files' lines as (``file``, ``_split``, ``_row``, ``text``), in few partitions.

    Lines end at ``\\n`` only (``\\r`` stays on its line; parsing strips it), and a final
    newline ends the last line. Read as lines, not as whole files split afterwards: splitting
    a whole file decodes it to Java's UTF-16 and back, which took a third of a first load's
    read. ``_split`` and ``_row`` (the line's split and a row id counted in the scan's order)
    are what :func:`~cdclake_merge.transforms.parse_lines` numbers the lines from; nothing may
    filter the lines before the row id is taken.

    Spark checks more than 32 explicit paths with a listing job of up to 10,000 tasks, and
    packs small files about 30 to a partition. With 10,000 small files (a backlog, a quiet
    table) both cost far more than the data: the listing job is capped at two tasks per core
    and the partitions are coalesced to four per core.
    """
    cores = max(spark.sparkContext.defaultParallelism, 1)
    setting = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    before = spark.conf.get(setting, None)
    spark.conf.set(setting, str(2 * cores))
    try:  # the paths are listed here, when the reader resolves them
        frame = spark.read.text(paths, lineSep="\n")
    finally:
        if before is None:
            spark.conf.unset(setting)
        else:
            spark.conf.set(setting, before)
    located = frame.select(
        F.input_file_name().alias("file"),
        F.col("_metadata.file_block_start").alias(SPLIT),
        F.col("value").alias("text"),
    ).coalesce(4 * cores)
    return located.select("file", SPLIT, F.monotonically_increasing_id().alias(ROW), "text")


def line_offsets(lines: DataFrame) -> dict[tuple[str, int], int]:
    """Lines as read (``file``, ``_split``, ``_row``) → (``file``, ``_split``) → what a line's
    row id less its number in its file is, for each split.

    A line read carries its split's start in the file and a row id that grows by one a line
    within the split (see :func:`read_lines`), so its number is its place in its split plus
    the lines of the file's earlier splits. One row a split reaches the driver: bounded by the
    files, not by their lines.
    """
    sizes = lines.groupBy("file", SPLIT).agg(
        F.min(ROW).alias("_first"), F.count(F.lit(1)).alias("_lines")
    )
    offsets, before, file = {}, 0, None
    for row in sorted(sizes.collect(), key=lambda r: (r["file"], r[SPLIT])):
        if row["file"] != file:
            before, file = 0, row["file"]
        offsets[(row["file"], row[SPLIT])] = row["_first"] - before - 1
        before += row["_lines"]
    return offsets


def _ordered_signatures(
    summary: list[Any], plans: Sequence[HeadPlan]
) -> tuple[list[list[Column]], list[str]]:
    """The column signatures and TOAST columns of the run's events, in a stable order.

    Lines the Python parser decoded report theirs in its ``schema`` rows; lines the JVM
    decoded have those of their head's plan (the ``before`` image for deletes).
    """
    signatures: set[tuple[Column, ...]] = set()
    toast: set[str] = set()
    for row in summary:
        if row["kind"] == "schema":
            for text in row["meta"]:
                meta = json.loads(text)
                signatures.update(tuple((n, t) for n, t in sig) for sig in meta["signatures"])
                toast.update(meta["toast"])
        elif row["kind"] == "event" and row["head"] is not None and row["op"] != "t":
            signatures.add(plans[row["head"]].signature(row["op"]))
            toast.update(row["toast"] or ())
    ordered = sorted(signatures, key=lambda s: (-len(s), json.dumps(s)))
    return [list(s) for s in ordered], sorted(toast)


def run_merge(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    sink: Sink,
    options: MergeOptions,
    *,
    progress: Callable[[str], None] = lambda stage: None,
) -> RunResult:
    """Apply the change files no commit has applied yet, as one commit (or none at all)."""
    previous = sink.load()
    if previous.version == 0 and options.start_positions is not None:
        previous = replace(previous, positions=dict(options.start_positions))
    listed = scan_changes(fs, options.changes, previous)
    # An old checkpoint's names are converted by the run that lists them: that run takes all.
    share = (
        cut(listed.pending)
        if previous.legacy_applied is not None
        else cut(listed.pending, options.max_files, options.max_bytes)
    )
    new_files = [f.path for f in share.applied]
    result = RunResult(
        table=options.table,
        version=previous.version,
        newest_source_ts_ms=previous.checkpoint.get("run", {}).get("newest_source_ts_ms"),
    )
    if not new_files:
        if previous.catalog_unsynced:  # the last run committed, its catalog sync failed
            sink.register(spark_factory(), previous)
            result.catalog_synced = True
        return result
    spark = spark_factory()
    result.files_applied, result.files_pending = len(new_files), len(share.left)

    progress("read")
    plans = plan_files(fs, new_files, options.spec)
    classified = classify_lines(read_lines(spark, new_files), plans).persist()
    cached = [classified]  # released however the run ends: long-lived sessions must not pile up
    try:
        parsed = parse_undecided(classified, options.spec, cached)
        summary = read_and_count(parsed, result)
        gate_bad_fraction(parsed, result, options, sink, previous)
        starts = snapshots_read(parsed, summary)
        parsed, summary = place_after_snapshots_read(parsed, summary, starts, previous)

        progress("fold")
        columns, toast = table_schema(summary, previous, options, plans)
        truncated_before = truncation_horizon(summary, previous)
        rows = history = None
        if columns:
            latest, rows, history = fold(
                spark, sink, previous, parsed, columns, toast, truncated_before, options.key, cached
            )
            cached.append(latest)
            count_folded(latest, result)
        result.stale_skipped = result.events_read - result.truncates - result.applied

        progress("write")
        changes = Changes(
            columns=tuple(columns),
            key=options.key,
            truncated_before=truncated_before,
            snapshots=recorded_snapshots(previous.snapshots, starts),
            positions=advance(
                previous.positions, share.applied, listed.parents, previous.legacy_applied
            ),
            rows=rows,
            truncated=truncated_before != previous.truncated_before,
            quarantine=_quarantine(parsed) if result.quarantined else None,
            run={k: v for k, v in result.as_dict().items() if k not in ("version", "committed")},
            tombstones_before=tombstone_cutoff(options.tombstone_retention_days),
            into_empty=not previous.exists,
        )
        if history is not None and (result.applied or changes.truncated):
            # Before the table's commit: a run killed between the two leaves the table where
            # it was, and the next run folds the same changes into the same history rows,
            # upserted by key and order over what this one wrote (docs/lake.md "History").
            sink.write_history(spark, previous, changes.columns, history)
        staged = sink.stage(spark, previous, changes)
        committed = sink.commit(spark, staged)
    finally:
        for frame in cached:
            frame.unpersist()
    result.version = committed.version
    result.committed = True

    progress("services")
    keep_recovery_points(spark, sink, result)
    return result


def keep_recovery_points(spark: SparkSession, sink: Sink, result: RunResult) -> None:
    """Stage 6: the day's savepoint and the expiry of old ones, after the commit (a failure
    here leaves the commit in force; the next run that commits tries again)."""
    kept = sink.keep_recovery_points(spark)
    result.savepoint_created, result.savepoints_deleted = kept.created, kept.deleted


def tombstone_cutoff(retention_days: float) -> str:
    """Tombstones written before this time (ISO, UTC) are dropped by this run's commit."""
    return (dt.datetime.now(dt.UTC) - dt.timedelta(days=retention_days)).isoformat()


def plan_files(fs: FileSystem, paths: Sequence[str], spec: TableSpec) -> list[HeadPlan]:
    """Stage 1a: JVM decoding plans for the schemas the run's change files start with.

    The start of a few files spread over the run (the S3 sink writes in offset order, so
    schema versions follow one another) is read on the driver; lines whose schema none of
    them shows are parsed in Python, which is slower, never different.
    """
    step = max(len(paths) / HEAD_SAMPLE_FILES, 1.0)
    last = len(paths) - 1
    sample = {min(int(i * step), last) for i in range(HEAD_SAMPLE_FILES)} | {last}
    found: Counter[str] = Counter()
    for index in sorted(sample):
        found.update(heads_in(fs.read_prefix(paths[index], HEAD_SAMPLE_BYTES)))
    return plan_heads([head for head, _ in found.most_common()], spec)


def parse_undecided(classified: DataFrame, spec: TableSpec, cached: list[DataFrame]) -> DataFrame:
    """Stage 1b: every line's outcome; the lines the JVM did not decide are parsed in Python.

    Counting them reads the files once, into the cache; without any, no Python worker starts
    and no line is numbered. Those parsed in Python are numbered within their files (they may
    be quarantined) from the lines of each split, counted over all the lines read.
    """
    decoded, undecided = decoded_lines(classified), undecided_lines(classified)
    if not undecided.count():
        return decoded
    offsets = line_offsets(classified)
    python = parse_lines(undecided, spec, offsets)
    parsed = decoded.unionByName(python, allowMissingColumns=True).persist()
    cached.append(parsed)
    return parsed


def read_and_count(
    parsed: DataFrame, result: RunResult, max_rows: int = MAX_SUMMARY_ROWS
) -> list[Any]:
    """Stage 1: one aggregation over the parsed lines; every line is counted once.

    What reaches the driver is bounded, whatever the lines: skips and bad lines are counted
    by reason kind, and should the kinds themselves be too many (kinds that name a value,
    an unknown op), they are counted as one, at the cost of a second aggregation.
    """
    summary = summarize(parsed, max_rows)
    _count(result, summary)
    return summary


def summarize(parsed: DataFrame, max_rows: int = MAX_SUMMARY_ROWS) -> list[Any]:
    """:func:`~cdclake_merge.transforms.run_summary`'s rows, at most ``max_rows``."""
    summary = run_summary(parsed).limit(max_rows + 1).collect()
    if len(summary) > max_rows:
        summary = run_summary(parsed, by_reason=False).collect()
    return summary


def snapshots_read(parsed: DataFrame, summary: list[Any]) -> list[tuple[int, tuple[str, int, int]]]:
    """Stage 2b: where each snapshot the run read starts, per change folder
    (:func:`transforms.snapshot_starts`); one aggregation, in a run with snapshot reads only."""
    if all(row["snapshot_lsn"] is None for row in summary):
        return []
    return [(row["lsn"], tuple(row["first"])) for row in snapshot_starts(parsed).collect()]


def place_after_snapshots_read(
    parsed: DataFrame,
    summary: list[Any],
    starts: list[tuple[int, tuple[str, int, int]]],
    previous: TableState,
) -> tuple[DataFrame, list[Any]]:
    """Stage 2c: the changes streamed with no commit (the first transaction after a snapshot)
    ordered after the snapshot read before them (:func:`transforms.place_after_snapshots`),
    and the summary of the lines so ordered: one aggregation, in a run with such changes only."""
    if not any(row["unknown"] for row in summary if row["kind"] == "event"):
        return parsed, summary
    placed = place_after_snapshots(parsed, starts, previous.snapshots)
    return placed, summarize(placed)


def recorded_snapshots(
    previous: Sequence[tuple[int, str]], starts: list[tuple[int, tuple[str, int, int]]]
) -> tuple[tuple[int, str], ...]:
    """The snapshots the checkpoint keeps for later runs' changes of unknown commit: position
    and first file, per folder, the :data:`KEPT_SNAPSHOTS` newest (a change of unknown commit
    follows its snapshot closely)."""
    firsts: dict[tuple[int, str], str] = {}
    for lsn, file in [*previous, *((lsn, first[0]) for lsn, first in starts)]:
        where = (lsn, folder_of(file))
        firsts[where] = min(file, firsts.get(where, file))
    kept = sorted(((lsn, file) for (lsn, _), file in firsts.items()), reverse=True)
    return tuple(sorted(kept[:KEPT_SNAPSHOTS]))


def gate_bad_fraction(
    parsed: DataFrame, result: RunResult, options: MergeOptions, sink: Sink, previous: TableState
) -> None:
    """Stage 2: above ``max_bad_fraction`` the run stops; its bad lines are kept, nothing else."""
    total = result.events_read + result.quarantined
    if not total or result.quarantined / total <= options.max_bad_fraction:
        return
    failed_at = join(sink.quarantine_root, f"failed-v{previous.version + 1:08d}")
    target = failed_at if "://" in failed_at else "file://" + failed_at
    _quarantine(parsed).coalesce(1).write.mode("overwrite").json(target)
    example = _quarantine(parsed).select("source_file", "line", "reason").first()
    where = f"; e.g. {example[0]} line {example[1]}: {example[2]}" if example else ""
    raise TooManyBadRecords(
        f"{result.quarantined} of {total} lines of {options.table} could not be applied "
        f"({result.quarantined / total:.2%} > max_bad_fraction {options.max_bad_fraction:.2%}); "
        f"nothing committed; the bad lines are in {failed_at}{where[:MAX_EXAMPLE_CHARS]}"
    )


def table_schema(
    summary: list[Any], previous: TableState, options: MergeOptions, plans: Sequence[HeadPlan]
) -> tuple[list[Column], list[str]]:
    """Stage 3: the table's columns after this run (stored ones first) and its TOAST columns."""
    signatures, toast = _ordered_signatures(summary, plans)
    try:
        columns = unify(options.table, previous.columns, *signatures)
    except NeedsRebuild as exc:
        raise TableNeedsRebuild(exc) from None
    except SchemaChangeError as exc:
        raise MergeError(str(exc)) from None
    if columns and options.start_columns and not previous.columns:
        columns = kept_columns(options.start_columns, columns)
    missing_key = [k for k in options.key if k not in dict(columns)]
    if columns and missing_key:
        raise MergeError(f"table {options.table}: key column(s) {missing_key} not in the data")
    return columns, toast


def truncation_horizon(summary: list[Any], previous: TableState) -> str | None:
    """Every row whose last change precedes the newest truncate seen so far is gone; so is
    every row older than the newest end of a snapshot and not read by it (a snapshot's reads
    share one order: the horizon is just before it)."""
    events = [row for row in summary if row["kind"] == "event"]
    run_truncate = max((row["order"] for row in events if row["op"] == "t"), default=None)
    ends = [snapshot_horizon(row["snapshot_end"]) for row in events if row["snapshot_end"]]
    return max(filter(None, (previous.truncated_before, run_truncate, *ends)), default=None)


def fold(
    spark: SparkSession,
    sink: Sink,
    previous: TableState,
    parsed: DataFrame,
    columns: Sequence[Column],
    toast: Sequence[str],
    truncated_before: str | None,
    key: Sequence[str],
    cached: list[DataFrame],
) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """Stage 4: per key, the newest change not older than the table's; the rows to write.

    Returns the folded changes (persisted, for counting), the rows the sink
    writes: upserts, deletes, and deletions of stored rows a new truncate removes; and
    where the table keeps its history, the run's history rows (None otherwise).
    """
    decoded = drop_truncated(decode_events(parsed, columns), previous.truncated_before)
    events = drop_truncated(decoded, truncated_before)
    truncating = truncated_before != previous.truncated_before
    if truncating:  # a new truncate deletes stored rows of keys this run never names
        stored = sink.read_state(spark, previous)
    else:  # only the run's keys, and of their columns only those a TOAST fill needs (all
        # for the history: a delete's last image and a closed version are whole rows)
        wanted = None if sink.history else toast
        stored = sink.lookup_state(spark, previous, events.select(*key).distinct(), wanted)
    full_state = (
        align(stored, columns, [*METADATA_COLUMNS, DELETED])
        if stored is not None
        else empty_state(spark, columns)
    ).persist()
    # Read from the table once: the stale check, the key changes' and TOAST fills and the
    # history each join it, and every join would read the table again.
    cached.append(full_state)
    state = drop_truncated(full_state, truncated_before)
    # One small action spares the key changes' fill its joins in runs without a key change;
    # none at all in runs that carried no placeholder.
    moved = sorted(r["column"] for r in created_placeholders(decoded).collect()) if toast else []
    fresh = fill_key_changes(fresh_events(events, state, key), state, key, moved)
    latest = fill_toast(latest_per_key(fresh, key, columns, toast), state, key, toast).persist()
    changed = changed_rows(latest, key, columns)
    history = None
    if sink.history:
        truncates = run_truncates(parsed, previous.truncated_before) if truncating else []
        stored_state = drop_truncated(full_state, previous.truncated_before)
        filled = fill_key_changes(decoded, stored_state, key, moved)
        history = history_rows(filled, stored_state, key, columns, truncates)
    if not truncating:
        return latest, changed, history
    removed = truncated_rows(full_state, changed, key, truncated_before)
    return latest, changed.unionByName(removed), history


def run_truncates(parsed: DataFrame, horizon: str | None) -> list[Truncate]:
    """The run's truncates and ends of a snapshot (each a truncate just before it) after the
    table's horizon, for the history (both are rare: their few rows reach the driver)."""
    ends = F.col("reason") == SNAPSHOT_END
    truncates = parsed.where((F.col("kind") == "event") & ((F.col("op") == "t") | ends))
    found = truncates.select("order", "source_ts_ms", ends.alias("end")).distinct().collect()
    marks = [
        (snapshot_horizon(row["order"]) if row["end"] else row["order"], row["source_ts_ms"])
        for row in found
    ]
    return [mark for mark in marks if horizon is None or mark[0] > horizon]


def count_folded(latest: DataFrame, result: RunResult) -> None:
    for row in (
        latest.groupBy("_cdc_op", F.size(TOAST) > 0)
        .agg(F.count(F.lit(1)).alias("keys"), F.sum("_events").alias("events"))
        .collect()
    ):
        op, unresolved, keys, events_n = row[0], row[1], row["keys"], row["events"]
        result.applied += int(events_n)
        if op == "d":
            result.deletes += int(keys)
        else:
            result.upserts += int(keys)
        if unresolved:
            result.toast_unresolved += int(keys)


def _quarantine(parsed: DataFrame) -> DataFrame:
    return parsed.where(F.col("kind") == "bad").select(
        F.col("file").alias("source_file"), "line", "reason", "raw"
    )


def _count(result: RunResult, rows: list[Any]) -> None:
    for row in rows:
        kind, op, reason, count = row["kind"], row["op"], row["reason"], int(row["count"])
        if kind == "schema":  # the workers' signature rows, not lines
            continue
        result.lines += count
        if kind == "event":
            result.events_read += count
            if op == "t":
                result.truncates += count
            newest = row["source_ts_ms"]
            if newest is not None and (result.newest_source_ts_ms or 0) < newest:
                result.newest_source_ts_ms = int(newest)
        elif kind == "skip":
            result.skipped += count
            result.skipped_reasons[reason] = result.skipped_reasons.get(reason, 0) + count
        else:
            result.quarantined += count
            short = reason or "unknown"
            result.quarantine_reasons[short] = result.quarantine_reasons.get(short, 0) + count
