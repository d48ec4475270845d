"""How ``make test`` shares the suite between its pytest-xdist workers (one per core).

Each worker is a pytest session of its own, so tests that share a session's fixtures form a
*group* one worker runs (:func:`worker_group`, which xdist's scheduler asks through
``tests/conftest.py``). xdist hands the groups out in collection order, one to whichever
worker is nearly done, so the order decides how long the last one runs alone: groups go
longest first (:func:`longest_groups_first`), by the seconds each module took in a measured
run (``tests/durations.json``), else by what its markers say it starts. Only the order
depends on those figures, never a result; refresh them after a run with ``--junitxml``:

    python -m tests.workers /tmp/run.xml      # rewrites tests/durations.json
"""

from __future__ import annotations

import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "durations.json"
# The areas whose modules may use the session's stack: they share a worker.
SHARED_STACK_AREAS = frozenset({"local", "fanout_e2e", "query", "bootstrap"})
SHARED_STACK_GROUP = "the shared local stack"
SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](session|package)["']""")


@cache
def shares_session_fixtures(area: str) -> bool:
    """Whether tests/<area>/conftest.py defines a fixture its modules share (session or
    package scope, such as tests/iam's recordings). A conftest of module-scoped fixtures
    alone shares nothing: its modules may run on either worker."""
    conftest = ROOT / "tests" / area / "conftest.py"
    return conftest.is_file() and bool(SHARED_SCOPE.search(conftest.read_text()))


def worker_group(nodeid: str) -> str:
    """Which tests share a worker: the areas on the shared stack one group; an area whose
    conftest holds session or package fixtures another; any other module one of its own (an
    area grouped whole without need ran tests/merge's 1,900 s on one worker while the other
    idled). A pure function of the node ID: xdist's controller, which groups, collects
    nothing."""
    path = Path(nodeid.split("::")[0])
    if len(path.parts) < 3:  # a module directly under tests/
        return str(path)
    area = path.parts[1]
    if area in SHARED_STACK_AREAS:
        return SHARED_STACK_GROUP
    return str(path.parent if shares_session_fixtures(area) else path)


def estimated_seconds(markers: set[str]) -> float:
    """A test's rough cost by what its markers say it starts, for a module not measured yet:
    the means of a fresh-clone run (2026-11-29: slow 17-33 s, Hudi 7.5 s, Spark, PostgreSQL or
    moto alone 1.3-3 s, the rest 0.4 s)."""
    if "slow" in markers:
        return 20.0
    if "hudi" in markers:
        return 7.5
    if markers & {"spark", "postgres", "moto"}:
        return 2.0
    return 0.4


@cache
def measured() -> dict[str, float]:
    """Seconds per module of the run ``tests/durations.json`` was taken from ({} if none)."""
    return json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}


def longest_groups_first(items: list[Any]) -> list[Any]:
    """``items`` (pytest items) with each group's tests together, the groups longest first,
    each group's tests in their order."""
    modules: dict[str, set[str]] = {}
    guessed: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        modules.setdefault(worker_group(item.nodeid), set()).add(module)
        if module not in measured():
            markers = {mark.name for mark in item.iter_markers()}
            guessed[module] = guessed.get(module, 0.0) + estimated_seconds(markers)
    # fsum: a plain sum over a set adds in the order of its hashes, which differs between
    # xdist's workers (each its own PYTHONHASHSEED); a group tied with another to the last
    # bit on one worker and not the other was ordered differently, and xdist refused the run.
    seconds = {
        group: math.fsum(measured().get(m, guessed.get(m, 0.0)) for m in group_modules)
        for group, group_modules in modules.items()
    }

    def order(item: Any) -> tuple[float, str]:
        group = worker_group(item.nodeid)
        return (-seconds[group], group)

    return sorted(items, key=order)


def module_seconds(junit_xml: Path) -> dict[str, float]:
    """Seconds per test module in a pytest ``--junitxml`` report (its classname is the
    module's dotted path, a test class's name after it)."""
    seconds: dict[str, float] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            module = "/".join(parts) + ".py"
            seconds[module] = seconds.get(module, 0.0) + float(case.get("time") or 0)
    return {module: round(value, 1) for module, value in sorted(seconds.items())}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.workers RUN.xml (pytest --junitxml)")
    durations = module_seconds(Path(sys.argv[1]))
    DURATIONS.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{DURATIONS.relative_to(ROOT)}: {len(durations)} modules")
