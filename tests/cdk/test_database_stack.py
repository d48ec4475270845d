"""The database stack: Aurora with logical replication, secrets, alarms, the bootstrap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_events as events

from connectors.configs import connector_name
from environment.replication import bootstrap_spec
from stacks.components.debezium_server import service_names
from tests.cdk.stack_helpers import as_list, masked, of_type, policy_statements, props, single

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request: pytest.FixtureRequest, synth) -> Any:  # type: ignore[no-untyped-def]
    return synth(request.param)


def test_database_template_matches_snapshot(env: Any, snapshot: Any) -> None:
    assert masked(env.template("database")) == snapshot(name=env.env)


def test_database_cluster_parameter_group_enables_logical_replication(env: Any) -> None:
    template = env.template("database")
    group = single(template, "AWS::RDS::DBClusterParameterGroup")
    replication = env.config.database.replication
    assert group["Family"] == "aurora-postgresql16"
    assert group["Parameters"] == {
        "rds.logical_replication": "1",
        "max_replication_slots": str(replication.max_replication_slots),
        "max_wal_senders": str(replication.max_wal_senders),
        "max_slot_wal_keep_size": str(replication.max_slot_wal_keep_size_mb),
        "rds.force_ssl": "1",
    }
    # The cluster uses it (a cluster group, not an instance group).
    cluster = single(template, "AWS::RDS::DBCluster")
    assert "Ref" in cluster["DBClusterParameterGroupName"]
    assert not of_type(template, "AWS::RDS::DBParameterGroup")


def test_database_cluster_engine_aurora_postgresql_16_from_config(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert (cluster["Engine"], cluster["EngineVersion"]) == (
        "aurora-postgresql",
        env.config.database.engine_version,
    )
    assert cluster["EngineVersion"].startswith("16.")


def test_database_cluster_storage_encrypted_with_rotated_key(env: Any) -> None:
    template = env.template("database")
    cluster = single(template, "AWS::RDS::DBCluster")
    key = template["Resources"][cluster["KmsKeyId"]["Fn::GetAtt"][0]]
    assert cluster["StorageEncrypted"] is True
    assert (key["Type"], key["Properties"]["EnableKeyRotation"]) == ("AWS::KMS::Key", True)


def test_database_cluster_iam_auth_enabled(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert cluster["EnableIAMDatabaseAuthentication"] is True


def test_database_cluster_postgresql_log_exported(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert cluster["EnableCloudwatchLogsExports"] == ["postgresql"]


def test_database_cluster_backup_retention_from_config(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert cluster["BackupRetentionPeriod"] == env.config.database.backup_retention_days


def test_database_cluster_port_is_the_stacks(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert cluster["Port"] == env.stacks["database"].port


def test_database_cluster_database_name_from_config(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    name = env.config.database.name
    assert cluster["DatabaseName"] == name == env.stacks["database"].database_name


def test_database_cluster_master_password_resolved_from_secret(env: Any) -> None:
    cluster = single(env.template("database"), "AWS::RDS::DBCluster")
    assert "{{resolve:secretsmanager:" in json.dumps(cluster["MasterUserPassword"])


def test_database_instances_private_of_configured_class_and_count(env: Any) -> None:
    db = env.config.database
    instances = props(env.template("database"), "AWS::RDS::DBInstance")
    assert [(i["PubliclyAccessible"], i["DBInstanceClass"]) for i in instances] == [
        (False, f"db.{db.instance_class}")
    ] * db.instances


def test_database_subnet_group_uses_isolated_subnets(env: Any) -> None:
    group = single(env.template("database"), "AWS::RDS::DBSubnetGroup")
    imports = [json.dumps(s) for s in group["SubnetIds"]]
    assert len(imports) == env.config.network.max_azs
    assert all("isolated" in s for s in imports)


def test_database_deletion_protection_and_snapshot_follow_config(synth) -> None:  # type: ignore[no-untyped-def]
    for env, protected, policy in (("dev", False, "Delete"), ("prod", True, "Snapshot")):
        (cluster,) = of_type(synth(env).template("database"), "AWS::RDS::DBCluster")
        assert cluster["Properties"]["DeletionProtection"] is protected
        assert cluster["DeletionPolicy"] == policy


def test_database_secrets_rotated_and_encrypted_with_cluster_key(env: Any) -> None:
    template = env.template("database")
    secrets = props(template, "AWS::SecretsManager::Secret")
    templates = {
        json.loads(s["GenerateSecretString"]["SecretStringTemplate"])["username"]: s
        for s in secrets
    }
    replication = templates[env.config.database.replication.user]
    assert json.loads(replication["GenerateSecretString"]["SecretStringTemplate"]) == {
        "username": env.config.database.replication.user,
        "dbname": env.config.database.name,
    }
    for secret in secrets:
        assert "Fn::GetAtt" in secret["KmsKeyId"]
    # Master and replication secrets: both attached to the cluster (host/port) and rotated.
    assert len(of_type(template, "AWS::SecretsManager::SecretTargetAttachment")) == 2
    schedules = props(template, "AWS::SecretsManager::RotationSchedule")
    assert len(schedules) == 2
    assert all(s["RotationRules"]["ScheduleExpression"] == "rate(30 days)" for s in schedules)


def test_database_replication_rotation_waits_for_bootstrap(env: Any) -> None:
    template = env.template("database")
    (bootstrap_id,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "Custom::ReplicationBootstrap"
    ]
    waiting = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SecretsManager::RotationSchedule"
        and bootstrap_id in r.get("DependsOn", [])
    ]
    assert len(waiting) == 1


def test_database_bootstrap_spec_matches_config(env: Any) -> None:
    template = env.template("database")
    resource = single(template, "Custom::ReplicationBootstrap")
    spec = json.loads(resource["Spec"])
    assert spec == bootstrap_spec(env.config)
    assert [t["name"] for t in spec["tables"]] == [t.name for t in env.config.tables]
    customers = next(t for t in spec["tables"] if t["name"] == "public.customers")
    assert customers["replica_identity"] == "FULL"
    assert resource["Database"] == env.config.database.name
    # Secrets travel as ARNs (Refs), never as values.
    assert set(resource["MasterSecretArn"]) == {"Ref"}
    assert set(resource["ReplicationSecretArn"]) == {"Ref"}


def test_database_no_password_in_template(env: Any) -> None:
    text = json.dumps(env.template("database"))
    assert '"password":' not in text.lower().replace(" ", "")
    assert "SecretString:password" in text  # only dynamic references


def test_database_bootstrap_lambda_bundles_pg8000_without_docker(env: Any) -> None:
    template = env.template("database")
    functions = [
        f
        for f in of_type(template, "AWS::Lambda::Function")
        if f["Properties"].get("Handler") == "lambdas.bootstrap.handler.on_event"
    ]
    assert len(functions) == 1
    function = functions[0]
    assert function["Properties"]["Runtime"].startswith("python3.")
    assert "VpcConfig" in function["Properties"]
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    asset = Path(env.outdir) / f"asset.{asset_hash}"
    assert (asset / "lambdas" / "bootstrap" / "handler.py").is_file()
    assert (asset / "lambdas" / "bootstrap" / "sql.py").is_file()
    assert (asset / "lambdas" / "__init__.py").is_file()
    assert (asset / "pg8000" / "native.py").is_file()
    assert (asset / "scramp").is_dir()
    assert not list(asset.rglob("__pycache__"))


def test_database_bootstrap_reads_only_its_two_secrets(env: Any) -> None:
    template = env.template("database")
    reads = [
        s
        for s in policy_statements(template)
        if "secretsmanager:GetSecretValue" in as_list(s["Action"])
    ]
    resources = [json.dumps(r) for s in reads for r in as_list(s["Resource"])]
    assert resources and "*" not in [json.loads(r) for r in resources]
    secret_ids = {
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::SecretsManager::SecretTargetAttachment"
    }
    for resource in resources:
        assert any(secret_id in resource for secret_id in secret_ids), resource


def test_database_bootstrap_restarts_the_named_captures_only(env: Any) -> None:
    template = env.template("database")
    (function,) = [f for f in props(template, "AWS::Lambda::Function") if "CAPTURES" in str(f)]
    captures = json.loads(function["Environment"]["Variables"]["CAPTURES"])
    source = connector_name(env.config, "debezium-source")
    cluster, service = service_names(env.config.prefix)
    replication = env.config.database.replication
    assert captures == [
        {"connector": source, "signal_table": replication.signal_table, "slot": replication.slot},
        {
            "cluster": cluster,
            "service": service,
            "signal_table": replication.fanout_signal_table,
            "slot": replication.fanout_slot,
        },
    ]
    granted = {
        action: json.dumps(s["Resource"])
        for s in policy_statements(template)
        for action in as_list(s["Action"])
        if action.split(":")[0] in ("kafkaconnect", "ecs")
    }
    assert set(granted) == {
        "kafkaconnect:ListConnectors",
        "kafkaconnect:RestartConnector",
        "ecs:UpdateService",
    }
    assert f":connector/{source}/*" in granted["kafkaconnect:RestartConnector"]
    assert f":service/{cluster}/{service}" in granted["ecs:UpdateService"]


def test_database_alarms_thresholds_from_config_notify_topic(env: Any) -> None:
    template = env.template("database")
    alarms = {a["MetricName"]: a for a in props(template, "AWS::CloudWatch::Alarm")}
    config = env.config.database.alarms
    lag = alarms["OldestReplicationSlotLag"]
    disk = alarms["TransactionLogsDiskUsage"]
    assert lag["Threshold"] == config.replication_slot_lag_bytes
    assert disk["Threshold"] == config.transaction_logs_disk_usage_bytes
    for alarm in (lag, disk):
        assert alarm["Namespace"] == "AWS/RDS"
        assert {"Name": "Role", "Value": "WRITER"} in alarm["Dimensions"]
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        (action,) = alarm["AlarmActions"]
        topic_id = action["Ref"]
        assert template["Resources"][topic_id]["Type"] == "AWS::SNS::Topic"
        assert "KmsMasterKeyId" in template["Resources"][topic_id]["Properties"]


def test_database_missing_tables_alarm_watches_bootstrap_metric(env: Any) -> None:
    template = env.template("database")
    (alarm,) = [
        a for a in props(template, "AWS::CloudWatch::Alarm") if a["MetricName"] == "MissingTables"
    ]
    assert alarm["Namespace"] == "CdcLake"
    assert alarm["Dimensions"] == [{"Name": "Environment", "Value": env.config.env}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert alarm["Period"] == env.config.database.replication.reconcile_every_minutes * 60
    (action,) = alarm["AlarmActions"]
    assert template["Resources"][action["Ref"]]["Type"] == "AWS::SNS::Topic"


def test_database_bootstrap_reconciles_on_schedule(env: Any) -> None:
    template = env.template("database")
    (rule,) = props(template, "AWS::Events::Rule")
    minutes = env.config.database.replication.reconcile_every_minutes
    expected = events.Schedule.rate(cdk.Duration.minutes(minutes)).expression_string
    assert rule["ScheduleExpression"] == expected
    (target,) = rule["Targets"]
    assert json.loads(target["Input"]) == {"RequestType": "Reconcile"}
    function_id = target["Arn"]["Fn::GetAtt"][0]
    function = template["Resources"][function_id]["Properties"]
    assert function["Handler"] == "lambdas.bootstrap.handler.on_event"
    assert function["Environment"]["Variables"]["METRICS_ENVIRONMENT"] == env.config.env


def test_database_security_group_only_from_named_groups(env: Any) -> None:
    template = env.template("database")
    rules = props(template, "AWS::EC2::SecurityGroupIngress")
    assert rules
    for rule in rules:
        assert "SourceSecurityGroupId" in rule
        assert "CidrIp" not in rule


def test_database_operator_access_host_ssm_only(env: Any) -> None:
    template = env.template("database")
    instance = single(template, "AWS::EC2::Instance")
    assert "KeyName" not in instance
    assert instance["Monitoring"] is True
    assert instance["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
    managed = [
        json.dumps(p)
        for role in props(template, "AWS::IAM::Role")
        for p in role.get("ManagedPolicyArns", [])
    ]
    assert any("AmazonSSMManagedInstanceCore" in m for m in managed)


def test_database_engine_version_not_deprecated(env: Any) -> None:
    from importlib.resources import files

    import cfnlint.data.schemas.extensions.aws_rds_dbcluster as schemas

    deprecated = json.loads(files(schemas).joinpath("engine_version_deprecated.json").read_text())
    text = json.dumps(deprecated)
    start = text.index('"aurora-postgresql"')
    versions = json.loads("[" + text[text.index("[", start) + 1 : text.index("]", start)] + "]")
    assert env.config.database.engine_version not in versions


def test_database_alarm_topic_subscribes_configured_email(synth) -> None:  # type: ignore[no-untyped-def]
    def emails(env: str) -> list[str]:
        template = synth(env).template("database")
        return [
            r["Properties"]["Endpoint"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::SNS::Subscription" and r["Properties"]["Protocol"] == "email"
        ]

    assert emails("prod") == [synth("prod").config.database.alarms.notify_email]
    assert emails("dev") == []


def test_database_secrets_retained_in_prod_deleted_in_dev(synth) -> None:  # type: ignore[no-untyped-def]
    for env, policy in (("dev", "Delete"), ("prod", "Retain")):
        secrets = of_type(synth(env).template("database"), "AWS::SecretsManager::Secret")
        assert len(secrets) == 2
        assert {(s["DeletionPolicy"], s["UpdateReplacePolicy"]) for s in secrets} == {
            (policy, policy)
        }


def _bootstrap_function(template: dict[str, Any]) -> dict[str, Any]:
    (function,) = [
        f
        for f in props(template, "AWS::Lambda::Function")
        if f.get("Handler") == "lambdas.bootstrap.handler.on_event"
    ]
    return function


def test_database_bootstrap_ships_rds_ca_bundle_and_verifies(env: Any) -> None:
    template = env.template("database")
    function = _bootstrap_function(template)
    variables = function["Environment"]["Variables"]
    assert variables["RDS_CA_BUNDLE"] == "/opt/global-bundle.pem"
    assert "DATABASE_TLS_VERIFY" not in variables
    (layer,) = function["Layers"]
    resource = template["Resources"][layer["Ref"]]
    assert resource["Type"] == "AWS::Lambda::LayerVersion"
    # The layer holds the bundle and nothing else of the folder it comes from.
    asset_hash = resource["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    asset = Path(env.outdir) / f"asset.{asset_hash}"
    assert sorted(p.name for p in asset.iterdir()) == ["global-bundle.pem"]


def test_database_rds_ca_bundle_missing_fails_in_one_line_naming_make_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from environment.config import ConfigError, load_config
    from stacks import build_stacks
    from tests.cdk.stack_helpers import cdk_context

    monkeypatch.setenv("CDCLAKE_RDS_CA_BUNDLE", str(tmp_path / "global-bundle.pem"))

    with pytest.raises(ConfigError) as raised:
        build_stacks(cdk.App(context={**cdk_context(), "env": "prod"}), load_config("prod"))

    message = str(raised.value)
    assert "\n" not in message and "`make rds-ca`" in message
    assert "database.tls_verify: false" in message


def test_database_rds_ca_bundle_without_certificate_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from environment.artifacts import rds_ca_bundle
    from environment.config import ConfigError, load_config

    bundle = tmp_path / "global-bundle.pem"
    bundle.write_text("<html>captive portal</html>\n")
    monkeypatch.setenv("CDCLAKE_RDS_CA_BUNDLE", str(bundle))

    with pytest.raises(ConfigError, match="holds no readable certificate"):
        rds_ca_bundle(load_config("dev"))


def test_database_tls_opt_out_needs_no_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from environment.artifacts import rds_ca_bundle
    from environment.config import load_config

    monkeypatch.setenv("CDCLAKE_RDS_CA_BUNDLE", str(tmp_path / "absent.pem"))
    config = load_config("dev")
    config = config.model_copy(
        update={"database": config.database.model_copy(update={"tls_verify": False})}
    )

    assert rds_ca_bundle(config) is None


def test_database_reconcile_failures_land_in_encrypted_dead_letter_queue(env: Any) -> None:
    template = env.template("database")
    (rule,) = props(template, "AWS::Events::Rule")
    (target,) = rule["Targets"]
    queue_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    queue = template["Resources"][queue_id]
    assert queue["Type"] == "AWS::SQS::Queue"
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    expected = "Retain" if env.config.database.deletion_protection else "Delete"
    assert queue["DeletionPolicy"] == expected
    # TLS only.
    (policy,) = [
        p for p in props(template, "AWS::SQS::QueuePolicy") if p["Queues"] == [{"Ref": queue_id}]
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )
    # The function's failed asynchronous invocations (a failing reconcile) land there too.
    (invoke,) = props(template, "AWS::Lambda::EventInvokeConfig")
    destination = invoke["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_database_reconcile_dead_letters_alarm_notifies_topic(env: Any) -> None:
    template = env.template("database")
    (rule,) = props(template, "AWS::Events::Rule")
    queue_id = rule["Targets"][0]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    (alarm,) = [
        a
        for a in props(template, "AWS::CloudWatch::Alarm")
        if a.get("Dimensions")
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Threshold"] == 1
    (action,) = alarm["AlarmActions"]
    assert template["Resources"][action["Ref"]]["Type"] == "AWS::SNS::Topic"
