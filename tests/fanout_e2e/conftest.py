"""The session's local stack with the fan-out, and this area's tables joined to it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cdclake.local.cli import app
from cdclake.local.stack import LocalStack
from tests.fanout_e2e.fanout_e2e_helpers import PAYMENTS_DDL, REFUNDS_DDL


@pytest.fixture(scope="package")
def fanout_stack(local_stack_with_fanout: LocalStack) -> LocalStack:
    """The fan-out's tables (this area's alone: the lake areas use customers and orders) join
    the publication as in production: created, then reconciled."""
    stack = local_stack_with_fanout
    with stack.connect() as conn:
        conn.run(PAYMENTS_DDL)
        conn.run(REFUNDS_DDL)
    reconciled = CliRunner().invoke(app, ["reconcile", "--state-dir", str(stack.root)])
    assert reconciled.exit_code == 0, reconciled.output
    return stack
