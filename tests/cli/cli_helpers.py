"""Every cdclake command, how each operator error is provoked for it, and how to run it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCENARIOS = ("no_credentials", "stack_stopped", "unknown_table", "unknown_env")


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    exit_code: int
    says: str  # a fragment the one line must hold


NO_AWS = "needs no AWS credentials"
NO_LOCAL = "does not use the local stack"
NO_TABLE = "takes no configured table"
NO_ENV = "takes no environment"
DSN = "postgresql://replicator@127.0.0.1:9/app"
CREDENTIALS = "no usable AWS credentials"
STACK = "the local stack is not running: start it with `cdclake local up`"
TABLE = "public.nope"

# One row per command path (as `cdclake --help` names them). A scenario maps to the case that
# provokes it, or to why it does not apply. A command missing here fails the test.
COMMANDS: dict[str, dict[str, Case | str]] = {
    "doctor": {
        "no_credentials": "its report is the answer (one row per check, skip/FAIL with the fix)",
        "stack_stopped": NO_LOCAL,
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("doctor", "--env", "nope"), 2, "no environment config"),
    },
    "validate": {
        "no_credentials": Case(
            ("validate", "--env", "dev", "--table", "public.orders"), 2, "only the local stack"
        ),
        "stack_stopped": Case(("validate", "--env", "local", "--table", "public.orders"), 1, STACK),
        "unknown_table": Case(("validate", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("validate", "--env", "nope", "--table", "public.orders"), 2, "no environment config"
        ),
    },
    "status": {
        "no_credentials": Case(("status", "--env", "dev"), 1, CREDENTIALS),
        "stack_stopped": Case(("status", "--env", "local"), 1, STACK),
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("status", "--env", "nope"), 2, "no environment config"),
    },
    "snapshot": {
        "no_credentials": Case(
            (
                "snapshot",
                *("--env", "dev", "--table", "public.orders"),
                *("--dsn", DSN, "--secret-id", "cdclake/replication"),
            ),
            1,
            CREDENTIALS,
        ),
        "stack_stopped": Case(("snapshot", "--env", "local", "--table", "public.orders"), 1, STACK),
        "unknown_table": Case(("snapshot", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("snapshot", "--env", "nope", "--table", "public.orders"), 2, "no environment config"
        ),
    },
    "dispatch": {
        "no_credentials": Case(("dispatch", "--env", "dev", "--dry-run"), 1, CREDENTIALS),
        "stack_stopped": Case(("dispatch", "--env", "local", "--dry-run"), 1, STACK),
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("dispatch", "--env", "nope"), 2, "no environment config"),
    },
    "cost": {
        "no_credentials": NO_AWS,
        "stack_stopped": NO_LOCAL,
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("cost", "--env", "nope"), 2, "no environment config"),
    },
    "merge": {
        "no_credentials": Case(
            ("merge", "--env", "dev", "--table", "public.orders"), 2, "glue start-job-run"
        ),
        "stack_stopped": Case(("merge", "--env", "local", "--table", "public.orders"), 1, STACK),
        "unknown_table": Case(("merge", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("merge", "--env", "nope", "--table", "public.orders"), 2, "no environment config"
        ),
    },
    "export": {
        "no_credentials": NO_AWS,
        "stack_stopped": NO_LOCAL,
        "unknown_table": Case(
            ("export", "--warehouse", "{tmp}", "--table", "lake.nope", "--out", "-"),
            1,
            "has no commit",
        ),
        "unknown_env": NO_ENV,
    },
    "generate": {s: "writes generated files; touches no environment" for s in SCENARIOS},
    "demo": {s: "starts its own stack in its own folder" for s in SCENARIOS},
    "local up": {
        "no_credentials": NO_AWS,
        "stack_stopped": "starts the stack",
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("local", "up", "--env", "nope"), 2, "no environment config"),
    },
    "local status": {
        "no_credentials": NO_AWS,
        "stack_stopped": "reports the stopped stack as its answer (exit 1, up: False)",
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("local", "status", "--env", "nope"), 2, "no environment config"),
    },
    "local reconcile": {
        "no_credentials": NO_AWS,
        "stack_stopped": Case(("local", "reconcile"), 1, STACK),
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("local", "reconcile", "--env", "nope"), 2, "no environment config"),
    },
    "local down": {
        "no_credentials": NO_AWS,
        "stack_stopped": "stopping a stopped stack succeeds (nothing was running)",
        "unknown_table": NO_TABLE,
        "unknown_env": Case(("local", "down", "--env", "nope"), 2, "no environment config"),
    },
    "quarantine list": {
        "no_credentials": Case(
            ("quarantine", "list", "--env", "dev", "--table", "public.orders"), 1, CREDENTIALS
        ),
        "stack_stopped": Case(
            ("quarantine", "list", "--env", "local", "--table", "public.orders"), 1, STACK
        ),
        "unknown_table": Case(("quarantine", "list", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("quarantine", "list", "--env", "nope", "--table", "public.orders"),
            2,
            "no environment config",
        ),
    },
    "quarantine replay": {
        "no_credentials": Case(
            ("quarantine", "replay", "--env", "dev", "--table", "public.orders"), 1, CREDENTIALS
        ),
        "stack_stopped": Case(
            ("quarantine", "replay", "--env", "local", "--table", "public.orders"), 1, STACK
        ),
        "unknown_table": Case(
            ("quarantine", "replay", "--env", "local", "--table", TABLE), 2, TABLE
        ),
        "unknown_env": Case(
            ("quarantine", "replay", "--env", "nope", "--table", "public.orders"),
            2,
            "no environment config",
        ),
    },
    "rebuild": {
        "no_credentials": Case(
            ("rebuild", "--env", "dev", "--table", "public.orders"), 1, CREDENTIALS
        ),
        "stack_stopped": Case(("rebuild", "--env", "local", "--table", "public.orders"), 1, STACK),
        "unknown_table": Case(("rebuild", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("rebuild", "--env", "nope", "--table", "public.orders"), 2, "no environment config"
        ),
    },
    "restore": {
        "no_credentials": Case(
            ("restore", "--env", "dev", "--table", "public.orders"), 1, CREDENTIALS
        ),
        "stack_stopped": Case(("restore", "--env", "local", "--table", "public.orders"), 1, STACK),
        "unknown_table": Case(("restore", "--env", "local", "--table", TABLE), 2, TABLE),
        "unknown_env": Case(
            ("restore", "--env", "nope", "--table", "public.orders"), 2, "no environment config"
        ),
    },
    "erase": {
        "no_credentials": Case(
            ("erase", "--env", "dev", "--table", "public.orders", "--key", "id=1"), 1, CREDENTIALS
        ),
        "stack_stopped": Case(
            ("erase", "--env", "local", "--table", "public.orders", "--key", "id=1"), 1, STACK
        ),
        "unknown_table": Case(
            ("erase", "--env", "local", "--table", TABLE, "--key", "id=1"), 2, TABLE
        ),
        "unknown_env": Case(
            ("erase", "--env", "nope", "--table", "public.orders", "--key", "id=1"),
            2,
            "no environment config",
        ),
    },
    "query": {
        "no_credentials": Case(("query", "--env", "dev", "SELECT 1"), 2, "the local stack only"),
        "stack_stopped": Case(("query", "SELECT 1"), 1, STACK),
        "unknown_table": "takes SQL, not a configured table (Trino's TABLE_NOT_FOUND: tests/query)",
        "unknown_env": Case(("query", "--env", "nope", "SELECT 1"), 2, "no environment config"),
    },
}


def command_paths() -> set[str]:
    """Every leaf command of the app, as `cdclake --help` and its groups list them."""
    import typer

    from cdclake.cli import app

    def walk(command: object, prefix: str) -> set[str]:
        children = getattr(command, "commands", None)
        if not children:
            return {prefix}
        found: set[str] = set()
        for name, child in children.items():
            found |= walk(child, f"{prefix} {name}".strip())
        return found

    return walk(typer.main.get_command(app), "")


def cases() -> list[tuple[str, str, Case]]:
    return [
        (command, scenario, case)
        for command, row in COMMANDS.items()
        for scenario, case in row.items()
        if isinstance(case, Case)
    ]


def environment(state_dir: Path) -> dict[str, str]:
    """No AWS credentials anywhere boto3 looks, no instance metadata, a stopped local stack."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k not in {"CDCLAKE_DEBUG", "PGPASSWORD"}
    }
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(state_dir / "no-credentials"),
        AWS_CONFIG_FILE=str(state_dir / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",
        CDCLAKE_LOCAL_DIR=str(state_dir / "stack"),
        COLUMNS="200",
    )
    return env


def write_stopped_stack(state_dir: Path) -> None:
    """What `cdclake local down` leaves: the state file of processes that no longer run."""
    from cdclake.local.processes import Tracked
    from cdclake.local.runtime import State
    from cdclake.local.stack import LocalStack

    stack = LocalStack(state_dir / "stack", env="local")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    names = ("postgres", "kafka", "connect", "moto")
    state = State(
        env="local",
        ports={name: 9 for name in names},  # discard port: nothing listens on it
        processes={n: Tracked(n, pid, 1, str(state_dir / f"{n}.log")) for n in names},
        bucket="cdclake-local-changes",
    )
    stack.root.mkdir(parents=True, exist_ok=True)
    stack.state_file.write_text(state.to_json())


def run_cli(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdclake.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def refused(code: str, message: str, operation: str = "GetJobRuns") -> Exception:
    """The ClientError botocore raises for an AWS error reply (through its own Stubber)."""
    import boto3
    from botocore.stub import Stubber

    glue = boto3.client(
        "glue", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(glue) as stub:
        stub.add_client_error(
            "get_job_runs", service_error_code=code, service_message=message, http_status_code=400
        )
        try:
            glue.get_job_runs(JobName="cdclake-dev-merge-public-orders")
        except Exception as exc:
            return exc
    raise AssertionError(f"{operation} was not refused")
