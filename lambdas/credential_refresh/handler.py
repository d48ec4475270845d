"""Restart both captures after the replication password rotated.

Debezium reads the password once, when its task starts: on MSK Connect the Secrets Manager
config provider resolves it then (``config.action.reload=none``), on ECS the task definition
injects it then. A rotation leaves running sessions connected, but the next reconnect would
fail with the old password and the connector would stay FAILED. So the rotation's
``RotationSucceeded`` event (EventBridge, from CloudTrail) restarts them while the old sessions
still work: each MSK Connect connector is restarted with its tasks (RestartConnector: the
configuration CloudFormation deployed is left as it is, so nothing drifts, and the restarted
tasks resolve the secret again) and the Debezium Server service gets a new deployment (its new
task reads the secret). Offsets are kept by both, so nothing is read twice beyond the usual
at-least-once overlap. MSK Connect refuses a restart unless the connector is RUNNING with no
other operation in progress: a refusal is a failure of that connector (below).

Connectors are found by their fixed names when the event arrives (ListConnectors): an ARN
changes whenever a connector is replaced, and between the two deploys of an upgrade there is
none, which is skipped with a warning (the recreated connector reads the current password).
A restart that fails (a connector mid-update refuses one) does not keep the others from theirs:
each is tried, and the invocation fails afterwards naming what did not restart: Lambda retries it
(restarting all again), then keeps its event in the dead-letter queue, whose alarm pages.

Environment: ``CONNECTOR_NAMES`` (JSON list) and ``ECS_SERVICES`` (JSON list of
``{"cluster": ..., "service": ...}``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()


def connector_arns(client: Any, names: list[str]) -> dict[str, str]:
    """ARN of each connector in ``names`` that exists (and is not being deleted), by name."""
    found: dict[str, str] = {}
    for name in names:
        paginator = client.get_paginator("list_connectors")
        for page in paginator.paginate(connectorNamePrefix=name):
            for connector in page["connectors"]:
                if connector["connectorName"] == name and connector["connectorState"] != "DELETING":
                    found[name] = connector["connectorArn"]
    return found


def restart_connector(client: Any, connector_arn: str) -> str:
    """Restart the connector and all its tasks; the restart's operation ARN."""
    response = client.restart_connector(connectorArn=connector_arn)
    return str(response["connectorOperationArn"])


def redeploy_service(client: Any, cluster: str, service: str) -> None:
    """Replace the service's task; the new one reads the current secret."""
    client.update_service(cluster=cluster, service=service, forceNewDeployment=True)


class RefreshFailed(RuntimeError):
    """Some captures were not restarted; the message names each and why."""


def refresh(
    kafkaconnect: Any, ecs: Any, names: list[str], services: list[dict[str, str]]
) -> dict[str, int]:
    """Restart each connector of ``names`` and redeploy each of ``services``, every one tried.

    Returns how many were restarted and redeployed; raises :class:`RefreshFailed` after the
    last when any failed.
    """
    failed: list[str] = []
    restarted = redeployed = 0
    try:
        arns = connector_arns(kafkaconnect, names) if names else {}
    except Exception as exc:  # no connector can be restarted; the services still can
        logger.exception("connectors not listed")
        failed.append(f"connectors not listed: {exc}")
        names, arns = [], {}
    for name in names:
        if name not in arns:
            logger.warning("connector not found, nothing to restart", extra={"connector": name})
            continue
        try:
            operation = restart_connector(kafkaconnect, arns[name])
        except Exception as exc:
            logger.exception("connector not restarted", extra={"connector": name})
            failed.append(f"connector {name}: {exc}")
            continue
        restarted += 1
        logger.info(
            "connector restarted for the rotated password",
            extra={"connector": name, "operation": operation},
        )
    for target in services:
        try:
            redeploy_service(ecs, target["cluster"], target["service"])
        except Exception as exc:
            logger.exception("service not redeployed", extra=target)
            failed.append(f"service {target['cluster']}/{target['service']}: {exc}")
            continue
        redeployed += 1
        logger.info("service redeployed for the rotated password", extra=target)
    if failed:
        raise RefreshFailed(f"{len(failed)} not restarted: " + "; ".join(failed))
    return {"connectors": restarted, "services": redeployed}


@event_source(data_class=EventBridgeEvent)
@logger.inject_lambda_context
def handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, int]:
    names: list[str] = json.loads(os.environ["CONNECTOR_NAMES"])
    services: list[dict[str, str]] = json.loads(os.environ["ECS_SERVICES"])
    kafkaconnect = boto3.client("kafkaconnect") if names else None
    ecs = boto3.client("ecs") if services else None
    return refresh(kafkaconnect, ecs, names, services)
