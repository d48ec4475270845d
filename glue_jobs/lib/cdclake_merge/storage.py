"""Minimal file access for manifests and input listing: local disk or any Hadoop filesystem.

The local implementation needs no Spark, so a run with nothing new to apply
finishes before a JVM would have started. The Hadoop one (through Spark's JVM)
serves ``s3://`` on Glue.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

INPUT_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz")


@dataclass(frozen=True)
class FileEntry:
    """A file as a listing shows it: ``tag`` changes when the file is written again."""

    path: str
    name: str
    size: int
    tag: str
    # Seconds since the epoch when written (S3 LastModified, mtime): how long a file waits.
    modified: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class Listing:
    """One folder, not recursive: its files (sorted by name) and its subfolders' names."""

    files: tuple[FileEntry, ...]
    folders: tuple[str, ...]


class FileSystem(Protocol):
    """read_text and read_prefix raise FileNotFoundError for a missing file, in every one."""

    def list_files(self, root: str) -> Iterator[str]: ...
    def list_folder(self, folder: str, after: str | None = None) -> Listing: ...
    def read_text(self, path: str) -> str: ...
    def read_prefix(self, path: str, limit: int) -> bytes: ...
    def read_bytes(self, path: str) -> bytes: ...
    def write_text(self, path: str, text: str) -> None: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...
    def create_exclusive(self, path: str, text: str) -> None: ...
    def exists(self, path: str) -> bool: ...
    def list_dir(self, path: str) -> list[str]: ...
    def delete(self, path: str) -> None: ...
    def mkdirs(self, path: str) -> None: ...


def missing(path: str) -> FileNotFoundError:
    """What every file system raises for a missing file: Python's own, naming the path."""
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *[p.strip("/") for p in parts]])


def folder_of(path: str) -> str:
    """The folder a file is in (for a change file, its Kafka partition's)."""
    return path.rsplit("/", 1)[0]


def is_input(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return not name.startswith((".", "_")) and name.endswith(INPUT_SUFFIXES)


class LocalFileSystem:
    def list_files(self, root: str) -> Iterator[str]:
        base = Path(root)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_")))
            for name in sorted(filenames):
                yield str(Path(dirpath, name))

    def list_folder(self, folder: str, after: str | None = None) -> Listing:
        """Files named after ``after`` (a directory read: local folders have no StartAfter)."""
        files: list[FileEntry] = []
        folders: list[str] = []
        try:
            entries = list(os.scandir(local_path(folder)))
        except (FileNotFoundError, NotADirectoryError):
            return Listing((), ())
        for entry in entries:
            if entry.is_dir():
                folders.append(entry.name)
            elif after is None or entry.name > after:
                stat = entry.stat()
                tag = f"{stat.st_size}:{stat.st_mtime_ns}"
                files.append(FileEntry(entry.path, entry.name, stat.st_size, tag, stat.st_mtime))
        return Listing(tuple(sorted(files, key=lambda f: f.name)), tuple(sorted(folders)))

    def read_text(self, path: str) -> str:
        return Path(path).read_text()

    def read_prefix(self, path: str, limit: int) -> bytes:
        with open(local_path(path), "rb") as f:
            return f.read(limit)

    def read_bytes(self, path: str) -> bytes:
        return Path(local_path(path)).read_bytes()

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode())

    def write_bytes(self, path: str, data: bytes) -> None:
        """Atomic: a reader sees the old bytes or the new ones, never a part."""
        target = Path(local_path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
        tmp.write_bytes(data)
        os.replace(tmp, target)

    def create_exclusive(self, path: str, text: str) -> None:
        """Atomic and exclusive: the file appears whole or not at all, and only once."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        finally:
            tmp.unlink()

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def list_dir(self, path: str) -> list[str]:
        p = Path(path)
        return sorted(child.name for child in p.iterdir()) if p.is_dir() else []

    def delete(self, path: str) -> None:
        import shutil

        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()

    def mkdirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)


class HadoopFileSystem:
    """Through the JVM's Hadoop FileSystem: s3://, hdfs://, file:// alike."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._gateway = spark.sparkContext._gateway
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _fs(self, path: str) -> Any:
        return self._path(path).getFileSystem(self._conf)

    def list_files(self, root: str) -> Iterator[str]:
        fs = self._fs(root)
        if not fs.exists(self._path(root)):
            return
        iterator = fs.listFiles(self._path(root), True)
        while iterator.hasNext():
            status = iterator.next()
            yield str(status.getPath().toString())

    def list_folder(self, folder: str, after: str | None = None) -> Listing:
        """Hadoop's listing has no StartAfter; S3 paths go to :func:`list_s3_folder` instead."""
        fs = self._fs(folder)
        if not fs.exists(self._path(folder)):
            return Listing((), ())
        files: list[FileEntry] = []
        folders: list[str] = []
        for status in fs.listStatus(self._path(folder)):
            name = str(status.getPath().getName())
            if status.isDirectory():
                folders.append(name)
            elif after is None or name > after:
                size, mtime = int(status.getLen()), int(status.getModificationTime())
                path = str(status.getPath().toString())
                files.append(FileEntry(path, name, size, f"{size}:{mtime}", mtime / 1000))
        return Listing(tuple(sorted(files, key=lambda f: f.name)), tuple(sorted(folders)))

    def _open(self, path: str) -> Any:
        """The file's input stream; a missing file raises FileNotFoundError, as the other
        file systems' do (Hadoop's java.io.FileNotFoundException reaches Python as a
        Py4JJavaError, which callers asking "is it there?" in one GET cannot tell apart)."""
        from py4j.java_gateway import is_instance_of
        from py4j.protocol import Py4JJavaError

        try:
            return self._fs(path).open(self._path(path))
        except Py4JJavaError as exc:
            if is_instance_of(self._gateway, exc.java_exception, "java.io.FileNotFoundException"):
                raise missing(path) from None
            raise

    def read_text(self, path: str) -> str:
        stream = self._open(path)
        try:
            reader = self._jvm.java.io.BufferedReader(
                self._jvm.java.io.InputStreamReader(stream, "UTF-8")
            )
            return "\n".join(iter(reader.readLine, None))
        finally:
            stream.close()

    def read_prefix(self, path: str, limit: int) -> bytes:
        stream = self._open(path)
        try:
            return bytes(stream.readNBytes(limit))
        finally:
            stream.close()

    def read_bytes(self, path: str) -> bytes:
        stream = self._open(path)
        try:
            return bytes(stream.readAllBytes())
        finally:
            stream.close()

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        stream = self._fs(path).create(self._path(path), overwrite)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        self._write(path, text.encode(), True)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._write(path, data, True)

    def create_exclusive(self, path: str, text: str) -> None:
        if self.exists(path):
            raise FileExistsError(path)
        self._write(path, text.encode(), False)

    def exists(self, path: str) -> bool:
        return bool(self._fs(path).exists(self._path(path)))

    def list_dir(self, path: str) -> list[str]:
        fs = self._fs(path)
        if not fs.exists(self._path(path)):
            return []
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(self._path(path)))

    def delete(self, path: str) -> None:
        self._fs(path).delete(self._path(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs(path).mkdirs(self._path(path))


def is_s3(path: str) -> bool:
    return path.startswith(("s3://", "s3a://", "s3n://"))


def list_s3_folder(folder: str, after: str | None = None, client: Any = None) -> Listing:
    """ListObjectsV2 of one folder from ``StartAfter=<folder>/<after>``, with ``/`` as delimiter.

    boto3 takes its endpoint and credentials from the environment, as Hadoop's S3A does in
    the local session (``AWS_ENDPOINT_URL_S3``) and as Glue's role does on AWS. Subfolders
    are reported only where their names sort after ``after``.
    """
    if client is None:
        client = s3_client()
    parsed = urlparse(folder)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/").rstrip("/")
    prefix = f"{prefix}/" if prefix else ""
    scheme = f"{parsed.scheme}://{bucket}/"
    arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
    if after is not None:
        arguments["StartAfter"] = prefix + after
    files: list[FileEntry] = []
    folders: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(**arguments):
        for common in page.get("CommonPrefixes", ()):
            folders.append(common["Prefix"][len(prefix) :].rstrip("/"))
        for item in page.get("Contents", ()):
            name = item["Key"][len(prefix) :]
            if not name or name.endswith("/"):  # a folder marker object
                continue
            size = int(item["Size"])
            tag, modified = item["ETag"].strip('"'), item["LastModified"].timestamp()
            files.append(FileEntry(scheme + item["Key"], name, size, tag, modified))
    return Listing(tuple(files), tuple(sorted(folders)))


def s3_client() -> Any:
    """boto3's S3 client; path-style against a local endpoint (moto), as the merge's S3A is."""
    import boto3
    from botocore.config import Config

    local = bool(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    return boto3.client("s3", config=Config(s3={"addressing_style": "path"}) if local else None)


def _split(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


class S3FileSystem:
    """A FileSystem over boto3, for reading (and small writes) without Spark: the operator
    commands and the dispatcher read checkpoints and timelines with it."""

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client()
        return self._client

    def _objects(self, uri: str, *, delimiter: bool) -> Iterator[dict[str, Any]]:
        bucket, prefix = _split(uri)
        prefix = prefix.rstrip("/") + "/" if prefix.rstrip("/") else ""
        arguments: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if delimiter:
            arguments["Delimiter"] = "/"
        for page in self.client.get_paginator("list_objects_v2").paginate(**arguments):
            for common in page.get("CommonPrefixes", ()):
                yield {"Key": common["Prefix"], "folder": True}
            yield from page.get("Contents", ())

    def list_files(self, root: str) -> Iterator[str]:
        bucket, _ = _split(root)
        scheme = urlparse(root).scheme
        for item in self._objects(root, delimiter=False):
            if not item["Key"].endswith("/"):
                yield f"{scheme}://{bucket}/{item['Key']}"

    def list_folder(self, folder: str, after: str | None = None) -> Listing:
        return list_s3_folder(folder, after, client=self.client)

    def list_dir(self, path: str) -> list[str]:
        names = set()
        for item in self._objects(path, delimiter=True):
            name = item["Key"].rstrip("/").rsplit("/", 1)[-1]
            if name:
                names.add(name)
        return sorted(names)

    def _get(self, path: str, **arguments: Any) -> bytes:
        """The object's bytes; a missing one raises FileNotFoundError, as the other file
        systems' do."""
        bucket, key = _split(path)
        try:
            return bytes(self.client.get_object(Bucket=bucket, Key=key, **arguments)["Body"].read())
        except self.client.exceptions.NoSuchKey:
            raise missing(path) from None

    def read_text(self, path: str) -> str:
        return self._get(path).decode()

    def read_prefix(self, path: str, limit: int) -> bytes:
        return self._get(path, Range=f"bytes=0-{limit - 1}")

    def read_bytes(self, path: str) -> bytes:
        return self._get(path)

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode())

    def write_bytes(self, path: str, data: bytes) -> None:
        bucket, key = _split(path)
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def create_exclusive(self, path: str, text: str) -> None:
        if self.exists(path):
            raise FileExistsError(path)
        self.write_text(path, text)

    def exists(self, path: str) -> bool:
        bucket, key = _split(path)
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/"), MaxKeys=1)
        return bool(listed.get("KeyCount"))

    def delete(self, path: str) -> None:
        bucket, key = _split(path)
        self.client.delete_object(Bucket=bucket, Key=key)

    def mkdirs(self, path: str) -> None:
        """S3 has no folders."""


def list_folder(fs: FileSystem, folder: str, after: str | None = None) -> Listing:
    """One folder's files after ``after``: S3 straight through boto3 (no JVM), else ``fs``.
    An :class:`S3FileSystem` lists with its own client: a client made a listing costs a
    dispatcher turn milliseconds a folder, two folders a table."""
    if is_s3(folder) and not isinstance(fs, S3FileSystem):
        return list_s3_folder(folder, after)
    return fs.list_folder(folder, after)


def filesystem_for(path: str, spark: Any | None = None) -> FileSystem:
    if "://" not in path or path.startswith("file://"):
        return LocalFileSystem()
    if spark is None:
        raise ValueError(f"{path} needs a SparkSession for its Hadoop filesystem")
    return HadoopFileSystem(spark)


def local_path(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path
