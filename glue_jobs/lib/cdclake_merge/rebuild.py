"""The merge side of a rebuild beside the live table (docs/merge-job.md "Rebuild beside the
live table"): runs of the generation being built, and the swap that makes it live.

Each rebuild run is an ordinary merge run (:func:`cdclake_merge.job.run_merge`) into the
generation being built, which starts reading the change folders where they ended when the
rebuild began (:func:`cdclake_merge.generations.begin_rebuild`); it syncs no catalog, so
readers keep the live generation, untouched. The swap writes the state object first, then
moves the catalog entry; a swap cut short between the two is finished by :func:`swap` again.
Not here yet: sending the snapshot's signal, knowing the snapshot finished, removing the old
generation, and the CLI, Glue and dispatcher wiring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import SparkSession

from cdclake_merge.generations import (
    Generations,
    begin_rebuild,
    read_generations,
    swapped,
    write_generations,
)
from cdclake_merge.job import MergeOptions, RunResult, run_merge
from cdclake_merge.positions import positions_from_json
from cdclake_merge.sink import Sink
from cdclake_merge.storage import FileSystem

# A sink of the table's generation n; ``catalog``: whether its commits sync the catalog.
GenerationSink = Callable[[int, bool], Sink]


def run_rebuild(
    spark_factory: Callable[[], SparkSession],
    fs: FileSystem,
    generation_sink: GenerationSink,
    options: MergeOptions,
    sidecar: str,
) -> tuple[Generations, RunResult]:
    """One run of the rebuild in progress (begun here if none is): what waits after its start
    positions, applied to the generation being built as one commit."""
    state = begin_rebuild(fs, sidecar, options.changes)
    assert state.building is not None  # begin_rebuild returns a rebuild in progress
    start = replace(options, start_positions=positions_from_json(state.start))
    result = run_merge(spark_factory, fs, generation_sink(state.building, False), start)
    return state, result


def swap(
    spark: SparkSession, fs: FileSystem, generation_sink: GenerationSink, sidecar: str
) -> Generations:
    """Make the generation being built live: the state object names it, then the catalog entry
    points at it. Finishes a swap cut short after the state object was written."""
    state = read_generations(fs, sidecar)
    if not state.catalog_pending:
        state = swapped(state)
        write_generations(fs, sidecar, state)
    sink = generation_sink(state.live, True)
    sink.take_over_catalog(spark, sink.load())
    done = replace(state, catalog_pending=False)
    write_generations(fs, sidecar, done)
    return done
