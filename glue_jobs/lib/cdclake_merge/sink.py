"""The sink contract: what a merge run needs from the table it writes, and how one is opened.

A run reads the table's :class:`TableState` (schema, truncation horizon, applied
input, version), folds the new changes, then hands them to the sink in two steps:
:meth:`Sink.stage` writes everything the commit will point to (quarantined lines,
tombstones, the checkpoint) and :meth:`Sink.commit` makes it all current in one
atomic step. A run killed between or during the two leaves the previous state in
force; the next run stages the same version again over what was left.

Sinks are found by table format in a registry: an implementation registers itself
(:func:`register_sink`) and imports this contract, never the other way round. There is one,
``hudi`` (:class:`~cdclake_merge.hudi.HudiTable`, Hudi 0.15 as on Glue 5.0), loaded by its
module name the first time it is opened; :func:`open_sink` is the one place both entry points
make a sink.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cdclake_merge.generations import read_generations
from cdclake_merge.pending import TablePaths
from cdclake_merge.positions import FolderPosition
from cdclake_merge.recovery import DEFAULT_RETAIN_HOURS, DEFAULT_SAVEPOINT_DAYS
from cdclake_merge.schema import Column

if TYPE_CHECKING:
    import datetime as dt

    from pyspark.sql import DataFrame, SparkSession

    from cdclake_merge.recovery import RecoveryChange
    from cdclake_merge.storage import FileSystem

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
TABLE_TYPES: tuple[TableType, ...] = ("COPY_ON_WRITE", "MERGE_ON_READ")


@dataclass(frozen=True)
class TableState:
    """What the last commit says: schema, truncation horizon, applied input.

    Applied input is a position per change folder (:mod:`cdclake_merge.positions`);
    ``legacy_applied`` holds the file names of a checkpoint written before positions,
    until the next commit converts them. ``version`` counts this table's commits and
    never goes down (it is stored in the checkpoint, not derived from a timeline that
    archives). ``layout`` is the order of the table's stored columns; columns added
    later go at its end. ``catalog_unsynced``: the newest commit is in the table but its
    catalog registration failed or was cut short; the next run registers it, even when it
    finds nothing new.
    """

    version: int = 0
    columns: tuple[Column, ...] = ()
    layout: tuple[str, ...] = ()
    truncated_before: str | None = None
    # The newest snapshots the table read (debezium.Change.snapshot_read): position and the
    # file of its first read, per change folder; where a change streamed with no commit
    # (transforms.place_after_snapshots) goes when its snapshot came in an earlier run.
    snapshots: tuple[tuple[int, str], ...] = ()
    positions: Mapping[str, FolderPosition] = field(default_factory=dict)
    legacy_applied: frozenset[str] | None = None
    tombstones: tuple[str, ...] = ()
    tombstone_written: Mapping[str, str] = field(default_factory=dict)  # set → ISO time
    exists: bool = False
    checkpoint: dict[str, Any] = field(default_factory=dict)
    catalog_unsynced: bool = False


@dataclass(frozen=True)
class Changes:
    """What one run hands the sink: folded rows and what to record with them."""

    columns: tuple[Column, ...]
    key: tuple[str, ...]
    truncated_before: str | None
    snapshots: tuple[tuple[int, str], ...]
    positions: Mapping[str, FolderPosition]
    rows: DataFrame | None  # state layout (columns, metadata, _cdc_deleted); None: no events
    truncated: bool  # this run moved the truncation horizon
    quarantine: DataFrame | None
    run: dict[str, Any]
    tombstones_before: str | None = None  # ISO time: tombstones written earlier are dropped
    # The table holds no row yet (its first commit with rows): nothing to look up or merge
    # with, so the sink may write the rows as they are (Hudi: bulk insert).
    into_empty: bool = False


@dataclass(frozen=True)
class Staged:
    """A commit written aside, not yet current."""

    version: int
    checkpoint_path: str
    changes: Changes


class Sink(Protocol):
    table: str  # DATABASE.TABLE
    history: bool  # the merge also writes every version of a row (cdclake_merge.history)
    root: str  # where the table's files are
    sidecar: str  # where the merge's checkpoints and tombstones are
    fs: FileSystem  # the filesystem of both
    quarantine_root: str

    def load(self, *, as_stored: bool = False) -> TableState: ...
    def read_live(self, spark: SparkSession, state: TableState) -> DataFrame | None: ...
    def read_state(self, spark: SparkSession, state: TableState) -> DataFrame | None: ...
    def lookup_state(
        self,
        spark: SparkSession,
        state: TableState,
        keys: DataFrame | None,
        columns: Sequence[str] | None,
    ) -> DataFrame | None: ...
    def stage(self, spark: SparkSession, previous: TableState, changes: Changes) -> Staged: ...
    def commit(self, spark: SparkSession, staged: Staged) -> TableState: ...
    def write_history(
        self,
        spark: SparkSession,
        previous: TableState,
        columns: Sequence[Column],
        rows: DataFrame,
    ) -> None: ...
    def register(self, spark: SparkSession, state: TableState) -> None: ...
    def take_over_catalog(self, spark: SparkSession, state: TableState) -> None: ...
    def register_history(self, spark: SparkSession) -> None: ...
    def newest_checkpoint(self) -> dict[str, Any] | None: ...
    def savepoints(self) -> list[str]: ...
    def keep_recovery_points(self, spark: SparkSession) -> RecoveryChange: ...
    def restore(self, spark: SparkSession, to: dt.datetime | None) -> TableState: ...


SinkFactory = Callable[..., Sink]
DEFAULT_FORMAT = "hudi"
# Where each built-in format registers itself: imported by name on first use.
BUILT_IN_FORMATS = {"hudi": "cdclake_merge.hudi"}
_REGISTRY: dict[str, SinkFactory] = {}


def register_sink(table_format: str, factory: SinkFactory) -> None:
    """Make ``factory`` (called with :func:`open_sink`'s keywords) the sink of a format."""
    _REGISTRY[table_format] = factory


def sink_factory(table_format: str = DEFAULT_FORMAT) -> SinkFactory:
    if table_format not in _REGISTRY and table_format in BUILT_IN_FORMATS:
        importlib.import_module(BUILT_IN_FORMATS[table_format])
    try:
        return _REGISTRY[table_format]
    except KeyError:
        known = sorted({*_REGISTRY, *BUILT_IN_FORMATS})
        raise ValueError(f"no sink for table format {table_format!r} (known: {known})") from None


def open_sink(
    *,
    warehouse: str,
    table: str,
    key: Sequence[str],
    fs: FileSystem,
    spark_factory: Any,
    partition_fields: Sequence[str] = (),
    table_type: str = "COPY_ON_WRITE",
    quarantine_root: str | None = None,
    sync_catalog: bool = True,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    savepoint_days: int = DEFAULT_SAVEPOINT_DAYS,
    record_index_file_groups: int | None = None,
    compaction_io_mb: int | None = None,
    clean_every_commits: int | None = None,
    generation: int = 1,
    history: int = 0,
) -> Sink:
    """The table ``DATABASE.TABLE`` under ``warehouse`` (``<warehouse>/<database>.db/<table>``).

    ``spark_factory`` is called only when Spark is needed, so a run with nothing
    to apply never starts a JVM; ``generation``: a rebuild's generation of the table
    (:mod:`cdclake_merge.generations`; 1: the table's own path); ``history``: 1 where the table
    keeps every version of its rows beside it (config's ``history``, an int as the other
    services are; none where ``sync_catalog`` is off: a rebuild's generation being built).
    Raises ValueError with a one-line reason.
    """
    if table_type not in TABLE_TYPES:
        raise ValueError(f"table type must be COPY_ON_WRITE or MERGE_ON_READ, got {table_type!r}")
    return sink_factory()(
        warehouse=warehouse,
        table=table,
        key=key,
        fs=fs,
        spark_factory=spark_factory,
        partition_fields=partition_fields,
        table_type=table_type,
        quarantine_root=quarantine_root,
        sync_catalog=sync_catalog,
        retain_hours=retain_hours,
        savepoint_days=savepoint_days,
        generation=generation,
        # Only commits of the table's own changes keep history: a generation being built from
        # a snapshot (no catalog sync) restates every row with its reads, which are not
        # changes of the rows; one built as a copy applies the live generation's changes.
        history=bool(history)
        and (sync_catalog or _copy_being_built(fs, warehouse, table, generation)),
        # None: the format's own defaults (the contract knows no index sizes or budgets)
        **{
            name: value
            for name, value in (
                ("record_index_file_groups", record_index_file_groups),
                ("compaction_io_mb", compaction_io_mb),
                ("clean_every_commits", clean_every_commits),
            )
            if value is not None
        },
    )


def _copy_being_built(fs: FileSystem, warehouse: str, table: str, generation: int) -> bool:
    """Whether ``generation`` of the table is a rebuild by copy in progress (one GET of the
    state object, for a generation being built only)."""
    if generation < 2:
        return False
    state = read_generations(fs, TablePaths.of(warehouse, table).sidecar)
    return state.copy and state.building == generation


def open_existing_sink(
    *, warehouse: str, table: str, fs: FileSystem, spark_factory: Any
) -> Sink | None:
    """An existing table's live generation opened with the key, type and partitioning it was
    created with.

    For read-only commands; None where the table has no commit yet.
    """
    home = sink_factory()(
        warehouse=warehouse, table=table, key=(), fs=fs, spark_factory=spark_factory
    )
    live = read_generations(fs, home.sidecar).live
    probe = sink_factory()(
        warehouse=warehouse,
        table=table,
        key=(),
        fs=fs,
        spark_factory=spark_factory,
        generation=live,
    )
    checkpoint = probe.newest_checkpoint()
    if checkpoint is None:
        return None
    return open_sink(
        warehouse=warehouse,
        table=table,
        key=checkpoint["key"],
        fs=fs,
        spark_factory=spark_factory,
        partition_fields=checkpoint["partition_fields"],
        table_type=checkpoint["table_type"],
        generation=live,
    )
