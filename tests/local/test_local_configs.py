"""The local stack runs the configs ``connectors/`` generates, changed only where it must be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdclake.local.connect import (
    SINK_OVERRIDES,
    SOURCE_OVERRIDES,
    WORKER_OVERRIDES,
    LocalEndpoints,
    connector_configs,
    sink_config,
    source_config,
    worker_config,
)
from connectors.configs import connector_name
from connectors.render import render
from environment.config import EnvironmentConfig, load_config

ENDPOINTS = LocalEndpoints(
    postgres_port=15432,
    kafka_port=19092,
    connect_port=18083,
    s3_port=15000,
    bucket="cdclake-local-changes",
    secrets_file=Path("/state/secrets/replication.properties"),
)


@pytest.fixture(scope="module")
def config() -> EnvironmentConfig:
    return load_config("local")


@pytest.fixture(scope="module")
def generated(config: EnvironmentConfig) -> dict[str, str]:
    """What `python -m connectors.render local` writes for MSK Connect."""
    return render(config)


def _differing(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_local_source_config_differs_only_in_overrides(
    config: EnvironmentConfig, generated: dict[str, str]
) -> None:
    production = json.loads(generated["debezium-source.json"])
    local = source_config(config, ENDPOINTS)
    assert _differing(production, local) == set(SOURCE_OVERRIDES)
    assert local["database.hostname"] == "127.0.0.1"
    assert local["database.password"] == (
        "${secretsmanager:/state/secrets/replication.properties:password}"
    )


def test_local_sink_config_differs_only_in_overrides(
    config: EnvironmentConfig, generated: dict[str, str]
) -> None:
    production = json.loads(generated["s3-sink.json"])
    local = sink_config(config, ENDPOINTS)
    assert _differing(production, local) == set(SINK_OVERRIDES)
    assert local["store.url"] == "http://127.0.0.1:15000"
    assert local["s3.bucket.name"] == "cdclake-local-changes"


def test_local_worker_config_differs_only_in_overrides(
    config: EnvironmentConfig, generated: dict[str, str]
) -> None:
    production = _properties(generated["worker.properties"])
    local = worker_config(config, endpoints=ENDPOINTS, plugin_path=Path("/state/plugins"))
    # What MSK Connect sets itself (cluster, group, internal topics, REST) is added, not changed.
    shared = {k: v for k, v in local.items() if k in production or k in WORKER_OVERRIDES}
    assert _differing(production, shared) == set(WORKER_OVERRIDES)
    assert local["config.providers.secretsmanager.class"].endswith("FileConfigProvider")


def test_local_connector_names_match_msk_connect(config: EnvironmentConfig) -> None:
    assert set(connector_configs(config, ENDPOINTS)) == {
        connector_name(config, "debezium-source"),
        connector_name(config, "s3-sink"),
    }
