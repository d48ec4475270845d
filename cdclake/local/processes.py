"""Child processes the local stack starts, tracked by PID and process group, never by name.

Each process is its own session leader (``start_new_session``), so its process group holds
every child it forks and one ``killpg`` stops the lot. A PID is only signalled while its start
time still matches the one recorded, so a reused PID is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


class StackError(RuntimeError):
    """Something the local stack could not do; the message says what and where to look."""


class ProcessExited(StackError):
    """A started process died while the stack waited for it; the message quotes its log's end.

    The quote matters where the log does not outlive the failure (a test's temporary root).
    """

    def __init__(self, proc: Tracked, what: str) -> None:
        self.proc = proc
        self.tail = log_tail(Path(proc.log), lines=200)
        shown = "\n".join(self.tail.splitlines()[-15:])
        super().__init__(
            f"{proc.name} exited while waiting for {what}; see {proc.log}; it ended with:\n{shown}"
        )

    @property
    def port_taken(self) -> bool:
        """Its port was taken between choosing it and binding it (ports are chosen up front)."""
        return "Address already in use" in self.tail


@dataclass(frozen=True)
class Tracked:
    """A started process: its PID (= process group), start time, and log file."""

    name: str
    pid: int
    start_ticks: int
    log: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Tracked:
        return cls(str(raw["name"]), int(raw["pid"]), int(raw["start_ticks"]), str(raw["log"]))


def free_port() -> int:
    """A port nothing listens on now; the OS hands out each ephemeral port once in a while."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_running(proc: Tracked) -> bool:
    return start_ticks(proc.pid) == proc.start_ticks


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> Tracked:
    """Start ``argv`` in a new session with stdout and stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            user=user,
            start_new_session=True,
        )
    ticks = start_ticks(popen.pid)
    if ticks is None:
        raise StackError(f"{name} exited at once; see {log}")
    # Popen's handle is dropped: a later `down` may run in another process, so the PID file,
    # not this object, is the record. The child is reaped by whoever is its parent then.
    _forget(popen)
    return Tracked(name=name, pid=popen.pid, start_ticks=ticks, log=str(log))


def _forget(popen: subprocess.Popen[bytes]) -> None:
    """Keep Python from warning about a child it never waits for (it is waited in ``stop``)."""
    popen.returncode = 0


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """Within it, SIGTERM and SIGHUP end this process as Ctrl-C does (KeyboardInterrupt).

    The stack's processes are session leaders, so nothing stops them when their starter is
    killed; a demo or a test run cancelled by ``kill`` or by CI must still run the ``finally``
    blocks that stop them. Python's default for SIGTERM ends the process without any.
    """
    caught = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in caught}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def log_tail(path: Path, *, lines: int) -> str:
    """The last ``lines`` lines of a log, or a note saying why there are none."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 256 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our own child, so it leaves no zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(proc: Tracked, *, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
    """Signal the process group, wait, then SIGKILL it; raise if anything of it survives."""
    if not is_running(proc):
        _reap(proc.pid)
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(proc.pid)
        if not is_running(proc) and not group_members(proc.pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        _reap(proc.pid)
        if not is_running(proc) and not group_members(proc.pid):
            return
        time.sleep(0.1)
    raise StackError(f"{proc.name} (pid {proc.pid}) did not stop")


def kill(proc: Tracked) -> None:
    """SIGKILL the process group at once (what a crash looks like to the others)."""
    if is_running(proc):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (is_running(proc) or group_members(proc.pid)):
        _reap(proc.pid)
        time.sleep(0.1)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) PIDs whose process group is ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def wait_for(
    what: str,
    check: Callable[[], bool],
    *,
    timeout: float,
    proc: Tracked | None = None,
    interval: float = 0.5,
) -> None:
    """Poll ``check`` until true; fail early when ``proc`` died, pointing at its log.

    A check that raises counts as not yet (a port not open yet refuses); on timeout its last
    error is part of the message, as a login or protocol error is the answer then.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            if check():
                return
        except Exception as exc:
            last = exc
        if proc is not None and not is_running(proc):
            raise ProcessExited(proc, what)
        if time.monotonic() > deadline:
            hint = f"; see {proc.log}" if proc is not None else ""
            cause = f" (last check: {type(last).__name__}: {last})" if last is not None else ""
            raise StackError(f"timed out after {timeout:.0f}s waiting for {what}{cause}{hint}")
        time.sleep(interval)


def start_on_free_ports(
    start: Callable[[], Tracked],
    ports: MutableMapping[str, int],
    names: Sequence[str],
    *,
    chosen: Callable[[], None] = lambda: None,
    attempts: int = 3,
) -> Tracked:
    """``start()``; when the process died because a port of ``names`` was taken, choose again.

    Ports are chosen before a process starts, and until it binds them the kernel may hand the
    same numbers to any outgoing connection on the machine. ``chosen`` runs after each choice
    (to record it) and before the next start.
    """
    for _ in range(attempts - 1):
        try:
            return start()
        except ProcessExited as exc:
            if not exc.port_taken:
                raise
            for name in names:
                ports[name] = free_port()
            chosen()
    return start()


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_moto(port: int, *, log: Path, env: Mapping[str, str] | None = None) -> Tracked:
    """moto's server (``python -m moto.server``) on ``port`` of 127.0.0.1, once it listens."""
    import sys

    proc = spawn(
        "moto",
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        log=log,
        env=env,
    )
    wait_for("moto", lambda: port_open(port), timeout=60, proc=proc)
    return proc


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """A moto server of its own on a free port (its endpoint), stopped by PID when done."""
    port = free_port()
    proc = start_moto(port, log=log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
