"""An erase's request object (``cdclake_merge.erase_request``): the key handed from
``cdclake erase`` to the Glue run through the lake bucket, not the run's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdclake_merge.erase_request import read_request, remove_request, write_request
from cdclake_merge.storage import LocalFileSystem

TABLE = "lake.public_orders"


def test_erase_request_written_then_read_same_key(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    request = write_request(fs, str(tmp_path), TABLE, {"id": "7", "region": "eu"})
    stored = tmp_path / "erase-requests" / TABLE
    assert [p.name for p in stored.iterdir()] == [f"{request}.json"]
    assert read_request(fs, str(tmp_path), TABLE, request) == {"id": "7", "region": "eu"}


def test_erase_request_removed_then_read_refused_naming_its_folder(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    request = write_request(fs, str(tmp_path), TABLE, {"id": "7"})
    remove_request(fs, str(tmp_path), TABLE, request)
    folder = tmp_path / "erase-requests" / TABLE
    with pytest.raises(ValueError) as refused:
        read_request(fs, str(tmp_path), TABLE, request)
    assert str(refused.value) == (
        f"erase request {request} is not in {folder}: an erase that succeeded removed it, or it "
        "expired unused; "
        "start another with `cdclake erase`"
    )


@pytest.mark.parametrize("request_id", ["../../lake.db/public_orders/x", "ABC", ""])
def test_erase_request_id_not_ours_refused(tmp_path: Path, request_id: str) -> None:
    with pytest.raises(ValueError, match=r"^--erase_request must be the 32 hex digits"):
        read_request(LocalFileSystem(), str(tmp_path), TABLE, request_id)


def test_erase_request_without_a_key_refused_naming_no_value(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    request = write_request(fs, str(tmp_path), TABLE, {"id": "7"})
    folder = tmp_path / "erase-requests" / TABLE
    (folder / f"{request}.json").write_text('{"key": {"id": 7}, "note": "secret-7"}')
    with pytest.raises(ValueError) as refused:
        read_request(fs, str(tmp_path), TABLE, request)
    assert "holds no key" in str(refused.value) and "secret" not in str(refused.value)
