"""Glue 5.0 merge jobs: one PySpark job per lake table, writing Hudi (started by the
dispatcher, stacks/components/merge_dispatcher.py, never by a schedule of its own)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from cdclake_merge.dispatch import MERGE_JOB_TAG
from cdclake_merge.metrics import NAMESPACE as METRICS_NAMESPACE
from cdclake_merge.session import MERGE_JAR, REPO_JARS, SPARK_CONF, MissingJars
from environment.artifacts import glue_wheel
from environment.lake import LakeConfig
from environment.names import merge_job_prefix, resource_name
from environment.paths import GLUE_WHEELS_DIR, REPO_ROOT
from environment.tables import TableConfig
from stacks.components.log_storage import log_group
from stacks.components.nag import (
    KMS_GRANT_REASON,
    LAMBDA_LOGS_FINDING,
    acknowledge,
    acknowledge_wildcards,
)

ENTRY_SCRIPT = REPO_ROOT / "glue_jobs" / "merge_job.py"
JOB_LIBRARY = REPO_ROOT / "glue_jobs" / "lib"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
# The merge job's own JVM code (jvm/merge), built by `make setup`.
JOB_JAR = REPO_JARS / MERGE_JAR
#: What Glue 5.0 appends to ``--custom-logGroup-prefix``: the runs' system and Spark logs, and
#: their stdout and stderr.
LOG_STREAMS = ("error", "output")
# Modules the job installs (pip) at start: not in Glue 5.0's own list, at the version the
# local job runs with, from the wheels a deploy ships (never PyPI).
JOB_MODULES = ("orjson",)
#: Where the wheels are copied in the assets bucket, each under its own file name.
WHEELS_PREFIX = "glue-wheels/"


def glue_conf(settings: Mapping[str, str]) -> str:
    """Spark settings as Glue's one ``--conf`` argument (``k=v --conf k2=v2``)."""
    return " --conf ".join(f"{key}={value}" for key, value in settings.items())


def pinned(names: Sequence[str], requirements: Path = REQUIREMENTS) -> str:
    """``name==version`` of each of ``names`` as requirements.txt pins it, comma-separated."""
    pins: dict[str, str] = {}
    for line in requirements.read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
    missing = [n for n in names if n not in pins]
    if missing:
        raise ValueError(f"{requirements}: no name==version pin for {', '.join(missing)}")
    return ",".join(f"{n}=={pins[n]}" for n in names)


class MergeJobs(Construct):
    """One Glue job per lake table, all running ``glue_jobs/merge_job.py``.

    One job per table (not one parameterized job) so each table is rerun, paused or
    resized on its own, and ``MaxConcurrentRuns=1`` guarantees two runs never write the same
    Hudi table. Job bookmarks are off: the job keeps its checkpoint in Hudi commit metadata.
    The job library (``glue_jobs/lib``) ships as a zip for ``--extra-py-files``, its JVM code
    (``jvm/merge``, built by ``make setup``) as a jar for ``--extra-jars``. Logs and
    bookmarks are encrypted by a Glue security configuration with the lake key.

    ``change_folders`` holds each table's folder of change files in ``change_bucket`` (by table
    name: ``topics/<topic>``, where the S3 sink writes). ``role`` has only what every job needs
    (its scripts, logs, metrics); the composing stack grants the buckets, the catalog and
    ``encryption_key`` (which the security configuration encrypts with). ``environment`` names
    the Environment dimension of the lake metrics each run publishes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: LakeConfig,
        tables: Sequence[TableConfig],
        change_folders: Mapping[str, str],
        name_prefix: str,
        change_bucket: s3.IBucket,
        lake_bucket: s3.IBucket,
        quarantine_bucket: s3.IBucket,
        assets_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        glue_database: str,
        environment: str,
        signal_function: str,
    ) -> None:
        """``signal_function``: the name of the function a rebuild run invokes to signal its
        incremental snapshot (``--signal_function``, glue_jobs/merge_job.py)."""
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)

        # Entry script and library as CDK assets (the library zips to cdclake_merge/... at root).
        self.script = s3_assets.Asset(self, "Script", path=str(ENTRY_SCRIPT))
        self.library = s3_assets.Asset(
            self, "Library", path=str(JOB_LIBRARY), exclude=["__pycache__", "*.pyc"]
        )
        if not JOB_JAR.is_file():
            raise MissingJars(f"{JOB_JAR} not found: run `make setup` to build it")
        self.jar = s3_assets.Asset(self, "Jar", path=str(JOB_JAR))
        # pip installs a wheel only under its own file name (name-version-tags.whl), which an
        # asset's key (its hash) is not: the wheels are copied into the assets bucket by name.
        wheels = [glue_wheel(requirement) for requirement in pinned(JOB_MODULES).split(",")]
        self.wheels = s3_deployment.BucketDeployment(
            self,
            "Wheels",
            sources=[
                s3_deployment.Source.asset(
                    str(GLUE_WHEELS_DIR), exclude=["*", ".*", *(f"!{w.name}" for w in wheels)]
                )
            ],
            destination_bucket=assets_bucket,
            destination_key_prefix=WHEELS_PREFIX,
            log_group=log_group(self, "WheelsLogs"),
        )
        self.wheel_keys = [f"{WHEELS_PREFIX}{w.name}" for w in wheels]
        self._acknowledge_wheels_copy()

        # The runs' logs, in log groups of this stack that expire: without a prefix Glue 5.0
        # writes to /aws-glue/jobs/error and /output, created on first use and kept forever.
        # Under /aws-glue/ as before: the role's log statement and the key's logs grant hold.
        #: ``--custom-logGroup-prefix`` of every merge job.
        self.log_group_prefix = f"/aws-glue/jobs/{resource_name(name_prefix, 'merge')}"
        self.log_groups = {
            stream: log_group(
                self,
                f"{stream.title()}Logs",
                log_group_name=f"{self.log_group_prefix}/{stream}",
                retention=logs.RetentionDays[config.job_log_retention],
                encryption_key=encryption_key,
            )
            for stream in LOG_STREAMS
        }

        # Encrypted job logs, bookmarks and shuffle/temp files written to S3.
        self.security_configuration = glue.CfnSecurityConfiguration(
            self,
            "SecurityConfiguration",
            name=f"{name_prefix}-merge",
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=encryption_key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=encryption_key.key_arn
                ),
                s3_encryptions=[
                    glue.CfnSecurityConfiguration.S3EncryptionProperty(
                        s3_encryption_mode="SSE-KMS", kms_key_arn=encryption_key.key_arn
                    )
                ],
            ),
        )

        # The jobs' role: assumed by Glue only; no AWS-managed policy.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description="cdc-lake Glue merge jobs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadJobCode",
                actions=["s3:GetObject"],
                resources=[
                    self.script.bucket.arn_for_objects(self.script.s3_object_key),
                    self.library.bucket.arn_for_objects(self.library.s3_object_key),
                    self.jar.bucket.arn_for_objects(self.jar.s3_object_key),
                    *(assets_bucket.arn_for_objects(key) for key in self.wheel_keys),
                ],
            )
        )
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws-glue/*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="JobLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:AssociateKmsKey",
                ],
                resources=[log_groups, f"{log_groups}:log-stream:*"],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="JobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                # Glue's job metrics, and the lake freshness each run publishes.
                conditions={"StringEquals": {"cloudwatch:namespace": ["Glue", METRICS_NAMESPACE]}},
            )
        )

        self.jobs: dict[str, glue.CfnJob] = {}
        for table in tables:
            name = table.merge_job_name(name_prefix)
            job_config = config.glue_job_of(table)
            # One job per table: its own arguments, one run at a time.
            job = glue.CfnJob(
                self,
                f"Job{_camel(table.lake_table_name)}",
                name=name,
                description=f"Merge CDC change files of {table.name} into its Hudi table",
                role=self.role.role_arn,
                glue_version="5.0",
                command=glue.CfnJob.JobCommandProperty(
                    name="glueetl",
                    python_version="3",
                    script_location=self.script.s3_object_url,
                ),
                worker_type=job_config.worker_type,
                # The most a run scales up to (auto scaling is on); the dispatcher starts each
                # run with what its pending bytes need, at least the table's min_workers.
                number_of_workers=job_config.number_of_workers,
                execution_class="FLEX" if job_config.flex else "STANDARD",
                # No Glue retries: a retry reads the whole run again, and the failures that
                # stop a run (bad lines, a schema change, a bad argument) fail it again. What
                # is transient is retried inside the run (S3, Spark tasks); the next start
                # continues from the last commit. Without retries Glue can queue a start
                # that finds a run in progress (WAITING) instead of failing it; Flex runs
                # wait for capacity on their own.
                max_retries=0,
                job_run_queuing_enabled=not job_config.flex,
                timeout=job_config.timeout_minutes,
                execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
                security_configuration=self.security_configuration.ref,
                # How the dispatcher finds the environment's merge jobs (ListJobs by tag).
                tags={MERGE_JOB_TAG: merge_job_prefix(name_prefix)},
                default_arguments={
                    # Read by glue_jobs/merge_job.py (getResolvedOptions).
                    "--table": table.name,
                    "--changes_path": change_bucket.s3_url_for_object(
                        f"{change_folders[table.name]}/"
                    ),
                    "--warehouse_path": lake_bucket.s3_url_for_object("warehouse/"),
                    "--database": glue_database,
                    "--record_key": ",".join(table.primary_key),
                    # Omitted when unpartitioned (the script defaults it): an empty value is
                    # one Glue may hand the script as a bare flag, which argparse rejects.
                    **(
                        {"--partition_fields": ",".join(table.partition_by)}
                        if table.partition_by
                        else {}
                    ),
                    "--table_type": table.hudi_table_type,
                    "--quarantine_path": quarantine_bucket.s3_url_for_object(
                        f"{table.lake_table_name}/"
                    ),
                    **(
                        {"--exclude_columns": ",".join(table.exclude_columns)}
                        if table.exclude_columns
                        else {}
                    ),
                    # JSON: a Spark type such as decimal(10,2) has a comma of its own.
                    **(
                        {"--column_types": json.dumps(table.column_types, sort_keys=True)}
                        if table.column_types
                        else {}
                    ),
                    "--max_bad_fraction": str(job_config.max_bad_fraction),
                    # A backlog is applied over several runs, each well inside the timeout.
                    "--max_files_per_run": str(job_config.files_per_run()),
                    "--max_bytes_per_run": str(job_config.bytes_per_run()),
                    "--tombstone_retention_days": str(config.tombstone_retention_days),
                    # The table's services (cdclake_merge.recovery, hudi_options).
                    **{
                        f"--{name}": str(value) for name, value in config.services_of(table).items()
                    },
                    **{f"--{name}": value for name, value in config.rebuild_of(table).items()},
                    "--environment": environment,
                    "--signal_function": signal_function,
                    # Read by the dispatcher (cdclake_merge.dispatch), not by the script: it
                    # sizes each run from the bytes waiting, and has no config of its own.
                    **{
                        f"--{name}": str(value) for name, value in config.dispatch_of(table).items()
                    },
                    # Glue's own.
                    "--datalake-formats": "hudi",
                    "--conf": glue_conf(SPARK_CONF),
                    "--enable-glue-datacatalog": "true",
                    "--extra-py-files": self.library.s3_object_url,
                    "--extra-jars": self.jar.s3_object_url,
                    # Without orjson the parser takes its standard-library path.
                    "--additional-python-modules": ",".join(
                        assets_bucket.s3_url_for_object(key) for key in self.wheel_keys
                    ),
                    "--python-modules-installer-option": "--no-index",
                    "--custom-logGroup-prefix": self.log_group_prefix,
                    "--enable-metrics": "true",
                    # Idle executors are released within a run; NumberOfWorkers is its maximum.
                    "--enable-auto-scaling": "true",
                    "--job-bookmark-option": "job-bookmark-disable",
                    "--job-language": "python",
                    "--TempDir": assets_bucket.s3_url_for_object("tmp/"),
                    "--enable-spark-ui": "true",
                    "--spark-event-logs-path": assets_bucket.s3_url_for_object("spark-logs/"),
                },
            )
            # A run started before its log groups exist would create them, without retention,
            # and their creation here would then fail.
            job.node.add_dependency(*self.log_groups.values(), self.wheels)
            self.jobs[table.name] = job

    def _acknowledge_wheels_copy(self) -> None:
        """The findings of CDK's own copy function (one per stack, at its root)."""
        stack = cdk.Stack.of(self)
        (function,) = [
            c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")
        ]
        reason = "CDK's BucketDeployment copies the wheels at deploy time"
        acknowledge(
            function,
            {
                LAMBDA_LOGS_FINDING: f"{reason}; the managed policy only writes its own logs",
                "AwsSolutions-L1": f"{reason}; its runtime is CDK's to choose",
            },
        )
        acknowledge_wildcards(
            function,
            {
                r"^Action::s3:(GetBucket|GetObject|List|DeleteObject|Abort)\*$": (
                    f"{reason}: CDK's read of its asset and write of the wheels' prefix"
                ),
                r"^Action::kms:(GenerateDataKey|ReEncrypt)\*$": KMS_GRANT_REASON,
                r"^Resource::arn:<AWS::Partition>:s3:::cdk-[a-z0-9]+-assets-.*/\*$": (
                    "the CDK bootstrap bucket's assets, read by asset hash"
                ),
                r"^Resource::<StorageGlueAssets[0-9A-F]+\.Arn>/\*$": (
                    f"{reason}: CDK grants its destination bucket's objects"
                ),
            },
        )


def _camel(name: str) -> str:
    return "".join(part.title() for part in name.split("_"))
