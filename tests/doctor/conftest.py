"""A moto server in its own process, credentials pointing at it, and configs for its account."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cdclake.local.processes import moto_server

MOTO_ACCOUNT = "123456789012"  # the account moto answers for


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


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
