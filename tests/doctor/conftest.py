"""A moto server in its own process, credentials pointing at it, and configs for its account."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

MOTO_ACCOUNT = "123456789012"  # the account moto answers for


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def aws_env(moto_endpoint: str) -> Iterator[None]:
    """boto3 (and so the doctor) talks to the moto server with dummy credentials."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("AWS_"):
                patch.delenv(name)
        patch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_CONFIG_FILE", os.devnull)
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        yield


@pytest.fixture(scope="session")
def config_dir(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    """config/dev.yaml and config/prod.yaml, deploying to moto's account."""
    folder = tmp_path_factory.mktemp("config")
    for env in ("dev", "prod"):
        raw = yaml.safe_load((repo_root / "config" / f"{env}.yaml").read_text())
        raw["account"] = MOTO_ACCOUNT
        (folder / f"{env}.yaml").write_text(yaml.safe_dump(raw))
    return folder
