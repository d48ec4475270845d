"""The replication bootstrap's scheduled Reconcile under exactly the statements the database
stack gives its role: the secrets from Secrets Manager (moto, gated), the SQL on a real
PostgreSQL, the captures' restarts on moto's ECS and the gate's MSK Connect. Only the network
path is stood in: the connection goes to the local server's unix socket instead of Aurora's TLS
endpoint. Every run has tables joining the publication, so it restarts both captures: their
tasks are ``pg_recvlogical`` readers of the slots, restarted once the restart call went
through, as MSK Connect and ECS would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pg8000.native import Connection

from lambdas.bootstrap import handler
from tests.bootstrap.bootstrap_helpers import SlotReader
from tests.iam.iam_helpers.gate import Gate, World, connector_store, principal, user_with
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
# Out of the publication before each run, so each run joins it (and restarts both captures).
LATE = "public.orders"
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
def environment(templates: dict[str, Any], world: World) -> dict[str, str]:
    template = templates["database"]
    return function_environment(template, _function(template), world.resolve, "database")


@pytest.fixture(scope="module")
def owner(bootstrap_world: dict[str, Any]) -> Iterator[Connection]:
    conn = Connection(
        user="postgres", unix_sock=bootstrap_world["socket"], database=bootstrap_world["database"]
    )
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def tasks(
    environment: dict[str, str], bootstrap_world: dict[str, Any], owner: Connection
) -> Iterator[dict[str, SlotReader]]:
    """Each capture's task reading its slot, by slot; the publication there before the first
    run (a Reconcile joins tables to an existing one only)."""
    spec = json.loads(json.loads(environment["BOOTSTRAP_PROPERTIES"])["Spec"])
    owner.run(f"CREATE PUBLICATION {spec['publication']} FOR TABLE public.customers")
    readers = {
        capture["slot"]: SlotReader(
            owner,
            bootstrap_world["socket"],
            bootstrap_world["database"],
            spec["publication"],
            capture["slot"],
        )
        for capture in json.loads(environment["CAPTURES"])
    }
    for reader in readers.values():
        reader.start()
    yield readers
    for reader in readers.values():
        reader.stop()


@pytest.fixture(scope="module")
def run(
    world: World,
    bootstrap_world: dict[str, Any],
    moto_iam: MotoIam,
    account: str,
    environment: dict[str, str],
    tasks: dict[str, SlotReader],
    owner: Connection,
) -> Runner:
    socket = bootstrap_world["socket"]
    publication = json.loads(json.loads(environment["BOOTSTRAP_PROPERTIES"])["Spec"])["publication"]
    restart = handler.restart_captures

    def restart_then_tasks(captures: Sequence[dict[str, str]]) -> None:
        restart(captures)  # through the gate: a denial ends the run here
        for capture in captures:
            tasks[capture["slot"]].stop()
            tasks[capture["slot"]].start()

    def local_connect(secret: dict[str, Any], database: str) -> Connection:
        return Connection(
            user=secret["username"],
            password=secret["password"] or None,
            unix_sock=socket,
            database=database,
        )

    def under(statements: Sequence[Mapping[str, Any]]) -> Run:
        published = owner.run(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
            p=publication,
        )
        if [LATE] in published:
            owner.run(f"ALTER PUBLICATION {publication} DROP TABLE {LATE}")
        keys = user_with(moto_iam, "bootstrap", statements)
        gate = Gate(statements, account, {"kafkaconnect": connector_store(world.connectors, [])})
        result: Any = None
        with principal(moto_iam, keys, gate, environment), pytest.MonkeyPatch.context() as patch:
            patch.setattr(handler, "connect", local_connect)
            patch.setattr(handler, "restart_captures", restart_then_tasks)
            # A restart the gate let through is followed at once by the new tasks.
            patch.setattr(handler, "RESTART_WAIT_SECONDS", 30.0)
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
    assert {c.action for c in full_run.calls} == {
        "secretsmanager:GetSecretValue",
        "kafkaconnect:ListConnectors",
        "kafkaconnect:RestartConnector",
        "ecs:UpdateService",
    }
    assert LATE in full_run.detail["Data"]["SignalledTables"].split(",")
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
        COMPONENT,
        "moto (action), gate (secret ARN, ECS resource, MSK Connect), PostgreSQL",
        full_run,
        statements,
        needed,
    )
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
