"""One merge run: new change files in, one atomic commit out (or nothing at all).

Shared by the ``cdclake merge`` CLI and the Glue entry script; they differ only
in how the SparkSession, the filesystem and the sink are made.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake_merge.debezium import TableSpec
from cdclake_merge.schema import Column, SchemaChangeError, unify
from cdclake_merge.snapshot_table import TableState
from cdclake_merge.storage import FileSystem, is_input, join
from cdclake_merge.transforms import (
    DELETED,
    METADATA_COLUMNS,
    TOAST,
    align,
    apply_changes,
    changed_rows,
    decode_events,
    drop_truncated,
    empty_state,
    fill_toast,
    fresh_events,
    latest_per_key,
    parse_files,
    run_summary,
    truncated_rows,
)

DEFAULT_MAX_BAD_FRACTION = 0.01
ABORT_ENV = "CDCLAKE_ABORT_AT"  # test hook: SIGKILL this process at a named stage
STAGES = ("read", "fold", "write", "commit", "committed")


class MergeError(RuntimeError):
    """A run that stopped before committing; the message is the one-line reason."""


class TooManyBadRecords(MergeError):
    pass


class Sink(Protocol):
    def load(self) -> TableState: ...
    def read_state(self, spark: SparkSession, state: TableState) -> DataFrame | None: ...
    def clean_uncommitted(self, state: TableState) -> None: ...
    def commit(
        self,
        spark: SparkSession,
        *,
        previous: TableState,
        new_state: DataFrame | None,
        columns: Sequence[Column],
        key: Sequence[str],
        truncated_before: str | None,
        applied_files: frozenset[str],
        quarantine: DataFrame | None,
        run: dict[str, Any],
        hook: Callable[[str], None] = ...,
        changes: DataFrame | None = None,
    ) -> TableState: ...

    @property
    def quarantine_root(self) -> str: ...


@dataclass(frozen=True)
class MergeOptions:
    table: str
    key: tuple[str, ...]
    changes: str
    column_types: dict[str, str] = field(default_factory=dict)
    exclude_columns: frozenset[str] = frozenset()
    max_bad_fraction: float = DEFAULT_MAX_BAD_FRACTION

    @property
    def spec(self) -> TableSpec:
        return TableSpec(self.key, dict(self.column_types), frozenset(self.exclude_columns))


@dataclass
class RunResult:
    table: str
    version: int
    files_applied: int = 0
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def abort_hook(stage: str) -> None:
    """Where a test asks for it, die here as a killed Glue worker would: no cleanup at all."""
    if os.environ.get(ABORT_ENV) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def relative(root: str, path: str) -> str:
    root_norm = root.rstrip("/")
    for prefix in (root_norm, "file:" + root_norm, "file://" + root_norm):
        if path.startswith(prefix + "/"):
            return path[len(prefix) + 1 :]
    return path


def pending_files(fs: FileSystem, changes: str, applied: frozenset[str]) -> list[str]:
    """Change files under ``changes`` that no commit has applied yet (none are opened)."""
    return [
        path
        for path in fs.list_files(changes)
        if is_input(path) and relative(changes, path) not in applied
    ]


def read_files(spark: SparkSession, paths: list[str]) -> DataFrame:
    """The change files as (``path``, whole-file ``value``) rows, in few partitions.

    Spark checks more than 32 explicit paths with a listing job of up to 10,000
    tasks, and packs small files about 30 to a partition. With 10,000 small files
    (a backlog, a quiet table) both cost far more than the data: the listing job is
    capped at two tasks per core and the files are coalesced to four partitions per
    core. Large files keep one partition each.
    """
    cores = max(spark.sparkContext.defaultParallelism, 1)
    setting = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    before = spark.conf.get(setting, None)
    spark.conf.set(setting, str(2 * cores))
    try:  # the paths are listed here, when the reader resolves them
        frame = spark.read.text(paths, wholetext=True)
    finally:
        if before is None:
            spark.conf.unset(setting)
        else:
            spark.conf.set(setting, before)
    return frame.select(F.input_file_name().alias("path"), "value").coalesce(4 * cores)


def _ordered_signatures(meta_rows: list[str]) -> tuple[list[list[Column]], list[str]]:
    signatures: set[tuple[Column, ...]] = set()
    toast: set[str] = set()
    for text in meta_rows:
        meta = json.loads(text)
        signatures.update(tuple((n, t) for n, t in sig) for sig in meta["signatures"])
        toast.update(meta["toast"])
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
    previous = sink.load()
    new_files = pending_files(fs, options.changes, previous.applied_files)
    result = RunResult(table=options.table, version=previous.version)
    if not new_files:
        return result
    spark = spark_factory()
    sink.clean_uncommitted(previous)
    result.files_applied = len(new_files)

    progress("read")
    parsed = parse_files(read_files(spark, new_files), options.spec).persist()
    cached = [parsed]  # released however the run ends: long-lived sessions must not pile them up
    try:
        summary = run_summary(parsed).collect()
        _count(result, summary)
        abort_hook("read")
        total = result.events_read + result.quarantined
        if total and result.quarantined / total > options.max_bad_fraction:
            failed_at = join(sink.quarantine_root, f"failed-v{previous.version + 1:08d}")
            _quarantine(parsed).coalesce(1).write.mode("overwrite").json(failed_at)
            raise TooManyBadRecords(
                f"{result.quarantined} of {total} lines of {options.table} could not be applied "
                f"({result.quarantined / total:.2%} > "
                f"max_bad_fraction {options.max_bad_fraction:.2%}); "
                f"nothing committed; the bad lines are in {failed_at}"
            )

        progress("fold")
        meta_rows = [text for row in summary if row["kind"] == "schema" for text in row["meta"]]
        signatures, toast = _ordered_signatures(meta_rows)
        try:
            columns = unify(options.table, previous.columns, *signatures)
        except SchemaChangeError as exc:
            raise MergeError(str(exc)) from None
        missing_key = [k for k in options.key if k not in dict(columns)]
        if columns and missing_key:
            raise MergeError(f"table {options.table}: key column(s) {missing_key} not in the data")

        run_truncate = max(
            (row["order"] for row in summary if row["kind"] == "event" and row["op"] == "t"),
            default=None,
        )
        truncated_before = max(
            filter(None, (previous.truncated_before, run_truncate)), default=None
        )

        new_state = changes = None
        if columns:
            stored = sink.read_state(spark, previous)
            full_state = (
                align(stored, columns, [*METADATA_COLUMNS, DELETED])
                if stored is not None
                else empty_state(spark, columns)
            )
            state = drop_truncated(full_state, truncated_before)
            events = drop_truncated(decode_events(parsed, columns), truncated_before)
            fresh = fresh_events(events, state, options.key)
            latest = latest_per_key(fresh, options.key, columns, toast)
            latest = fill_toast(latest, state, options.key, toast).persist()
            cached.append(latest)
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
            changed = changed_rows(latest, options.key, columns)
            new_state = apply_changes(state, changed, options.key)
            changes = changed.unionByName(
                truncated_rows(full_state, changed, options.key, truncated_before)
            )
            abort_hook("fold")
        result.stale_skipped = result.events_read - result.truncates - result.applied

        progress("write")
        applied = previous.applied_files | {relative(options.changes, p) for p in new_files}
        committed = sink.commit(
            spark,
            previous=previous,
            new_state=new_state,
            columns=columns,
            key=options.key,
            truncated_before=truncated_before,
            applied_files=frozenset(applied),
            quarantine=_quarantine(parsed) if result.quarantined else None,
            run={k: v for k, v in result.as_dict().items() if k not in ("version", "committed")},
            hook=abort_hook,
            changes=changes,
        )
    finally:
        for frame in cached:
            frame.unpersist()
    result.version = committed.version
    result.committed = True
    return result


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
        elif kind == "skip":
            result.skipped += count
            result.skipped_reasons[reason] = result.skipped_reasons.get(reason, 0) + count
        else:
            result.quarantined += count
            short = reason.split(":", 1)[0] if reason else "unknown"
            result.quarantine_reasons[short] = result.quarantine_reasons.get(short, 0) + count
