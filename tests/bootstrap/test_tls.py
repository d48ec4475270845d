"""The bootstrap's own connection to the database: the TLS context from the RDS CA bundle (or
the explicit opt-out), and a bootstrap over TLS against a real PostgreSQL with its secrets
from Secrets Manager."""

from __future__ import annotations

import json
import os
import ssl

import pytest
from pg8000.native import Connection

from lambdas.bootstrap import handler
from tests.bootstrap.bootstrap_helpers import Database, TlsServer

pytestmark = pytest.mark.postgres


AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def test_tls_context_bundle_verifies_certificate_and_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # tests/conftest.py writes a self-made CA standing in for the RDS bundle.
    monkeypatch.setenv("RDS_CA_BUNDLE", os.environ["CDCLAKE_RDS_CA_BUNDLE"])
    monkeypatch.delenv("DATABASE_TLS_VERIFY", raising=False)

    context = handler.tls_context()

    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    subjects = [cert["subject"] for cert in context.get_ca_certs()]
    assert subjects == [((("commonName", "cdc-lake test RDS CA"),),)]


def test_handler_create_over_tls_with_secrets_manager_bootstraps(
    tls_server: TlsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler's own read_secret and connect: secrets from (moto's) Secrets Manager, the
    # database over TCP with TLS, its certificate verified against the bundle.
    import boto3
    import moto

    monkeypatch.setenv("RDS_CA_BUNDLE", tls_server.ca_bundle)
    monkeypatch.setenv("METRICS_ENVIRONMENT", "test")
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    admin = Connection(user="postgres", unix_sock=tls_server.socket, database="postgres")
    database = Database(tls_server.socket, admin)
    endpoint = {"host": "127.0.0.1", "port": tls_server.port}
    master = {**database.secrets["master"], **endpoint, "password": tls_server.password}
    replication = {**database.secrets["replication"], **endpoint}
    try:
        with moto.mock_aws():
            secrets = boto3.client("secretsmanager")
            arns = {
                name: secrets.create_secret(
                    Name=f"{database.name}-{name}", SecretString=json.dumps(value)
                )["ARN"]
                for name, value in (("master", master), ("replication", replication))
            }
            props = {
                **database.props(database.spec()),
                "MasterSecretArn": arns["master"],
                "ReplicationSecretArn": arns["replication"],
            }
            result = handler.create(props)
        in_database = database.owner.run(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = :p",
            p=database.publication,
        )
        published = set(result["Data"]["PublishedTables"].split(","))
        assert published == {name for (name,) in in_database}
        assert {t.name for t in database.spec().tables} <= published
        # The role it made logs in over TLS with the replication secret's password.
        conn = handler.connect(replication, database.name)
        try:
            assert conn.run("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [[True]]
        finally:
            conn.close()
    finally:
        database.close()
        admin.close()


def test_connect_certificate_of_another_ca_refused(
    tls_server: TlsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/conftest.py's stand-in RDS bundle did not sign this server's certificate.
    monkeypatch.setenv("RDS_CA_BUNDLE", os.environ["CDCLAKE_RDS_CA_BUNDLE"])
    secret = {
        "username": "postgres",
        "password": tls_server.password,
        "host": "127.0.0.1",
        "port": tls_server.port,
    }

    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handler.connect(secret, "postgres")


def test_tls_context_without_bundle_or_opt_out_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("DATABASE_TLS_VERIFY", raising=False)

    with pytest.raises(RuntimeError, match="RDS_CA_BUNDLE"):
        handler.tls_context()


def test_tls_context_explicit_opt_out_encrypts_unverified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RDS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("DATABASE_TLS_VERIFY", "false")

    context = handler.tls_context()

    assert context.verify_mode == ssl.CERT_NONE
