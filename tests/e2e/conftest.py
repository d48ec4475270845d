"""A local stack of this area's own: the pipeline begins with a connector that has never run.

Not the session's shared stack: the workload loads customers before capture starts and checks
that the connector's *initial* snapshot (taken once, when a connector first starts) read it,
and it validates whole tables only its writer changes; on the shared stack the connector has
long been running and tests/local writes the same two configured tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from cdclake.local.stack import LocalStack
from tests.e2e.e2e_helpers import missing_spark


@pytest.fixture(scope="package")
def e2e_stack(
    own_local_stack: Callable[[str], AbstractContextManager[LocalStack]],
) -> Iterator[LocalStack]:
    reason = missing_spark()
    if reason:
        pytest.skip(f"end-to-end pipeline cannot run here: {reason}")
    with own_local_stack("e2e") as stack:
        # No capture yet: the pipeline loads a table first, so the connector's initial snapshot
        # has rows to read while the writer keeps going.
        stack.up(timeout=300, capture=False)
        yield stack
