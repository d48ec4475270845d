"""`cdclake doctor` against a real moto server: each check's ok and what-to-do outcomes."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from cdclake.doctor import (
    Check,
    app,
    bootstrap_qualifier,
    check_bootstrap,
    check_change_file_expiry,
    check_cluster_parameters,
    check_credentials,
    check_elastic_ip_quota,
    check_engine_version,
    check_plugin,
    check_rds_ca,
    check_stored_tables,
    check_vpc_quota,
    parameter_problems,
    run_checks,
)
from cdclake.errors import run
from cdclake_merge.metrics import publish_lags
from environment.config import EnvironmentConfig, load_config

pytestmark = pytest.mark.moto


def _session(region: str) -> boto3.Session:
    return boto3.Session(region_name=region)


def _config(config_dir: Path, **changes: object) -> EnvironmentConfig:
    """dev deploying to moto's account, with fields changed as a test needs (not re-validated)."""
    config = load_config("dev", config_dir=config_dir)
    database = changes.pop("database", None)
    if database is not None:
        changes["database"] = config.database.model_copy(update=database)  # type: ignore[arg-type]
    return config.model_copy(update=changes)


def _bootstrap(region: str, version: str) -> None:
    """A CDKToolkit stack like `cdk bootstrap` leaves: it owns the version parameter."""
    template = {
        "Resources": {
            "CdkBootstrapVersion": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {
                    "Name": "/cdk-bootstrap/hnb659fds/version",
                    "Type": "String",
                    "Value": version,
                },
            }
        }
    }
    _session(region).client("cloudformation").create_stack(
        StackName="CDKToolkit", TemplateBody=json.dumps(template)
    )


def test_doctor_credentials_config_account_ok(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir)
    assert check_credentials(config, _session(config.region)).status == "ok"


def test_doctor_credentials_other_account_fails_with_what_to_do(
    aws_env: None, config_dir: Path
) -> None:
    config = _config(config_dir, account="111111111111")
    check = check_credentials(config, _session(config.region))
    assert check.status == "FAIL"
    assert "123456789012" in check.detail and "AWS_PROFILE" in check.detail


def test_doctor_credentials_failure_skips_other_checks(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, account="111111111111")
    checks = run_checks(config, _session(config.region))
    assert checks[0].status == "FAIL"
    offline = [c for c in checks[1:] if c.name == "RDS CA bundle"]
    assert [c.status for c in offline] == ["ok"]  # reads this machine only
    assert {c.status for c in checks[1:] if c not in offline} == {"skip"}
    assert len(checks) == 11


def test_doctor_bootstrap_missing_fails_with_bootstrap_command(
    aws_env: None, config_dir: Path
) -> None:
    config = _config(config_dir, region="ap-south-1")
    check = check_bootstrap(config, _session(config.region))
    assert check.status == "FAIL"
    assert "npx cdk bootstrap aws://123456789012/ap-south-1" in check.detail


def test_doctor_bootstrap_present_ok(aws_env: None, config_dir: Path) -> None:
    _bootstrap("eu-west-3", "21")
    config = _config(config_dir, region="eu-west-3")
    check = check_bootstrap(config, _session(config.region))
    assert check == Check("CDK bootstrap", "ok", "CDKToolkit CREATE_COMPLETE, version 21")


def test_doctor_bootstrap_old_version_fails(aws_env: None, config_dir: Path) -> None:
    _bootstrap("sa-east-1", "5")
    config = _config(config_dir, region="sa-east-1")
    check = check_bootstrap(config, _session(config.region))
    assert check.status == "FAIL"
    assert "version 5, at least 6" in check.detail


def test_doctor_bootstrap_qualifier_from_cdk_json(tmp_path: Path) -> None:
    (tmp_path / "cdk.json").write_text(
        json.dumps({"context": {"@aws-cdk/core:bootstrapQualifier": "abc123"}})
    )
    assert bootstrap_qualifier(tmp_path) == "abc123"


def test_doctor_plugin_placeholder_fails(aws_env: None) -> None:
    location = "s3://REPLACE-ME/plugins/debezium.zip"
    check = check_plugin("debezium", location, _session("eu-west-1"))
    assert check.status == "FAIL"
    assert "make plugins" in check.detail


def test_doctor_plugin_s3_object_present_ok(aws_env: None) -> None:
    s3 = _session("eu-west-1").client("s3")
    s3.create_bucket(
        Bucket="doctor-plugins", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    s3.put_object(Bucket="doctor-plugins", Key="plugins/sink.zip", Body=b"PK")
    location = "s3://doctor-plugins/plugins/sink.zip"
    assert check_plugin("s3 sink", location, _session("eu-west-1")).status == "ok"


def test_doctor_plugin_s3_object_missing_fails(aws_env: None) -> None:
    location = "s3://doctor-no-such-bucket/plugins/sink.zip"
    assert check_plugin("s3 sink", location, _session("eu-west-1")).status == "FAIL"


def test_doctor_plugin_local_zip_missing_fails_then_present_ok(
    aws_env: None, tmp_path: Path
) -> None:
    session = _session("eu-west-1")
    assert check_plugin("debezium", "plugins/d.zip", session, tmp_path).status == "FAIL"
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "d.zip").write_bytes(b"PK")
    assert check_plugin("debezium", "plugins/d.zip", session, tmp_path).status == "ok"


def test_doctor_engine_version_not_offered_fails(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, database={"engine_version": "16.999"})
    check = check_engine_version(config, _session(config.region))
    assert check.status == "FAIL"
    assert "16.999 is not offered" in check.detail


def test_doctor_engine_version_offered_with_instance_class_ok(
    aws_env: None, config_dir: Path
) -> None:
    # moto's catalogue of orderable Aurora PostgreSQL options stops at 15.x.
    config = _config(config_dir, database={"engine_version": "15.2"})
    check = check_engine_version(config, _session(config.region))
    assert check == Check("Aurora engine version", "ok", "aurora-postgresql 15.2 on db.r6g.large")


def test_doctor_engine_instance_class_not_offered_fails(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, database={"engine_version": "15.2", "instance_class": "m1.nano"})
    check = check_engine_version(config, _session(config.region))
    assert check.status == "FAIL"
    assert "db.m1.nano is not offered" in check.detail


def test_doctor_parameter_problems_names_unknown_and_unmodifiable() -> None:
    defaults = [
        {"ParameterName": "rds.logical_replication", "IsModifiable": True},
        {"ParameterName": "rds.force_ssl", "IsModifiable": False},
    ]
    wanted = ["rds.logical_replication", "rds.force_ssl", "max_slot_wal_keep_size"]
    assert parameter_problems(defaults, wanted) == [
        "rds.force_ssl (not modifiable)",
        "max_slot_wal_keep_size (unknown)",
    ]


def test_doctor_cluster_parameters_unreadable_fails(aws_env: None, config_dir: Path) -> None:
    # moto does not implement DescribeEngineDefaultClusterParameters: the check must fail
    # rather than pass unchecked.
    config = _config(config_dir)
    check = check_cluster_parameters(config, _session(config.region))
    assert check.status == "FAIL"
    assert "aurora-postgresql16" in check.detail


def test_doctor_vpc_quota_room_ok(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="ca-central-1")
    check = check_vpc_quota(config, _session(config.region))
    assert check == Check("quota: VPCs", "ok", "1 of 5 used, 1 more needed")


def test_doctor_vpc_quota_last_one_free_ok(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="ap-northeast-3")
    ec2 = _session(config.region).client("ec2")
    for index in range(3):  # and the default VPC: 4 of 5, the network stack takes the 5th
        ec2.create_vpc(CidrBlock=f"10.{index}.0.0/16")
    check = check_vpc_quota(config, _session(config.region))
    assert check == Check("quota: VPCs", "ok", "4 of 5 used, 1 more needed")


def test_doctor_vpc_quota_exhausted_fails(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="eu-south-1")
    ec2 = _session(config.region).client("ec2")
    for index in range(4):  # moto starts each region with its default VPC
        ec2.create_vpc(CidrBlock=f"10.{index}.0.0/16")
    check = check_vpc_quota(config, _session(config.region))
    assert check.status == "FAIL"
    assert "5 of 5 VPCs used" in check.detail and "L-F678F1CE" in check.detail


def test_doctor_elastic_ip_quota_unreadable_skips(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir)
    assert check_elastic_ip_quota(config, _session(config.region)).status == "skip"


def test_doctor_cli_failing_check_exits_nonzero_with_table(aws_env: None, config_dir: Path) -> None:
    result = CliRunner().invoke(app, ["--env", "dev", "--config-dir", str(config_dir)])
    assert result.exit_code == 1
    assert "cdclake doctor" in result.output
    for name in ("AWS credentials", "CDK bootstrap", "plugin debezium", "quota: VPCs"):
        assert name in result.output


def test_doctor_cli_unknown_env_exits_2(
    aws_env: None, config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(app, ["--env", "nope", "--config-dir", str(config_dir)]) == 2
    assert "no environment config" in capsys.readouterr().err


def test_doctor_run_checks_names_match_their_checks(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir)
    checks = run_checks(config, _session(config.region))
    assert [c.name for c in checks] == [
        "AWS credentials",
        "CDK bootstrap",
        "plugin debezium",
        "plugin s3 sink",
        "RDS CA bundle",
        "Aurora engine version",
        "cluster parameters",
        "quota: VPCs",
        "quota: Elastic IPs",
        "change file expiry",
        "stored tables",
    ]


def test_doctor_rds_ca_missing_fails_naming_make_rds_ca(
    config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDCLAKE_RDS_CA_BUNDLE", str(tmp_path / "absent.pem"))
    check = check_rds_ca(_config(config_dir))
    assert check.status == "FAIL"
    assert "make rds-ca" in check.detail


def test_doctor_rds_ca_present_ok(config_dir: Path) -> None:
    check = check_rds_ca(_config(config_dir))  # the session's stand-in bundle (tests/conftest.py)
    assert check.status == "ok"
    assert os.environ["CDCLAKE_RDS_CA_BUNDLE"] in check.detail


def _lags(config: EnvironmentConfig, lags: dict[str, float]) -> None:
    """The dispatcher's LagSeconds datapoints for ``config``'s environment, stamped now."""
    client = _session(config.region).client("cloudwatch")
    assert publish_lags(config.env, lags, client=client)


def test_doctor_change_file_expiry_lag_past_half_the_expiration_fails_naming_the_table(
    aws_env: None, config_dir: Path
) -> None:
    config = _config(config_dir, region="sa-east-1")
    table = config.lake_tables[0].name
    days = config.lake.change_file_expiration_days
    _lags(config, {table: dt.timedelta(days=days * 0.6).total_seconds()})
    check = check_change_file_expiry(config, _session(config.region))
    assert check.status == "FAIL"
    assert check.detail.startswith(f"{table}: the oldest change file has waited {int(days * 0.6)}")


def test_doctor_change_file_expiry_fresh_lag_ok(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="me-south-1")
    _lags(config, {t.name: 600.0 for t in config.lake_tables})
    check = check_change_file_expiry(config, _session(config.region))
    assert check.status == "ok"
    assert check.detail.startswith(f"{len(config.lake_tables)} tables")


def test_doctor_change_file_expiry_no_lag_yet_skips(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="af-south-1")
    assert check_change_file_expiry(config, _session(config.region)).status == "skip"


def _stored(config: EnvironmentConfig, table_type: str, key: tuple[str, ...] | None = None) -> str:
    """dev's first lake table deployed (its merge job's paths) and stored by Hudi as
    ``table_type`` with config's key (or ``key``) and partitioning; the table's name."""
    table = config.lake_tables[0]
    session = _session(config.region)
    bucket = f"lake-{config.region}"
    session.client("s3").create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": config.region}
    )
    database = config.lake.glue_database
    session.client("glue").create_job(
        Name=table.merge_job_name(config.prefix),
        Role="arn:aws:iam::123456789012:role/merge",
        Command={"Name": "glueetl", "ScriptLocation": f"s3://{bucket}/merge_job.py"},
        DefaultArguments={
            "--changes_path": f"s3://{bucket}/topics/orders/",
            "--warehouse_path": f"s3://{bucket}/warehouse/",
            "--database": database,
        },
    )
    properties = (
        f"hoodie.table.type={table_type}\n"
        f"hoodie.table.recordkey.fields={','.join(key or table.primary_key)}\n"
        f"hoodie.table.partition.fields={','.join(table.partition_by)}\n"
    )
    key = f"warehouse/{database}.db/{table.lake_table_name}/.hoodie/hoodie.properties"
    session.client("s3").put_object(Bucket=bucket, Key=key, Body=properties.encode())
    return table.name


def test_doctor_stored_tables_type_config_changed_warns_naming_table_change_and_command(
    aws_env: None, config_dir: Path
) -> None:
    config = _config(config_dir, region="ap-south-2")
    stored = (
        "MERGE_ON_READ"
        if config.lake_tables[0].hudi_table_type != "MERGE_ON_READ"
        else ("COPY_ON_WRITE")
    )
    table = _stored(config, stored)
    check = check_stored_tables(config, _session(config.region))
    wanted = config.lake_tables[0].hudi_table_type
    assert (check.status, check.failed) == ("warn", False)
    assert check.detail == (
        f"{table}: needs rebuild: table type {stored} -> {wanted} (config differs from the "
        f"stored table; its merge runs are refused): run cdclake rebuild --env dev --table "
        f"{table}; after the deploy the dispatcher begins it (schema_changes: rebuild)"
    )


def _with_history(config_dir: Path, region: str) -> EnvironmentConfig:
    base = _config(config_dir, region=region)
    first = base.lake_tables[0].model_copy(update={"history": True})
    return base.model_copy(
        update={"tables": [first if t.name == first.name else t for t in base.tables]}
    )


def test_doctor_stored_tables_history_table_type_changed_warns_the_dispatcher_copies_it(
    aws_env: None, config_dir: Path
) -> None:
    config = _with_history(config_dir, "eu-south-2")
    first = config.lake_tables[0]
    stored = "MERGE_ON_READ" if first.hudi_table_type != "MERGE_ON_READ" else "COPY_ON_WRITE"
    table = _stored(config, stored)
    check = check_stored_tables(config, _session(config.region))
    assert check.detail == (
        f"{table}: needs rebuild: table type {stored} -> {first.hudi_table_type} (config "
        "differs from the stored table; its merge runs are refused): run cdclake rebuild --env "
        f"dev --table {table} (a copy: the table keeps its history); after the deploy the "
        "dispatcher begins it (schema_changes: rebuild)"
    )


def test_doctor_stored_tables_history_table_key_changed_warns_its_runs_park(
    aws_env: None, config_dir: Path
) -> None:
    config = _with_history(config_dir, "eu-central-2")
    first = config.lake_tables[0]
    table = _stored(config, first.hudi_table_type, key=("other_id",))
    check = check_stored_tables(config, _session(config.region))
    assert check.detail == (
        f"{table}: needs rebuild: record key [other_id] -> [{', '.join(first.primary_key)}] "
        "(config differs from the stored table; its merge runs are refused): the table keeps "
        "its history (history: true), which a rebuild carries only through a change of its "
        "table type, partitioning or record index size (issue #51): see docs/merge-job.md "
        '"Schema changes"; after the deploy its runs park (history: true)'
    )


def test_doctor_stored_tables_as_config_says_ok(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="ap-southeast-4")
    _stored(config, config.lake_tables[0].hudi_table_type)
    check = check_stored_tables(config, _session(config.region))
    assert (check.status, check.detail) == ("ok", "1 tables: config matches each stored table")


def test_doctor_stored_tables_nothing_deployed_skips(aws_env: None, config_dir: Path) -> None:
    config = _config(config_dir, region="il-central-1")
    assert check_stored_tables(config, _session(config.region)).status == "skip"
