"""Finding new change files from a position per folder: listing, rewrites, old checkpoints, S3."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cdclake_merge.positions import (
    RECENT_FILES,
    ChangeFile,
    FolderPosition,
    advance,
    cut,
    positions_as_json,
    positions_from_json,
    scan,
)
from cdclake_merge.storage import FileEntry, Listing, LocalFileSystem, list_s3_folder

TOPIC = "app.public.orders"


def _write(root: Path, partition: int, offset: int, text: str = "{}\n") -> Path:
    folder = root / TOPIC / f"partition={partition}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{TOPIC}+{partition}+{offset:010d}.json"
    path.write_text(text)
    return path


class CountingFileSystem(LocalFileSystem):
    """The local filesystem, recording which folders were listed and from where."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def list_folder(self, folder: str, after: str | None = None) -> Listing:
        self.calls.append((folder, after))
        return super().list_folder(folder, after)


def _applied_all(root: Path, fs: LocalFileSystem) -> dict[str, object]:
    found = scan(fs, str(root), {})
    return advance({}, found.pending, found.parents)


def test_scan_first_run_finds_every_file_and_sees_parents(tmp_path: Path) -> None:
    for p in range(2):
        for offset in (0, 10):
            _write(tmp_path, p, offset)
    found = scan(LocalFileSystem(), str(tmp_path), {})
    assert [f.relative for f in found.pending] == [
        f"{TOPIC}/partition={p}/{TOPIC}+{p}+{o:010d}.json" for p in range(2) for o in (0, 10)
    ]
    assert found.parents == {"", TOPIC}


def test_scan_after_position_lists_partitions_from_their_position(tmp_path: Path) -> None:
    fs = CountingFileSystem()
    for offset in range(0, 100, 10):
        _write(tmp_path, 0, offset)
    positions = _applied_all(tmp_path, fs)
    new = _write(tmp_path, 0, 100)
    fs.calls.clear()
    found = scan(fs, str(tmp_path), positions)  # type: ignore[arg-type]
    assert [f.path for f in found.pending] == [str(new)]
    partition_call = [c for c in fs.calls if c[0].endswith("partition=0")]
    assert partition_call == [
        (str(tmp_path / TOPIC / "partition=0"), f"{TOPIC}+0+{90 - 10 * RECENT_FILES:010d}.json")
    ]


def test_scan_rewritten_recent_file_is_pending_again(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    path = _write(tmp_path, 0, 0, "{}\n")
    positions = _applied_all(tmp_path, fs)
    assert scan(fs, str(tmp_path), positions).pending == ()  # type: ignore[arg-type]
    path.write_text("{}\n{}\n")  # the sink task restarted and wrote the file again, longer
    assert [f.path for f in scan(fs, str(tmp_path), positions).pending] == [str(path)]  # type: ignore[arg-type]


def test_scan_rewrite_of_same_size_is_recognised_by_its_tag(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    path = _write(tmp_path, 0, 0, "{}\n")
    positions = _applied_all(tmp_path, fs)
    stat = path.stat()
    path.write_text("[]\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert len(scan(fs, str(tmp_path), positions).pending) == 1  # type: ignore[arg-type]


def test_advance_checkpoint_size_depends_on_partitions_not_history(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    sizes = []
    positions: dict[str, object] = {}
    for batch in range(3):
        for p in range(4):
            for offset in range(batch * 500, (batch + 1) * 500, 5):
                _write(tmp_path, p, offset)
        found = scan(fs, str(tmp_path), positions)  # type: ignore[arg-type]
        assert len(found.pending) == 400
        positions = advance(positions, found.pending, found.parents)  # type: ignore[arg-type]
        sizes.append(len(json.dumps(positions_as_json(positions))))  # type: ignore[arg-type]
    assert sizes[0] == sizes[1] == sizes[2]
    assert positions_from_json(json.loads(json.dumps(positions_as_json(positions)))) == positions  # type: ignore[arg-type]


def test_scan_legacy_names_are_subtracted_once_then_converted(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    old = [_write(tmp_path, 0, o) for o in (0, 10, 20)]
    new = _write(tmp_path, 0, 5)  # sorts among the applied names: an old checkpoint never saw it
    legacy = frozenset(str(p.relative_to(tmp_path)) for p in old)
    found = scan(fs, str(tmp_path), {}, legacy)
    assert [f.path for f in found.pending] == [str(new)]
    positions = advance({}, found.pending, found.parents, legacy)
    assert positions[f"{TOPIC}/partition=0"].after == old[-1].name
    assert scan(fs, str(tmp_path), positions).pending == ()


def test_scan_new_partition_and_new_topic_folders_are_found(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    _write(tmp_path, 0, 0)
    positions = _applied_all(tmp_path, fs)
    added = _write(tmp_path, 7, 0)
    other = tmp_path / "app.public.customers" / "partition=0" / "c+0+0000000000.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}\n")
    found = scan(fs, str(tmp_path), positions)  # type: ignore[arg-type]
    assert sorted(f.path for f in found.pending) == sorted([str(added), str(other)])


@pytest.mark.moto
def test_list_s3_folder_starts_after_the_position_and_reports_etags() -> None:
    import boto3
    import moto

    # moto's backends belong to the process and an in-process moto server of another area
    # (tests/fanout) shares them: no reset (mock_aws resets them all on start and stop), and
    # the bucket goes afterwards.
    mock = moto.mock_aws()
    mock.start(reset=False)
    try:
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="lake")
        try:
            prefix = f"topics/{TOPIC}/partition=0"
            names = [f"{TOPIC}+0+{o:010d}.json" for o in range(0, 2500, 1)]
            for name in names[:3] + names[-3:]:
                client.put_object(Bucket="lake", Key=f"{prefix}/{name}", Body=b"{}\n")
            client.put_object(Bucket="lake", Key=f"topics/{TOPIC}/partition=1/x.json", Body=b"x")
            listed = list_s3_folder(f"s3a://lake/{prefix}", names[1], client=client)
            assert [f.name for f in listed.files] == [names[2], *names[-3:]]
            assert listed.files[0] == FileEntry(
                f"s3a://lake/{prefix}/{names[2]}", names[2], 3, listed.files[0].tag
            )
            assert len(listed.files[0].tag) == 32  # the object's MD5 ETag
            parents = list_s3_folder(f"s3://lake/topics/{TOPIC}/", None, client=client)
            assert (parents.files, parents.folders) == ((), ("partition=0", "partition=1"))
        finally:
            for item in client.list_objects_v2(Bucket="lake").get("Contents", []):
                client.delete_object(Bucket="lake", Key=item["Key"])
            client.delete_bucket(Bucket="lake")
    finally:
        mock.stop(remove_data=False)


def test_folder_position_from_json_of_older_checkpoint_takes_defaults() -> None:
    assert FolderPosition.from_json({"after": "a.json"}) == FolderPosition(after="a.json")


def test_folder_position_is_applied_up_to_and_including_after() -> None:
    position = FolderPosition(after=f"{TOPIC}+0+0000000010.json")
    applied = [
        position.is_applied(FileEntry(name, name, 3, "t"))
        for name in (f"{TOPIC}+0+{o:010d}.json" for o in (0, 10, 20))
    ]
    assert applied == [True, True, False]


def test_scan_hidden_and_underscore_folders_are_not_searched(tmp_path: Path) -> None:
    kept = _write(tmp_path, 0, 0)
    for hidden in ("_temporary", ".staging"):
        folder = tmp_path / TOPIC / hidden
        folder.mkdir(parents=True)
        (folder / f"{TOPIC}+0+0000000000.json").write_text("{}\n")
    found = scan(LocalFileSystem(), str(tmp_path), {})
    assert [f.path for f in found.pending] == [str(kept)]


def test_scan_marker_file_sorting_first_does_not_hide_change_files(tmp_path: Path) -> None:
    kept = _write(tmp_path, 0, 0)
    (kept.parent / "_SUCCESS").write_text("")  # "_" sorts before the topic's letters
    found = scan(LocalFileSystem(), str(tmp_path), {})
    assert [f.path for f in found.pending] == [str(kept)]


def test_scan_folder_holding_subfolders_and_files_is_listed_whole_every_run(
    tmp_path: Path,
) -> None:
    fs = CountingFileSystem()
    _write(tmp_path, 0, 0)
    for offset in range(RECENT_FILES + 2):  # enough files for the root to get an ``after``
        (tmp_path / f"{TOPIC}+9+{offset:010d}.json").write_text("{}\n")
    positions = _applied_all(tmp_path, fs)
    assert positions[""].after is not None and positions[""].parent
    fs.calls.clear()
    scan(fs, str(tmp_path), positions)  # type: ignore[arg-type]
    assert (str(tmp_path), None) in fs.calls


def test_advance_legacy_names_convert_to_the_newest_name_of_each_folder() -> None:
    names = [f"{TOPIC}+0+{o:010d}.json" for o in range(50)]  # a set's order is not theirs
    legacy = frozenset(f"{TOPIC}/partition=0/{n}" for n in names) | {"top.json"}
    positions = advance({}, [], [], legacy)
    assert positions[f"{TOPIC}/partition=0"].after == names[-1]
    assert positions[""].after == "top.json"


def _files(folder: str, *sizes: int) -> list[ChangeFile]:
    return [
        ChangeFile(f"/c/{folder}/{i:04d}.json", folder, f"{i:04d}.json", size, str(size))
        for i, size in enumerate(sizes)
    ]


def test_cut_file_cap_takes_a_prefix_of_each_folder_in_turn() -> None:
    pending = _files("p0", 1, 1, 1) + _files("p1", 1, 1, 1)
    share = cut(pending, max_files=3)
    assert [f.relative for f in share.applied] == ["p0/0000.json", "p0/0001.json", "p1/0000.json"]
    assert [f.relative for f in share.left] == ["p0/0002.json", "p1/0001.json", "p1/0002.json"]


def test_cut_byte_cap_stops_before_the_file_that_would_pass_it() -> None:
    pending = _files("p0", 40, 40, 40) + _files("p1", 30, 70)
    share = cut(pending, max_bytes=100)
    assert [f.relative for f in share.applied] == ["p0/0000.json", "p1/0000.json"]
    assert len(share.left) == 3


def test_cut_first_file_larger_than_the_byte_cap_is_still_applied() -> None:
    share = cut(_files("p0", 500, 1), max_bytes=100)
    assert [f.relative for f in share.applied] == ["p0/0000.json"]


def test_cut_without_caps_applies_every_pending_file() -> None:
    pending = _files("p0", 1, 1) + _files("p1", 1)
    assert (len(cut(pending).applied), cut(pending).left) == (3, ())


def test_advance_after_a_capped_run_the_next_scan_finds_exactly_the_rest(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    for offset in range(0, 70, 10):  # more files per folder than RECENT_FILES remembers
        _write(tmp_path, 0, offset)
        _write(tmp_path, 1, offset)
    first = scan(fs, str(tmp_path), {})
    share = cut(first.pending, max_files=9)
    positions = advance({}, share.applied, first.parents)
    assert scan(fs, str(tmp_path), positions).pending == share.left
