"""The lake's S3 buckets: change files, Hudi tables, quarantine, Glue assets, access logs."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from environment.lake import LakeConfig
from environment.retention import ERASE_REQUEST_DAYS, noncurrent_version_days
from stacks.components.log_storage import access_log_bucket


class LakeStorage(Construct):
    """Five buckets under one customer-managed key (the access-log bucket excepted).

    Every bucket blocks public access, refuses non-TLS requests and logs access to
    ``access_log_bucket``. Change files and quarantined records expire after the configured
    days, the capture's heartbeat change files (``heartbeats``, a folder of the change bucket
    that nothing merges and the dispatcher lists every turn) after one; Hudi keeps its own
    history, so the lake bucket only expires old object versions, as far back as Hudi's
    cleaner keeps file versions (``retain_hours``), the delete markers left once a deleted
    object has no version left, and the erase requests (``erase_requests``, a folder) a failed
    erase run left and no rerun removed, after ``ERASE_REQUEST_DAYS``: each holds a key.
    Data buckets are retained when the stack is deleted.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: LakeConfig,
        heartbeats: str,
        erase_requests: str,
    ) -> None:
        super().__init__(scope, construct_id)

        #: KMS key of the lake buckets, the Glue job logs/bookmarks and Athena results.
        self.encryption_key = kms.Key(
            self,
            "Key",
            description="cdc-lake buckets, Glue job logs and bookmarks, Athena results",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

        self.access_log_bucket = access_log_bucket(
            self, "AccessLogs", expiration=cdk.Duration.days(365)
        )

        def bucket(
            construct_id: str, *, lifecycle: list[s3.LifecycleRule], versioned: bool = False
        ) -> s3.Bucket:
            return s3.Bucket(
                self,
                construct_id,
                encryption=s3.BucketEncryption.KMS,
                encryption_key=self.encryption_key,
                bucket_key_enabled=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                versioned=versioned,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                server_access_logs_bucket=self.access_log_bucket,
                server_access_logs_prefix=f"{construct_id.lower()}/",
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="abort-incomplete-uploads",
                        abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                    ),
                    *lifecycle,
                ],
                removal_policy=cdk.RemovalPolicy.RETAIN,
            )

        # Change files from the S3 sink connector: topics/<prefix>.<schema>.<table>/...
        self.change_bucket = bucket(
            "Changes",
            lifecycle=[
                s3.LifecycleRule(
                    id="expire-change-files",
                    expiration=cdk.Duration.days(config.change_file_expiration_days),
                ),
                # About a file a rotation interval: a day keeps the dispatcher's listing short.
                s3.LifecycleRule(
                    id="expire-heartbeats", prefix=heartbeats, expiration=cdk.Duration.days(1)
                ),
            ],
        )
        # Hudi tables under warehouse/; versioned so an overwritten file can be recovered.
        self.lake_bucket = bucket(
            "Lake",
            versioned=True,
            lifecycle=[
                s3.LifecycleRule(
                    id="expire-old-versions",
                    noncurrent_version_expiration=cdk.Duration.days(
                        noncurrent_version_days(config.retain_hours)
                    ),
                ),
                # A delete marker with no version behind it still costs a LIST of the table.
                s3.LifecycleRule(
                    id="remove-expired-delete-markers", expired_object_delete_marker=True
                ),
                s3.LifecycleRule(
                    id="expire-erase-requests",
                    prefix=erase_requests,
                    expiration=cdk.Duration.days(ERASE_REQUEST_DAYS),
                ),
            ],
        )
        # Records the merge job could not parse, per table: <schema>_<table>/...
        self.quarantine_bucket = bucket(
            "Quarantine",
            lifecycle=[
                s3.LifecycleRule(
                    id="expire-quarantine",
                    expiration=cdk.Duration.days(config.quarantine_expiration_days),
                )
            ],
        )
        # Glue temp files, Spark UI event logs and Athena query results.
        self.assets_bucket = bucket(
            "GlueAssets",
            lifecycle=[
                s3.LifecycleRule(
                    id=f"expire-{prefix.rstrip('/')}",
                    prefix=prefix,
                    expiration=cdk.Duration.days(days),
                )
                for prefix, days in (("tmp/", 7), ("spark-logs/", 30), ("athena-results/", 30))
            ],
        )
