"""The local capture stack: start, inspect, reconcile and stop it.

Everything lives under one state folder (default ``.local-stack/`` in the repository):

    state.json            ports, PIDs (with start times), bucket
    logs/<name>.log       one log per process
    logs/kafka-authorizer.log  every Kafka authorization decision (what MSK's IAM would check)
    postgres/data         the cluster (owned by the ``postgres`` user when run as root)
    kafka/                KRaft metadata and log dirs, server.properties
    connect/              worker.properties and the connector configs as sent
    plugins/              plugin.path: debezium-postgres/ and s3-sink/
    metastore/            the Hive metastore's settings and schema scripts (cdclake.local.metastore)
    trino/                Trino's etc/ and data/, once a query started it (cdclake.local.trino)
    secrets/              the replication user's credentials (mode 0600), read by the worker's
                          file config provider; never printed

Each process is started by its own module, which gets the stack as a ``StackHandle``
(``cdclake.local.runtime``): ``postgres``, ``kafka``, ``connect`` (the worker),
``metastore``, ``fanout`` (its AWS side and the Lambda driver) with ``debezium_server``,
``trino``; moto here.
This module decides what runs, in which order, and bootstraps, reconciles and stops it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import boto3
from pg8000.native import Connection, DatabaseError, InterfaceError, identifier

from cdclake.local import fanout as local_fanout
from cdclake.local import kafka as local_kafka
from cdclake.local import metastore as local_metastore
from cdclake.local import postgres as local_postgres
from cdclake.local import processes
from cdclake.local import trino as local_trino
from cdclake.local.connect import (
    ConnectClient,
    LocalEndpoints,
    connector_configs,
    dump,
    start_worker,
)
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import AWS_ENV, State
from connectors.configs import connector_name
from environment.config import load_config
from environment.paths import REPO_ROOT
from environment.replication import bootstrap_spec
from lambdas.bootstrap.sql import (
    BootstrapResult,
    BootstrapSpec,
    await_new_slot_holders,
    bootstrap,
    joining_tables,
    signal_incremental_snapshot,
    slot_holders,
)

DEFAULT_STATE_DIR = REPO_ROOT / ".local-stack"
PROCESS_ORDER = ("moto", "postgres", "metastore", "kafka", "connect")
# A joining table's capture restart: attempts, and seconds each waits for a new slot reader.
CAPTURE_RESTARTS = 3
CAPTURE_RESTART_WAIT = 60.0


@dataclass
class ReconcileResult:
    bootstrap: BootstrapResult
    joined: list[str]
    signal_id: str | None


class LocalStack:
    """One local stack rooted at ``root``; every method is safe to call from a new process."""

    def __init__(self, root: Path | None = None, env: str = "local") -> None:
        self.root = (root or Path(os.environ.get("CDCLAKE_LOCAL_DIR", DEFAULT_STATE_DIR))).resolve()
        self.env = env
        self.config = load_config(env)
        self.state_file = self.root / "state.json"
        self.secrets_file = self.root / "secrets" / "replication.properties"

    # -- state ---------------------------------------------------------------------------

    def load_state(self) -> State | None:
        if not self.state_file.exists():
            return None
        return State.from_json(self.state_file.read_text())

    def save_state(self, state: State) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(state.to_json())
        tmp.replace(self.state_file)

    def endpoints(self, state: State) -> LocalEndpoints:
        return LocalEndpoints(
            postgres_port=state.ports["postgres"],
            kafka_port=state.ports["kafka"],
            connect_port=state.ports["connect"],
            s3_port=state.ports["moto"],
            bucket=state.bucket,
            secrets_file=self.secrets_file,
        )

    def running(self) -> dict[str, bool]:
        state = self.load_state()
        if state is None:
            return {}
        return {name: processes.is_running(p) for name, p in state.processes.items()}

    # -- up ------------------------------------------------------------------------------

    def up(
        self,
        *,
        timeout: float = 300.0,
        progress: Callable[[str], None] = lambda _: None,
        fanout: bool = False,
        capture: bool = True,
    ) -> State:
        """Start whatever is not running, (re)configure the connectors, wait for RUNNING.

        ``fanout`` (kept for later ``up``s) adds the fan-out: ``cdclake.local.fanout``.
        ``capture=False`` stops before Kafka Connect: the database can be loaded first, and the
        next ``up`` starts the connectors, whose initial snapshot then reads what is there.
        """
        state = self.load_state()
        if state is not None and state.env != self.env:
            raise StackError(f"{self.root} holds a stack for env {state.env!r}; run down first")
        if state is None:
            state = State(env=self.env, bucket=f"{self.config.prefix}-changes")
        for name in (*PROCESS_ORDER, *local_fanout.FANOUT_PROCESSES):
            if name in state.processes and not processes.is_running(state.processes[name]):
                del state.processes[name]
        for name in PROCESS_ORDER:
            if name not in state.processes:
                port = state.ports.get(name)
                if port is None or processes.port_open(port):
                    state.ports[name] = processes.free_port()
        if "kafka" not in state.processes:
            controller = state.ports.get("kafka_controller")
            if controller is None or processes.port_open(controller):
                state.ports["kafka_controller"] = processes.free_port()
        self.save_state(state)
        try:
            if "moto" not in state.processes:
                progress("starting moto S3")
                state.processes["moto"] = self._on_free_ports(state, self._start_moto, "moto")
                self.save_state(state)
            self._ensure_bucket(state)
            if "postgres" not in state.processes:
                progress("starting PostgreSQL")
                state.processes["postgres"] = self._on_free_ports(
                    state, partial(local_postgres.start, self), "postgres"
                )
                self.save_state(state)
            progress("bootstrapping replication (role, grants, publication)")
            self._bootstrap(state)
            if "metastore" not in state.processes:
                progress("starting the Hive metastore")
                state.processes["metastore"] = self._on_free_ports(
                    state, partial(local_metastore.start, self), "metastore"
                )
                self.save_state(state)
            if "kafka" not in state.processes:
                progress("starting Kafka (KRaft)")
                state.processes["kafka"] = self._on_free_ports(
                    state, partial(local_kafka.start, self), "kafka", "kafka_controller"
                )
                self.save_state(state)
            if not capture:
                self.save_state(state)
                return state
            if "connect" not in state.processes:
                progress("starting Kafka Connect")
                state.processes["connect"] = self._on_free_ports(
                    state,
                    lambda s: start_worker(self, self.endpoints(s), timeout=timeout),
                    "connect",
                )
                self.save_state(state)
            progress("configuring connectors")
            self.apply_connectors(state)
            progress("waiting for connectors to report RUNNING")
            self.wait_running(state, timeout=timeout)
            if fanout or state.fanout:
                state.fanout = True
                self.save_state(state)
                local_fanout.start(self, state, timeout=timeout, progress=progress)
        except BaseException:
            self.save_state(state)
            raise
        return state

    def _on_free_ports(
        self, state: State, start: Callable[[State], Tracked], *ports: str
    ) -> Tracked:
        return processes.start_on_free_ports(
            lambda: start(state), state.ports, ports, chosen=lambda: self.save_state(state)
        )

    def log_path(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def _start_moto(self, state: State) -> Tracked:
        return processes.start_moto(
            state.ports["moto"], log=self.log_path("moto"), env={**os.environ, **AWS_ENV}
        )

    def s3_client(self, state: State | None = None) -> Any:
        state = state or self.load_state()
        if state is None:
            raise StackError("the local stack is not up")
        return boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{state.ports['moto']}",
            aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            region_name=AWS_ENV["AWS_REGION"],
        )

    def _ensure_bucket(self, state: State) -> None:
        s3 = self.s3_client(state)
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if state.bucket not in existing:
            s3.create_bucket(Bucket=state.bucket)

    @contextmanager
    def connect(
        self, state: State | None = None, *, database: str | None = None
    ) -> Iterator[Connection]:
        """A superuser connection to the stack's database (for bootstrap, tests, workloads)."""
        state = state or self.load_state()
        if state is None:
            raise StackError("the local stack is not up")
        conn = Connection(
            user=local_postgres.SUPERUSER,
            host="127.0.0.1",
            port=state.ports["postgres"],
            database=database or self.config.database.name,
        )
        try:
            yield conn
        finally:
            conn.close()

    def replication_credentials(self) -> tuple[str, str]:
        """The replication user's name and password, made once and kept in the state folder."""
        user = self.config.database.replication.user
        if self.secrets_file.exists():
            values = dict(
                line.split("=", 1)
                for line in self.secrets_file.read_text().splitlines()
                if "=" in line
            )
            return values["username"], values["password"]
        password = secrets.token_urlsafe(24)
        self.secrets_file.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.secrets_file.parent, 0o700)
        fd = os.open(self.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"username={user}\npassword={password}\n")
        return user, password

    def _password_works(self, state: State, user: str, password: str) -> bool:
        try:
            conn = Connection(
                user=user,
                password=password,
                host="127.0.0.1",
                port=state.ports["postgres"],
                database=self.config.database.name,
            )
        except (DatabaseError, InterfaceError):
            return False
        conn.close()
        return True

    def _bootstrap(self, state: State, *, joinable: list[str] | None = None) -> BootstrapResult:
        with self.connect(state, database="postgres") as admin:
            name = self.config.database.name
            if not admin.run("SELECT 1 FROM pg_database WHERE datname = :d", d=name):
                admin.run(f"CREATE DATABASE {identifier(name)}")
        user, password = self.replication_credentials()
        works = self._password_works(state, user, password)
        with self.connect(state) as conn:
            spec = BootstrapSpec.from_dict(bootstrap_spec(self.config))
            return bootstrap(conn, spec, password=password, password_works=works, joinable=joinable)

    def apply_connectors(self, state: State) -> dict[str, dict[str, str]]:
        """PUT every connector's config (creates or updates), and keep a copy for reading."""
        configs = connector_configs(self.config, self.endpoints(state))
        client = ConnectClient(self.endpoints(state).connect_url)
        folder = self.root / "connect" / "connectors"
        folder.mkdir(parents=True, exist_ok=True)
        for name, settings in configs.items():
            (folder / f"{name}.json").write_text(dump(settings))
            client.put_config(name, settings)
        return configs

    def wait_running(self, state: State, *, timeout: float) -> None:
        client = ConnectClient(self.endpoints(state).connect_url)
        connect = state.processes.get("connect")
        for name in connector_configs(self.config, self.endpoints(state)):

            def ready(name: str = name) -> bool:
                failure = client.failure(name)
                if failure:
                    raise StackError(f"connector {name} FAILED:\n{failure}")
                return client.running(name)

            deadline = time.monotonic() + timeout
            while not _safe(ready):
                if connect is not None and not processes.is_running(connect):
                    raise StackError(f"Kafka Connect exited; see {connect.log}")
                if time.monotonic() > deadline:
                    raise StackError(f"connector {name} not RUNNING after {timeout:.0f}s")
                time.sleep(1)

    # -- status --------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        state = self.load_state()
        if state is None:
            return {"up": False, "state_dir": str(self.root)}
        running = {name: processes.is_running(p) for name, p in state.processes.items()}
        endpoints = self.endpoints(state)
        connectors: dict[str, Any] = {}
        if running.get("connect"):
            client = ConnectClient(endpoints.connect_url)
            for name in connector_configs(self.config, endpoints):
                try:
                    raw = client.status(name)
                    connectors[name] = {
                        "state": raw.get("connector", {}).get("state", "MISSING"),
                        "tasks": [t.get("state") for t in raw.get("tasks", [])],
                    }
                except Exception as exc:
                    connectors[name] = {"state": f"unknown ({exc.__class__.__name__})"}
        expected = (*PROCESS_ORDER, *(local_fanout.FANOUT_PROCESSES if state.fanout else ()))
        return {
            "up": bool(running) and all(running.get(n, False) for n in expected),
            "env": state.env,
            "state_dir": str(self.root),
            "postgres_dsn": (
                f"postgresql://{local_postgres.SUPERUSER}@127.0.0.1:{state.ports['postgres']}/"
                f"{self.config.database.name}"
            ),
            "kafka_bootstrap": f"127.0.0.1:{state.ports['kafka']}",
            "connect_url": endpoints.connect_url,
            "s3_endpoint": endpoints.s3_endpoint,
            "s3_bucket": state.bucket,
            "changes_uri": f"s3://{state.bucket}/topics",
            "warehouse": str(self.root / "warehouse"),
            "metastore_uri": local_metastore.uri(state) if "metastore" in state.ports else None,
            "aws_env": AWS_ENV,
            "processes": {
                name: {"pid": p.pid, "running": running[name], "log": p.log}
                for name, p in state.processes.items()
            },
            "connectors": connectors,
            **(local_fanout.status(self, state) if state.fanout else {}),
        }

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self) -> ReconcileResult:
        """Production's reconcile (publication = configured tables), then snapshot newcomers.

        Rows written before a table joined the publication were never published: an
        incremental snapshot (a row in Debezium's signal table) reads them, interleaved with
        streamed changes by Debezium's watermarking. As the Lambda's Reconcile does, the
        capture is restarted before its tables join, and signalled once a task started after
        the restart reads the slot (``await_new_slot_holders`` says why).
        """
        state = self.load_state()
        if state is None:
            raise StackError("the local stack is not up")
        replication = self.config.database.replication
        connect = state.processes.get("connect")
        connect_running = connect is not None and processes.is_running(connect)
        if connect_running:
            self.apply_connectors(state)
        lake = {t.name for t in self.config.lake_tables}
        with self.connect(state) as conn:
            joining = joining_tables(conn, BootstrapSpec.from_dict(bootstrap_spec(self.config)))
            holders = slot_holders(conn, [replication.slot])
        if connect_running and any(t in lake for t in joining):
            # With the worker down there is no old task: the next `up` starts one, which loads
            # the schemas and then reads the signal.
            self._restart_capture(state, holders)
            self.wait_running(state, timeout=120)
        result = self._bootstrap(state, joinable=joining)
        joined = sorted(t for t in result.joined_tables if t in lake)
        signal_id = None
        if joined:
            with self.connect(state) as conn:
                signal_id = signal_incremental_snapshot(conn, replication.signal_table, joined)
        return ReconcileResult(bootstrap=result, joined=joined, signal_id=signal_id)

    def _restart_capture(self, state: State, holders: dict[str, int | None]) -> None:
        """Restart the capture connector until a task started after it reads the slot.

        A restart can leave the old reader in place (seen once in CI under load: no new reader
        in 120 s, the cause lost with the stack's logs), so it is asked again before the
        tables are left out; the error names the connector's state for the next reader.
        """
        client = ConnectClient(self.endpoints(state).connect_url)
        name = connector_name(self.config, "debezium-source")
        stale: list[str] = []
        for _ in range(CAPTURE_RESTARTS):
            client.restart(name)
            with self.connect(state) as conn:
                stale = await_new_slot_holders(conn, holders, timeout=CAPTURE_RESTART_WAIT)
            if not stale:
                return
        raise StackError(
            f"slot {', '.join(stale)} not taken by a restarted task after {CAPTURE_RESTARTS} "
            f"restarts {CAPTURE_RESTART_WAIT:.0f}s apart ({_task_states(client.status(name))}): "
            "nothing joined the publication; run reconcile again"
        )

    # -- crash -------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL one process group, as a crash would; ``up`` starts it again."""
        state = self.load_state()
        if state is None or name not in state.processes:
            raise StackError(f"no {name} process in {self.root}")
        processes.kill(state.processes[name])
        del state.processes[name]
        self.save_state(state)

    # -- down ----------------------------------------------------------------------------

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every process in reverse start order; verify none is left. Returns names."""
        state = self.load_state()
        stopped: list[str] = []
        if state is not None:
            errors = []
            # Trino (started on demand) reads through the metastore and S3: it stops first.
            for name in (
                local_trino.PROCESS,
                *reversed(local_fanout.FANOUT_PROCESSES),
                *reversed(PROCESS_ORDER),
            ):
                proc = state.processes.get(name)
                if proc is None:
                    continue
                try:
                    # SIGINT is PostgreSQL's fast shutdown; the JVMs and moto take SIGTERM.
                    sig = 2 if name == "postgres" else 15
                    processes.stop(proc, sig=sig, timeout=60)
                    stopped.append(name)
                except StackError as exc:
                    errors.append(str(exc))
                del state.processes[name]
                self.save_state(state)
            if errors:
                raise StackError("; ".join(errors))
        if purge and self.root.exists():
            shutil.rmtree(self.root)
        return stopped


def _safe(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except StackError:
        raise
    except Exception:
        return False


def _task_states(status: dict[str, Any]) -> str:
    """``connector RUNNING, task 0 FAILED: <first trace line>`` from a connector's status."""
    parts = [f"connector {status.get('connector', {}).get('state', 'missing')}"]
    for task in status.get("tasks", []):
        trace = str(task.get("trace") or "").strip().splitlines()
        parts.append(
            f"task {task.get('id')} {task.get('state')}" + (f": {trace[0]}" if trace else "")
        )
    return ", ".join(parts)
