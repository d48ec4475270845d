"""The credential refresh under exactly the statements the operations stack gives its role.

ECS runs on moto; moto has no MSK Connect, so the gate answers those calls from an in-memory
store (``connector_store``) after checking each (action, connector ARN) against the role's
statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lambdas.credential_refresh import handler
from tests.iam.iam_helpers.gate import Gate, World, connector_store, principal, user_with
from tests.iam.iam_helpers.moto import REGION, MotoIam
from tests.iam.iam_helpers.runs import (
    Run,
    assert_each_removal_denied,
    docs_row,
    granting_statements,
    lambda_context,
)
from tests.iam.iam_helpers.templates import (
    function_environment,
    function_role,
    logical_id,
    role_policy,
)

pytestmark = [pytest.mark.moto, pytest.mark.cdk]


COMPONENT = "credential refresh"
ROTATED_AT = "2026-11-24T06:00:00Z"

Runner = Callable[[Sequence[Mapping[str, Any]]], Run]


def rotation_event(account: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "AWS Service Event via CloudTrail",
        "source": "aws.secretsmanager",
        "account": account,
        "time": ROTATED_AT,
        "region": REGION,
        "resources": [],
        "detail": {"eventName": "RotationSucceeded"},
    }


@pytest.fixture(scope="module")
def statements(templates: dict[str, Any], world: World) -> list[dict[str, Any]]:
    template = templates["operations"]
    function = logical_id(template, "AWS::Lambda::Function", "CredentialRefreshFunction")
    role = function_role(template, function)
    return list(world.resolve(list(role_policy(template, role).statements), "operations"))


@pytest.fixture(scope="module")
def run(templates: dict[str, Any], world: World, moto_iam: MotoIam, account: str) -> Runner:
    template = templates["operations"]
    function = logical_id(template, "AWS::Lambda::Function", "CredentialRefreshFunction")
    environment = function_environment(template, function, world.resolve, "operations")
    ecs = moto_iam.client("ecs")

    def deployment() -> str:
        """The primary deployment's id: a forced new deployment replaces it."""
        cluster, name = world.service_arn.split("/")[-2:]
        (service,) = ecs.describe_services(cluster=cluster, services=[name])["services"]
        return str(service["deployments"][0]["id"])

    def under(statements: Sequence[Mapping[str, Any]]) -> Run:
        keys = user_with(moto_iam, "credential-refresh", statements)
        restarted: list[str] = []
        responder = connector_store(world.connectors, restarted)
        gate = Gate(statements, account, {"kafkaconnect": responder})
        before = deployment()
        error: Exception | None = None
        with principal(moto_iam, keys, gate, environment):
            try:
                result = handler.handler(rotation_event(account), lambda_context("refresh"))
            except Exception as exc:  # the run's outcome: the denial is what is asserted
                error, result = exc, None
        redeployed = deployment() != before
        ok = error is None and sorted(restarted) == sorted(world.connectors) and redeployed
        return Run(ok, gate.calls, {"result": result, "error": repr(error), "restarted": restarted})

    return under


def test_credential_refresh_template_statements_restarts_everything(full_run: Run) -> None:
    assert full_run.ok, full_run.detail
    assert not full_run.denied
    assert {c.action for c in full_run.calls} == {
        "kafkaconnect:ListConnectors",
        "kafkaconnect:RestartConnector",
        "ecs:UpdateService",
    }


def test_credential_refresh_each_needed_statement_removed_fails_access_denied(
    full_run: Run, needed: dict[int, Run], statements: list[dict[str, Any]]
) -> None:
    granting = granting_statements(full_run, statements)
    assert granting and granting <= set(needed)
    assert_each_removal_denied(needed, statements)
    assert all("AccessDenied" in failed.detail["error"] for failed in needed.values())


def test_credential_refresh_needed_statements_match_docs_table(
    full_run: Run, needed: dict[int, Run], statements: list[dict[str, Any]], repo_root: Path
) -> None:
    row = docs_row(
        COMPONENT,
        "moto (ECS action), gate (ECS resource, MSK Connect)",
        full_run,
        statements,
        needed,
    )
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
