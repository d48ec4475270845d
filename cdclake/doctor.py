"""``cdclake doctor --env ENV``: what a deploy needs that ``cdk synth`` cannot see.

Each check reads the account and region of ``config/<env>.yaml`` through boto3 (which honours
``AWS_PROFILE`` and ``AWS_ENDPOINT_URL``) and ends in one line: ``ok`` with what it found, or
``FAIL`` with what to do. Quota checks are advisory: when Service Quotas cannot be read they say
``skip`` and do not fail the run. The exit code is 1 when any check fails.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from botocore.parsers import ResponseParserError
from rich.console import Console
from rich.table import Table

from cdclake.status import expiry_warning, metric_lag
from environment.artifacts import PLUGIN_BUILD_HINT, PluginNotFound, plugin_source
from environment.config import ConfigError, EnvironmentConfig, load_config
from environment.paths import CONFIG_DIR, REPO_ROOT

# The bootstrap version the CDK's default synthesizer requires (each template's
# CheckBootstrapVersion rule and the assembly's requiresBootstrapStackVersion).
MIN_BOOTSTRAP_VERSION = 6
BOOTSTRAP_STACK = "CDKToolkit"
DEFAULT_QUALIFIER = "hnb659fds"
# Service Quotas codes: VPCs per Region, and EC2-VPC Elastic IPs (one per NAT gateway).
VPC_QUOTA = ("vpc", "L-F678F1CE")
ELASTIC_IP_QUOTA = ("ec2", "L-0263D0A3")

Status = Literal["ok", "FAIL", "skip"]
# What a call can end in besides an answer (an unparsable reply is not a BotoCoreError).
AWS_ERRORS = (ClientError, BotoCoreError, ResponseParserError)


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def _error(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip()
    return str(exc)


def bootstrap_qualifier(repo_root: Path = REPO_ROOT) -> str:
    """The qualifier cdk.json sets, or the CDK default."""
    try:
        context = json.loads((repo_root / "cdk.json").read_text()).get("context", {})
    except (OSError, ValueError):
        return DEFAULT_QUALIFIER
    return str(context.get("@aws-cdk/core:bootstrapQualifier", DEFAULT_QUALIFIER))


def check_credentials(config: EnvironmentConfig, session: boto3.Session) -> Check:
    name = "AWS credentials"
    try:
        identity = session.client("sts").get_caller_identity()
    except NoCredentialsError:
        return Check(
            name,
            "FAIL",
            f"no credentials found: set AWS_PROFILE (or log in with `aws sso login`) for "
            f"account {config.account}",
        )
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", f"credentials rejected ({_error(exc)}): refresh them")
    account = identity["Account"]
    if account != config.account:
        return Check(
            name,
            "FAIL",
            f"credentials are for account {account}, config/{config.env}.yaml deploys to "
            f"{config.account}: switch AWS_PROFILE (or fix `account` in the config)",
        )
    return Check(name, "ok", f"{identity['Arn']} in {config.account} / {config.region}")


def check_bootstrap(
    config: EnvironmentConfig, session: boto3.Session, qualifier: str = DEFAULT_QUALIFIER
) -> Check:
    name = "CDK bootstrap"
    todo = f"run `npx cdk bootstrap aws://{config.account}/{config.region}`"
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=BOOTSTRAP_STACK)
    except AWS_ERRORS as exc:
        if "does not exist" in _error(exc):
            return Check(name, "FAIL", f"no {BOOTSTRAP_STACK} stack in {config.region}: {todo}")
        return Check(name, "FAIL", f"cannot read {BOOTSTRAP_STACK} ({_error(exc)})")
    status = stacks["Stacks"][0]["StackStatus"]
    if status.endswith("_FAILED") or status.startswith(("ROLLBACK", "DELETE")):
        return Check(name, "FAIL", f"{BOOTSTRAP_STACK} is {status}: {todo}")
    parameter = f"/cdk-bootstrap/{qualifier}/version"
    try:
        value = session.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", f"{parameter} not readable ({_error(exc)}): {todo}")
    version = int(value) if value.isdigit() else 0
    if version < MIN_BOOTSTRAP_VERSION:
        return Check(
            name,
            "FAIL",
            f"bootstrap version {value}, at least {MIN_BOOTSTRAP_VERSION} needed: {todo}",
        )
    return Check(name, "ok", f"{BOOTSTRAP_STACK} {status}, version {version}")


def check_rds_ca(config: EnvironmentConfig) -> Check:
    """The RDS CA bundle the bootstrap Lambda and both captures verify Aurora with."""
    from environment.artifacts import rds_ca_bundle

    name = "RDS CA bundle"
    try:
        bundle = rds_ca_bundle(config)
    except ConfigError as exc:
        return Check(name, "FAIL", str(exc))
    if bundle is None:
        return Check(name, "ok", "database.tls_verify: false: Aurora's certificate is not verified")
    return Check(name, "ok", f"{bundle} (shipped with the bootstrap Lambda and both captures)")


def check_plugin(
    label: str, location: str, session: boto3.Session, repo_root: Path = REPO_ROOT
) -> Check:
    """A connector plugin the capture stack uses: an S3 object, or a local zip it uploads."""
    name = f"plugin {label}"
    try:
        source = plugin_source(location, setting=label, repo_root=repo_root)
    except PluginNotFound as exc:
        return Check(name, "FAIL", str(exc))
    if isinstance(source, tuple):
        bucket, key = source
        try:
            session.client("s3").head_object(Bucket=bucket, Key=key)
        except AWS_ERRORS as exc:
            return Check(
                name, "FAIL", f"{location} not readable ({_error(exc)}): {PLUGIN_BUILD_HINT}"
            )
        return Check(name, "ok", location)
    return Check(name, "ok", f"{source} ({source.stat().st_size:,} bytes, uploaded as an asset)")


def check_engine_version(config: EnvironmentConfig, session: boto3.Session) -> Check:
    database = config.database
    instance_class = f"db.{database.instance_class}"
    name = "Aurora engine version"
    rds = session.client("rds")
    try:
        offered = [
            option
            for page in rds.get_paginator("describe_orderable_db_instance_options").paginate(
                Engine="aurora-postgresql", EngineVersion=database.engine_version
            )
            for option in page["OrderableDBInstanceOptions"]
        ]
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", f"cannot list orderable options ({_error(exc)})")
    if not offered:
        return Check(
            name,
            "FAIL",
            f"aurora-postgresql {database.engine_version} is not offered in {config.region}: "
            f"set database.engine_version to one `aws rds describe-db-engine-versions "
            f"--engine aurora-postgresql` lists",
        )
    if instance_class not in {o["DBInstanceClass"] for o in offered}:
        return Check(
            name,
            "FAIL",
            f"{instance_class} is not offered with aurora-postgresql {database.engine_version} "
            f"in {config.region}: change database.instance_class",
        )
    return Check(name, "ok", f"aurora-postgresql {database.engine_version} on {instance_class}")


def parameter_problems(defaults: Iterable[dict[str, Any]], wanted: Iterable[str]) -> list[str]:
    """Wanted parameter names the engine's defaults lack or do not let a group modify."""
    known = {p["ParameterName"]: p for p in defaults}
    problems = []
    for name in wanted:
        if name not in known:
            problems.append(f"{name} (unknown)")
        elif not known[name].get("IsModifiable", False):
            problems.append(f"{name} (not modifiable)")
    return problems


def check_cluster_parameters(config: EnvironmentConfig, session: boto3.Session) -> Check:
    """The engine accepts every parameter the stack sets (or the parameter group fails)."""
    family = config.database.parameter_group_family
    name = "cluster parameters"
    try:
        defaults = [
            parameter
            for page in session.client("rds")
            .get_paginator("describe_engine_default_cluster_parameters")
            .paginate(DBParameterGroupFamily=family)
            for parameter in page["EngineDefaults"].get("Parameters", [])
        ]
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", f"cannot read {family} defaults ({_error(exc)})")
    problems = parameter_problems(defaults, config.database.cluster_parameters)
    if problems:
        return Check(
            name,
            "FAIL",
            f"{family} rejects {', '.join(problems)}: drop them from "
            f"DatabaseConfig.cluster_parameters",
        )
    return Check(name, "ok", f"{family} accepts {', '.join(config.database.cluster_parameters)}")


def _quota(session: boto3.Session, code: tuple[str, str]) -> float | None:
    service, quota = code
    try:
        answer = session.client("service-quotas").get_service_quota(
            ServiceCode=service, QuotaCode=quota
        )
    except AWS_ERRORS:
        return None
    return float(answer["Quota"]["Value"])


def check_vpc_quota(config: EnvironmentConfig, session: boto3.Session) -> Check:
    name = "quota: VPCs"
    limit = _quota(session, VPC_QUOTA)
    if limit is None:
        return Check(name, "skip", "Service Quotas not readable; the network stack adds 1 VPC")
    used = len(session.client("ec2").describe_vpcs()["Vpcs"])
    if used + 1 > limit:
        return Check(
            name,
            "FAIL",
            f"{used} of {limit:g} VPCs used in {config.region}, the network stack needs 1 more: "
            f"request an increase of {VPC_QUOTA[1]} in Service Quotas",
        )
    return Check(name, "ok", f"{used} of {limit:g} used, 1 more needed")


def check_elastic_ip_quota(config: EnvironmentConfig, session: boto3.Session) -> Check:
    name = "quota: Elastic IPs"
    needed = config.network.nat_gateways
    limit = _quota(session, ELASTIC_IP_QUOTA)
    if limit is None:
        return Check(
            name, "skip", f"Service Quotas not readable; {needed} NAT gateway(s) need one each"
        )
    used = len(session.client("ec2").describe_addresses()["Addresses"])
    if used + needed > limit:
        return Check(
            name,
            "FAIL",
            f"{used} of {limit:g} Elastic IPs used, {needed} more needed for NAT gateways: "
            f"request an increase of {ELASTIC_IP_QUOTA[1]} or lower network.nat_gateways",
        )
    return Check(name, "ok", f"{used} of {limit:g} used, {needed} more needed")


def check_change_file_expiry(
    config: EnvironmentConfig, session: boto3.Session, now: dt.datetime | None = None
) -> Check:
    """Each lake table's lag (CloudWatch ``LagSeconds``: the age of its oldest waiting change
    file) against the bucket's expiration: a file that expires unapplied is lost to the lake."""
    cloudwatch = session.client("cloudwatch")
    at = now or dt.datetime.now(dt.UTC)
    expiration = config.lake.change_file_expiration_days
    near: list[str] = []
    read = 0
    for table in config.lake_tables:
        found = metric_lag(cloudwatch, config.env, table.name, at)
        if found is None:
            continue
        read += 1
        warning = expiry_warning(dt.timedelta(seconds=found[0]), expiration)
        if warning:
            near.append(f"{table.name}: {warning}")
    if near:
        return Check("change file expiry", "FAIL", "; ".join(near))
    if not read:
        return Check("change file expiry", "skip", "no LagSeconds yet (not deployed, or idle)")
    return Check(
        "change file expiry",
        "ok",
        f"{read} tables: every waiting change file is far from the {expiration}-day expiration",
    )


# Checks that read only this machine: they run without credentials too.
OFFLINE_CHECKS = frozenset({"RDS CA bundle"})


def run_checks(
    config: EnvironmentConfig, session: boto3.Session, repo_root: Path = REPO_ROOT
) -> list[Check]:
    """Every check, in order; after a credentials failure the others are skipped."""
    connect = config.connect
    checks: dict[str, Callable[[], Check]] = {
        "CDK bootstrap": lambda: check_bootstrap(config, session, bootstrap_qualifier(repo_root)),
        "plugin debezium": lambda: check_plugin(
            "debezium", connect.debezium_plugin, session, repo_root
        ),
        "plugin s3 sink": lambda: check_plugin(
            "s3 sink", connect.s3_sink_plugin, session, repo_root
        ),
        "RDS CA bundle": lambda: check_rds_ca(config),
        "Aurora engine version": lambda: check_engine_version(config, session),
        "cluster parameters": lambda: check_cluster_parameters(config, session),
        "quota: VPCs": lambda: check_vpc_quota(config, session),
        "quota: Elastic IPs": lambda: check_elastic_ip_quota(config, session),
        "change file expiry": lambda: check_change_file_expiry(config, session),
    }
    credentials = check_credentials(config, session)
    if credentials.failed:
        return [
            credentials,
            *(
                _guarded(name, check)
                if name in OFFLINE_CHECKS
                else Check(name, "skip", "needs working credentials")
                for name, check in checks.items()
            ),
        ]
    return [credentials, *(_guarded(name, check) for name, check in checks.items())]


def _guarded(name: str, check: Callable[[], Check]) -> Check:
    """One check's answer; a call that errors out unexpectedly fails that check, not the run."""
    try:
        return check()
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", _error(exc))


def render(checks: list[Check], console: Console) -> None:
    table = Table(title="cdclake doctor", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail / what to do", overflow="fold")
    colour = {"ok": "green", "FAIL": "red", "skip": "yellow"}
    for check in checks:
        table.add_row(check.name, f"[{colour[check.status]}]{check.status}[/]", check.detail)
    console.print(table)


def doctor(
    env: Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")],
    config_dir: Annotated[
        Path, typer.Option("--config-dir", help="folder of the environment files")
    ] = CONFIG_DIR,
) -> None:
    """Preflight for `cdk deploy`: credentials, bootstrap, plugins, engine, quotas; and for a
    deployed environment, change files waiting near their expiration."""
    console = Console(soft_wrap=False)
    config = load_config(env, config_dir=config_dir)  # a ConfigError: one line (cdclake.errors)
    checks = run_checks(config, boto3.Session(region_name=config.region))
    render(checks, console)
    if any(check.failed for check in checks):
        raise typer.Exit(1)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(doctor)
