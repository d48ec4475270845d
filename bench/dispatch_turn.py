"""One dispatcher turn over 500 lake tables against a moto server (issue #47 item 5).

    .venv/bin/python bench/dispatch_turn.py                 # 500 tables
    .venv/bin/python bench/dispatch_turn.py --tables 50 --commits 5

The dispatcher Lambda has a 5-minute timeout and decides every table of its environment in
one turn; the target is 500 tables within 60 s. A moto server (its own process, so its work
does not share this one's interpreter) holds the state of ``--tables`` tables as the stack and
the merge leave it: a merge job per table tagged as the stack tags it, and in S3 per table a
Hudi timeline of ``--commits`` completed commits each naming its checkpoint, the newest
checkpoint, and change files under the S3 sink's layout. Nine tables in ten are caught up (every
file applied), the tenth has a file waiting after its last commit. The turn is the Lambda's:
``ListJobs`` by the tag, ``GetJob`` per job (its targets), then
:func:`cdclake_merge.dispatch.dispatch` with ``dry_run=True`` (per table ``GetJobRuns``, the
timeline's listing, the commit files read until one names a checkpoint, the checkpoint, the
catalog marker, the change folders' listings). Times each part, counts the requests per table,
prints the figures and writes ``bench/results/dispatch_turn-<ts>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REGION = "eu-north-1"
PREFIX = "bench"
TAG_VALUE = f"{PREFIX}-merge-"
CHANGES, LAKE = "bench-dispatch-changes", "bench-dispatch-lake"
WAREHOUSE = f"s3://{LAKE}/warehouse/"
DATABASE = "bench"
BUDGET = 20  # prod's lake.dispatch.max_concurrent_runs
TARGET_SECONDS = 60.0
WAITING_EVERY = 10  # one table in ten has a change file waiting
SETUP_THREADS = 8


def clients(endpoint: str) -> tuple[Any, Any]:
    """S3 (path-style) and Glue clients of the moto server."""
    import boto3
    from botocore.config import Config

    common: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region_name": REGION,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    config = Config(s3={"addressing_style": "path"}, max_pool_connections=SETUP_THREADS * 2)
    return boto3.client("s3", config=config, **common), boto3.client("glue", **common)


def table_name(i: int) -> str:
    return f"public.t{i:04d}"


def topic_of(table: str) -> str:
    return f"{PREFIX}.{table}"


def make_table(s3: Any, glue: Any, i: int, commits: int) -> None:
    """Table ``i``'s job, change files, timeline and checkpoint."""
    from cdclake_merge.pending import CHECKPOINT_KEY, TablePaths
    from cdclake_merge.positions import advance, positions_as_json, scan
    from cdclake_merge.storage import S3FileSystem, join

    table = table_name(i)
    topic = topic_of(table)
    changes = f"s3://{CHANGES}/topics/{topic}/"
    glue.create_job(
        Name=f"{TAG_VALUE}{table.replace('.', '-')}",
        Role="arn:aws:iam::123456789012:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/merge_job.py"},
        GlueVersion="5.0",
        DefaultArguments={
            "--table": table,
            "--changes_path": changes,
            "--warehouse_path": WAREHOUSE,
            "--database": DATABASE,
            "--record_key": "id",
        },
        Tags={"cdclake:merge-jobs": TAG_VALUE},
    )

    def put(offset: int) -> None:
        key = f"topics/{topic}/partition=0/{topic}+0+{offset:010d}.json"
        s3.put_object(Bucket=CHANGES, Key=key, Body=b'{"payload": {}}\n')

    put(0)
    fs = S3FileSystem(s3)
    listed = scan(fs, changes, {})
    positions = advance({}, listed.pending, listed.parents)
    paths = TablePaths.of(WAREHOUSE, f"{DATABASE}.{table.replace('.', '_')}")
    for version in range(1, commits + 1):
        checkpoint = f"checkpoints/v{version:08d}.json"
        if version == commits:  # only the newest is read
            body = {"version": version, "key": ["id"], "positions": positions_as_json(positions)}
            fs.write_text(join(paths.sidecar, checkpoint), json.dumps(body))
        instant = f"2026112800{version:07d}"
        named = {"extraMetadata": {CHECKPOINT_KEY: checkpoint}}
        fs.write_text(join(paths.timeline, f"{instant}.commit"), json.dumps(named))
    if i % WAITING_EVERY == 0:
        put(1000)


def make_world(endpoint: str, tables: int, commits: int) -> float:
    """The buckets and ``tables`` tables on the server; the seconds it took."""
    s3, glue = clients(endpoint)
    started = time.monotonic()
    for bucket in (CHANGES, LAKE):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    with ThreadPoolExecutor(SETUP_THREADS) as pool:
        list(pool.map(lambda i: make_table(s3, glue, i, commits), range(tables)))
    return time.monotonic() - started


def turn(endpoint: str) -> dict[str, Any]:
    """One turn as the Lambda makes it (dry run): its decisions, parts' seconds and requests."""
    from cdclake_merge.dispatch import dispatch, merge_jobs, target_from_job
    from cdclake_merge.storage import S3FileSystem

    s3, glue = clients(endpoint)
    requests: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        requests[event_name.split(".", 2)[-1]] += 1

    for client in (s3, glue):
        client.meta.events.register("before-call.*.*", count)
    started = time.monotonic()
    jobs = merge_jobs(glue, TAG_VALUE)
    listed = time.monotonic()
    targets = [target_from_job(glue, job) for job in jobs]
    read = time.monotonic()
    decisions = dispatch(targets, fs=S3FileSystem(s3), glue=glue, budget=BUDGET, dry_run=True)
    done = time.monotonic()
    return {
        "decisions": decisions,
        "seconds": {
            "list_jobs": round(listed - started, 3),
            "get_jobs": round(read - listed, 3),
            "dispatch": round(done - read, 3),
            "turn": round(done - started, 3),
        },
        "requests": dict(sorted(requests.items())),
    }


@contextmanager
def aws_environment(endpoint: str) -> Iterator[None]:
    """What the Lambda's clients read from its environment, pointing at ``endpoint``: the
    merge's own listing makes its S3 client from it (cdclake_merge.storage.s3_client)."""
    values = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }
    saved = {k: os.environ.get(k) for k in (*values, "AWS_SESSION_TOKEN", "AWS_PROFILE")}
    os.environ.update(values)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def bench(tables: int, commits: int) -> dict[str, Any]:
    """The figures of one turn over ``tables`` tables with ``commits`` commits each."""
    from cdclake.local.processes import moto_server

    with (
        tempfile.TemporaryDirectory(prefix="bench-dispatch-") as scratch,
        moto_server(Path(scratch) / "moto.log") as endpoint,
        aws_environment(endpoint),
    ):
        setup = make_world(endpoint, tables, commits)
        result = turn(endpoint)
    decisions = result["decisions"]
    seconds = result["seconds"]
    requests = sum(result["requests"].values())
    return {
        "tables": tables,
        "commits_per_table": commits,
        "decisions": len(decisions),
        "failed": [d.reason for d in decisions if d.failed],
        "waiting": sum(1 for d in decisions if d.files_pending),
        "started": sum(1 for d in decisions if d.start),
        "budget": BUDGET,
        "setup_s": round(setup, 1),
        "seconds": seconds,
        "ms_per_table": round(1000 * seconds["turn"] / max(tables, 1), 1),
        "requests": result["requests"],
        "requests_per_table": round(requests / max(tables, 1), 2),
        "target_s": TARGET_SECONDS,
        "target_met": seconds["turn"] <= TARGET_SECONDS,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "at": dt.datetime.now(dt.UTC).isoformat(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--commits", type=int, default=20, help="completed commits per table")
    args = parser.parse_args()
    figures = bench(args.tables, args.commits)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    target = HERE / "results" / f"dispatch_turn-{stamp}.json"
    target.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "failed"}, indent=2))
    print(
        f"{figures['decisions']} decisions ({len(figures['failed'])} failed) in "
        f"{figures['seconds']['turn']} s, {figures['requests_per_table']} requests a table "
        f"(target <= {TARGET_SECONDS:.0f} s: {'met' if figures['target_met'] else 'missed'}); "
        f"written to {target.relative_to(HERE.parent)}"
    )


if __name__ == "__main__":
    main()
