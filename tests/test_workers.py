"""How the suite is shared between its workers (tests/workers.py): which tests must share one,
and the order the groups are handed out in."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.workers import (
    ROOT,
    SHARED_STACK_GROUP,
    longest_groups_first,
    measured,
    module_seconds,
    worker_group,
)


@dataclass(frozen=True)
class Marked:
    """What the ordering reads of a pytest item: its node ID and its markers' names."""

    nodeid: str
    markers: tuple[str, ...] = field(default=())

    def iter_markers(self) -> list[pytest.Mark]:
        return [getattr(pytest.mark, name).mark for name in self.markers]


def test_worker_group_area_of_module_fixtures_alone_one_group_per_module() -> None:
    # tests/merge's conftest holds module-scoped fixtures only.
    assert worker_group("tests/merge/test_hudi.py::test_a") == "tests/merge/test_hudi.py"
    assert worker_group("tests/merge/test_job.py::test_b") == "tests/merge/test_job.py"


def test_worker_group_area_of_session_fixtures_one_group() -> None:
    # tests/iam's conftest records sessions shared by its modules.
    assert worker_group("tests/iam/test_a.py::t") == worker_group("tests/iam/test_b.py::t")
    assert worker_group("tests/iam/test_a.py::t") == "tests/iam"


def test_worker_group_shared_stack_areas_one_group() -> None:
    groups = {worker_group(f"tests/{area}/test_x.py::t") for area in ("local", "query")}
    assert groups == {SHARED_STACK_GROUP}


def test_longest_groups_first_measured_modules_by_their_seconds() -> None:
    bench, cli = "tests/merge/test_bench.py", "tests/merge/test_cli.py"
    longer, shorter = sorted((bench, cli), key=lambda m: -measured()[m])
    items = [Marked(f"{shorter}::a"), Marked(f"{longer}::b"), Marked(f"{shorter}::c")]
    ordered = [item.nodeid for item in longest_groups_first(items)]
    assert ordered == [f"{longer}::b", f"{shorter}::a", f"{shorter}::c"]


def test_longest_groups_first_unmeasured_module_by_its_markers() -> None:
    unmeasured = "tests/merge/test_not_measured_yet.py"
    assert unmeasured not in measured()
    slow = [Marked(f"{unmeasured}::t{i}", ("slow",)) for i in range(500)]  # 500 x 20 s
    quick = Marked("tests/merge/test_bench.py::t")
    assert longest_groups_first([quick, *slow])[-1] == quick


def test_module_seconds_junit_cases_summed_per_module(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="tests.merge.test_hudi" name="a" time="1.5"/>'
        '<testcase classname="tests.merge.test_hudi" name="b" time="2"/>'
        '<testcase classname="tests.e2e.test_pipeline.TestRuns" name="c" time="4"/>'
        "</testsuite></testsuites>"
    )
    assert module_seconds(report) == {
        "tests/e2e/test_pipeline.py": 4.0,
        "tests/merge/test_hudi.py": 3.5,
    }


ORDER_UNDER_A_SEED = """
import json, sys
import tests.workers as workers
from tests.test_workers import Marked
seconds = {"tests/ops/test_a.py": 0.1, "tests/ops/test_b.py": 0.2, "tests/ops/test_c.py": 0.3,
           "tests/merge/test_d.py": 0.6}
workers.measured = lambda: seconds
items = [Marked(f"{module}::t") for module in seconds]
print(json.dumps([item.nodeid for item in workers.longest_groups_first(items)]))
"""


def test_longest_groups_first_groups_tied_to_the_bit_same_order_under_every_hash_seed() -> None:
    # Each xdist worker hashes strings with a seed of its own; a group's modules are a set,
    # so a plain sum added 0.1, 0.2 and 0.3 in another order on each (0.6 or 0.6000000000000001,
    # against a group of 0.6), the workers collected different orders, and xdist refused the run.
    orders = {
        subprocess.run(
            [sys.executable, "-c", ORDER_UNDER_A_SEED],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(12)
    }
    assert len(orders) == 1, orders
