"""The local Debezium Server runs the ECS task's environment, changed only where it must be."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake.local.debezium_server import (
    ServerEndpoints,
    server_environment,
    server_overrides,
    stream_names,
    task_environment,
)
from cdclake.local.fanout import (
    FAILED_RECORDS_RETENTION_S,
    MAPPING,
    PUT_EVENTS_BACKOFF_SECONDS,
    PUT_EVENTS_MAX_ATTEMPTS,
    REPO_ROOT,
)
from cdclake.local.runtime import cdk_components
from connectors.configs import topic_name
from connectors.render import placeholder_database
from environment.config import EnvironmentConfig, load_config

pytestmark = pytest.mark.cdk

ENDPOINTS = ServerEndpoints(
    postgres_port=15432,
    aws_endpoint="http://127.0.0.1:15000",
    http_port=18080,
    offsets_file="/state/fanout/offsets.dat",
)


@pytest.fixture(scope="module")
def config() -> EnvironmentConfig:
    return load_config("local")


@pytest.fixture(scope="module")
def task(config: EnvironmentConfig) -> dict[str, str]:
    """The environment ``DebeziumServer`` gives the ECS task (CloudFormation's stream names)."""
    from stacks.components.debezium_server import OFFSETS_FILE

    return task_environment(
        config,
        database=placeholder_database(config),
        offsets_file=OFFSETS_FILE,
        streams={
            topic_name(config, t): f"CdclakeLocalFanOut-Streams{i}-RANDOM"
            for i, t in enumerate(config.fanout_tables)
        },
    )


def test_local_debezium_server_environment_differs_only_in_overrides(
    config: EnvironmentConfig, task: dict[str, str]
) -> None:
    local = server_environment(config, ENDPOINTS)
    differing = {k for k in task.keys() | local.keys() if task.get(k) != local.get(k)}
    assert differing == set(server_overrides(config))
    assert local["DEBEZIUM_SOURCE_DATABASE_HOSTNAME"] == "127.0.0.1"
    assert local["DEBEZIUM_SINK_KINESIS_ENDPOINT"] == "http://127.0.0.1:15000"


def test_local_debezium_server_environment_holds_no_password(
    config: EnvironmentConfig,
) -> None:
    local = server_environment(config, ENDPOINTS)
    assert not any("PASSWORD" in key or key.rsplit("_", 1)[-1] == "USER" for key in local)


def test_local_streams_are_named_after_their_debezium_topics(config: EnvironmentConfig) -> None:
    local = server_environment(config, ENDPOINTS)
    routed = {
        local[k.replace("_REGEX", "_REPLACEMENT")]
        for k in local
        if k.startswith("DEBEZIUM_TRANSFORMS_STREAM") and k.endswith("_REGEX")
    }
    assert routed == set(stream_names(config).values())


@pytest.fixture(scope="module")
def fanout_template(config: EnvironmentConfig) -> dict[str, Any]:
    """``FanOut`` alone in a stack, synthesized with the project's CDK context."""
    import aws_cdk as cdk
    from aws_cdk import assertions
    from aws_cdk import aws_events as events
    from aws_cdk import aws_kinesis as kinesis
    from aws_cdk import aws_kms as kms

    from stacks.components.fanout_function import FanOut

    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    stack = cdk.Stack(
        cdk.App(context=context),
        "FanOutProbe",
        env=cdk.Environment(account=config.account, region=config.region),
    )
    FanOut(
        stack,
        "FanOut",
        fanout=config.fanout,
        prefix=config.prefix,
        tables=config.fanout_tables,
        encryption_key=kms.Key(stack, "Key"),
        bus=events.EventBus(stack, "Bus"),
        streams=[kinesis.Stream(stack, "Stream")],
        retain=False,
    )
    template: dict[str, Any] = assertions.Template.from_stack(stack).to_json()
    return template


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_local_event_source_mapping_matches_the_fanout_construct(
    fanout_template: dict[str, Any],
) -> None:
    (mapping,) = _resources(fanout_template, "AWS::Lambda::EventSourceMapping")
    assert {
        "batch_size": mapping["BatchSize"],
        "batching_window_s": float(mapping["MaximumBatchingWindowInSeconds"]),
        "bisect_on_error": mapping["BisectBatchOnFunctionError"],
        "retry_attempts": mapping["MaximumRetryAttempts"],
        "max_record_age_s": mapping["MaximumRecordAgeInSeconds"],
        "report_batch_item_failures": mapping["FunctionResponseTypes"]
        == ["ReportBatchItemFailures"],
        "starting_position": mapping["StartingPosition"],
    } == MAPPING.to_dict()
    assert mapping["ParallelizationFactor"] == 1  # one batch per shard at a time, as locally


def test_local_function_environment_matches_the_fanout_construct(
    config: EnvironmentConfig, fanout_template: dict[str, Any]
) -> None:
    (function,) = _resources(fanout_template, "AWS::Lambda::Function")
    deployed = function["Environment"]["Variables"]
    assert json.loads(deployed["ROUTES"]) == cdk_components()[2].routes(config.fanout_tables)
    assert deployed["PUT_EVENTS_MAX_ATTEMPTS"] == str(PUT_EVENTS_MAX_ATTEMPTS)
    assert deployed["PUT_EVENTS_BACKOFF_SECONDS"] == str(PUT_EVENTS_BACKOFF_SECONDS)
    assert deployed["CLAIM_CHECK_THRESHOLD_BYTES"] == str(config.fanout.claim_check_threshold_bytes)
    (queue,) = _resources(fanout_template, "AWS::SQS::Queue")
    assert queue["MessageRetentionPeriod"] == FAILED_RECORDS_RETENTION_S
