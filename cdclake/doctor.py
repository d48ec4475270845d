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
from environment.replication import replication_slots_needed

# The bootstrap version the CDK's default synthesizer requires (each template's
# CheckBootstrapVersion rule and the assembly's requiresBootstrapStackVersion).
MIN_BOOTSTRAP_VERSION = 6
BOOTSTRAP_STACK = "CDKToolkit"
DEFAULT_QUALIFIER = "hnb659fds"
# Service Quotas codes: VPCs per Region, and EC2-VPC Elastic IPs (one per NAT gateway).
VPC_QUOTA = ("vpc", "L-F678F1CE")
ELASTIC_IP_QUOTA = ("ec2", "L-0263D0A3")

# An existing cluster (database.existing): the engines Debezium's PostgreSQL connector reads
# (Aurora, and RDS Multi-AZ DB clusters), and the major versions cdc-lake states
# (docs/database.md): 16, what it creates, and 15, what the bootstrap's tests run against.
EXISTING_ENGINES = ("aurora-postgresql", "postgres")
SUPPORTED_MAJOR_VERSIONS = ("15", "16")
# The cap of WAL a stalled slot may keep, unset: PostgreSQL's -1 (no cap).
UNSET_WAL_KEEP = ("", "-1")

# warn: true and worth acting on, but no reason to hold the deploy (the exit code stays 0).
Status = Literal["ok", "FAIL", "skip", "warn"]
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


def _describe_cluster(config: EnvironmentConfig, session: boto3.Session) -> dict[str, Any] | str:
    """The existing cluster as RDS describes it, or what to do when it cannot be read."""
    existing = config.database.existing
    assert existing is not None
    try:
        clusters = session.client("rds").describe_db_clusters(
            DBClusterIdentifier=existing.cluster_identifier
        )["DBClusters"]
    except AWS_ERRORS as exc:
        return (
            f"cannot read cluster {existing.cluster_identifier} in {config.region} "
            f"({_error(exc)}): fix database.existing.cluster_identifier or the credentials"
        )
    return dict(clusters[0])


def check_existing_cluster(config: EnvironmentConfig, session: boto3.Session) -> Check:
    """The cluster of ``database.existing``: an engine and version Debezium reads as we use
    it, reached at the endpoint, port and security group the config gives."""
    name = "existing cluster"
    existing = config.database.existing
    assert existing is not None
    cluster = _describe_cluster(config, session)
    if isinstance(cluster, str):
        return Check(name, "FAIL", cluster)
    engine, version = cluster["Engine"], cluster["EngineVersion"]
    problems = []
    if engine not in EXISTING_ENGINES:
        problems.append(
            f"engine {engine} is not PostgreSQL ({' or '.join(EXISTING_ENGINES)}): attach a "
            f"PostgreSQL cluster"
        )
    elif version.split(".", 1)[0] not in SUPPORTED_MAJOR_VERSIONS:
        problems.append(
            f"{engine} {version} is not a version cdc-lake runs Debezium against "
            f"({', '.join(SUPPORTED_MAJOR_VERSIONS)}): upgrade the cluster's major version"
        )
    if cluster.get("Endpoint") != existing.endpoint:
        problems.append(
            f"its writer endpoint is {cluster.get('Endpoint')}: set database.existing.endpoint "
            f"to it (logical replication reads the writer)"
        )
    if cluster.get("Port") != existing.port:
        problems.append(f"it listens on {cluster.get('Port')}: set database.existing.port to it")
    groups = [g["VpcSecurityGroupId"] for g in cluster.get("VpcSecurityGroups", [])]
    if existing.security_group_id not in groups:
        problems.append(
            f"{existing.security_group_id} is not one of its security groups {groups}: set "
            f"database.existing.security_group_id to one of them"
        )
    if problems:
        return Check(name, "FAIL", f"{existing.cluster_identifier}: {'; '.join(problems)}")
    return Check(
        name,
        "ok",
        f"{existing.cluster_identifier}: {engine} {version} at {existing.endpoint}:"
        f"{existing.port}, {existing.security_group_id}",
    )


def replication_parameter_problems(values: dict[str, str], needed: int) -> list[str]:
    """What an existing cluster's parameter group must change for the captures: ``values``
    are the group's parameters that have a value (an unset one is the engine's default)."""
    problems = []
    if values.get("rds.logical_replication") != "1":
        problems.append("set rds.logical_replication = 1 (wal_level becomes logical)")
    for parameter in ("max_replication_slots", "max_wal_senders"):
        value = values.get(parameter, "")
        if not value.isdigit() or int(value) < needed:
            shown = value or "not set"
            problems.append(f"set {parameter} to at least {needed} (is {shown})")
    if values.get("max_slot_wal_keep_size", "") in UNSET_WAL_KEEP:
        problems.append(
            "set max_slot_wal_keep_size (MB; e.g. 20480) so a stalled slot cannot fill the disk"
        )
    return problems


def check_existing_cluster_parameters(config: EnvironmentConfig, session: boto3.Session) -> Check:
    """The existing cluster's parameter group lets both captures replicate, applied."""
    name = "existing cluster parameters"
    cluster = _describe_cluster(config, session)
    if isinstance(cluster, str):
        return Check(name, "FAIL", cluster)
    group = cluster["DBClusterParameterGroup"]
    try:
        parameters = [
            parameter
            for page in session.client("rds")
            .get_paginator("describe_db_cluster_parameters")
            .paginate(DBClusterParameterGroupName=group)
            for parameter in page["Parameters"]
        ]
    except AWS_ERRORS as exc:
        return Check(name, "FAIL", f"cannot read cluster parameter group {group} ({_error(exc)})")
    values = {
        p["ParameterName"]: str(p["ParameterValue"]) for p in parameters if "ParameterValue" in p
    }
    needed = replication_slots_needed(config)
    problems = replication_parameter_problems(values, needed)
    if problems:
        where = (
            "create a cluster parameter group of the cluster's family, attach it and in it "
            if group.startswith("default.")
            else f"in cluster parameter group {group}, "
        )
        return Check(
            name,
            "FAIL",
            f"{where}{'; '.join(problems)}; these are static: reboot the writer afterwards",
        )
    pending = [
        m["DBInstanceIdentifier"]
        for m in cluster.get("DBClusterMembers", [])
        if m.get("DBClusterParameterGroupStatus") == "pending-reboot"
    ]
    if pending:
        return Check(
            name,
            "FAIL",
            f"{group} is set but not applied on {', '.join(pending)}: reboot "
            f"{'it' if len(pending) == 1 else 'them'} (static parameters apply on reboot)",
        )
    return Check(
        name,
        "ok",
        f"{group}: logical replication on, {needed} slots and WAL senders at least, "
        f"max_slot_wal_keep_size {values['max_slot_wal_keep_size']} MB",
    )


def check_existing_network(config: EnvironmentConfig, session: boto3.Session) -> Check:
    """The subnets of ``network.existing`` (and the security group of ``database.existing``)
    are in its VPC, each subnet in its zone."""
    name = "existing network"
    network = config.network.existing
    assert network is not None
    ec2 = session.client("ec2")
    try:
        ec2.describe_vpcs(VpcIds=[network.vpc_id])
        subnets = {
            s["SubnetId"]: s
            for s in ec2.describe_subnets(SubnetIds=network.private_subnet_ids)["Subnets"]
        }
    except AWS_ERRORS as exc:
        return Check(
            name,
            "FAIL",
            f"cannot read {network.vpc_id} and its subnets ({_error(exc)}): fix network.existing",
        )
    problems = []
    for subnet_id, zone in zip(network.private_subnet_ids, network.availability_zones, strict=True):
        subnet = subnets[subnet_id]
        if subnet["VpcId"] != network.vpc_id:
            problems.append(f"subnet {subnet_id} is in {subnet['VpcId']}, not {network.vpc_id}")
        elif subnet["AvailabilityZone"] != zone:
            problems.append(
                f"subnet {subnet_id} is in {subnet['AvailabilityZone']}, listed for {zone}: "
                f"list the zones in the subnets' order"
            )
    database = config.database.existing
    if database is not None:
        try:
            (group,) = ec2.describe_security_groups(GroupIds=[database.security_group_id])[
                "SecurityGroups"
            ]
        except AWS_ERRORS as exc:
            problems.append(f"security group {database.security_group_id} ({_error(exc)})")
        else:
            if group["VpcId"] != network.vpc_id:
                problems.append(
                    f"security group {database.security_group_id} is in {group['VpcId']}, "
                    f"not {network.vpc_id}"
                )
    if problems:
        return Check(name, "FAIL", f"{'; '.join(problems)}: fix network.existing")
    return Check(
        name,
        "ok",
        f"{network.vpc_id}: {len(subnets)} private subnets in "
        f"{', '.join(network.availability_zones)}",
    )


# Checks that read only this machine: they run without credentials too.
OFFLINE_CHECKS = frozenset({"RDS CA bundle"})


def check_stored_tables(config: EnvironmentConfig, session: boto3.Session) -> Check:
    """Each deployed lake table's stored layout (its type, key, partitioning, record index
    size: what Hudi fixes at the first write) against this config: a change only a rebuild
    takes, named with what follows the deploy. ``cdk synth`` never reads the stored table."""
    from cdclake.ops import aws_place
    from cdclake.status import layout_reasons, layout_warnings
    from cdclake_merge.generations import live_generation
    from cdclake_merge.layout import copy_takes
    from cdclake_merge.pending import TablePaths
    from cdclake_merge.storage import S3FileSystem

    glue = session.client("glue")
    fs = S3FileSystem(session.client("s3"))
    changed: list[str] = []
    read = 0
    for table in config.lake_tables:
        try:
            place = aws_place(config, table.name, glue)
        except LookupError:  # not deployed yet: its first write takes this config
            continue
        read += 1
        _, live = live_generation(fs, place.warehouse, place.lake_table)
        timeline = TablePaths.of(place.warehouse, live).timeline
        reasons = layout_reasons(fs, place, timeline)
        copied = copy_takes(reasons)
        for warning in layout_warnings(place, reasons):
            if table.history and not copied:  # only a change of its layout is rebuilt (#51)
                follows = "after the deploy its runs park (history: true)"
            elif table.schema_changes == "rebuild":
                follows = "after the deploy the dispatcher begins it (schema_changes: rebuild)"
            else:
                follows = "after the deploy its runs park (schema_changes: stop)"
            changed.append(f"{table.name}: {warning}; {follows}")
    if changed:
        return Check("stored tables", "warn", "; ".join(changed))
    if not read:
        return Check("stored tables", "skip", "no merge job deployed yet")
    return Check("stored tables", "ok", f"{read} tables: config matches each stored table")


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
    }
    # What the stacks create is checked for creating it; what exists, for being usable.
    if config.database.existing is None:
        checks["Aurora engine version"] = lambda: check_engine_version(config, session)
        checks["cluster parameters"] = lambda: check_cluster_parameters(config, session)
    else:
        checks["existing cluster"] = lambda: check_existing_cluster(config, session)
        checks["existing cluster parameters"] = lambda: check_existing_cluster_parameters(
            config, session
        )
    if config.network.existing is None:
        checks["quota: VPCs"] = lambda: check_vpc_quota(config, session)
        checks["quota: Elastic IPs"] = lambda: check_elastic_ip_quota(config, session)
    else:
        checks["existing network"] = lambda: check_existing_network(config, session)
    checks["change file expiry"] = lambda: check_change_file_expiry(config, session)
    checks["stored tables"] = lambda: check_stored_tables(config, session)
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
    colour = {"ok": "green", "FAIL": "red", "skip": "yellow", "warn": "yellow"}
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
    deployed environment, change files waiting near their expiration and config changes a
    stored table takes only by a rebuild."""
    console = Console(soft_wrap=False)
    config = load_config(env, config_dir=config_dir)  # a ConfigError: one line (cdclake.errors)
    checks = run_checks(config, boto3.Session(region_name=config.region))
    render(checks, console)
    if any(check.failed for check in checks):
        raise typer.Exit(1)


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(doctor)
