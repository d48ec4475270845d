"""Lake metrics from a real merge run: glue_jobs/merge_job.py with the Glue job's own arguments
(buckets as local folders) publishes to a moto server; what arrives is read back with boto3."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import runpy
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdclake_merge import metrics
from tests.cdk.stack_helpers import lake_alarms
from tests.metrics.metrics_helpers import (
    job_arguments,
    local_argv,
    moto_server,
    newest_source_ts_ms,
    statistics,
)

pytestmark = [pytest.mark.moto, pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]

ENTRY = Path(__file__).resolve().parents[2] / "glue_jobs" / "merge_job.py"
# Its own table: the session catalog also holds the Glue entry tests' cdclake_dev.public_orders.
TABLE = "public.customers"


@pytest.fixture(scope="session")
def cloudwatch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """boto3 clients (the job's and ours) talk to a moto server with dummy credentials."""
    import boto3

    with (
        moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint,
        pytest.MonkeyPatch.context() as patch,
    ):
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            patch.delenv(name)
        patch.setenv("AWS_ENDPOINT_URL", endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
        patch.setenv("AWS_CONFIG_FILE", os.devnull)
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        yield boto3.client("cloudwatch")


@pytest.fixture(scope="session")
def two_runs(synth, spark, cloudwatch, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A committing run over generated changes, then a run with nothing new; both publish
    (the second no lag)."""
    from cdclake_merge.generator import GeneratorOptions, generate_files

    arguments = job_arguments(synth("dev").template("lake"), TABLE)
    work = tmp_path_factory.mktemp("metrics")
    argv = local_argv(arguments, work / "buckets")
    args = dict(zip(argv[1::2], argv[2::2], strict=True))
    generated = work / "generated"
    generate_files(generated, GeneratorOptions(table=TABLE, events=300, seed=11, keys=40))
    shutil.copytree(next((generated / "topics").iterdir()), args["--changes_path"])
    main = runpy.run_path(str(ENTRY))["main"]

    runs = []
    for _ in range(2):
        out = io.StringIO()
        before = time.time()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        summary = json.loads(out.getvalue().strip().splitlines()[-1])["cdclake_merge"]
        runs.append({"before": before, "after": time.time(), "summary": summary})
        time.sleep(1.5)  # the no-op run's lag must be visibly later
    return {
        "environment": arguments["--environment"],
        "runs": runs,
        "newest_ms": newest_source_ts_ms(Path(args["--changes_path"])),
        "changes": args["--changes_path"],
    }


def test_metrics_runs_commit_then_find_nothing_new(two_runs: dict[str, Any]) -> None:
    first, second = (run["summary"] for run in two_runs["runs"])
    assert first["committed"] and first["applied"] > 0
    assert not second["committed"]
    assert two_runs["environment"] == "dev"  # from the job definition


def test_metrics_every_metric_arrives_with_environment_and_table(
    two_runs: dict[str, Any], cloudwatch: Any
) -> None:
    listed = cloudwatch.list_metrics(Namespace=metrics.NAMESPACE)["Metrics"]
    found = {
        m["MetricName"]
        for m in listed
        if {d["Name"]: d["Value"] for d in m["Dimensions"]}
        == {"Environment": "dev", "Table": TABLE}
    }
    assert found == set(metrics.METRIC_NAMES)


def test_metrics_counts_match_the_committed_run(two_runs: dict[str, Any], cloudwatch: Any) -> None:
    first = two_runs["runs"][0]["summary"]
    sums = {
        name: statistics(cloudwatch, name, "dev", TABLE)
        for name in (metrics.EVENTS_APPLIED, metrics.UPSERTS, metrics.DELETES, metrics.QUARANTINED)
    }
    assert {name: s["Sum"] for name, s in sums.items()} == {
        metrics.EVENTS_APPLIED: first["applied"],
        metrics.UPSERTS: first["upserts"],
        metrics.DELETES: first["deletes"],
        metrics.QUARANTINED: first["quarantined"],
    }
    # Both runs published; the one with nothing new published zeros.
    assert {(s["SampleCount"], s["Minimum"]) for s in sums.values()} == {(2, 0)}


def test_metrics_lag_is_now_minus_newest_source_commit(
    two_runs: dict[str, Any], cloudwatch: Any
) -> None:
    lag = statistics(cloudwatch, metrics.LAG, "dev", TABLE)
    first = two_runs["runs"][0]
    newest = two_runs["newest_ms"] / 1000
    assert two_runs["runs"][0]["summary"]["newest_source_ts_ms"] == two_runs["newest_ms"]
    assert first["before"] - newest <= lag["Minimum"] <= first["after"] - newest


def test_metrics_noop_run_leaves_lag_to_the_dispatcher(
    two_runs: dict[str, Any], cloudwatch: Any
) -> None:
    # The table's newest source commit is old once it is quiet: only the dispatcher, which
    # sees that nothing waits, may say how far behind it is.
    assert statistics(cloudwatch, metrics.LAG, "dev", TABLE)["SampleCount"] == 1


def test_metrics_run_duration_is_published(two_runs: dict[str, Any], cloudwatch: Any) -> None:
    duration = statistics(cloudwatch, metrics.RUN_DURATION, "dev", TABLE)
    first = two_runs["runs"][0]
    assert 0 < duration["Maximum"] <= first["after"] - first["before"]


# Written out, not read from metrics.UNITS: the alarms and the dashboard were built on these.
PUBLISHED_UNITS = {
    "EventsApplied": "Count",
    "Upserts": "Count",
    "Deletes": "Count",
    "Quarantined": "Count",
    "RunDurationSeconds": "Seconds",
    "LagSeconds": "Seconds",
}


def test_metrics_units_are_seconds_and_counts_as_the_alarms_expect(
    two_runs: dict[str, Any], cloudwatch: Any, synth: Any
) -> None:
    for name, unit in PUBLISHED_UNITS.items():
        runs = 1 if name == metrics.LAG else 2  # the run with nothing new publishes no lag
        assert statistics(cloudwatch, name, "dev", TABLE, unit=unit)["SampleCount"] == runs, name
    by_kind = lake_alarms(synth("dev").template("operations"))
    alarms = {kind: tables[TABLE] for kind, tables in by_kind.items() if TABLE in tables}
    assert set(alarms) == {"Lag", "ChangeFilesExpiring", "Quarantined"}
    for kind, alarm in alarms.items():
        unit = PUBLISHED_UNITS[alarm["MetricName"]]
        assert alarm.get("Unit", unit) == unit, kind
    # The lag alarm compares seconds with its objective, which is also its period (seconds).
    lag = alarms["Lag"]
    assert (lag["Statistic"], lag["Threshold"]) == ("Maximum", lag["Period"])
    first = two_runs["runs"][0]
    published = statistics(cloudwatch, metrics.LAG, "dev", TABLE, unit="Seconds")["Minimum"]
    newest = two_runs["newest_ms"] / 1000
    assert first["before"] - newest <= published <= first["after"] - newest


def test_publish_unreachable_endpoint_logs_one_line_and_returns_false(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import boto3
    from botocore.config import Config

    from cdclake.local.processes import free_port

    client = boto3.client(
        "cloudwatch",
        endpoint_url=f"http://127.0.0.1:{free_port()}",
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    run = metrics.TableRun("dev", TABLE, 1, 1, 0, 0, 1.0, 0)
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
        assert metrics.publish(run, client=client) is False
    (record,) = caplog.records
    assert record.getMessage().startswith(f"cdclake metrics not published for {TABLE}: ")
    assert "\n" not in record.getMessage()


def test_cli_merge_env_publishes_under_its_environment(cloudwatch: Any) -> None:
    from cdclake.cli import _publish_metrics
    from cdclake_merge.job import RunResult

    result = RunResult(table="lake.public_orders", version=3, applied=5, upserts=4, deletes=1)
    result.newest_source_ts_ms = int(time.time() * 1000) - 90_000
    _publish_metrics("local", "public.orders", result, 2.5)
    applied = statistics(cloudwatch, metrics.EVENTS_APPLIED, "local", "public.orders")
    lag = statistics(cloudwatch, metrics.LAG, "local", "public.orders")
    assert (applied["Sum"], applied["SampleCount"]) == (5, 1)
    assert 90 <= lag["Maximum"] < 120


def test_cli_merge_env_without_region_does_not_try(
    cloudwatch: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from cdclake.cli import _publish_metrics
    from cdclake_merge.job import RunResult

    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
        _publish_metrics("laptop", "public.orders", RunResult(table="t", version=1), 1.0)
    assert caplog.records == []  # not even a failed attempt's line on a laptop without AWS
