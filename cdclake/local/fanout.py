"""The fan-out beside the local stack (``cdclake local up --fanout``).

Adds to the capture stack: on the moto server, what the fan-out stack declares for the
environment (one Kinesis stream per fan-out table, the bus and its archive, per consumer a
rule, a queue, its dead-letter queue and a delivery dead-letter queue, the Connection and API
destination of an HTTP consumer, the claim-check bucket, the failed-records queue); Debezium
Server (``cdclake.local.debezium_server``); and the fan-out handler driven as Lambda's event
source mapping drives it (``cdclake.local.event_source``).

Names, patterns, queue settings and routes come from the functions and constants the CDK
constructs use (imported from ``stacks.components``, which starts CDK's jsii runtime: only
``up`` pays for it). Physical names are CloudFormation's in AWS; here they are
``config.resource_name(...)``, and each stream is named after its Debezium topic.

State folder additions::

    fanout/plan.json          what the event-source driver runs with (no secrets)
    fanout/checkpoints.json   the mapping's position in each shard
    fanout/resources.json     what ``provision`` made on moto (names, URLs, ARNs)
    secrets/<consumer>.api-key       an HTTP consumer's API key (0600; also in moto's secrets)
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3

from cdclake.local import debezium_server, processes
from cdclake.local.debezium_server import stream_names
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import AWS_ENV, StackHandle, State, cdk_components
from environment.config import ConsumerConfig, EnvironmentConfig
from environment.fanout_settings import (
    FAILED_RECORDS_RETENTION_DAYS,
    MAPPING,
    PUT_EVENTS_BACKOFF_SECONDS,
    PUT_EVENTS_MAX_ATTEMPTS,
)
from environment.paths import REPO_ROOT

#: Processes of the fan-out, in start order (``down`` stops them before the capture stack).
FANOUT_PROCESSES = ("debezium-server", "fanout-lambda")
FUNCTION_NAME = "fanout"

FAILED_RECORDS_RETENTION_S = FAILED_RECORDS_RETENTION_DAYS * 24 * 3600


# -- names ---------------------------------------------------------------------------------


def bus_name(config: EnvironmentConfig) -> str:
    return config.resource_name("changes")  # ChangeEventBus's name and archive name


def claim_check_bucket(config: EnvironmentConfig) -> str:
    return config.resource_name("claim-checks")


def failure_queue_name(config: EnvironmentConfig) -> str:
    return config.resource_name("fanout-failed-records")


@dataclass(frozen=True)
class ConsumerNames:
    queue: str
    dead_letters: str
    delivery_dead_letters: str
    rule: str
    connection: str
    api_destination: str


def consumer_names(config: EnvironmentConfig, consumer: ConsumerConfig) -> ConsumerNames:
    def name(*parts: str) -> str:
        return config.resource_name(consumer.name, *parts)

    return ConsumerNames(
        queue=name(),
        dead_letters=name("dlq"),
        delivery_dead_letters=name("delivery-dlq"),
        rule=name(),
        connection=name(),
        api_destination=name(),
    )


def secret_name(secret_arn: str) -> str:
    """``arn:...:secret:<name>-<6 chars>`` -> ``<name>`` (Secrets Manager's random suffix)."""
    resource = secret_arn.split(":secret:", 1)[1]
    return re.sub(r"-[A-Za-z0-9]{6}$", "", resource)


# -- AWS side on moto ------------------------------------------------------------------------


@dataclass(frozen=True)
class AwsClients:
    endpoint: str
    region: str
    credentials: dict[str, str]

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"],
        )


def _queue(sqs: Any, name: str, attributes: dict[str, str]) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn


def provision(config: EnvironmentConfig, aws: AwsClients, secrets_dir: Path) -> dict[str, Any]:
    """Create (idempotently) what the fan-out stack declares; return names, URLs and ARNs."""
    _, consumers_module, fanout_function = cdk_components()
    kinesis, sqs, events, s3, secretsmanager = (
        aws.client(s) for s in ("kinesis", "sqs", "events", "s3", "secretsmanager")
    )
    existing_streams = set(kinesis.list_streams()["StreamNames"])
    for stream in stream_names(config).values():
        if stream in existing_streams:
            continue
        if config.kinesis.mode == "ON_DEMAND":
            kinesis.create_stream(StreamName=stream, StreamModeDetails={"StreamMode": "ON_DEMAND"})
        else:
            kinesis.create_stream(StreamName=stream, ShardCount=config.kinesis.shards)
        if config.kinesis.retention_hours > 24:
            kinesis.increase_stream_retention_period(
                StreamName=stream, RetentionPeriodHours=config.kinesis.retention_hours
            )

    bucket = claim_check_bucket(config)
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=bucket)
    failure_url, _ = _queue(
        sqs,
        failure_queue_name(config),
        {"MessageRetentionPeriod": str(FAILED_RECORDS_RETENTION_S)},
    )

    bus = bus_name(config)
    if bus not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=bus)
    bus_arn = events.describe_event_bus(Name=bus)["Arn"]
    archives = {a["ArchiveName"] for a in events.list_archives().get("Archives", [])}
    if bus not in archives:
        sources = sorted({t.event_source for t in config.fanout_tables})
        events.create_archive(
            ArchiveName=bus,
            EventSourceArn=bus_arn,
            EventPattern=json.dumps({"source": sources or ["cdc"]}),
            RetentionDays=config.fanout.archive_retention_days,
        )

    target_policy = {
        "RetryPolicy": {
            "MaximumRetryAttempts": consumers_module.TARGET_RETRIES,
            "MaximumEventAgeInSeconds": int(consumers_module.TARGET_MAX_AGE.to_seconds()),
        }
    }
    consumers: dict[str, Any] = {}
    for consumer in config.fanout.consumers:
        names = consumer_names(config, consumer)
        dlq_url, dlq_arn = _queue(
            sqs,
            names.dead_letters,
            {
                "MessageRetentionPeriod": str(
                    int(consumers_module.DEAD_LETTER_RETENTION.to_seconds())
                )
            },
        )
        queue_url, queue_arn = _queue(
            sqs,
            names.queue,
            {
                "MessageRetentionPeriod": str(int(consumers_module.QUEUE_RETENTION.to_seconds())),
                "VisibilityTimeout": str(6 * consumer.consumer_timeout_seconds),
                "RedrivePolicy": json.dumps(
                    {
                        "deadLetterTargetArn": dlq_arn,
                        "maxReceiveCount": consumers_module.MAX_RECEIVES,
                    }
                ),
            },
        )
        delivery_url, delivery_arn = _queue(
            sqs,
            names.delivery_dead_letters,
            {
                "MessageRetentionPeriod": str(
                    int(consumers_module.DEAD_LETTER_RETENTION.to_seconds())
                )
            },
        )
        rendered = consumers_module.event_pattern(config.fanout_tables, consumer)
        pattern = {
            "source": list(rendered.source),
            "detail-type": list(rendered.detail_type),
            "detail": dict(rendered.detail),
        }
        events.put_rule(
            Name=names.rule,
            EventBusName=bus,
            EventPattern=json.dumps(pattern),
            State="ENABLED",
            Description=f"{consumer.name}: {', '.join(consumer.tables)} ({''.join(consumer.ops)})",
        )
        targets = [
            {
                "Id": "queue",
                "Arn": queue_arn,
                "DeadLetterConfig": {"Arn": delivery_arn},
                **target_policy,
            }
        ]
        entry: dict[str, Any] = {
            "queue_url": queue_url,
            "queue_arn": queue_arn,
            "dead_letter_queue_url": dlq_url,
            "delivery_dead_letter_queue_url": delivery_url,
            "rule": names.rule,
            "event_pattern": pattern,
        }
        if consumer.http is not None:
            entry["http"] = _http_consumer(
                consumer, names, events, secretsmanager, secrets_dir, consumers_module
            )
            targets.append(
                {
                    "Id": "api",
                    "Arn": entry["http"]["api_destination_arn"],
                    "DeadLetterConfig": {"Arn": delivery_arn},
                    **target_policy,
                }
            )
        events.put_targets(Rule=names.rule, EventBusName=bus, Targets=targets)
        consumers[consumer.name] = entry

    routes = fanout_function.routes(config.fanout_tables)
    return {
        "bus": bus,
        "bus_arn": bus_arn,
        "streams": stream_names(config),
        "claim_check_bucket": bucket,
        "failure_queue_url": failure_url,
        "routes": routes,
        "consumers": consumers,
    }


def _http_consumer(
    consumer: ConsumerConfig,
    names: ConsumerNames,
    events: Any,
    secretsmanager: Any,
    secrets_dir: Path,
    consumers_module: ModuleType,
) -> dict[str, Any]:
    """The consumer's secret (made once, kept 0600), Connection and API destination."""
    http = consumer.http
    assert http is not None
    if http.auth != "api_key":
        raise StackError(
            f"fanout.consumers {consumer.name}: the local stack supports auth: api_key only"
        )
    key_file = secrets_dir / f"{consumer.name}.api-key"
    if not key_file.exists():
        secrets_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(24))
    api_key = key_file.read_text().strip()
    name = secret_name(http.secret_arn)
    listed = secretsmanager.list_secrets(Filters=[{"Key": "name", "Values": [name]}])
    if not any(s["Name"] == name for s in listed.get("SecretList", [])):
        secretsmanager.create_secret(Name=name, SecretString=json.dumps({"api_key": api_key}))
    known = {c["Name"] for c in events.list_connections().get("Connections", [])}
    if names.connection not in known:
        events.create_connection(
            Name=names.connection,
            Description=f"{consumer.name} endpoint",
            AuthorizationType="API_KEY",
            AuthParameters={
                "ApiKeyAuthParameters": {
                    "ApiKeyName": consumers_module.API_KEY_HEADER,
                    "ApiKeyValue": api_key,
                }
            },
        )
    connection_arn = events.describe_connection(Name=names.connection)["ConnectionArn"]
    destinations = {d["Name"] for d in events.list_api_destinations().get("ApiDestinations", [])}
    if names.api_destination not in destinations:
        events.create_api_destination(
            Name=names.api_destination,
            Description=f"{consumer.name} endpoint",
            ConnectionArn=connection_arn,
            InvocationEndpoint=http.endpoint,
            HttpMethod=http.method,
            InvocationRateLimitPerSecond=http.rate_per_second,
        )
    destination = events.describe_api_destination(Name=names.api_destination)
    return {
        "connection": names.connection,
        "connection_arn": connection_arn,
        "api_destination": names.api_destination,
        "api_destination_arn": destination["ApiDestinationArn"],
        "secret": name,
        "endpoint": http.endpoint,
    }


# -- the stack hooks -------------------------------------------------------------------------


def _aws(stack: StackHandle, state: State) -> AwsClients:

    return AwsClients(
        endpoint=f"http://127.0.0.1:{state.ports['moto']}",
        region=stack.config.region,
        credentials=AWS_ENV,
    )


def start(
    stack: StackHandle, state: State, *, timeout: float, progress: Callable[[str], None]
) -> None:
    """Provision the AWS side, then start Debezium Server and the Lambda driver if not running."""

    folder = stack.root / "fanout"
    folder.mkdir(parents=True, exist_ok=True)
    aws = _aws(stack, state)
    progress("creating the fan-out's streams, bus, rules and queues on moto")
    resources = provision(stack.config, aws, stack.root / "secrets")
    (folder / "resources.json").write_text(json.dumps(resources, indent=2, sort_keys=True))
    port = state.ports.get("debezium-server")
    if "debezium-server" not in state.processes and (port is None or processes.port_open(port)):
        state.ports["debezium-server"] = processes.free_port()
    stack.save_state(state)

    if "debezium-server" not in state.processes:
        progress("starting Debezium Server")
        processes.start_on_free_ports(
            lambda: debezium_server.start(stack, state, aws.endpoint, folder, timeout=timeout),
            state.ports,
            ["debezium-server"],
            chosen=lambda: stack.save_state(state),
        )

    if "fanout-lambda" not in state.processes:
        progress("starting the fan-out handler's event source mapping")
        plan = {
            "endpoint": aws.endpoint,
            "region": aws.region,
            "streams": sorted(resources["streams"].values()),
            "mapping": MAPPING.to_dict(),
            "failure_queue_url": resources["failure_queue_url"],
            "function_name": stack.config.resource_name(FUNCTION_NAME),
            "function_arn": (
                f"arn:aws:lambda:{aws.region}:{stack.config.account}:function:"
                f"{stack.config.resource_name(FUNCTION_NAME)}"
            ),
            "checkpoints": str(folder / "checkpoints.json"),
            "function_environment": {
                **AWS_ENV,
                "AWS_DEFAULT_REGION": aws.region,
                "AWS_ENDPOINT_URL": aws.endpoint,
                "EVENT_BUS_NAME": resources["bus"],
                "ROUTES": json.dumps(resources["routes"], separators=(",", ":"), sort_keys=True),
                "CLAIM_CHECK_BUCKET": resources["claim_check_bucket"],
                "CLAIM_CHECK_THRESHOLD_BYTES": str(stack.config.fanout.claim_check_threshold_bytes),
                "PUT_EVENTS_MAX_ATTEMPTS": str(PUT_EVENTS_MAX_ATTEMPTS),
                "PUT_EVENTS_BACKOFF_SECONDS": str(PUT_EVENTS_BACKOFF_SECONDS),
                "POWERTOOLS_SERVICE_NAME": "fanout",
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
        }
        plan_file = folder / "plan.json"
        plan_file.write_text(json.dumps(plan, indent=2, sort_keys=True))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).strip(
            os.pathsep
        )
        proc = processes.spawn(
            "fanout-lambda",
            [sys.executable, "-m", "cdclake.local.event_source", str(plan_file)],
            log=stack.log_path("fanout-lambda"),
            env=env,
            cwd=REPO_ROOT,
        )
        state.processes["fanout-lambda"] = proc
        stack.save_state(state)


def status(stack: StackHandle, state: State) -> dict[str, Any]:
    """``status --json`` additions: the moto endpoint and each consumer's queue URL."""
    resources_file = stack.root / "fanout" / "resources.json"
    resources = json.loads(resources_file.read_text()) if resources_file.exists() else {}
    return {
        "aws_endpoint": f"http://127.0.0.1:{state.ports['moto']}",
        "event_bus": resources.get("bus"),
        "kinesis_streams": resources.get("streams", {}),
        "failed_records_queue_url": resources.get("failure_queue_url"),
        "consumers": {
            name: {"queue_url": c["queue_url"], "dead_letter_queue_url": c["dead_letter_queue_url"]}
            for name, c in resources.get("consumers", {}).items()
        },
        "debezium_server_health": (
            f"http://127.0.0.1:{state.ports['debezium-server']}/q/health"
            if "debezium-server" in state.ports
            else None
        ),
    }


def tracked(state: State) -> list[Tracked]:
    return [state.processes[n] for n in FANOUT_PROCESSES if n in state.processes]


# -- HTTP consumers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


def api_destination_request(
    config: EnvironmentConfig, aws: AwsClients, consumer_name: str, event: dict[str, Any]
) -> HttpRequest:
    """The request EventBridge sends for ``event`` to the consumer's API destination target.

    moto (5.2) does not deliver to API destinations: with ``MOTO_EVENTS_INVOKE_HTTP=true`` it
    sends a request without the event and without the Connection's credentials. This builds
    what EventBridge sends instead, from what is stored on moto: the rule's target (the matched
    event as the JSON body; the stack sets no input transformation), the API destination
    (method, endpoint) and its Connection (the API key header), the key read from the
    consumer's secret as the Connection's dynamic reference reads it at deploy time.
    """
    consumer = next(c for c in config.fanout.consumers if c.name == consumer_name)
    if consumer.http is None:
        raise StackError(f"fanout.consumers {consumer_name} has no http target")
    names = consumer_names(config, consumer)
    events = aws.client("events")
    targets = events.list_targets_by_rule(Rule=names.rule, EventBusName=bus_name(config))
    target = next(t for t in targets["Targets"] if ":api-destination/" in t["Arn"])
    if target.get("InputTransformer") or target.get("InputPath"):
        raise StackError(f"rule {names.rule}: input transformations are not rendered locally")
    destination = events.describe_api_destination(Name=names.api_destination)
    if destination["ApiDestinationArn"] != target["Arn"]:
        raise StackError(f"rule {names.rule} targets {target['Arn']}, not its API destination")
    connection = events.describe_connection(Name=names.connection)
    if connection["ConnectionArn"] != destination["ConnectionArn"]:
        raise StackError(f"API destination {names.api_destination} uses another connection")
    if connection["AuthorizationType"] != "API_KEY":
        raise StackError(f"connection {names.connection}: only API_KEY is built locally")
    header = connection["AuthParameters"]["ApiKeyAuthParameters"]["ApiKeyName"]
    stored = aws.client("secretsmanager").get_secret_value(
        SecretId=secret_name(consumer.http.secret_arn)
    )
    api_key = json.loads(stored["SecretString"])["api_key"]
    parameters = target.get("HttpParameters", {})
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Amazon/EventBridge/ApiDestinations",
        **parameters.get("HeaderParameters", {}),
        header: api_key,
    }
    body = target.get("Input") or json.dumps(event)
    return HttpRequest(
        destination["HttpMethod"], destination["InvocationEndpoint"], headers, body.encode()
    )
