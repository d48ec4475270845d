"""`cdclake quarantine replay --env dev` where moto cannot go: a run that fails, a job that is
already running, a run polled through its states (botocore's Stubber checks each request)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from cdclake.cli import app

JOB = "cdclake-dev-merge-public-orders"  # TableConfig.merge_job_name of config/dev.yaml
REPLAY = ["quarantine", "replay", "--env", "dev", "--table", "public.orders"]


def _glue() -> Any:
    return boto3.client(
        "glue", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


@pytest.fixture
def glue(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    """The CLI's Glue client, answering from a Stubber: first the job's definition."""
    client = _glue()
    stubber = Stubber(client)
    stubber.add_response(
        "get_job",
        {
            "Job": {
                "Name": JOB,
                "DefaultArguments": {
                    "--changes_path": "s3://c/topics/cdclake-dev.public.orders/",
                    "--warehouse_path": "s3://l/warehouse/",
                    "--database": "cdclake_dev",
                    "--quarantine_path": "s3://q/public_orders/",
                },
            }
        },
        {"JobName": JOB},
    )
    monkeypatch.setattr("cdclake.quarantine.glue_client", lambda region: client)
    with stubber:
        yield stubber
    stubber.assert_no_pending_responses()


def test_quarantine_replay_aws_wait_failed_run_exits_1_with_its_error_in_one_line(
    glue: Stubber,
) -> None:
    glue.add_response(
        "start_job_run",
        {"JobRunId": "jr_failed"},
        {"JobName": JOB, "Arguments": {"--mode": "replay"}},
    )
    glue.add_response(
        "get_job_run",
        {
            "JobRun": {
                "Id": "jr_failed",
                "JobRunState": "FAILED",
                "ErrorMessage": "cdclake replay failed:\ncolumn 'balance' is stored as decimal",
                "StartedOn": datetime(2025, 1, 1, tzinfo=UTC),
            }
        },
        {"JobName": JOB, "RunId": "jr_failed"},
    )
    result = CliRunner().invoke(app, [*REPLAY, "--wait"])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: replay run jr_failed of Glue job {JOB} ended FAILED: cdclake replay failed: "
        "column 'balance' is stored as decimal"
    ]


def test_quarantine_replay_aws_job_already_running_refused_in_one_line(glue: Stubber) -> None:
    glue.add_client_error("start_job_run", service_error_code="ConcurrentRunsExceededException")
    result = CliRunner().invoke(app, REPLAY)
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: Glue job {JOB} is running (one run at a time): replay when it has ended"
    )


def test_quarantine_replay_aws_config_file_refused_until_deployed(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*REPLAY, "--config", str(tmp_path / "fixed.yaml")])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "deploy the fix first" in result.output


def test_quarantine_replay_local_run_id_refused() -> None:
    result = CliRunner().invoke(
        app, ["quarantine", "replay", "--env", "local", "--table", "public.orders", "--run-id", "x"]
    )
    assert result.exit_code == 2 and "AWS environments only" in result.output


def test_wait_for_run_polls_until_a_final_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from cdclake import quarantine

    client = _glue()
    slept: list[float] = []
    seen: list[str] = []
    with Stubber(client) as stubber:
        for state in ("STARTING", "RUNNING", "TIMEOUT"):
            stubber.add_response(
                "get_job_run",
                {"JobRun": {"Id": "jr_1", "JobRunState": state}},
                {"JobName": "j", "RunId": "jr_1"},
            )
        monkeypatch.setattr(quarantine, "time", SimpleNamespace(sleep=slept.append))
        run = quarantine.wait_for_run(client, "j", "jr_1", interval=7, seen=seen.append)
    assert run["JobRunState"] == "TIMEOUT"
    assert seen == ["STARTING", "RUNNING", "TIMEOUT"] and slept == [7, 7]
