"""The key an erase run erases, handed over through a request object, not the job run.

A Glue job run's arguments stay in the job's run history (``GetJobRuns``, the console) for
as long as Glue keeps it, beyond any erase's reach. So ``cdclake erase`` writes the key to a
short-lived request object (``<warehouse>/erase-requests/<table>/<id>.json``) and starts the
run with ``--erase_request <id>`` alone; the run reads the key from there and removes the
object once the erase succeeded. A failed run leaves it, so the run can be run again from the
console; one never run again expires (``environment.retention.ERASE_REQUEST_DAYS``, the lake
bucket's lifecycle rule on this folder, which is why it is one folder for every table and
outside the tables' sidecars, which the dispatcher may read). The lake bucket keeps a removed
object's old version as long as the table's other old file versions: the erase's deadlines
say so.

No Spark, no boto3 here: the command writes it through boto3's file system, the job reads
and removes it through Hadoop's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping

from cdclake_merge.storage import FileSystem, join

REQUESTS = "erase-requests"  # directly under the warehouse: one lifecycle rule expires them
# What `cdclake erase` names a request: a run argument edited by hand cannot leave the folder.
_REQUEST_ID = re.compile(r"[0-9a-f]{32}")


def request_folder(warehouse: str, table: str) -> str:
    """Where ``DATABASE.TABLE``'s erase requests are."""
    return join(warehouse, REQUESTS, table)


def request_path(warehouse: str, table: str, request_id: str) -> str:
    """The request object of ``request_id``; ValueError (one line) for an id not ours."""
    if not _REQUEST_ID.fullmatch(request_id):
        raise ValueError(
            f"--erase_request must be the 32 hex digits `cdclake erase` started the run with, "
            f"not {request_id!r}"
        )
    return join(request_folder(warehouse, table), f"{request_id}.json")


def write_request(fs: FileSystem, warehouse: str, table: str, key: Mapping[str, str]) -> str:
    """Store ``key`` (every key column's value as text) as a new request; its id."""
    request_id = uuid.uuid4().hex
    fs.write_text(request_path(warehouse, table, request_id), json.dumps({"key": dict(key)}))
    return request_id


def read_request(fs: FileSystem, warehouse: str, table: str, request_id: str) -> dict[str, str]:
    """The key of request ``request_id``. ValueError (one line, naming no value): no such
    request (a successful erase removed it, or it was never written) or not a key."""
    path = request_path(warehouse, table, request_id)
    try:
        text = fs.read_text(path)
    except FileNotFoundError:
        raise ValueError(
            f"erase request {request_id} is not in {request_folder(warehouse, table)}: an erase "
            "that succeeded removed it, or it expired unused; start another with `cdclake erase`"
        ) from None
    try:
        key = json.loads(text).get("key")
    except (ValueError, AttributeError):
        key = None
    if not isinstance(key, dict) or not key or not all(isinstance(v, str) for v in key.values()):
        raise ValueError(
            f"erase request {request_id} holds no key (an object of key columns' text values)"
        )
    return key


def remove_request(fs: FileSystem, warehouse: str, table: str, request_id: str) -> None:
    """Remove a request once its erase is done (or its run never started)."""
    fs.delete(request_path(warehouse, table, request_id))
