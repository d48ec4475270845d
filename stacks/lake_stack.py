"""Lake: buckets, the Glue database, the merge jobs and the Athena workgroup."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from cdclake_merge.erase_request import REQUESTS
from cdclake_merge.metrics import NAMESPACE as METRICS_NAMESPACE
from connectors.configs import TOPICS_DIR, heartbeat_changes_topic, topic_name
from environment.config import EnvironmentConfig
from environment.names import merge_job_prefix
from stacks.components.lake_storage import LakeStorage
from stacks.components.merge_dispatcher import MergeDispatcher
from stacks.components.merge_jobs import MergeJobs
from stacks.components.nag import acknowledge, acknowledge_wildcards
from stacks.components.query import Query


class LakeStack(cdk.Stack):
    """Where change files land and Hudi tables live, and the jobs that merge one into the other.

    The S3 sink connector (CaptureStack) writes ``topics/<prefix>.<schema>.<table>/...`` into
    ``change_bucket``; a Glue job per lake table merges those files into a Hudi table under
    ``s3://<lake_bucket>/warehouse/`` registered in ``glue_database``; Athena queries it.
    The jobs need no VPC: they only talk to S3, Glue and CloudWatch. No schedule starts a job:
    the dispatcher starts those whose change files wait, within the environment's budget.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        vpc: ec2.IVpc,
        alarm_topic: sns.ITopic,
        signal_function: lambda_.IFunction,
        **kwargs: Any,
    ) -> None:
        """``alarm_topic``: where the dispatcher's dead letters page; ``signal_function``: the
        replication bootstrap's function, through which a merge job's rebuild run signals its
        incremental snapshot (the runs have no route to the database)."""
        super().__init__(scope, construct_id, **kwargs)
        self.config = config

        heartbeats = f"{TOPICS_DIR}/{heartbeat_changes_topic(config)}/"
        self.storage = LakeStorage(
            self,
            "Storage",
            config=config.lake,
            heartbeats=heartbeats,
            # Where `cdclake erase` hands a key to the job (--warehouse_path is warehouse/).
            erase_requests=f"warehouse/{REQUESTS}/",
        )
        #: S3 bucket of the CDC change files (S3 sink connector output).
        self.change_bucket = self.storage.change_bucket
        #: S3 bucket of the Hudi tables (warehouse/).
        self.lake_bucket = self.storage.lake_bucket
        #: S3 bucket of records the merge job rejected.
        self.quarantine_bucket = self.storage.quarantine_bucket
        #: KMS key of the lake buckets.
        self.encryption_key = self.storage.encryption_key
        #: Name of the Glue Data Catalog database of the Hudi tables.
        self.glue_database = config.lake.glue_database

        # The catalog database the merge jobs sync their Hudi tables into.
        database = glue.CfnDatabase(
            self,
            "GlueDatabase",
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.glue_database,
                description=f"cdc-lake Hudi tables ({config.env})",
                location_uri=self.lake_bucket.s3_url_for_object("warehouse/"),
            ),
        )

        self.merge_jobs = MergeJobs(
            self,
            "MergeJobs",
            config=config.lake,
            tables=config.lake_tables,
            change_folders={
                t.name: f"{TOPICS_DIR}/{topic_name(config, t)}" for t in config.lake_tables
            },
            name_prefix=config.prefix,
            change_bucket=self.change_bucket,
            lake_bucket=self.lake_bucket,
            quarantine_bucket=self.quarantine_bucket,
            assets_bucket=self.storage.assets_bucket,
            encryption_key=self.encryption_key,
            glue_database=self.glue_database,
            environment=config.env,
            signal_function=signal_function.function_name,
        )
        for job in self.merge_jobs.jobs.values():
            job.add_dependency(database)
        self._grant_merge_jobs(self.merge_jobs.role, signal_function)

        self.dispatcher = MergeDispatcher(
            self,
            "Dispatcher",
            config=config.lake.dispatch,
            job_prefix=merge_job_prefix(config.prefix),
            environment=config.env,
            heartbeats=self.change_bucket.s3_url_for_object(heartbeats),
            alarm_topic=alarm_topic,
            # Where the environment keeps its data, dead letters outlive the stack.
            retain=config.database.deletion_protection,
        )
        self._grant_dispatcher(self.dispatcher.function)

        self.query = Query(
            self,
            "Query",
            name=config.resource_name("lake"),
            results_bucket=self.storage.assets_bucket,
            encryption_key=self.encryption_key,
        )

        cdk.CfnOutput(self, "ChangeBucketName", value=self.change_bucket.bucket_name)
        cdk.CfnOutput(self, "LakeBucketName", value=self.lake_bucket.bucket_name)
        cdk.CfnOutput(self, "QuarantineBucketName", value=self.quarantine_bucket.bucket_name)
        cdk.CfnOutput(self, "GlueDatabaseName", value=self.glue_database)
        cdk.CfnOutput(self, "AthenaWorkGroup", value=self.query.workgroup_name)
        cdk.CfnOutput(
            self,
            "MergeJobNames",
            value=",".join(sorted(str(j.name) for j in self.merge_jobs.jobs.values())),
        )

    def _grant_merge_jobs(self, role: iam.IRole, signal_function: lambda_.IFunction) -> None:
        """Least privilege for the merge jobs: explicit actions, prefixes, one database, and
        the one function a rebuild run signals its snapshot through."""
        # The buckets' objects are under the lake key, and so are the jobs' logs, bookmarks
        # and temporary files (their security configuration encrypts with it).
        self.encryption_key.grant(role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
        prefix = self.config.prefix
        storage = self.storage
        quarantine_folders = [t.lake_table_name for t in self.config.lake_tables]
        statements = [
            # A rebuild run's snapshot signal ({"RequestType": "Signal"}): the bootstrap's
            # function reaches the database, the job does not.
            iam.PolicyStatement(
                sid="SignalRebuildSnapshot",
                actions=["lambda:InvokeFunction"],
                resources=[signal_function.function_arn],
            ),
            # Read change files of this environment's topics only.
            iam.PolicyStatement(
                sid="ListChangeFiles",
                actions=["s3:ListBucket"],
                resources=[self.change_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{TOPICS_DIR}/{prefix}.*"]}},
            ),
            iam.PolicyStatement(
                sid="ReadChangeFiles",
                actions=["s3:GetObject"],
                resources=[self.change_bucket.arn_for_objects(f"{TOPICS_DIR}/{prefix}.*")],
            ),
            # An erase run (`cdclake erase`, --mode erase) writes the change files holding the
            # erased key again without its lines.
            iam.PolicyStatement(
                sid="RewriteChangeFiles",
                actions=["s3:PutObject"],
                resources=[self.change_bucket.arn_for_objects(f"{TOPICS_DIR}/{prefix}.*")],
            ),
            # Read and write Hudi tables under warehouse/.
            iam.PolicyStatement(
                sid="ListLake",
                actions=["s3:ListBucket"],
                resources=[self.lake_bucket.bucket_arn, storage.assets_bucket.bucket_arn],
            ),
            iam.PolicyStatement(
                sid="WriteLake",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[
                    self.lake_bucket.arn_for_objects("warehouse/*"),
                    storage.assets_bucket.arn_for_objects("tmp/*"),
                    storage.assets_bucket.arn_for_objects("spark-logs/*"),
                ],
            ),
            # Creating a folder, S3A probes each parent up to one that exists: a HEAD on the
            # key `warehouse` itself, which `warehouse/*` does not match; without it S3 answers
            # 403 and the write fails (found by tests/iam/test_merge_job_least_privilege.py).
            iam.PolicyStatement(
                sid="ProbeWarehouse",
                actions=["s3:GetObject"],
                resources=[self.lake_bucket.arn_for_objects("warehouse")],
            ),
            # Rejected records, through Spark's JSON writer: it probes the folder (HEAD on
            # the folder's own key, then a listing), writes under _temporary/ and renames
            # (copy + delete). Listing is bucket-wide because S3 answers a HEAD on a missing
            # key with 403 instead of 404 unless ListBucket is allowed, and an s3:prefix
            # condition never matches a HEAD; the bucket holds nothing but quarantine.
            iam.PolicyStatement(
                sid="ListQuarantine",
                actions=["s3:ListBucket"],
                resources=[self.quarantine_bucket.bucket_arn],
            ),
            iam.PolicyStatement(
                sid="WriteQuarantine",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[
                    arn
                    for folder in quarantine_folders
                    for arn in (
                        self.quarantine_bucket.arn_for_objects(folder),
                        self.quarantine_bucket.arn_for_objects(f"{folder}/*"),
                    )
                ],
            ),
            # The Glue Data Catalog client checks `default` when it starts and creates it
            # when missing; without this Hudi's catalog sync fails after the data commit.
            iam.PolicyStatement(
                sid="CatalogDefaultDatabase",
                actions=["glue:GetDatabase", "glue:CreateDatabase"],
                resources=[
                    self.format_arn(service="glue", resource="catalog"),
                    self.format_arn(service="glue", resource="database", resource_name="default"),
                ],
            ),
            # Spark's session catalog checks that `global_temp` does not exist, and Hudi's
            # writer looks its table up in the current database (`default`) before a table's
            # first commit; a denied lookup is an error, not "absent" (tests/iam, catalog sync).
            iam.PolicyStatement(
                sid="CatalogSessionLookups",
                actions=["glue:GetDatabase", "glue:GetTable"],
                resources=[
                    self.format_arn(service="glue", resource="catalog"),
                    self.format_arn(
                        service="glue", resource="database", resource_name="global_temp"
                    ),
                    self.format_arn(service="glue", resource="database", resource_name="default"),
                    self.format_arn(service="glue", resource="table", resource_name="default/*"),
                ],
            ),
            # Hudi's catalog sync: this database and its tables only.
            iam.PolicyStatement(
                sid="CatalogSync",
                actions=[
                    "glue:GetDatabase",
                    "glue:GetTable",
                    "glue:GetTables",
                    "glue:CreateTable",
                    "glue:UpdateTable",
                    "glue:GetPartition",
                    "glue:GetPartitions",
                    "glue:BatchGetPartition",
                    "glue:CreatePartition",
                    "glue:BatchCreatePartition",
                    "glue:UpdatePartition",
                    "glue:BatchUpdatePartition",
                    "glue:DeletePartition",
                    "glue:BatchDeletePartition",
                ],
                resources=[
                    self.format_arn(service="glue", resource="catalog"),
                    self.format_arn(
                        service="glue", resource="database", resource_name=self.glue_database
                    ),
                    self.format_arn(
                        service="glue", resource="table", resource_name=f"{self.glue_database}/*"
                    ),
                ],
            ),
        ]
        for statement in statements:
            # An environment with no lake table (fan-out only) has no quarantine folder.
            if statement.resources:
                role.add_to_principal_policy(statement)
        self._acknowledge_job_role(role)

        # CloudWatch Logs encrypts the jobs' log groups with the lake key (security config).
        self.encryption_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="GlueJobLogs",
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": self.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="/aws-glue/*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )

    def _grant_dispatcher(self, function: lambda_.Function) -> None:
        """What the dispatcher reads (listings, Hudi timelines, the merge's checkpoints), the
        jobs it starts and the lag it publishes: nothing in S3 it could write to."""
        warehouse = f"warehouse/{self.glue_database}.db"
        statements = [
            iam.PolicyStatement(
                sid="ListChangeFiles",
                actions=["s3:ListBucket"],
                resources=[self.change_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{TOPICS_DIR}/{self.config.prefix}.*"]}},
            ),
            iam.PolicyStatement(
                sid="ListLakeTables",
                actions=["s3:ListBucket"],
                resources=[self.lake_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{warehouse}/*"]}},
            ),
            iam.PolicyStatement(
                sid="ReadCheckpoints",
                actions=["s3:GetObject"],
                resources=[
                    self.lake_bucket.arn_for_objects(f"{warehouse}/*/.hoodie/*"),
                    self.lake_bucket.arn_for_objects(f"{warehouse}/_cdclake/*"),
                ],
            ),
            iam.PolicyStatement(
                sid="FindMergeJobs",
                actions=["glue:ListJobs"],
                # ListJobs has no resource-level permission; it returns job names only.
                resources=["*"],
            ),
            iam.PolicyStatement(
                sid="StartMergeJobs",
                actions=["glue:GetJob", "glue:GetJobRuns", "glue:StartJobRun"],
                # The environment's merge jobs by their name prefix: one ARN whatever the
                # number of tables (one per job reaches IAM's 10 KB policy limit near 120).
                resources=[
                    self.format_arn(
                        service="glue",
                        resource="job",
                        resource_name=merge_job_prefix(self.config.prefix) + "*",
                    )
                ],
            ),
            iam.PolicyStatement(
                sid="PublishLag",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource; the namespace is the limit
                conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            ),
        ]
        for statement in statements:
            function.add_to_role_policy(statement)
        self.encryption_key.grant_decrypt(function)
        assert function.role is not None  # the function creates its own role
        acknowledge_wildcards(
            function.role,
            {
                r"/warehouse/[^/]+\.db/\*/\.hoodie/\*$": "Hudi's timeline of each lake table "
                "in this database (the commits naming the merge's checkpoints)",
                r"/warehouse/[^/]+\.db/_cdclake/\*$": "the merge's checkpoints, one folder per "
                "lake table in this database",
                r"^Resource::\*$": "cloudwatch:PutMetricData and glue:ListJobs have no resource: "
                "the first is limited to the CdcLake namespace, the second returns job names",
                r":job/[a-z0-9-]+-merge-\*$": "this environment's merge jobs, by their name "
                "prefix (one ARN for any number of tables)",
            },
        )

    def _acknowledge_job_role(self, role: iam.IRole) -> None:
        """Each wildcard of the job role, named exactly, with why it cannot be narrower."""

        def arn_of(bucket: Any) -> str:
            return f"<{self.get_logical_id(bucket.node.default_child)}.Arn>"

        partition_arn = f"arn:<AWS::Partition>:%s:{self.region}:{self.account}:%s"
        log_groups = partition_arn % ("logs", "log-group:/aws-glue/*")
        reasons = {
            log_groups: "Glue names its log groups per security configuration and role "
            "under /aws-glue/",
            f"{log_groups}:log-stream:*": "Glue creates one log stream per job run",
            "*": "cloudwatch:PutMetricData has no resource; limited to the Glue and "
            "CdcLake namespaces",
            f"{arn_of(self.change_bucket)}/{TOPICS_DIR}/{self.config.prefix}.*": "Change files of "
            "this environment's topics, one folder per table and partition",
            f"{arn_of(self.storage.assets_bucket)}/spark-logs/*": "Spark UI event logs",
            f"{arn_of(self.storage.assets_bucket)}/tmp/*": "Glue temporary directory",
            f"{arn_of(self.lake_bucket)}/warehouse/*": "Hudi writes data, log and metadata "
            "files anywhere in its table folders",
            **{
                f"{arn_of(self.quarantine_bucket)}/{table.lake_table_name}/*": "Rejected "
                "records of this table; Spark names its part and temporary files per run"
                for table in self.config.lake_tables
            },
            partition_arn % ("glue", f"table/{self.glue_database}/*"): "Hudi creates and "
            "syncs one catalog table per lake table in this database only",
            partition_arn % ("glue", "table/default/*"): "Hudi's writer looks each lake "
            "table up by its name in the current database (read only; one name per table)",
        }
        acknowledge(
            role,
            {f"AwsSolutions-IAM5[Resource::{resource}]": r for resource, r in reasons.items()},
        )
