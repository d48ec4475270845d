"""The lake metrics tests' helpers: a moto server by PID, the Glue job's arguments, reads back."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cdclake.local.processes import free_port, spawn, stop, wait_for
from cdclake_merge import metrics


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """A moto server on a free port of 127.0.0.1, stopped by PID when the block ends."""
    port = free_port()
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = spawn("moto", argv, log=log)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            "the moto server",
            lambda: urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).status == 200,
            timeout=30,
            proc=proc,
            interval=0.1,
        )
        yield endpoint
    finally:
        stop(proc, timeout=10)


def job_arguments(template: dict[str, Any], table: str) -> dict[str, Any]:
    """The Glue job's default arguments for ``table`` as the lake stack declares them."""
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Glue::Job":
            arguments = resource["Properties"]["DefaultArguments"]
            if arguments["--table"] == table:
                return dict(arguments)
    raise AssertionError(f"no Glue job for {table}")


def local_argv(arguments: dict[str, Any], buckets: Path) -> list[str]:
    """The arguments as Glue passes them to the script, each bucket a local folder."""
    argv = ["merge_job.py", "--JOB_NAME", "local"]
    for name, value in arguments.items():
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            # Another stack's value (the bootstrap function's name): its export's name stands
            # in, as these runs never invoke it.
            value = value["Fn::ImportValue"]
        elif isinstance(value, dict):  # {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/path/"]]}
            value = "".join(
                str(buckets / p["Ref"]) if isinstance(p, dict) else p.removeprefix("s3://")
                for p in value["Fn::Join"][1]
            )
        argv += [name, value]
    return argv


def newest_source_ts_ms(changes: Path) -> int:
    """The newest ``source.ts_ms`` of any change event in the files (Debezium JSON, schema)."""
    newest = 0
    for path in changes.rglob("*.json"):
        for text in path.read_text().splitlines():
            event = json.loads(text)
            if event and event.get("payload"):
                newest = max(newest, int(event["payload"]["source"]["ts_ms"]))
    return newest


def statistics(
    client: Any, name: str, environment: str, table: str, unit: str | None = None
) -> dict[str, float]:
    """Sum, Minimum, Maximum and SampleCount of a lake metric within an hour of now (of the
    datapoints published in ``unit`` only, where given: CloudWatch matches units exactly)."""
    now = datetime.now(UTC)
    answer = client.get_metric_statistics(
        Namespace=metrics.NAMESPACE,
        MetricName=name,
        Dimensions=metrics.dimensions(environment, table),
        StartTime=now - timedelta(hours=1),
        EndTime=now + timedelta(hours=1),
        Period=2 * 3600,  # one bucket: the whole window
        Statistics=["Sum", "Minimum", "Maximum", "SampleCount"],
        **({"Unit": unit} if unit else {}),
    )
    if unit and not answer["Datapoints"]:
        raise AssertionError(f"no {name} datapoint published in {unit}")
    (point,) = answer["Datapoints"]
    return {k: float(point[k]) for k in ("Sum", "Minimum", "Maximum", "SampleCount")}
