"""The merge tests' shared fixtures: one folder on each file system the merge meets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdclake_merge.storage import FileSystem, HadoopFileSystem, LocalFileSystem, S3FileSystem

from .support import moto_bucket

BUCKET = "merge-file-systems"


@pytest.fixture(scope="module")
def s3_root() -> Iterator[tuple[S3FileSystem, str]]:
    with moto_bucket(BUCKET) as client:
        yield S3FileSystem(client), f"s3://{BUCKET}/warehouse"


@pytest.fixture(params=["local", "hadoop", "s3"])
def file_system(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileSystem, str]:
    """A folder where the local stack (local), a Glue run (Hadoop; its S3 listed through
    boto3) or an operator command (S3, on moto) meets the merge's files."""
    if request.param == "local":
        return LocalFileSystem(), str(tmp_path)
    if request.param == "hadoop":
        return HadoopFileSystem(request.getfixturevalue("spark")), tmp_path.as_uri()
    fs, root = request.getfixturevalue("s3_root")
    return fs, f"{root}/{tmp_path.name}"
