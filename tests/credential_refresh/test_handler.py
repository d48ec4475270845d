"""The rotation handler against the real service models (botocore's Stubber checks every request
against them). moto has no MSK Connect, so the calls themselves are not executed here."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from botocore.stub import Stubber

from lambdas.credential_refresh.handler import (
    RefreshFailed,
    connector_arns,
    redeploy_service,
    refresh,
    restart_connector,
)

CONNECTOR = "arn:aws:kafkaconnect:us-east-1:123456789012:connector/cdclake-dev-debezium-source/1"


@pytest.fixture
def kafkaconnect() -> Iterator[tuple[object, Stubber]]:
    client = boto3.client("kafkaconnect", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_credential_refresh_connector_restarted_with_its_tasks_config_untouched(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    # RestartConnector alone: no DescribeConnector/UpdateConnector, so the configuration
    # CloudFormation deployed stays what it deployed (no drift, the sink is not updated).
    stub.add_response(
        "restart_connector",
        {"connectorArn": CONNECTOR, "connectorOperationArn": f"{CONNECTOR}/operation/1"},
        {"connectorArn": CONNECTOR},
    )

    assert restart_connector(client, CONNECTOR) == f"{CONNECTOR}/operation/1"


def test_credential_refresh_service_gets_new_deployment() -> None:
    client = boto3.client("ecs", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "update_service",
            {},
            {"cluster": "fanout", "service": "debezium-server", "forceNewDeployment": True},
        )
        redeploy_service(client, "fanout", "debezium-server")
        stub.assert_no_pending_responses()


def _summary(name: str, state: str, revision: str) -> dict[str, str]:
    return {
        "connectorName": name,
        "connectorState": state,
        "connectorArn": f"arn:aws:kafkaconnect:us-east-1:123456789012:connector/{name}/{revision}",
    }


def test_credential_refresh_connectors_found_by_exact_name(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    source, sink = "cdclake-dev-debezium-source", "cdclake-dev-s3-sink"
    # ListConnectors matches by prefix: a longer name and a connector being deleted are not it.
    stub.add_response(
        "list_connectors",
        {
            "connectors": [
                _summary(source, "DELETING", "old"),
                _summary(source, "RUNNING", "new"),
                _summary(f"{source}-copy", "RUNNING", "x"),
            ]
        },
        {"connectorNamePrefix": source},
    )
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": sink})

    # The sink is absent (removed for an upgrade): skipped, not an error.
    assert connector_arns(client, [source, sink]) == {
        source: f"arn:aws:kafkaconnect:us-east-1:123456789012:connector/{source}/new"
    }


def test_credential_refresh_connector_being_deleted_listed_last_is_not_it(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    source = "cdclake-dev-debezium-source"
    # ListConnectors gives no order: the connector being deleted may come after the live one.
    stub.add_response(
        "list_connectors",
        {"connectors": [_summary(source, "RUNNING", "new"), _summary(source, "DELETING", "old")]},
        {"connectorNamePrefix": source},
    )
    assert connector_arns(client, [source]) == {
        source: f"arn:aws:kafkaconnect:us-east-1:123456789012:connector/{source}/new"
    }


def test_credential_refresh_failed_restart_others_still_restarted_then_fails(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    source, sink = "cdclake-dev-debezium-source", "cdclake-dev-s3-sink"
    for name in (source, sink):
        stub.add_response(
            "list_connectors",
            {"connectors": [_summary(name, "RUNNING", "1")]},
            {"connectorNamePrefix": name},
        )
    arn = {n: _summary(n, "RUNNING", "1")["connectorArn"] for n in (source, sink)}
    # The source is mid-update and refuses; the sink and the service are still restarted.
    stub.add_client_error(
        "restart_connector",
        "ConflictException",
        "connector is updating",
        expected_params={"connectorArn": arn[source]},
    )
    stub.add_response(
        "restart_connector",
        {"connectorArn": arn[sink], "connectorOperationArn": f"{arn[sink]}/operation/1"},
        {"connectorArn": arn[sink]},
    )
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        ecs_stub.add_response(
            "update_service",
            {},
            {"cluster": "fanout", "service": "debezium-server", "forceNewDeployment": True},
        )
        failed = rf"1 not restarted: connector {source}: .*Conflict"
        with pytest.raises(RefreshFailed, match=failed):
            refresh(
                client,
                ecs,
                [source, sink],
                [{"cluster": "fanout", "service": "debezium-server"}],
            )
        ecs_stub.assert_no_pending_responses()


def test_credential_refresh_connectors_not_listed_service_still_redeployed_then_fails(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    # The whole ListConnectors call refused, not one connector: the service is still redeployed.
    stub.add_client_error("list_connectors", "AccessDeniedException", "not allowed")
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        ecs_stub.add_response(
            "update_service",
            {},
            {"cluster": "fanout", "service": "debezium-server", "forceNewDeployment": True},
        )
        with pytest.raises(
            RefreshFailed, match=r"1 not restarted: connectors not listed: .*Denied"
        ):
            refresh(
                client,
                ecs,
                ["cdclake-dev-debezium-source"],
                [{"cluster": "fanout", "service": "debezium-server"}],
            )
        ecs_stub.assert_no_pending_responses()


def _restart_responses(stub: Stubber, *names: str) -> None:
    """ListConnectors finding each of ``names`` running, then their restarts (refresh lists
    every connector before it restarts any)."""
    summaries = [_summary(name, "RUNNING", "1") for name in names]
    for name, summary in zip(names, summaries, strict=True):
        stub.add_response(
            "list_connectors", {"connectors": [summary]}, {"connectorNamePrefix": name}
        )
    for summary in summaries:
        arn = summary["connectorArn"]
        stub.add_response(
            "restart_connector",
            {"connectorArn": arn, "connectorOperationArn": f"{arn}/operation/1"},
            {"connectorArn": arn},
        )


SERVICE = {"cluster": "fanout", "service": "debezium-server"}


def test_credential_refresh_everything_restarted_counted(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    _restart_responses(stub, "cdclake-dev-debezium-source")
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        ecs_stub.add_response("update_service", {}, {**SERVICE, "forceNewDeployment": True})
        done = refresh(client, ecs, ["cdclake-dev-debezium-source"], [SERVICE])
    assert done == {"connectors": 1, "services": 1}


def test_credential_refresh_connector_absent_skipped_not_failed(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    # Between the two deploys of an upgrade the connector does not exist: nothing to restart.
    name = "cdclake-dev-s3-sink"
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": name})
    assert refresh(client, None, [name], []) == {
        "connectors": 0,
        "services": 0,
    }


def test_credential_refresh_service_refused_named_then_fails() -> None:
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        ecs_stub.add_client_error("update_service", "ServiceNotActiveException", "inactive")
        with pytest.raises(RefreshFailed) as failed:
            refresh(None, ecs, [], [SERVICE])
    assert str(failed.value).startswith(
        "1 not restarted: service fanout/debezium-server: An error occurred "
        "(ServiceNotActiveException)"
    )


def test_credential_refresh_handler_nothing_configured_restarts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import dataclass

    from lambdas.credential_refresh.handler import handler

    @dataclass
    class Context:
        function_name: str = "credential-refresh"
        memory_limit_in_mb: int = 128
        invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:refresh"
        aws_request_id: str = "req-1"

    monkeypatch.setenv("CONNECTOR_NAMES", "[]")
    monkeypatch.setenv("ECS_SERVICES", "[]")
    event = {
        "source": "aws.secretsmanager",
        "detail-type": "AWS API Call via CloudTrail",
        "time": "2026-11-23T09:00:00Z",
        "detail": {"eventName": "RotationSucceeded"},
    }
    assert handler(event, Context()) == {"connectors": 0, "services": 0}


@contextmanager
def refresh_log() -> Iterator[list[dict[str, object]]]:
    """The handler's log lines (Powertools JSON) written meanwhile, parsed when the block ends."""
    from lambdas.credential_refresh import handler

    stream, lines = io.StringIO(), []
    log_handler = handler.logger.logger_handler
    previous, log_handler.stream = log_handler.stream, stream  # setStream would flush the old
    try:
        yield lines
    finally:
        log_handler.stream = previous
        lines += [json.loads(line) for line in stream.getvalue().splitlines()]


def _said(lines: list[dict[str, object]], *fields: str) -> list[tuple[object, ...]]:
    return [(line["level"], line["message"], *(line.get(f) for f in fields)) for line in lines]


def test_credential_refresh_logs_each_restart(kafkaconnect: tuple[object, Stubber]) -> None:
    client, stub = kafkaconnect
    _restart_responses(stub, "cdclake-dev-debezium-source")
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub, refresh_log() as lines:
        ecs_stub.add_response("update_service", {}, {**SERVICE, "forceNewDeployment": True})
        refresh(client, ecs, ["cdclake-dev-debezium-source"], [SERVICE])
    # ("service" is Powertools' own key: the cluster names the redeployed service here.)
    operation = _summary("cdclake-dev-debezium-source", "RUNNING", "1")["connectorArn"]
    assert _said(lines, "connector", "cluster", "operation") == [
        (
            "INFO",
            "connector restarted for the rotated password",
            "cdclake-dev-debezium-source",
            None,
            f"{operation}/operation/1",
        ),
        ("INFO", "service redeployed for the rotated password", None, "fanout", None),
    ]


def test_credential_refresh_logs_an_absent_connector_as_a_warning(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    name = "cdclake-dev-s3-sink"
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": name})
    with refresh_log() as lines:
        refresh(client, None, [name], [])
    assert _said(lines, "connector") == [
        ("WARNING", "connector not found, nothing to restart", name)
    ]


def test_credential_refresh_logs_each_failure_as_an_error(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    stub.add_client_error("list_connectors", "AccessDeniedException", "not allowed")
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub, refresh_log() as lines, pytest.raises(RefreshFailed):
        ecs_stub.add_client_error("update_service", "ServiceNotActiveException", "inactive")
        refresh(client, ecs, ["cdclake-dev-debezium-source"], [SERVICE])
    assert _said(lines, "cluster") == [
        ("ERROR", "connectors not listed", None),
        ("ERROR", "service not redeployed", "fanout"),
    ]


def test_credential_refresh_logs_a_refused_restart_naming_the_connector(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    name = "cdclake-dev-debezium-source"
    summary = _summary(name, "RUNNING", "1")
    stub.add_response("list_connectors", {"connectors": [summary]}, {"connectorNamePrefix": name})
    stub.add_client_error("restart_connector", "ConflictException", "connector is updating")
    with refresh_log() as lines, pytest.raises(RefreshFailed):
        refresh(client, None, [name], [])
    assert _said(lines, "connector") == [("ERROR", "connector not restarted", name)]


def test_credential_refresh_absent_connector_first_the_next_still_restarted(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    # Between an upgrade's deploys the source may be gone while the sink still runs.
    source, sink = "cdclake-dev-debezium-source", "cdclake-dev-s3-sink"
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": source})
    _restart_responses(stub, sink)
    assert refresh(client, None, [source, sink], []) == {"connectors": 1, "services": 0}


def test_credential_refresh_two_connectors_and_two_services_each_counted(
    kafkaconnect: tuple[object, Stubber],
) -> None:
    client, stub = kafkaconnect
    source, sink = "cdclake-dev-debezium-source", "cdclake-dev-s3-sink"
    _restart_responses(stub, source, sink)
    other = {"cluster": "fanout", "service": "debezium-server-2"}
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        for service in (SERVICE, other):
            ecs_stub.add_response("update_service", {}, {**service, "forceNewDeployment": True})
        done = refresh(client, ecs, [source, sink], [SERVICE, other])
    assert done == {"connectors": 2, "services": 2}


def test_credential_refresh_refused_service_the_next_still_redeployed() -> None:
    other = {"cluster": "fanout", "service": "debezium-server-2"}
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        ecs_stub.add_client_error("update_service", "ServiceNotActiveException", "inactive")
        ecs_stub.add_response("update_service", {}, {**other, "forceNewDeployment": True})
        with pytest.raises(
            RefreshFailed, match=r"^1 not restarted: service fanout/debezium-server:"
        ):
            refresh(None, ecs, [], [SERVICE, other])
        ecs_stub.assert_no_pending_responses()


def test_credential_refresh_every_failure_named_in_the_message() -> None:
    other = {"cluster": "fanout", "service": "debezium-server-2"}
    ecs = boto3.client("ecs", region_name="us-east-1")
    with Stubber(ecs) as ecs_stub:
        for _ in (SERVICE, other):
            ecs_stub.add_client_error("update_service", "ServiceNotActiveException", "inactive")
        with pytest.raises(RefreshFailed) as failed:
            refresh(None, ecs, [], [SERVICE, other])
    refusal = (
        "An error occurred (ServiceNotActiveException) when calling the UpdateService "
        "operation: inactive"
    )
    assert str(failed.value) == (
        f"2 not restarted: service fanout/debezium-server: {refusal}; "
        f"service fanout/debezium-server-2: {refusal}"
    )
