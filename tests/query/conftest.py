"""The session's local stack, where Trino can run here (else the exact reason to skip)."""

from __future__ import annotations

import pytest

from cdclake.local.stack import LocalStack
from tests.query.query_helpers import missing_engine


@pytest.fixture(scope="module")
def stack(local_stack: LocalStack) -> LocalStack:
    reason = missing_engine()
    if reason is not None:
        pytest.skip(reason)
    return local_stack
