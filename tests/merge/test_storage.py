"""cdclake_merge.storage's contract, held by each file system alike: a missing file read raises
Python's FileNotFoundError naming the path (callers asking "is it there?" in one GET rely on
it: the state object of a table never rebuilt, read by every merge run on Glue's S3A)."""

from __future__ import annotations

import pytest

from cdclake_merge.generations import Generations, read_generations
from cdclake_merge.storage import FileSystem


def test_read_text_missing_file_raises_file_not_found_naming_it(
    file_system: tuple[FileSystem, str],
) -> None:
    fs, root = file_system
    with pytest.raises(FileNotFoundError) as raised:
        fs.read_text(f"{root}/absent.json")
    assert str(raised.value.filename).endswith("absent.json")


def test_read_prefix_missing_file_raises_file_not_found(
    file_system: tuple[FileSystem, str],
) -> None:
    fs, root = file_system
    with pytest.raises(FileNotFoundError):
        fs.read_prefix(f"{root}/absent.json", 16)


def test_read_text_written_file_returns_its_text(file_system: tuple[FileSystem, str]) -> None:
    fs, root = file_system
    fs.write_text(f"{root}/present.json", '{"live": 2}')
    assert fs.read_text(f"{root}/present.json") == '{"live": 2}'


def test_read_bytes_written_bytes_returned_unchanged(file_system: tuple[FileSystem, str]) -> None:
    fs, root = file_system
    data = bytes(range(256)) * 3  # every byte value: no decoding on the way
    fs.write_bytes(f"{root}/change.json.gz", data)
    assert fs.read_bytes(f"{root}/change.json.gz") == data


def test_read_bytes_missing_file_raises_file_not_found(
    file_system: tuple[FileSystem, str],
) -> None:
    fs, root = file_system
    with pytest.raises(FileNotFoundError):
        fs.read_bytes(f"{root}/absent.json.gz")


def test_read_generations_none_stored_is_generation_one(
    file_system: tuple[FileSystem, str],
) -> None:
    fs, root = file_system
    assert read_generations(fs, f"{root}/_cdclake/public_orders") == Generations()
