"""Erasing a key: from the change files (its lines gone, gzip kept, the rewrite still applied),
the quarantine, the lake table's files and its history; and ``cdclake erase --env local``
doing all of it on one module lake."""

from __future__ import annotations

import gzip
import io
import json
import struct
import zlib
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq
import pytest
import typer

from cdclake.erase import deadlines_of, erase_locally, show
from cdclake_merge.erase import (
    erase_change_files,
    erase_lake,
    erase_quarantine,
    keep_applied,
    refuse_unreachable_generations,
)
from cdclake_merge.generations import Generations
from cdclake_merge.hudi import HudiTable
from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths
from cdclake_merge.positions import FolderPosition, positions_as_json, scan
from cdclake_merge.replay import LEDGER, LINES, REPLAYS, listing
from cdclake_merge.storage import (
    FileSystem,
    LocalFileSystem,
    is_input,
    join,
    list_folder,
)
from environment.config import load_config
from environment.retention import LAKE_VERSIONS

from .support import Lake, envelope, line

TOPIC = "app.public.orders"
FOLDER = f"{TOPIC}/partition=0"
KEY = {"id": "2"}


def _lines(*ids: int) -> str:
    return "".join(
        line(envelope("c", lsn=10 + i, after={"id": i, "v": f"secret-{i}"})) + "\n" for i in ids
    )


def _world(fs: FileSystem, root: str) -> tuple[str, TablePaths]:
    """Two applied files (one gzip, one plain and still recent) and the checkpoint naming them."""
    changes = join(root, "changes")
    folder = join(changes, FOLDER)
    old, new = f"{TOPIC}+0+0000000000.json.gz", f"{TOPIC}+0+0000000002.json"
    fs.write_bytes(join(folder, old), gzip.compress(_lines(1, 2).encode()))
    fs.write_bytes(join(folder, new), _lines(2, 3).encode())
    listed = {e.name: e for e in list_folder(fs, folder).files}
    position = FolderPosition(after=old, recent=((new, listed[new].size, listed[new].tag),))
    paths = TablePaths.of(join(root, "wh"), "db.orders")
    fs.write_text(
        join(paths.timeline, "20260101000000000.commit"),
        json.dumps({"extraMetadata": {CHECKPOINT_KEY: "checkpoints/v00000001.json"}}),
    )
    fs.write_text(
        join(paths.sidecar, "checkpoints", "v00000001.json"),
        json.dumps(
            {
                "positions": positions_as_json(
                    {
                        "": FolderPosition(parent=True),
                        TOPIC: FolderPosition(parent=True),
                        FOLDER: position,
                    }
                )
            }
        ),
    )
    return changes, paths


def _change_text(fs: FileSystem, changes: str) -> bytes:
    files = sorted(p for p in fs.list_files(changes) if is_input(p))
    return b"".join(
        gzip.decompress(fs.read_bytes(p)) if p.endswith(".gz") else fs.read_bytes(p) for p in files
    )


def test_erase_change_files_key_lines_removed_others_kept(
    file_system: tuple[FileSystem, str],
) -> None:
    fs, root = file_system
    changes, _ = _world(fs, root)
    erased = erase_change_files(fs, changes, KEY)
    data = _change_text(fs, changes)
    assert (b"secret-2" not in data, data.count(b"secret-"), erased.lines) == (True, 2, 2)


def test_erase_change_files_rewritten_not_pending(file_system: tuple[FileSystem, str]) -> None:
    fs, root = file_system
    changes, paths = _world(fs, root)
    erased = erase_change_files(fs, changes, KEY)
    keep_applied(fs, paths, changes, erased)
    checkpoint = json.loads(fs.read_text(join(paths.sidecar, "checkpoints", "v00000001.json")))
    positions = {f: FolderPosition.from_json(p) for f, p in checkpoint["positions"].items()}
    assert scan(fs, changes, positions).pending == ()


def _quarantine(root: Path) -> str:
    """A commit's quarantine rows for keys 2 and 3, and a replay that applied key 3's line."""
    rows = [
        {"source_file": "a.json", "line": n, "reason": "bad", "raw": _lines(n).rstrip("\n")}
        for n in (2, 3)
    ]
    folder = root / "quarantine" / "v00000002"
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    replay = root / "quarantine" / REPLAYS / "r00000001"
    replay.mkdir(parents=True)
    (replay / LINES).write_text(_lines(3))
    (replay / LEDGER).write_text(json.dumps({"replay": "r00000001", "applied": [_id(3)]}))
    return str(root / "quarantine")


def _id(n: int) -> str:
    return f"v00000002:a.json:{n}"


def _quarantine_text(root: str) -> str:
    return "".join(p.read_text() for p in Path(root).rglob("*.json") if p.name != LEDGER)


def test_erase_quarantine_key_lines_removed_others_kept(tmp_path: Path) -> None:
    root = _quarantine(tmp_path)
    erased = erase_quarantine(LocalFileSystem(), root, KEY)
    text = _quarantine_text(root)
    assert ("secret-2" in text, text.count("secret-3"), erased.lines) == (False, 2, 1)


def test_erase_quarantine_replayed_copy_removed(tmp_path: Path) -> None:
    root = _quarantine(tmp_path)
    erase_quarantine(LocalFileSystem(), root, {"id": "3"})
    assert "secret-3" not in _quarantine_text(root)


def test_erase_quarantine_replayed_line_still_replayed(tmp_path: Path) -> None:
    root = _quarantine(tmp_path)
    erase_quarantine(LocalFileSystem(), root, {"id": "3"})
    found = listing(LocalFileSystem(), root)
    assert ([q.id for q in found.pending], found.replayed) == ([_id(2)], {_id(3): "r00000001"})


@dataclass(frozen=True)
class ErasedLake:
    """A MERGE_ON_READ lake keeping history whose key 2 was inserted, updated twice and
    deleted (two commits: the second only a log file over the first's base file), with a
    line of the key quarantined, erased as ``cdclake erase --env local`` does it."""

    lake: Lake
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    history_before: list[dict[str, Any]]
    history_after: list[dict[str, Any]]
    shown: dict[str, Any]  # the command's JSON line
    refused: tuple[int, str]  # exit code and stderr of erasing key 1, which the table holds
    version_before_rerun: int
    version_after_rerun: int


def _values_in_files(root: Path) -> str:
    """Every value of every data file under ``root`` (parquet pages are compressed: read them;
    log files' records are plain Avro), the metadata table's files left out."""
    own = [p for p in root.rglob("*") if "metadata" not in p.relative_to(root).parts]
    texts = [str(pq.ParquetFile(p).read().to_pylist()) for p in own if p.suffix == ".parquet"]
    logs = [p.read_bytes().decode("latin-1") for p in own if ".log." in p.name]
    return "\n".join(texts + logs)


def _bytes_in_files(root: Path) -> bytes:
    """Every file under ``root`` as stored, gzip opened."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return b"".join(
        gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in files
    )


def _hudi(lake: Lake) -> HudiTable:
    return cast(HudiTable, lake.sink)


def _history(lake: Lake, id_: int) -> list[dict[str, Any]]:
    rows = lake.spark.read.format("hudi").load(_hudi(lake).history_root).filter(f"id = {id_}")
    return sorted(
        (
            {k: v for k, v in r.asDict().items() if not k.startswith("_hoodie")}
            for r in rows.collect()
        ),
        key=lambda r: str(r["_cdc_order"]),
    )


def _erase_command(lake: Lake, key: dict[str, str]) -> tuple[int, str, str]:
    """The local command's erase and output (cdclake.erase) on the test lake: exit code,
    stderr, stdout."""
    config = load_config("local")
    place = lake.place(table_type="MERGE_ON_READ")
    err, out = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stderr(err), redirect_stdout(out):
        try:
            counts = erase_locally(config, place, key, spark_factory=lambda: lake.spark)
            deadlines = deadlines_of(config, place.source_table, datetime.now(UTC))
            show({"table": place.source_table, "key": key}, counts, deadlines)
        except typer.Exit as exc:
            code = exc.exit_code
    return code, err.getvalue(), out.getvalue()


def _lake_keeping_history(spark: Any, folder: Path, **options: Any) -> Lake:
    return Lake(spark, folder, table_type="MERGE_ON_READ", services={"history": 1}, **options)


@pytest.fixture(scope="module")
def erased_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> ErasedLake:  # type: ignore[no-untyped-def]
    lake = _lake_keeping_history(spark, tmp_path_factory.mktemp("erase"), max_bad_fraction=0.5)
    lake.write("a.json", [_change("c", 1, 10), _change("c", 2, 11)])
    lake.merge()
    lake.write(
        "b.json",
        [
            _change("u", 1, 19),
            _change("u", 2, 20),
            _change("u", 2, 21),
            _change("x", 2, 22),  # an unknown op: quarantined
            envelope("d", lsn=30, before={"id": 2, "v": "secret-2-30"}),
        ],
    )
    lake.merge()
    before, history_before = lake.visible(), _history(lake, 1)
    code, err, _ = _erase_command(lake, {"id": "1"})
    _, _, out = _erase_command(lake, KEY)
    version = lake.sink.load().version
    after, history_after = lake.visible(), _history(lake, 1)
    lake.merge()
    return ErasedLake(
        lake,
        before,
        after,
        history_before,
        history_after,
        json.loads(out),
        (code, err),
        version,
        lake.sink.load().version,
    )


def _change(op: str, id_: int, lsn: int) -> dict[str, Any]:
    return envelope(op, lsn=lsn, after={"id": id_, "v": f"secret-{id_}-{lsn}"})


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_erased_key_in_no_table_file(erased_lake: ErasedLake) -> None:
    assert "secret-2" not in _values_in_files(Path(_hudi(erased_lake.lake).root))


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_erased_key_in_no_history_file(erased_lake: ErasedLake) -> None:
    history = _values_in_files(Path(_hudi(erased_lake.lake).history_root))
    assert ("secret-2" in history, erased_lake.shown["history_rows"]) == (False, 4)


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_other_keys_unchanged(erased_lake: ErasedLake) -> None:
    deleted = erased_lake.shown["table_files_deleted"]
    assert (erased_lake.after, deleted > 0) == (erased_lake.before, True)


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_other_keys_history_unchanged(erased_lake: ErasedLake) -> None:
    assert (erased_lake.history_after, len(erased_lake.history_before)) == (
        erased_lake.history_before,
        2,
    )


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_key_in_table_refused_in_one_line(erased_lake: ErasedLake) -> None:
    code, err = erased_lake.refused
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, len(lines), "still holds the key" in lines[0]) == (1, 1, True), err


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_next_merge_commits_nothing(erased_lake: ErasedLake) -> None:
    assert erased_lake.version_after_rerun == erased_lake.version_before_rerun


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_command_local_counts_in_json_line(erased_lake: ErasedLake) -> None:
    shown = erased_lake.shown
    counted = {k: shown[k] for k in ("change_files", "change_lines", "quarantine_lines")}
    assert (shown["key"], counted) == (
        KEY,
        {"change_files": 2, "change_lines": 5, "quarantine_lines": 1},
    )


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_command_local_key_in_no_change_file(erased_lake: ErasedLake) -> None:
    assert b"secret-2" not in _bytes_in_files(erased_lake.lake.changes)


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_command_local_key_in_no_quarantine_file(erased_lake: ErasedLake) -> None:
    root = Path(_hudi(erased_lake.lake).quarantine_root)
    assert (root.exists(), b"secret-2" in _bytes_in_files(root)) == (True, False)


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_command_local_deadlines_in_json_line(erased_lake: ErasedLake) -> None:
    places = [d["place"] for d in erased_lake.shown["deadlines"]]
    assert places[:2] == ["Kafka topics", LAKE_VERSIONS]


def test_erase_generations_replaced_one_not_removed_refused() -> None:
    with pytest.raises(ValueError, match=r"generation 1 of public\.orders, which a rebuild's swap"):
        refuse_unreachable_generations(Generations(live=2, retired=1), "public.orders")


def test_erase_generations_rebuild_in_progress_refused() -> None:
    with pytest.raises(
        ValueError, match=r"rebuild of public\.orders \(generation 2\) is in progress"
    ):
        refuse_unreachable_generations(Generations(live=1, building=2), "public.orders")


def test_erase_generations_live_one_alone_passes() -> None:
    refuse_unreachable_generations(Generations(live=2), "public.orders")


# A key whose digits no other value of the lake spells: the record index names keys as text.
DISTINCT = 987654321
HFILE_DATA_BLOCK = b"DATABLK*"


@dataclass(frozen=True)
class IndexedLake:
    """A MERGE_ON_READ lake keeping history whose key DISTINCT was inserted, then deleted,
    and erased; then another run updated key 1 and inserted key 3. Each of the table's and
    its history's metadata tables seen before the erase, after it and after the next run:
    (metadata partitions, whether a file holds the key)."""

    table: tuple[tuple[str, bool], ...]
    history: tuple[tuple[str, bool], ...]
    rows_after_next_run: list[dict[str, Any]]


def _hfile_blocks(data: bytes) -> Iterator[bytes]:
    """Every HFile data block in ``data`` (a metadata table's base file, or a log file's
    HFile blocks), gzip opened: a block is its magic, its sizes and checksum settings (33
    bytes: the on-disk size of what follows at 8), then its gzip stream."""
    at = data.find(HFILE_DATA_BLOCK)
    while at >= 0:
        (size,) = struct.unpack(">i", data[at + 8 : at + 12])
        yield zlib.decompressobj(31).decompress(data[at + 33 : at + 33 + size])
        at = data.find(HFILE_DATA_BLOCK, at + len(HFILE_DATA_BLOCK))


def _metadata(root: Path) -> tuple[str, bool]:
    """The table's metadata partitions, and whether any file of its metadata table holds the
    key: as stored (a log file's delete blocks) or in an HFile data block."""
    properties = (root / ".hoodie" / "hoodie.properties").read_text().splitlines()
    named = [p for p in properties if p.startswith("hoodie.table.metadata.partitions=")]
    key = str(DISTINCT).encode()
    files = [p.read_bytes() for p in (root / ".hoodie" / "metadata").rglob("*") if p.is_file()]
    held = any(key in data or any(key in b for b in _hfile_blocks(data)) for data in files)
    return "".join(named).partition("=")[2], held


@pytest.fixture(scope="module")
def indexed_lake(spark, tmp_path_factory: pytest.TempPathFactory) -> IndexedLake:  # type: ignore[no-untyped-def]
    lake = _lake_keeping_history(spark, tmp_path_factory.mktemp("erase-index"))
    roots = (Path(_hudi(lake).root), Path(_hudi(lake).history_root))
    seen: list[tuple[tuple[str, bool], ...]] = []
    lake.write("a.json", [_change("c", 1, 10), _change("c", DISTINCT, 11)])
    lake.merge()
    lake.write("b.json", [envelope("d", lsn=20, before={"id": DISTINCT})])
    lake.merge()
    seen.append(tuple(_metadata(root) for root in roots))
    erase_lake(spark, _hudi(lake), {"id": str(DISTINCT)})
    seen.append(tuple(_metadata(root) for root in roots))
    lake.write("c.json", [_change("u", 1, 30), _change("c", 3, 31)])
    lake.merge()
    seen.append(tuple(_metadata(root) for root in roots))
    table, history = zip(*seen, strict=True)
    return IndexedLake(table, history, lake.visible())


INDEXED = "files,record_index"


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.parametrize("which", ["table", "history"])
def test_erase_lake_metadata_table_deleted_with_the_key(
    indexed_lake: IndexedLake, which: str
) -> None:
    # Hudi's record index names every key it ever held until its metadata table compacts
    # and cleans; the erase deletes the metadata table, and the next commit builds it again,
    # without the key.
    seen = getattr(indexed_lake, which)
    assert seen == ((INDEXED, True), ("", False), (INDEXED, False))


@pytest.mark.spark
@pytest.mark.hudi
def test_erase_lake_next_run_with_the_index_built_again_updates_in_place(
    indexed_lake: IndexedLake,
) -> None:
    # Key 1 is found by the index built again (updated, not inserted twice).
    assert indexed_lake.rows_after_next_run == [
        {"id": 1, "v": "secret-1-30"},
        {"id": 3, "v": "secret-3-31"},
    ]
