"""One local stack with the fan-out for these tests, always torn down (and checked gone).

Package-scoped: the stack stops when this folder's tests end, so its JVMs do not idle under
the rest of the session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cdclake.local import processes
from cdclake.local.cli import app
from cdclake.local.stack import LocalStack
from tests.fanout_e2e.fanout_e2e_helpers import PAYMENTS_DDL, REFUNDS_DDL, missing_prerequisite


@pytest.fixture(scope="package")
def fanout_stack() -> Iterator[LocalStack]:
    reason = missing_prerequisite()
    if reason:
        pytest.skip(f"local stack with the fan-out cannot start here: {reason}")
    # Not under pytest's tmp dir: that is mode 0700 for root, and PostgreSQL runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="cdclake-fanout-", dir="/tmp"))
    os.chmod(root, 0o755)
    stack = LocalStack(root, env="local")
    runner = CliRunner()
    try:
        started = runner.invoke(
            app, ["up", "--fanout", "--state-dir", str(root), "--timeout", "300"]
        )
        assert started.exit_code == 0, started.output
        # The fan-out tables join the publication as in production: created, then reconciled.
        with stack.connect() as conn:
            conn.run(PAYMENTS_DDL)
            conn.run(REFUNDS_DDL)
        reconciled = runner.invoke(app, ["reconcile", "--state-dir", str(root)])
        assert reconciled.exit_code == 0, reconciled.output
        yield stack
    finally:
        state = stack.load_state()
        tracked = list(state.processes.values()) if state else []
        try:
            stopped = runner.invoke(app, ["down", "--state-dir", str(root)])
            assert stopped.exit_code == 0, stopped.output
        finally:
            leftovers = [
                (p.name, p.pid)
                for p in tracked
                if processes.is_running(p) or processes.group_members(p.pid)
            ]
            if leftovers:
                for p in tracked:
                    processes.kill(p)
            shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"down left processes running: {leftovers}"
