"""The merge side of a rebuild beside the live table (docs/merge-job.md "Rebuild beside the
live table"): which generation a run writes, the runs of the generation being built, the swap
that makes it live and the removal of the generation it replaced. A table that keeps its
history is rebuilt as a copy of the live generation, for a change of its layout
(:attr:`~cdclake_merge.generations.Generations.copy`).

Every run of a table goes through :func:`merge_table` (the Glue job's merge mode and
``cdclake merge``) or :func:`rebuild_step` (the Glue job's rebuild mode and ``cdclake
rebuild``): they read the state object in the table's own sidecar, finish a swap whose catalog
update was cut short, and write the live generation, or the generation being built while a
rebuild is in progress (the live one then takes no commit). A rebuild run is an ordinary merge
run (:func:`cdclake_merge.job.run_merge`) into the generation being built, which starts reading
the change folders where they ended when the rebuild began; it syncs no catalog, so readers
keep the live generation, untouched. The swap writes the state object first, then moves the
catalog entry. Sending the snapshot's signal is the CLI's (it needs the database).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from cdclake_merge.generations import (
    STATE,
    Generations,
    begin_rebuild,
    begin_signalled,
    caught_up,
    change_ends,
    read_generations,
    snapshot_finished,
    swapped,
    write_generations,
)
from cdclake_merge.job import MergeOptions, RunResult, run_merge
from cdclake_merge.layout import COPIED, LayoutNeedsRebuild, copy_takes
from cdclake_merge.positions import positions_from_json
from cdclake_merge.replay import listing
from cdclake_merge.sink import Changes, Sink, TableState
from cdclake_merge.storage import FileSystem, join

# A table that keeps its history is rebuilt as a copy (Generations.copy), which takes a change
# of its layout but its key (layout.COPIED). From a snapshot, the history would take the new
# generation's first rows, a version of each key it already holds open, as changes; a type
# change needs the new types decided from every waiting line first (docs/lake.md "History").
HISTORY_REFUSED = (
    "table {table} keeps its history (history: true): a rebuild would break its versions "
    "for {change}, which is not built yet (issue #51; a rebuild takes its table type, "
    "partitioning and record index size); nothing was begun"
)
# A copy continued by a run that keeps no history would apply changes without their versions.
COPY_WITHOUT_HISTORY = (
    "table {table}: a rebuild by copy is in progress and keeps the table's history, which this "
    "run does not write (run it with the table's config: --env, or the job's --history 1)"
)
QUARANTINE_DDL = "source_file string, line bigint, reason string, raw string"  # job._quarantine

# A sink of the table's generation n; ``catalog``: whether its commits sync the catalog.
GenerationSink = Callable[[int, bool], Sink]


@dataclass(frozen=True)
class TableRun:
    """What one run of a table did: ``rebuilding``: it wrote the generation being built
    (``caught_up``/``swapped``: and that generation became live); ``removed``: the generation
    a swap replaced, removed by this run."""

    state: Generations
    result: RunResult
    rebuilding: bool = False
    caught_up: bool = False
    swapped: bool = False
    removed: int | None = None
    copied: int | None = None  # the version a rebuild by copy's first commit made, this run

    def as_dict(self) -> dict[str, object]:
        return {
            **self.result.as_dict(),
            "live": self.state.live,
            "building": self.state.building,
            "caught_up": self.caught_up,
            "swapped": self.swapped,
            "removed": self.removed,
            "copied": self.copied,
        }


def _home(generation_sink: GenerationSink) -> Sink:
    """Generation 1's sink: its sidecar holds the state object."""
    return generation_sink(1, False)


def follow_live(
    spark_factory: Callable[[], SparkSession], generation_sink: GenerationSink
) -> Generations:
    """The table's state, a swap whose catalog update was cut short finished first (as a run
    finishes a commit's failed catalog sync)."""
    home = _home(generation_sink)
    state = read_generations(home.fs, home.sidecar)
    if state.catalog_pending:
        state = swap(spark_factory(), generation_sink)
    return state


def merge_table(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    generation_sink: GenerationSink,
    options: MergeOptions,
    *,
    notifications: str | None = None,
    keep_columns: bool = True,
    progress: Callable[[str], None] = lambda stage: None,
) -> TableRun:
    """A merge run of the table (``fs``: where its change files are): into the live
    generation; while a rebuild is in progress, its step instead (:func:`rebuild_step`: the
    live generation takes no commit). The first run past a swap's commit removes the
    generation the swap replaced."""
    state = follow_live(spark_factory, generation_sink)
    if state.building is not None:
        return rebuild_step(
            spark_factory,
            fs,
            generation_sink,
            options,
            notifications=notifications,
            keep_columns=keep_columns,
        )
    result = run_merge(
        spark_factory, fs, generation_sink(state.live, True), options, progress=progress
    )
    removed = state.retired
    if removed is None or state.swapped_version is None or result.version <= state.swapped_version:
        return TableRun(state, result)
    return TableRun(remove_retired(generation_sink, state), result, removed=removed)


def remove_retired(generation_sink: GenerationSink, state: Generations) -> Generations:
    """Delete the generation a swap replaced: its folder, and its sidecar's checkpoints and
    tombstones (generation 1's sidecar keeps the state object). Deleting what is gone does
    nothing, so a run killed midway is finished by the next."""
    if state.retired is None:
        return state
    old = generation_sink(state.retired, False)
    old.fs.delete(old.root)
    if state.retired == 1:
        for name in old.fs.list_dir(old.sidecar):
            if name != STATE:
                old.fs.delete(join(old.sidecar, name))
    else:
        old.fs.delete(old.sidecar)
    done = replace(state, retired=None, swapped_version=None)
    home = _home(generation_sink)
    write_generations(home.fs, home.sidecar, done)
    return done


def run_rebuild(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    generation_sink: GenerationSink,
    options: MergeOptions,
) -> tuple[Generations, RunResult]:
    """One run of the rebuild in progress (begun here if none is): what waits after its start
    positions, applied to the generation being built as one commit."""
    home = _home(generation_sink)
    state = begin_rebuild(home.fs, home.sidecar, options.changes, fs)
    assert state.building is not None  # begin_rebuild returns a rebuild in progress
    start = replace(options, start_positions=positions_from_json(state.start))
    result = run_merge(spark_factory, fs, generation_sink(state.building, False), start)
    return state, result


def rebuild_step(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    generation_sink: GenerationSink,
    options: MergeOptions,
    *,
    notifications: str | None = None,
    snapshot_done: bool = False,
    keep_columns: bool = True,
    signal: Callable[[str], None] | None = None,
) -> TableRun:
    """One rebuild run (:func:`run_rebuild`), then, if the generation being built has caught
    up, the swap in the same run. Caught up: its snapshot finished (Debezium's COMPLETED
    notification of the state's ``snapshot_id`` under ``notifications``, or ``snapshot_done``,
    an operator's word) and the run applied every change file listed after that was seen.
    A table that keeps its history is rebuilt as a copy instead (:func:`history_refusal` says
    when it cannot be): the first run copies the live generation (:func:`copy_live_once`),
    then applies what waits; no snapshot, so caught up is every listed file applied.
    ``keep_columns`` (``drop_columns: keep``): the new generation starts from the live one's
    columns, so a column the source dropped stays (null). ``signal``: sends the incremental
    snapshot's signal with the id given, where the run can reach the database (a Glue run
    through the bootstrap function, ``cdclake dispatch --env local``): a rebuild not begun or
    not signalled yet is begun and signalled first (:func:`begin_signalled`); without it the
    caller signalled (``cdclake rebuild``)."""
    state = follow_live(spark_factory, generation_sink)
    home = _home(generation_sink)
    if generation_sink(1, True).history:
        refused = history_refusal(generation_sink(state.live, False), state)
        if refused is not None:
            raise ValueError(refused)
        state = begin_rebuild(home.fs, home.sidecar, options.changes, fs, copy=True)
    elif signal is not None:
        state = begin_signalled(home.fs, home.sidecar, options.changes, signal, fs)
    else:
        state = begin_rebuild(home.fs, home.sidecar, options.changes, fs)
    copied = None
    if state.copy:
        assert state.building is not None  # begin_rebuild returns a rebuild in progress
        if not generation_sink(state.building, False).history:
            raise ValueError(COPY_WITHOUT_HISTORY.format(table=options.table))
        copied = copy_live_once(spark_factory, generation_sink, state, options.key)
    done = snapshot_done or (
        notifications is not None
        and state.snapshot_id is not None
        and snapshot_finished(fs, notifications, state.snapshot_id)
    )
    ends = change_ends(fs, options.changes)  # listed after the snapshot was seen finished
    live = generation_sink(state.live, False).newest_checkpoint() if keep_columns else None
    kept = tuple((name, kind) for name, kind in live["columns"]) if live else None
    state, result = run_rebuild(
        spark_factory, fs, generation_sink, replace(options, start_columns=kept)
    )
    assert state.building is not None
    built = generation_sink(state.building, False).load()
    copied_version = copied.version if copied is not None else None
    if not built.exists or not caught_up(state, ends, built.positions, done):
        return TableRun(state, result, rebuilding=True, copied=copied_version)
    return TableRun(
        swap(spark_factory(), generation_sink),
        result,
        rebuilding=True,
        caught_up=True,
        swapped=True,
        copied=copied_version,
    )


def abandon(generation_sink: GenerationSink) -> Generations:
    """Give up the rebuild in progress: the generation being built is deleted (its folder,
    sidecar and quarantine) and the state object names none, so the live generation takes the
    table's runs again. For a rebuild that cannot finish (a copy meeting a type change it does
    not take); the live generation was never written meanwhile. Deleting what is gone does
    nothing, so one killed midway is finished by the next."""
    home = _home(generation_sink)
    state = read_generations(home.fs, home.sidecar)
    if state.building is None:
        raise ValueError("no rebuild is in progress: nothing to abandon")
    built = generation_sink(state.building, False)
    for path in (built.root, built.sidecar, built.quarantine_root):
        built.fs.delete(path)
    done = replace(
        state,
        building=None,
        start={},
        began_at=None,
        snapshot_id=None,
        signal_sent=True,
        copy=False,
    )
    write_generations(home.fs, home.sidecar, done)
    return done


def history_refusal(live: Sink, state: Generations) -> str | None:
    """Why a table that keeps its history is not rebuilt now (a one-line reason), or None: it
    is, as a copy. ``live``: its live generation opened with config's spec; ``state``: the
    table's, so a copy in progress goes on and a rebuild from a snapshot is not continued."""
    if state.building is not None:
        if state.copy:
            return None
        return HISTORY_REFUSED.format(table=live.table, change="a rebuild from a snapshot")
    try:
        stored = live.load()
    except LayoutNeedsRebuild as exc:
        if not copy_takes(exc.differences):
            change = "; ".join(d for d in exc.differences if not d.startswith(COPIED))
            return HISTORY_REFUSED.format(table=live.table, change=change)
        stored = live.load(as_stored=True)
    else:
        change = "anything but a change of its layout (a column's type)"
        return HISTORY_REFUSED.format(table=live.table, change=change)
    if stored.legacy_applied is not None:
        change = "a table whose last commit predates change-file positions (merge it once first)"
        return HISTORY_REFUSED.format(table=live.table, change=change)
    return None


def copy_live_once(
    spark_factory: Callable[[], SparkSession],
    generation_sink: GenerationSink,
    state: Generations,
    key: tuple[str, ...],
) -> TableState | None:
    """The first commit of a rebuild by copy, unless it is made: the live generation's rows and
    tombstones written to the generation being built under config's layout, with the live
    checkpoint's columns, positions, snapshots and truncation horizon, so that its runs go on
    from where the live one stopped and each key's stored row is its history's open version.
    None when it was made already (a run killed after it finds it, one killed during it
    writes it again). A tombstone's retention counts again from the copy: kept longer, never
    shorter; the copy writes no history row (it is no change). The live generation's
    quarantined lines that wait for a replay go with it, as its first commit's: a replay reads
    its own generation's quarantine only."""
    assert state.building is not None
    target = generation_sink(state.building, False)
    if target.newest_checkpoint() is not None:
        return None
    live = generation_sink(state.live, False)
    source = live.load(as_stored=True)
    spark = spark_factory()
    run = {
        "copied_from": state.live,
        "newest_source_ts_ms": source.checkpoint.get("run", {}).get("newest_source_ts_ms"),
        "deletes": len(source.tombstones),  # tombstone sets: written again with the rows
    }
    waiting = listing(live.fs, live.quarantine_root, source.version)
    lines = [(q.source_file, q.line, waiting.reasons[q.id], q.raw) for q in waiting.pending]
    changes = Changes(
        columns=source.columns,
        key=key,
        truncated_before=source.truncated_before,
        snapshots=source.snapshots,
        positions=source.positions,
        rows=live.read_state(spark, source),
        truncated=False,
        quarantine=spark.createDataFrame(lines, QUARANTINE_DDL) if lines else None,
        run={**run, "quarantined": len(lines)},
        into_empty=True,
    )
    staged = target.stage(spark, TableState(layout=source.layout), changes)
    return target.commit(spark, staged)


def swap(spark: SparkSession, generation_sink: GenerationSink) -> Generations:
    """Make the generation being built live: the state object names it, then the catalog entry
    points at it. Finishes a swap cut short after the state object was written."""
    home = _home(generation_sink)
    state = read_generations(home.fs, home.sidecar)
    if not state.catalog_pending:
        if state.building is None:
            raise ValueError("no rebuild is in progress: nothing to swap")
        state = swapped(state, generation_sink(state.building, False).load().version)
        write_generations(home.fs, home.sidecar, state)
    sink = generation_sink(state.live, True)
    sink.take_over_catalog(spark, sink.load())
    sink.register_history(spark)  # a copy's runs wrote history rows without the sync
    done = replace(state, catalog_pending=False)
    write_generations(home.fs, home.sidecar, done)
    return done
