"""The local stack's PostgreSQL: a throwaway cluster from Debian's server binaries.

Its data lives in ``postgres/data`` of the state folder (owned by the ``postgres`` user when
run as root), its socket in ``postgres/run``, its output in ``logs/postgres.log``. Logical
replication is on, as on Aurora; local connections and the superuser over TCP are trusted
(127.0.0.1 only), every other role logs in with a password.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from pg8000.native import Connection

from cdclake.local import processes
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import StackHandle, State

SUPERUSER = "postgres"


def postgres_bin_dir() -> Path:
    """Debian's server binaries (newest major), or ``$CDCLAKE_PG_BIN``."""
    override = os.environ.get("CDCLAKE_PG_BIN")
    candidates = [Path(override)] if override else []
    candidates += sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/postgres")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    for candidate in candidates:
        if (candidate / "postgres").exists() and (candidate / "initdb").exists():
            return candidate
    raise StackError(
        "no PostgreSQL server binaries (initdb, postgres) found under /usr/lib/postgresql/*/bin; "
        "install Debian's server: apt-get install -y postgresql (or set CDCLAKE_PG_BIN)"
    )


def _server_user() -> str | None:
    """PostgreSQL refuses to run as root: run it as ``postgres`` then (Debian's package user)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise StackError(
            "running as root, and there is no `postgres` user to run the server as; "
            "apt-get install -y postgresql creates it"
        ) from None
    return "postgres"


def start(stack: StackHandle, state: State) -> Tracked:
    """The server on ``state.ports["postgres"]``, its cluster made first if there is none."""
    bindir = postgres_bin_dir()
    user = _server_user()
    base = stack.root / "postgres"
    data = base / "data"
    sockets = base / "run"
    for folder in (base, sockets):
        folder.mkdir(parents=True, exist_ok=True)
    if user is not None:
        for folder in (base, sockets):
            shutil.chown(folder, user=user, group=user)
    if not (data / "PG_VERSION").exists():
        # Local connections and the superuser over TCP are trusted (127.0.0.1 only); every
        # other role logs in with a password, as Debezium does against Aurora.
        initdb = subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                "-E",
                "UTF8",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-instructions",
            ],
            check=False,
            user=user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if initdb.returncode != 0:
            raise StackError(f"initdb could not create {data}:\n{initdb.stderr}")
        hba = data / "pg_hba.conf"
        hba.write_text(
            f"local all all trust\n"
            f"host all {SUPERUSER} 127.0.0.1/32 trust\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
            "host replication all 127.0.0.1/32 scram-sha-256\n"
        )
    port = state.ports["postgres"]
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": str(sockets),
        "wal_level": "logical",
        "max_replication_slots": str(stack.config.database.replication.max_replication_slots),
        "max_wal_senders": str(stack.config.database.replication.max_wal_senders),
        "shared_buffers": "64MB",
        # A throwaway cluster: durability across power loss buys nothing here.
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
    }
    argv = [str(bindir / "postgres"), "-D", str(data)]
    for key, value in settings.items():
        argv += ["-c", f"{key}={value}"]
    proc = processes.spawn("postgres", argv, log=stack.log_path("postgres"), user=user)
    processes.wait_for("PostgreSQL", lambda: _accepts_connections(state), timeout=60, proc=proc)
    return proc


def _accepts_connections(state: State) -> bool:
    conn = Connection(
        user=SUPERUSER, host="127.0.0.1", port=state.ports["postgres"], database="postgres"
    )
    conn.close()
    return True
