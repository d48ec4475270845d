"""The environments the cost model prices, the bench result it takes its rate from, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from environment.config import EnvironmentConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
# The run the model's per-event rate was measured in (cdclake/cost.py).
BENCH_RESULT = ROOT / "bench" / "results" / "merge_incremental-20261123-235246.json"
# The run the model's bytes per event come from.
INITIAL_LOAD_RESULT = ROOT / "bench" / "results" / "initial_load-20261124-093749.json"
ENVS = ("dev", "prod")


def configs() -> dict[str, EnvironmentConfig]:
    return {env: load_config(env) for env in ENVS}


def bench_run() -> dict[str, Any]:
    """The 3,000,000-row MERGE_ON_READ run of the incremental bench."""
    result = json.loads(BENCH_RESULT.read_text())
    return dict(
        result["incremental"]["MERGE_ON_READ"]["runs"]["3000000"], machine=result["machine"]
    )


def initial_load_run() -> dict[str, Any]:
    """The initial-load bench's run: rows and the bytes of their change files."""
    return dict(json.loads(INITIAL_LOAD_RESULT.read_text())["run"])


def with_schedule(config: EnvironmentConfig, schedule: str) -> EnvironmentConfig:
    dispatch = config.lake.dispatch.model_copy(update={"schedule": schedule})
    lake = config.lake.model_copy(update={"dispatch": dispatch})
    return config.model_copy(update={"lake": lake})


def run_cost(*args: str) -> subprocess.CompletedProcess[str]:
    """``cdclake cost`` in its own process, through the CLI's error boundary."""
    env = {k: v for k, v in os.environ.items() if k != "CDCLAKE_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "cdclake.cli", "cost", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        cwd=ROOT,
        timeout=120,
    )
