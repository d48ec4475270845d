"""One local capture stack for the end-to-end tests, always torn down (and checked gone).

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

from cdclake.local import processes
from cdclake.local.stack import LocalStack
from tests.e2e.e2e_helpers import missing_prerequisite


@pytest.fixture(scope="package")
def e2e_stack() -> Iterator[LocalStack]:
    reason = missing_prerequisite()
    if reason:
        pytest.skip(f"end-to-end pipeline cannot run here: {reason}")
    # Not under pytest's tmp dir: that is mode 0700 for root, and PostgreSQL runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="cdclake-e2e-", dir="/tmp"))
    os.chmod(root, 0o755)
    stack = LocalStack(root, env="local")
    try:
        # No capture yet: the pipeline loads a table first, so the connector's initial snapshot
        # has rows to read while the writer keeps going.
        stack.up(timeout=300, capture=False)
        yield stack
    finally:
        state = stack.load_state()
        tracked = list(state.processes.values()) if state else []
        try:
            stack.down()
        finally:
            leftovers = [
                (p.name, p.pid)
                for p in tracked
                if processes.is_running(p) or processes.group_members(p.pid)
            ]
            for p in tracked:
                if processes.is_running(p):
                    processes.kill(p)
            shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"down left processes running: {leftovers}"
