"""The merge side of a rebuild beside the live table (issue #49; docs/merge-job.md "Rebuild
beside the live table") on real Hudi 0.15: a table of numeric(10,2) amounts whose column became
numeric(14,4) is rebuilt as generation 2 beside it from the change files written after the
rebuild began (Debezium's incremental-snapshot reads, then a streamed update), the live table
untouched and readable meanwhile, then swapped in by moving its catalog entry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge.generations import begin_rebuild, read_generations
from cdclake_merge.job import RunResult, TableNeedsRebuild
from cdclake_merge.rebuild import run_rebuild, swap
from cdclake_merge.sink import Sink, open_sink
from tests.merge.support import Lake, decimal_b64, envelope, with_schema

pytestmark = [pytest.mark.spark, pytest.mark.hudi]


def _amounts(
    op: str, id_: int, lsn: int, amount: str, scale: int, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A change of ``amount`` as the JsonConverter writes numeric(10 + 2 * (scale - 2), scale)."""
    event = envelope(
        op, lsn=lsn, commit=lsn, after={"id": id_, "amount": decimal_b64(amount, scale)}
    )
    event["source"].update(source or {})
    decimal = {
        "field": "amount",
        "optional": True,
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(6 + 2 * scale)},
    }
    return with_schema(event, [{"field": "id", "type": "int32"}, decimal])


def _snapshot_read(id_: int, window_closed: int, amount: str) -> dict[str, Any]:
    """An incremental-snapshot read: no LSN of its own, ordered where its window closed."""
    sequence = json.dumps([str(window_closed), str(window_closed)])
    source = {"snapshot": "incremental", "lsn": None, "sequence": sequence}
    return _amounts("r", id_, 0, amount, 4, source)


def _generation_sink(lake: Lake) -> Any:
    def sink(generation: int, catalog: bool) -> Sink:
        return open_sink(
            warehouse=str(lake.warehouse),
            table=lake.table,
            key=lake.key,
            fs=lake.fs,
            spark_factory=lambda: lake.spark,
            sync_catalog=catalog,
            generation=generation,
        )

    return sink


def _catalog_rows(lake: Lake) -> list[tuple[int, Decimal]]:
    rows = lake.spark.table(lake.table).select("id", "amount").collect()
    return sorted((r["id"], r["amount"]) for r in rows)


def _location(lake: Lake) -> str:
    """The entry's own storage location in the metastore, what Athena and Hive read: Spark's
    DESCRIBE shows the ``path`` property Hudi's sync rewrites, which moved without the swap."""
    database, name = lake.table.split(".")
    client = lake.spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    return str(client.getTable(database, name).storage().locationUri().get().toString())


def _needing_rebuild(spark: Any, root: Path) -> Lake:
    """A live table of amounts 1.25 and 2.50 whose next change file is numeric(14,4), and the
    change files written once the rebuild has begun: snapshot reads, then an update of 1."""
    lake = Lake(spark, root)
    lake.write("a.json", [_amounts("c", 1, 10, "1.25", 2), _amounts("c", 2, 11, "2.50", 2)])
    lake.merge()
    lake.write("b.json", [_amounts("u", 2, 20, "2.7500", 4)])
    with pytest.raises(TableNeedsRebuild):
        lake.merge()
    begin_rebuild(lake.fs, lake.sink.sidecar, str(lake.changes))  # type: ignore[attr-defined]
    lake.write("c.json", [_snapshot_read(1, 30, "1.2500"), _snapshot_read(2, 30, "2.7500")])
    lake.write("d.json", [_amounts("u", 1, 40, "9.9900", 4)])
    return lake


def _rebuild(lake: Lake, generation_sink: Any = None) -> RunResult:
    _, result = run_rebuild(
        lambda: lake.spark,
        lake.fs,
        generation_sink or _generation_sink(lake),
        lake.options,
        lake.sink.sidecar,  # type: ignore[attr-defined]
    )
    return result


@dataclass
class Rebuilt:
    lake: Lake
    result: RunResult
    generation: Sink
    live_version: int  # the live table's, after the rebuild's run
    live_rows: list[tuple[int, Decimal]]  # through its catalog entry, before the swap
    location_before: str
    location_after: str
    rows_after: list[tuple[int, Decimal]]  # through the catalog entry, after the swap


@pytest.fixture(scope="module")
def rebuilt(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Rebuilt:
    lake = _needing_rebuild(spark, tmp_path_factory.mktemp("rebuilt"))
    result = _rebuild(lake)
    live_version, live_rows, before = lake.sink.load().version, _catalog_rows(lake), _location(lake)
    swap(spark, lake.fs, _generation_sink(lake), lake.sink.sidecar)  # type: ignore[attr-defined]
    generation = _generation_sink(lake)(2, False)
    return Rebuilt(
        lake,
        result,
        generation,
        live_version,
        live_rows,
        before,
        _location(lake),
        _catalog_rows(lake),
    )


def _stored_rows(lake: Lake, sink: Sink) -> list[tuple[int, str]]:
    live = sink.read_live(lake.spark, sink.load())
    assert live is not None
    return sorted((r["id"], str(r["amount"])) for r in live.collect())


def test_run_rebuild_writes_generation_two_beside_the_live_table(rebuilt: Rebuilt) -> None:
    root = Path(rebuilt.generation.root)
    assert root.parent == Path(rebuilt.lake.sink.root).parent
    assert root.name == rebuilt.lake.table.split(".")[1] + "__g2"
    assert _stored_rows(rebuilt.lake, rebuilt.generation) == [(1, "9.9900"), (2, "2.7500")]


def test_run_rebuild_reads_only_files_written_after_it_began(rebuilt: Rebuilt) -> None:
    assert (rebuilt.result.files_applied, rebuilt.result.upserts) == (2, 2)


def test_run_rebuild_leaves_the_live_table_untouched_and_readable(rebuilt: Rebuilt) -> None:
    assert rebuilt.live_version == 1
    assert rebuilt.live_rows == [(1, Decimal("1.25")), (2, Decimal("2.50"))]
    assert rebuilt.location_before.rstrip("/").endswith(rebuilt.lake.table.split(".")[1])


def test_swap_moves_the_catalog_entry_to_the_generation(rebuilt: Rebuilt) -> None:
    assert rebuilt.location_after.rstrip("/").endswith(Path(rebuilt.generation.root).name)
    assert rebuilt.rows_after == [(1, Decimal("9.9900")), (2, Decimal("2.7500"))]
    state = read_generations(rebuilt.lake.fs, rebuilt.lake.sink.sidecar)  # type: ignore[attr-defined]
    assert (state.live, state.building, state.catalog_pending, state.retired) == (2, None, False, 1)


class _KilledAtCommit(Exception):
    pass


def test_run_rebuild_killed_before_its_commit_restarted_gives_the_same_rows(
    spark: Any, tmp_path: Path, rebuilt: Rebuilt
) -> None:
    lake = _needing_rebuild(spark, tmp_path)
    make = _generation_sink(lake)

    def killed_at_commit(generation: int, catalog: bool) -> Sink:
        sink = make(generation, catalog)

        def commit(*_: Any) -> Any:  # everything staged, the Hudi commit never made
            raise _KilledAtCommit

        sink.commit = commit  # type: ignore[method-assign]
        return sink

    with pytest.raises(_KilledAtCommit):
        _rebuild(lake, killed_at_commit)
    _rebuild(lake)
    assert _stored_rows(lake, make(2, False)) == _stored_rows(rebuilt.lake, rebuilt.generation)
