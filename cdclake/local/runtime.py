"""What the local stack's parts share: its state record, the JVM and AWS settings of its
processes (and where their jars are), the CDK constructs' module the fan-out's parts mirror,
and the handle a part (the fan-out, each process's module) gets of the stack that starts it.

Below ``stack`` and ``fanout``: imports neither, so they need not import each other.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from cdclake.local.processes import StackError, Tracked
from environment.paths import REPO_ROOT

if TYPE_CHECKING:
    from environment.config import EnvironmentConfig

# Dummy credentials: moto accepts any; the worker's AWS SDK finds them in its environment, the
# same default provider chain that picks up the IAM role on MSK Connect.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "cdclake-local",
    "AWS_SECRET_ACCESS_KEY": "cdclake-local",
    "AWS_REGION": "us-east-1",
}
# Two cores are shared with other work: small heaps, one GC thread.
JVM_OPTS = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
JVM_LIB = REPO_ROOT / "jvm" / "lib"


def java_binary(tool: str = "java") -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / tool).exists():
        return str(Path(home) / "bin" / tool)
    found = shutil.which(tool)
    if not found:
        raise StackError(f"{tool} not found: the local stack needs a Java 17 JDK")
    return found


def jvm_lib(module: str) -> Path:
    path = JVM_LIB / module
    if not path.is_dir() or not any(path.glob("*.jar")):
        raise StackError(
            f"{path} has no jars; resolve them with "
            "`mvn -B -q -f jvm/pom.xml dependency:copy-dependencies` (part of `make setup`)"
        )
    return path


def cdk_components() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``stacks.components``' debezium_server, event_consumers, fanout_function (starts jsii)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    # jsii prints a banner per process on an end-of-life Node; the variable lists majors.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from stacks.components import debezium_server, event_consumers, fanout_function

    return debezium_server, event_consumers, fanout_function


@dataclass
class State:
    """What ``up`` started; written to ``state.json`` so ``status``/``down`` find it later."""

    env: str
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, Tracked] = field(default_factory=dict)
    bucket: str = ""
    fanout: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "env": self.env,
                "ports": self.ports,
                "processes": {k: v.to_dict() for k, v in self.processes.items()},
                "bucket": self.bucket,
                "fanout": self.fanout,
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> State:
        raw = json.loads(text)
        return cls(
            env=raw["env"],
            ports={k: int(v) for k, v in raw["ports"].items()},
            processes={k: Tracked.from_dict(v) for k, v in raw["processes"].items()},
            bucket=raw["bucket"],
            fanout=bool(raw.get("fanout", False)),
        )


class StackHandle(Protocol):
    """What a part of the stack may use of the stack that starts it."""

    config: EnvironmentConfig
    root: Path

    def save_state(self, state: State) -> None: ...
    def log_path(self, name: str) -> Path: ...
    def replication_credentials(self) -> tuple[str, str]: ...
