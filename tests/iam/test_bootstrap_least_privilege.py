"""The replication bootstrap's scheduled Reconcile under exactly the statements the database
stack gives its role: the secrets from Secrets Manager (moto, gated), the SQL on a real
PostgreSQL. Only the network path is stood in: the connection goes to the local server's unix
socket instead of Aurora's TLS endpoint."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pg8000.native import Connection

from lambdas.bootstrap import handler
from tests.iam.iam_helpers.gate import Gate, World, principal, user_with
from tests.iam.iam_helpers.moto import MotoIam
from tests.iam.iam_helpers.runs import (
    Run,
    assert_each_removal_denied,
    docs_row,
    granting_statements,
    lambda_context,
)
from tests.iam.iam_helpers.statements import allowing
from tests.iam.iam_helpers.templates import (
    function_environment,
    function_role,
    logical_id,
    role_policy,
)

pytestmark = [pytest.mark.moto, pytest.mark.cdk, pytest.mark.postgres]

COMPONENT = "replication bootstrap (Reconcile)"
Runner = Callable[[Sequence[Mapping[str, Any]]], Run]


def _function(template: Mapping[str, Any]) -> str:
    return logical_id(template, "AWS::Lambda::Function", "ReplicationBootstrapFunction")


@pytest.fixture(scope="module")
def statements(
    templates: dict[str, Any], world: World, bootstrap_world: dict[str, Any]
) -> list[dict[str, Any]]:
    template = templates["database"]
    role = function_role(template, _function(template))
    return list(world.resolve(list(role_policy(template, role).statements), "database"))


@pytest.fixture(scope="module")
def run(
    templates: dict[str, Any],
    world: World,
    bootstrap_world: dict[str, Any],
    moto_iam: MotoIam,
    account: str,
) -> Runner:
    template = templates["database"]
    environment = function_environment(template, _function(template), world.resolve, "database")
    socket = bootstrap_world["socket"]

    def local_connect(secret: dict[str, Any], database: str) -> Connection:
        return Connection(
            user=secret["username"],
            password=secret["password"] or None,
            unix_sock=socket,
            database=database,
        )

    def under(statements: Sequence[Mapping[str, Any]]) -> Run:
        keys = user_with(moto_iam, "bootstrap", statements)
        gate = Gate(statements, account)
        result: Any = None
        with principal(moto_iam, keys, gate, environment), pytest.MonkeyPatch.context() as patch:
            patch.setattr(handler, "connect", local_connect)
            try:
                result = handler.on_event({"RequestType": "Reconcile"}, lambda_context("bootstrap"))
            except Exception as exc:  # the run's outcome: the denial is what is asserted
                result = exc
        return Run(not isinstance(result, Exception), gate.calls, result)

    return under


def test_bootstrap_template_statements_publication_reconciled(
    full_run: Run, bootstrap_world: dict[str, Any]
) -> None:
    assert full_run.ok, full_run.detail
    assert {c.action for c in full_run.calls} == {"secretsmanager:GetSecretValue"}
    conn = Connection(user="postgres", unix_sock=bootstrap_world["socket"], database="app")
    try:
        published = conn.run(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables"
            " WHERE pubname = 'cdclake_publication' AND schemaname = 'public' ORDER BY 1"
        )
    finally:
        conn.close()
    assert [row[0] for row in published] == [
        "public.customers",
        "public.order_lines",
        "public.orders",
    ]


def test_bootstrap_each_needed_statement_removed_fails_access_denied(
    full_run: Run, needed: dict[int, Run], statements: list[dict[str, Any]]
) -> None:
    granting = granting_statements(full_run, statements)
    assert granting and granting <= set(needed)
    assert_each_removal_denied(needed, statements)


def test_bootstrap_key_policy_lets_role_decrypt_only_via_secrets_manager(
    templates: dict[str, Any], world: World, bootstrap_world: dict[str, Any]
) -> None:
    """The secrets' key is the database key; its key policy (not the role's statements) lets
    the role decrypt, through Secrets Manager only. moto does not call KMS for GetSecretValue,
    so this is checked in the template."""
    template = templates["database"]
    key = logical_id(template, "AWS::KMS::Key", "DatabaseKey")
    role = function_role(template, _function(template))
    role_arn = f"arn:aws:iam::{world.resolve.pseudo['AWS::AccountId']}:role/{role}"
    statements = [
        {**s, "Resource": "key"}
        for s in template["Resources"][key]["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"AWS": {"Fn::GetAtt": [role, "Arn"]}}
    ]
    via = {"kms:ViaService": "secretsmanager.eu-west-1.amazonaws.com"}
    assert statements, f"no key policy statement names {role_arn}"
    assert allowing(statements, "kms:Decrypt", "key", via)
    assert not allowing(
        statements, "kms:Decrypt", "key", {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}
    )


def test_bootstrap_needed_statements_match_docs_table(
    full_run: Run, needed: dict[int, Run], statements: list[dict[str, Any]], repo_root: Path
) -> None:
    row = docs_row(
        COMPONENT, "moto (action), gate (secret ARN), PostgreSQL", full_run, statements, needed
    )
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
