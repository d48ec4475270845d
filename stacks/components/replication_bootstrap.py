"""The replication bootstrap custom resource: role, grants, CDC tables and publication."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import custom_resources as cr
from constructs import Construct

from environment.config import DatabaseConfig
from environment.replication import BootstrapPayload
from stacks.components.capture_restarts import grant_capture_restarts
from stacks.components.dead_letters import dead_letter_queue
from stacks.components.log_storage import log_group
from stacks.components.nag import (
    LAMBDA_LOGS_FINDING,
    acknowledge,
    managed_policy_finding,
)
from stacks.components.python_bundling import python_code

RUNTIME = lambda_.Runtime.PYTHON_3_14


class ReplicationBootstrap(Construct):
    """A Lambda behind the CDK Provider framework that prepares the database for Debezium.

    On create and update it (idempotently) creates the replication role and sets its password
    from ``replication_secret``, grants SELECT on the configured tables, creates the heartbeat
    and signal tables, sets REPLICA IDENTITY and makes the publication list exactly the
    configured tables plus the heartbeat and signal tables. The SQL is in
    ``lambdas/bootstrap/sql.py`` and is tested against a real PostgreSQL.

    ``replication_secret`` (username, password, host, port, dbname, engine) is what Debezium
    connects with; its single-user rotation starts only after the role exists.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        database: DatabaseConfig,
        spec: BootstrapPayload,
        environment: str,
        vpc: ec2.IVpc,
        vpc_cidr: str | None,
        cluster: rds.IDatabaseCluster,
        master_secret: secretsmanager.ISecret,
        encryption_key: kms.IKey,
        alarm_topic: sns.ITopic,
        rds_ca_bundle: Path | None,
        captures: Sequence[Mapping[str, str]],
        master_endpoint: Mapping[str, str],
    ) -> None:
        """``spec``: what the bootstrap makes (``environment.replication.bootstrap_spec``);
        ``environment`` names the Environment dimension of its metric; ``rds_ca_bundle``: the
        RDS CA bundle the function verifies Aurora with (shipped in a layer), None when the
        config opts out of verifying; ``vpc_cidr``: the VPC whose interface endpoints it
        calls, None in a VPC without ours (it then calls out on 443 only). Reaching the cluster
        and reading ``master_secret`` are the composing stack's grants to
        :attr:`security_group` and :attr:`function`.
        ``captures``: each capture's slot and signal table, and the MSK Connect connector
        (``connector``) or ECS service (``cluster``, ``service``) running it, by fixed names:
        a Reconcile restarts those carrying tables about to join (lambdas/bootstrap/handler.py
        says why). ``master_endpoint``: ``Host`` and ``Port`` the function connects to as the
        master user, for a cluster whose master secret may hold no host (empty: the
        secret's)."""
        super().__init__(scope, construct_id)
        replication = database.replication
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        # Long-lived environments keep what outlives a stack: secrets, failed events.
        keep = (
            cdk.RemovalPolicy.RETAIN if database.deletion_protection else cdk.RemovalPolicy.DESTROY
        )

        # The replication role's own secret, completed with host/port/engine by the attachment.
        secret = rds.DatabaseSecret(
            self,
            "ReplicationSecret",
            username=replication.user,
            dbname=database.name,
            encryption_key=encryption_key,
        )
        secret.apply_removal_policy(keep)
        self.replication_secret = secret.attach(cluster)

        # The function: in the private subnets, talks to the cluster and Secrets Manager only.
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="Replication bootstrap Lambda",
            allow_all_outbound=False,
        )
        if vpc_cidr is not None:
            self.security_group.add_egress_rule(
                ec2.Peer.ipv4(vpc_cidr), ec2.Port.tcp(443), "VPC endpoints"
            )
        if captures:
            # MSK Connect's API has no VPC endpoint: RestartConnector goes out through the NAT.
            self.security_group.add_egress_rule(
                ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "MSK Connect and ECS APIs (NAT)"
            )

        properties = {
            "Spec": json.dumps(spec, sort_keys=True),
            "Database": database.name,
            "MasterSecretArn": master_secret.secret_arn,
            "ReplicationSecretArn": self.replication_secret.secret_arn,
            **master_endpoint,
        }
        # The RDS CA bundle in a layer of its own (/opt/<file>): not in the code asset, which
        # is the package folder as the repository keeps it.
        tls: dict[str, str] = {"DATABASE_TLS_VERIFY": "false"}
        layers: list[lambda_.ILayerVersion] = []
        if rds_ca_bundle is not None:
            self.ca_layer = lambda_.LayerVersion(
                self,
                "RdsCaBundle",
                code=lambda_.Code.from_asset(
                    str(rds_ca_bundle.parent), exclude=["*", f"!{rds_ca_bundle.name}"]
                ),
                compatible_runtimes=[RUNTIME],
                description="RDS CA bundle: the bootstrap verifies Aurora's certificate",
            )
            layers.append(self.ca_layer)
            tls = {"RDS_CA_BUNDLE": f"/opt/{rds_ca_bundle.name}"}
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler="lambdas.bootstrap.handler.on_event",
            code=python_code("lambdas/bootstrap", runtime=RUNTIME),
            description="cdc-lake replication bootstrap (role, grants, publication)",
            # A Reconcile waits up to 10 minutes for restarted captures (RESTART_WAIT_SECONDS).
            timeout=cdk.Duration.minutes(15 if captures else 5),
            memory_size=256,
            vpc=vpc,
            vpc_subnets=private,
            security_groups=[self.security_group],
            layers=layers,
            environment={
                # Lets `aws lambda invoke --payload '{"RequestType":"Reconcile"}'` re-run it.
                "BOOTSTRAP_PROPERTIES": cdk.Stack.of(self).to_json_string(properties),
                "METRICS_ENVIRONMENT": environment,
                # The logger's service, as the Powertools functions get theirs.
                "POWERTOOLS_SERVICE_NAME": "replication-bootstrap",
                "CAPTURES": json.dumps(list(captures), sort_keys=True),
                **tls,
            },
            log_group=log_group(self, "FunctionLogs"),
        )
        self.replication_secret.grant_read(self.function)
        self._grant_restarts(captures)

        # Provider framework: retries, timeouts and the CloudFormation response for us.
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            log_group=log_group(self, "ProviderLogs"),
        )

        # The custom resource; spec changes (tables, identities) trigger an Update.
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type="Custom::ReplicationBootstrap",
            properties=properties,
        )
        # Wait for the writer instance, not only the cluster resource.
        self.resource.node.add_dependency(cluster)

        # Reconciles that never ran or failed: EventBridge's undelivered events and the
        # function's failed asynchronous invocations (after Lambda's own retries) land here.
        dead_letters = dead_letter_queue(
            self,
            "ReconcileDeadLetters",
            retain=keep == cdk.RemovalPolicy.RETAIN,
            what="Reconcile runs not delivered or failed",
            alarm_topic=alarm_topic,
        )
        self.dead_letter_queue, self.dead_letter_alarm = dead_letters.queue, dead_letters.alarm
        self.function.configure_async_invoke(
            on_failure=destinations.SqsDestination(self.dead_letter_queue), retry_attempts=2
        )

        # Tables the application creates after a deploy join the publication by themselves
        # (and are snapshotted), and MissingTables (the alarm's metric) stays current.
        self.schedule = events.Rule(
            self,
            "ReconcileSchedule",
            description="Re-run the replication bootstrap: join tables created since",
            schedule=events.Schedule.rate(
                cdk.Duration.minutes(replication.reconcile_every_minutes)
            ),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object({"RequestType": "Reconcile"}),
                    retry_attempts=2,
                    dead_letter_queue=self.dead_letter_queue,
                )
            ],
        )

        # Rotate the replication password monthly; the first rotation waits for the role.
        self.rotation = secretsmanager.SecretRotation(
            self,
            "ReplicationRotation",
            application=secretsmanager.SecretRotationApplication.POSTGRES_ROTATION_SINGLE_USER,
            secret=self.replication_secret,
            target=cluster,
            vpc=vpc,
            vpc_subnets=private,
            automatically_after=cdk.Duration.days(30),
        )
        self.rotation.node.add_dependency(self.resource)
        schedules = [
            c
            for c in self.replication_secret.node.find_all()
            if isinstance(c, secretsmanager.RotationSchedule)
        ]
        assert schedules, "SecretRotation adds its schedule to the secret"
        for schedule in schedules:
            schedule.node.add_dependency(self.resource)

        self._acknowledge()

    def _acknowledge(self) -> None:
        acknowledge(
            self.function,
            {
                LAMBDA_LOGS_FINDING: "AWS-managed minimal policy: write this function's own logs",
                managed_policy_finding("AWSLambdaVPCAccessExecutionRole"): (
                    "AWS-managed minimal policy for the ENIs a VPC function needs"
                ),
            },
        )
        function_id = cdk.Stack.of(self).get_logical_id(
            self.function.node.default_child  # type: ignore[arg-type]
        )
        acknowledge(
            self.provider,
            {
                LAMBDA_LOGS_FINDING: (
                    "CDK Provider framework function: AWS-managed log-writing policy"
                ),
                f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]": (
                    "The framework may invoke any version of the bootstrap function, "
                    "and only that function"
                ),
            },
        )

    def _grant_restarts(self, captures: Sequence[Mapping[str, str]]) -> None:
        """Restarting the named captures and nothing else."""
        grant_capture_restarts(
            self.function,
            connectors=[c["connector"] for c in captures if "connector" in c],
            services=[(c["cluster"], c["service"]) for c in captures if "service" in c],
        )
