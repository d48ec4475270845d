"""``cdclake query`` starts Trino only on a stack whose moto and metastore both run; a state
file stands for the stack (no processes of the stack are started)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cdclake.errors import LOCAL_STACK_HELP
from cdclake.local import metastore
from cdclake.local.processes import StackError
from cdclake.query import engine_port
from tests.query.query_helpers import stack_with


def _no_trino(message: str) -> None:
    raise AssertionError(f"Trino was being started on a stack without its metastore: {message}")


def test_engine_port_metastore_down_moto_up_refused(tmp_path: Path) -> None:
    standing_for_moto = subprocess.Popen(["sleep", "300"])  # a live process where moto was
    try:
        stack = stack_with(
            tmp_path, running={"moto": standing_for_moto.pid}, stopped=(metastore.NAME,)
        )
        with pytest.raises(StackError) as refused:
            engine_port(stack, progress=_no_trino)
    finally:
        standing_for_moto.kill()
        standing_for_moto.wait()
    assert str(refused.value) == LOCAL_STACK_HELP
