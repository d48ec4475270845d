"""Session-wide fixtures: one synth per environment, one SparkSession, one local stack, the
shared samples."""

from __future__ import annotations

import atexit
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cdclake_merge.session import JAVA_OPTIONS_ENV, SHUFFLE_PARTITIONS_ENV
from tests.workers import SHARED_STACK_GROUP, longest_groups_first, worker_group

if TYPE_CHECKING:
    from cdclake.local.stack import LocalStack

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def _test_rds_ca() -> str:
    """A self-made CA certificate standing in for the RDS bundle (`make rds-ca`), which CI
    does not download: every synth of the session, subprocesses included, ships it."""
    import tempfile

    from cryptography.hazmat.primitives import serialization

    from tests.bootstrap.bootstrap_helpers import self_signed_ca

    cert, _ = self_signed_ca("cdc-lake test RDS CA")
    folder = Path(tempfile.mkdtemp(prefix="cdclake-test-rds-ca-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "global-bundle.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


# Made once per session: subprocesses (a CLI, a nested pytest) inherit it instead.
if "CDCLAKE_RDS_CA_BUNDLE" not in os.environ:
    os.environ["CDCLAKE_RDS_CA_BUNDLE"] = _test_rds_ca()

# The JVMs the tests start (a CLI merge, a bench script, the local stack's merges) live for a
# merge or two, on small files: C1 alone finishes a cold CLI merge sooner (33 -> 26 s idle) and
# leaves the other worker the CPU the optimising compiler would take. The session's own
# SparkSession (`spark`) lives the whole run, where the optimising compiler pays: it keeps it.
os.environ.setdefault(JAVA_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
# Every Spark session of the run (the tests' own, a CLI's, the local stack's merges) reads tens
# of rows: a shuffle task of Hudi's deserializes the table's whole Hadoop configuration, so the
# session's two cores' worth of them, not eight (a tiny merge 3.47 -> 3.23 s, interleaved).
os.environ.setdefault(SHUFFLE_PARTITIONS_ENV, "2")


def pytest_configure(config: pytest.Config) -> None:
    """Under ``make test``'s workers, those JVMs also share the classes every one of them loads
    (tests/class_archive.py; ``CDCLAKE_TEST_CLASS_ARCHIVE=0`` turns it off). Set here, in the
    controller, before the workers start: they inherit it."""
    workers = config.getoption("numprocesses", default=None)
    if hasattr(config, "workerinput") or not workers:
        return
    if os.environ.get("CDCLAKE_TEST_CLASS_ARCHIVE", "1") == "0":
        return
    from tests.class_archive import start

    os.environ[JAVA_OPTIONS_ENV] = start(os.environ[JAVA_OPTIONS_ENV], JAVA_OPTIONS_ENV)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    """Real Debezium events from ../shared/debezium-samples (skips where that folder is absent)."""
    path = SHARED / "debezium-samples"
    if not path.is_dir():
        pytest.skip(
            f"shared Debezium samples not found at {path} (CI places shared/ beside the repo)"
        )
    return path


class Synth:
    """One environment synthesized once: templates by stack role, and the assembly folder."""

    def __init__(self, env: str, outdir: Path) -> None:
        import aws_cdk as cdk

        from environment.config import load_config
        from stacks import build_stacks
        from tests.cdk.stack_helpers import cdk_context  # with the plugins CI has no zips of

        self.env = env
        self.config = load_config(env)
        self.outdir = outdir
        app = cdk.App(context={**cdk_context(), "env": env}, outdir=str(outdir))
        self.stacks = build_stacks(app, self.config)
        self.assembly = app.synth()

    def template(self, role: str) -> dict[str, object]:
        """The synthesized template of a stack by role ('network', 'database', ...)."""
        stack = self.stacks[role]
        return dict(self.assembly.get_stack_by_name(stack.stack_name).template)


_SYNTHS: dict[str, Synth] = {}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``synth("dev")`` synthesizes that environment once per test session."""

    def get(env: str) -> Synth:
        if env not in _SYNTHS:
            _SYNTHS[env] = Synth(env, tmp_path_factory.mktemp(f"cdk-{env}"))
        return _SYNTHS[env]

    return get


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The one local SparkSession (embedded Hive metastore) shared by every Spark test."""
    from cdclake_merge.session import local_session

    with pytest.MonkeyPatch.context() as patch:
        # It lives the whole run: it keeps the optimising compiler the processes tests start
        # go without (JAVA_OPTIONS_ENV, above), which they still inherit after this.
        patch.setenv(JAVA_OPTIONS_ENV, "")
        session = local_session(
            tmp_path_factory.mktemp("spark-warehouse"), app_name="cdclake-tests"
        )
    yield session
    session.stop()


# --- the local stack -----------------------------------------------------------------------------
#
# One stack per session (``local_stack``), started by the first test that needs it, the fan-out
# added by the first that needs that (``local_stack_with_fanout``), stopped once the last test
# using it is done. Areas that test a stack started differently get one of their own
# (``own_local_stack``), stopped and checked the same way.

SHARED_STACK_FIXTURES = frozenset({"local_stack", "local_stack_with_fanout"})
_SHARED_STACK: dict[str, Any] = {}


def _stack_missing(*, fanout: bool) -> str | None:
    """Why a local stack (with the fan-out) cannot start on this machine, or None."""
    import shutil

    from cdclake.local.debezium_server import SERVER_LIB
    from cdclake.local.postgres import postgres_bin_dir
    from cdclake.local.processes import StackError
    from cdclake.local.runtime import JVM_LIB

    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH: the local stack needs a Java 17 JDK"
    try:
        postgres_bin_dir()
    except StackError as exc:
        return str(exc)
    for module in ("kafka", "debezium-postgres", "s3-sink", "hive-metastore"):
        if not any((JVM_LIB / module).glob("*.jar")):
            return (
                f"jvm/lib/{module} has no jars: run "
                "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (make setup)"
            )
    if fanout and not any(SERVER_LIB.glob("debezium-server-dist-*.tar.gz")):
        return "jvm/lib/debezium-server has no debezium-server-dist tar.gz: run `make setup`"
    return None


def _skip_unless_stack_can_start(*, fanout: bool) -> None:
    reason = _stack_missing(fanout=fanout)
    if reason:
        what = "local stack with the fan-out" if fanout else "local stack"
        pytest.skip(f"{what} cannot start here: {reason}")


def _processes_logging_under(root: Path) -> list[tuple[int, str]]:
    """(PID, log) of every process whose stdout is a log of the stack at ``root``: each process
    the stack spawns writes there, restarted ones and children included, whoever started it
    (this process, ``cdclake local up`` or a CLI child)."""
    logs = f"{root / 'logs'}{os.sep}"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                target = os.readlink(entry / "fd" / "1")
            except OSError:  # gone meanwhile, or a kernel thread
                continue
            if target.startswith(logs):
                found.append((int(entry.name), target))
    return found


@contextmanager
def _stack_in_tmp(
    prefix: str, stop: Callable[[LocalStack], None] | None = None
) -> Iterator[LocalStack]:
    """A not yet started stack rooted in /tmp; on exit stopped (``stop``, else ``down``), every
    process it left killed by PID, its folder removed, and the test failed if any was left."""
    import shutil
    import signal
    import tempfile

    from cdclake.local.stack import LocalStack
    from cdclake_merge.session import METASTORE_URI_ENV

    # Not under pytest's tmp dir: that is mode 0700 for root, and PostgreSQL runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix=f"cdclake-{prefix}-", dir="/tmp"))
    os.chmod(root, 0o755)
    stack = LocalStack(root, env="local")
    try:
        yield stack
    finally:
        try:
            (stop or LocalStack.down)(stack)
        finally:
            leftovers = _processes_logging_under(root)
            for pid, _ in leftovers:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(root, ignore_errors=True)
            # What an in-process `--env local` command pointed this process at is gone now;
            # a later CLI merge inheriting it would sync to a stopped metastore.
            os.environ.pop(METASTORE_URI_ENV, None)
        assert not leftovers, f"stopping the stack left processes running: {leftovers}"


def _cli_down(stack: LocalStack) -> None:
    from typer.testing import CliRunner

    from cdclake.local.cli import app

    stopped = CliRunner().invoke(app, ["down", "--state-dir", str(stack.root)])
    assert stopped.exit_code == 0, stopped.output


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """A run cancelled by ``kill`` (CI's time limit) stops as Ctrl-C does: the session's
    fixtures are torn down, so the local stacks they started do not outlive it."""
    import threading

    from cdclake.local.processes import terminated_as_interrupt

    if threading.current_thread() is not threading.main_thread():  # signals are main's only
        yield
        return
    with terminated_as_interrupt():
        yield


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (as ``make unit`` runs) with :func:`worker_group`'s groups.

    Not xdist's own `loadgroup`: it names a group by rewriting node IDs, which pytest 9 no
    longer allows, so every test ran where it happened to be sent."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return WorkerGroups(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules using the session's stack run first, one after another (each in its order),
    and the stack stops after the last test using it: its JVMs do not idle under other tests,
    nor under another area's own stack; and as the longest group, it starts first on a worker.
    The other groups follow longest first."""

    def uses(item: pytest.Item) -> bool:
        return bool(SHARED_STACK_FIXTURES & set(getattr(item, "fixturenames", ())))

    modules = {getattr(item, "module", None) for item in items if uses(item)}
    strays = sorted(
        {
            item.nodeid.split("::")[0]
            for item in items
            if uses(item) and worker_group(item.nodeid) != SHARED_STACK_GROUP
        }
    )
    if strays:
        raise pytest.UsageError(
            f"{', '.join(strays)} use the session's local stack: add the area to "
            "SHARED_STACK_AREAS in tests/workers.py, so that one worker runs them all"
        )
    _SHARED_STACK["last_user"] = None
    block = [item for item in items if getattr(item, "module", None) in modules]
    rest = [item for item in items if getattr(item, "module", None) not in modules]
    items[:] = block + longest_groups_first(rest)
    if block:
        _SHARED_STACK["last_user"] = [item for item in block if uses(item)][-1]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        stop = _SHARED_STACK.get("stop")
        if stop is not None and item is _SHARED_STACK.get("last_user"):
            stop()


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """The session's local capture stack: PostgreSQL, Kafka, Kafka Connect and moto, capturing
    config/local.yaml's tables. Started through ``cdclake local up`` as a person would; stopped
    through ``cdclake local down`` after the last test using it, or at the session's end."""
    from typer.testing import CliRunner

    from cdclake.local.cli import app

    _skip_unless_stack_can_start(fanout=False)
    with ExitStack() as stop:
        stack = stop.enter_context(_stack_in_tmp("session", stop=_cli_down))
        _SHARED_STACK["stop"] = stop.close
        # Its output says what failed and where the logs are.
        started = CliRunner().invoke(
            app, ["up", "--state-dir", str(stack.root), "--timeout", "300"]
        )
        assert started.exit_code == 0, started.output
        yield stack
    _SHARED_STACK.pop("stop", None)


@pytest.fixture(scope="session")
def local_stack_with_fanout(local_stack: LocalStack) -> LocalStack:
    """The session's stack with the fan-out added (Debezium Server, the handler's event source
    mapping, the AWS side on moto), through ``cdclake local up --fanout``."""
    from typer.testing import CliRunner

    from cdclake.local.cli import app

    _skip_unless_stack_can_start(fanout=True)
    started = CliRunner().invoke(
        app, ["up", "--fanout", "--state-dir", str(local_stack.root), "--timeout", "300"]
    )
    assert started.exit_code == 0, started.output
    return local_stack


@pytest.fixture(scope="session")
def own_local_stack() -> Callable[..., AbstractContextManager[LocalStack]]:
    """``with own_local_stack("e2e") as stack:`` a stack of the caller's own, not started, for
    tests of a stack started differently (a fresh connector's initial snapshot, a whole run
    recorded from start to stop); skips when it cannot start here, stops and checks as above."""

    def own(prefix: str, *, fanout: bool = False) -> AbstractContextManager[LocalStack]:
        _skip_unless_stack_can_start(fanout=fanout)
        return _stack_in_tmp(prefix)

    return own
