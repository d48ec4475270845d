"""The lake stack: buckets, Glue database, one merge job per lake table, Athena."""

from __future__ import annotations

import fnmatch
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.stack_helpers import (
    as_list,
    flat,
    masked,
    of_type,
    policy_statements,
    props,
    single,
    synth_config_variant,
)

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request: pytest.FixtureRequest, synth) -> Any:  # type: ignore[no-untyped-def]
    return synth(request.param)


def logical_id(env: Any, construct: Any) -> str:
    """Logical id of a construct's resource, derived from the construct (never hard-coded)."""
    stack = env.stacks["lake"]
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))


def render(env: Any, value: Any) -> str:
    """A Fn::Join of strings and bucket Refs as text, buckets named by their stack attribute."""
    lake = env.stacks["lake"]
    names = {
        logical_id(env, lake.change_bucket): "<change_bucket>",
        logical_id(env, lake.lake_bucket): "<lake_bucket>",
        logical_id(env, lake.quarantine_bucket): "<quarantine_bucket>",
        logical_id(env, lake.storage.assets_bucket): "<assets_bucket>",
    }
    if isinstance(value, str):
        return value
    if "Fn::GetAtt" in value:
        return names.get(value["Fn::GetAtt"][0], "<token>")
    if "Fn::ImportValue" in value:  # another stack's (the bootstrap function's name)
        return "<import>"
    delimiter, parts = value["Fn::Join"]
    return delimiter.join(
        p
        if isinstance(p, str)
        else names.get(p.get("Ref") or p.get("Fn::GetAtt", [""])[0], "<token>")
        for p in parts
    )


def allowed(env: Any, action: str) -> set[str]:
    """Rendered resources of every Allow statement of the lake stack granting ``action``."""
    return {
        render(env, resource)
        for statement in policy_statements(env.template("lake"))
        if statement["Effect"] == "Allow" and action in as_list(statement["Action"])
        for resource in as_list(statement["Resource"])
    }


def job_role_statements(env: Any) -> list[dict[str, Any]]:
    """The statements of the merge jobs' role (the stack holds the dispatcher's role too)."""
    role = {"Ref": logical_id(env, env.stacks["lake"].merge_jobs.role)}
    return [
        statement
        for policy in props(env.template("lake"), "AWS::IAM::Policy")
        if role in policy["Roles"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def jobs(env: Any) -> dict[str, dict[str, Any]]:
    found = props(env.template("lake"), "AWS::Glue::Job")
    return {j["DefaultArguments"]["--table"]: j for j in found}


def test_lake_template_matches_snapshot(env: Any, snapshot: Any) -> None:
    assert masked(env.template("lake")) == snapshot(name=env.env)


def test_lake_one_glue_job_per_lake_table(env: Any) -> None:
    assert sorted(jobs(env)) == sorted(t.name for t in env.config.lake_tables)
    assert env.config.lake_tables  # the check above is not vacuous


def test_lake_glue_job_named_as_operations_tools_find_it(env: Any) -> None:
    # cdclake status, quarantine and merge --env look the job up by TableConfig.merge_job_name.
    for table in env.config.lake_tables:
        expected = f"{env.config.prefix}-merge-{table.schema_name}-{table.table_name}"
        assert jobs(env)[table.name]["Name"] == expected.replace("_", "-")
        assert table.merge_job_name(env.config.prefix) == jobs(env)[table.name]["Name"]


def test_lake_glue_job_arguments_for_merge_script(env: Any) -> None:
    config = env.config
    for table in config.lake_tables:
        job = jobs(env)[table.name]
        args = {k: render(env, v) for k, v in job["DefaultArguments"].items()}
        assert args["--changes_path"] == (
            f"s3://<change_bucket>/topics/{config.prefix}.{table.schema_name}.{table.table_name}/"
        )
        assert args["--warehouse_path"] == "s3://<lake_bucket>/warehouse/"
        assert args["--database"] == config.lake.glue_database
        assert args["--record_key"] == ",".join(table.primary_key)
        assert args.get("--partition_fields", "") == ",".join(table.partition_by)
        assert args["--table_type"] == table.hudi_table_type
        assert args["--quarantine_path"] == (
            f"s3://<quarantine_bucket>/{table.schema_name}_{table.table_name}/"
        )
        assert args.get("--exclude_columns", "") == ",".join(table.exclude_columns)
        assert json.loads(args.get("--column_types", "{}")) == dict(table.column_types)
        assert args["--max_bad_fraction"] == str(config.lake.glue_job.max_bad_fraction)
        assert args["--tombstone_retention_days"] == str(config.lake.tombstone_retention_days)
        assert args["--datalake-formats"] == "hudi"
        assert args["--enable-glue-datacatalog"] == "true"
        assert args["--enable-metrics"] == "true"
        assert args["--job-bookmark-option"] == "job-bookmark-disable"
        assert args["--extra-py-files"].endswith(".zip")
        assert args["--extra-jars"].endswith(".jar")
        assert job["Command"]["ScriptLocation"].endswith(".py")


def exported(env: Any, value: dict[str, Any]) -> Any:
    """What an ``Fn::ImportValue`` of the lake stack imports: the database stack's output."""
    outputs = env.template("database")["Outputs"].values()
    (output,) = [o for o in outputs if o.get("Export", {}).get("Name") == value["Fn::ImportValue"]]
    return output["Value"]


def test_lake_merge_job_rebuild_signals_through_the_bootstrap_function(env: Any) -> None:
    database = env.stacks["database"]
    function = database.resolve(
        database.get_logical_id(database.bootstrap.function.node.default_child)
    )
    for job in jobs(env).values():
        assert exported(env, job["DefaultArguments"]["--signal_function"]) == {"Ref": function}
    invokes = [
        s for s in job_role_statements(env) if "lambda:InvokeFunction" in as_list(s["Action"])
    ]
    assert [(s["Sid"], exported(env, s["Resource"])) for s in invokes] == [
        ("SignalRebuildSnapshot", {"Fn::GetAtt": [function, "Arn"]})
    ]


def glue_conf_settings(value: str) -> dict[str, str]:
    """Glue's ``--conf`` value (``k=v --conf k2=v2``) as the settings it passes to Spark."""
    return dict(part.split("=", 1) for part in value.split(" --conf "))


def test_lake_glue_job_spark_conf_is_the_local_sessions(env: Any) -> None:
    from cdclake_merge.session import SPARK_CONF

    for job in jobs(env).values():
        assert glue_conf_settings(job["DefaultArguments"]["--conf"]) == dict(SPARK_CONF)
    assert SPARK_CONF["spark.kryo.registrator"] == "org.apache.spark.HoodieSparkKryoRegistrar"


def test_lake_glue_job_installs_orjson_from_shipped_wheel_never_pypi(env: Any) -> None:
    # The wheel of the version requirements.txt pins, for Glue 5.0 (CPython 3.11, x86_64),
    # copied by the deploy under its own file name (pip refuses a wheel named otherwise), and
    # pip told to look nowhere else.
    requirements = Path(__file__).resolve().parents[2] / "requirements.txt"
    pin = next(
        line for line in requirements.read_text().splitlines() if line.startswith("orjson==")
    )
    wheel = f"glue-wheels/orjson-{pin.removeprefix('orjson==')}-cp311-cp311-manylinux"
    template = env.template("lake")
    (copy,) = props(template, "Custom::CDKBucketDeployment")
    assert copy["DestinationBucketKeyPrefix"] == "glue-wheels/"
    for job in jobs(env).values():
        modules = flat(job["DefaultArguments"]["--additional-python-modules"])
        bucket = flat(copy["DestinationBucketName"])
        assert modules.startswith(f"s3://{bucket}/{wheel}"), modules
        assert modules.endswith("x86_64.whl") and "," not in modules
        assert job["DefaultArguments"]["--python-modules-installer-option"] == "--no-index"


def test_lake_job_module_pin_missing_from_requirements_fails_naming_file(tmp_path: Path) -> None:
    from stacks.components.merge_jobs import pinned

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# pinned\nORJSON==3.11.5  # fast JSON\nboto3>=1\n")
    assert pinned(["orjson"], requirements) == "orjson==3.11.5"
    with pytest.raises(ValueError, match=r"requirements\.txt: no name==version pin for boto3"):
        pinned(["orjson", "boto3"], requirements)


def test_lake_glue_job_no_continuous_log_argument(env: Any) -> None:
    # Glue 5.0 ignores it: real-time logs are always on there.
    for job in jobs(env).values():
        assert "--enable-continuous-cloudwatch-log" not in job["DefaultArguments"]


def test_lake_glue_job_unpartitioned_table_omits_partition_fields(env: Any) -> None:
    # Never an empty job argument: the script defaults a missing one, while an empty value is
    # one Glue may pass on as a bare flag (argparse: "expected one argument").
    assert "--partition_fields" not in jobs(env)["public.order_lines"]["DefaultArguments"]
    assert jobs(env)["public.orders"]["DefaultArguments"]["--partition_fields"] == "order_date"


def test_lake_glue_job_no_empty_argument(env: Any) -> None:
    for job in jobs(env).values():
        assert [k for k, v in job["DefaultArguments"].items() if v == ""] == []


def test_lake_glue_job_capacity_from_config(env: Any) -> None:
    for table in env.config.lake_tables:
        job_config = env.config.lake.glue_job_of(table)
        job = jobs(env)[table.name]
        assert job["GlueVersion"] == "5.0"
        assert job["Command"] == {**job["Command"], "Name": "glueetl", "PythonVersion": "3"}
        assert job["WorkerType"] == job_config.worker_type
        assert job["NumberOfWorkers"] == job_config.number_of_workers
        assert job["ExecutionClass"] == ("FLEX" if job_config.flex else "STANDARD")
        assert job["MaxRetries"] == 0  # a retry re-reads the run and repeats its failure
        assert job.get("JobRunQueuingEnabled", False) is not job_config.flex
        assert job["Timeout"] == job_config.timeout_minutes
        assert job["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
        assert "SecurityConfiguration" in job


def test_lake_glue_security_configuration_encrypts_logs_and_bookmarks(env: Any) -> None:
    config = single(env.template("lake"), "AWS::Glue::SecurityConfiguration")
    encryption = config["EncryptionConfiguration"]
    assert encryption["CloudWatchEncryption"]["CloudWatchEncryptionMode"] == "SSE-KMS"
    assert encryption["JobBookmarksEncryption"]["JobBookmarksEncryptionMode"] == "CSE-KMS"
    assert encryption["S3Encryptions"][0]["S3EncryptionMode"] == "SSE-KMS"


def test_lake_job_library_asset_has_package_at_root(env: Any) -> None:
    job = next(iter(jobs(env).values()))
    zip_key = json.dumps(job["DefaultArguments"]["--extra-py-files"])
    asset_hash = zip_key.split("/")[-1].split(".zip")[0]
    staged = Path(env.outdir) / f"asset.{asset_hash}"
    assert (staged / "cdclake_merge" / "__init__.py").is_file()
    assert not list(staged.rglob("__pycache__"))


def test_lake_job_jar_asset_holds_event_decoder(env: Any) -> None:
    job = next(iter(jobs(env).values()))
    jar_key = json.dumps(job["DefaultArguments"]["--extra-jars"])
    asset_hash = jar_key.split("/")[-1].split(".jar")[0]
    with zipfile.ZipFile(Path(env.outdir) / f"asset.{asset_hash}.jar") as jar:
        names = set(jar.namelist())
    assert {"io/cdclake/merge/EventDecoder.class", "io/cdclake/merge/PayloadParser.class"} <= names


def test_lake_buckets_public_access_blocked(env: Any) -> None:
    buckets = props(env.template("lake"), "AWS::S3::Bucket")
    assert len(buckets) == 5
    assert [b["PublicAccessBlockConfiguration"] for b in buckets] == [
        {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
    ] * 5


def test_lake_buckets_kms_encrypted_and_logged_but_the_access_log_bucket(env: Any) -> None:
    # S3 server access logs cannot be delivered to a bucket encrypted with a KMS key.
    seen = []
    for bucket in props(env.template("lake"), "AWS::S3::Bucket"):
        default = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
            "ServerSideEncryptionByDefault"
        ]
        seen.append(
            (default["SSEAlgorithm"], "KMSMasterKeyID" in default, "LoggingConfiguration" in bucket)
        )
    assert sorted(seen) == [("AES256", False, False)] + [("aws:kms", True, True)] * 4


def test_lake_buckets_retained(env: Any) -> None:
    buckets = of_type(env.template("lake"), "AWS::S3::Bucket")
    assert [b["DeletionPolicy"] for b in buckets] == ["Retain"] * 5


def test_lake_bucket_policies_deny_insecure_transport(env: Any) -> None:
    policies = props(env.template("lake"), "AWS::S3::BucketPolicy")
    assert len(policies) == 5
    for policy in policies:
        denies = [
            s
            for s in policy["PolicyDocument"]["Statement"]
            if s["Effect"] == "Deny"
            and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert denies


def test_lake_change_files_expire_after_configured_days(env: Any) -> None:
    lake = env.stacks["lake"]
    (bucket,) = [
        r
        for k, r in env.template("lake")["Resources"].items()
        if k == logical_id(env, lake.change_bucket)
    ]
    rules = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    # The bucket's own rule; the heartbeat folder's is below.
    expirations = [
        r["ExpirationInDays"] for r in rules if "ExpirationInDays" in r and "Prefix" not in r
    ]
    assert expirations == [env.config.lake.change_file_expiration_days]


def test_lake_heartbeat_change_files_expire_after_a_day(env: Any) -> None:
    # Nothing merges them and the dispatcher lists them all every turn: a day keeps it short.
    from connectors.configs import heartbeat_changes_topic

    lake = env.stacks["lake"]
    bucket = env.template("lake")["Resources"][logical_id(env, lake.change_bucket)]
    rules = bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    (rule,) = [r for r in rules if "Prefix" in r]
    assert rule["Prefix"] == f"topics/{heartbeat_changes_topic(env.config)}/"
    assert rule["ExpirationInDays"] == 1


def _lake_bucket_rules(env: Any) -> list[dict[str, Any]]:
    lake = env.stacks["lake"]
    bucket = env.template("lake")["Resources"][logical_id(env, lake.lake_bucket)]
    return list(bucket["Properties"]["LifecycleConfiguration"]["Rules"])


@pytest.mark.parametrize(("hours", "days"), [(1, 1), (24, 1), (25, 2), (49, 3)])
def test_lake_noncurrent_version_days_whole_days_rounded_up(hours: int, days: int) -> None:
    from environment.retention import noncurrent_version_days

    assert noncurrent_version_days(hours) == days


def test_lake_bucket_noncurrent_versions_expire_after_retain_hours(env: Any) -> None:
    # As far back as Hudi's cleaner keeps file versions (lake.retain_hours), in whole days.
    from environment.retention import noncurrent_version_days

    expirations = [
        r["NoncurrentVersionExpiration"]["NoncurrentDays"]
        for r in _lake_bucket_rules(env)
        if "NoncurrentVersionExpiration" in r
    ]
    assert expirations == [noncurrent_version_days(env.config.lake.retain_hours)]


def test_lake_bucket_expired_delete_markers_removed(env: Any) -> None:
    # A delete marker whose object has no version left is removed, not listed forever.
    assert [r for r in _lake_bucket_rules(env) if r.get("ExpiredObjectDeleteMarker")]


def _erase_request_of(env: Any, table: Any) -> str:
    """Where the job of ``table`` reads an erase request: ``<bucket>/key``."""
    from cdclake_merge.erase_request import request_path

    warehouse = job_paths(env, table)["warehouse"]
    name = f"{env.config.lake.glue_database}.{table.lake_table_name}"
    return request_path(warehouse, name, "0" * 32)


def test_lake_bucket_erase_requests_never_rerun_expire_after_the_request_days(env: Any) -> None:
    # A request holds a key: one whose run failed and was never run again must not stay.
    from environment.retention import ERASE_REQUEST_DAYS

    (rule,) = [r for r in _lake_bucket_rules(env) if "Prefix" in r]
    assert rule["ExpirationInDays"] == ERASE_REQUEST_DAYS
    for table in env.config.lake_tables:
        key = _erase_request_of(env, table).split("/", 1)[1]
        assert key.startswith(rule["Prefix"]), (table.name, key, rule["Prefix"])


def test_lake_job_role_reads_and_removes_its_erase_requests(env: Any) -> None:
    for table in env.config.lake_tables:
        request = _erase_request_of(env, table)
        for action in ("s3:GetObject", "s3:DeleteObject"):
            assert permits(env, action, request), (action, table.name, request)


def test_lake_glue_database_named_from_config(env: Any) -> None:
    database = single(env.template("lake"), "AWS::Glue::Database")
    assert database["DatabaseInput"]["Name"] == env.config.lake.glue_database
    assert env.stacks["lake"].glue_database == env.config.lake.glue_database


def test_lake_athena_workgroup_results_encrypted_and_enforced(env: Any) -> None:
    workgroup = single(env.template("lake"), "AWS::Athena::WorkGroup")
    configuration = workgroup["WorkGroupConfiguration"]
    assert configuration["EnforceWorkGroupConfiguration"] is True
    result = configuration["ResultConfiguration"]
    assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    assert render(env, result["OutputLocation"]) == "s3://<assets_bucket>/athena-results/"
    assert configuration["EngineVersion"]["SelectedEngineVersion"] == "Athena engine version 3"


def test_lake_job_role_least_privilege(env: Any) -> None:
    template = env.template("lake")
    roles = [
        r
        for r in props(template, "AWS::IAM::Role")
        if "glue.amazonaws.com" in json.dumps(r["AssumeRolePolicyDocument"])
    ]
    assert len(roles) == 1
    assert "ManagedPolicyArns" not in roles[0]
    statements = job_role_statements(env)
    actions = [a for s in statements for a in as_list(s["Action"])]
    assert all("*" not in a for a in actions), [a for a in actions if "*" in a]
    for statement in statements:
        if "*" in as_list(statement["Resource"]):
            assert as_list(statement["Action"]) == ["cloudwatch:PutMetricData"]
            assert statement["Condition"] == {
                "StringEquals": {"cloudwatch:namespace": ["Glue", "CdcLake"]}
            }
    glue_resources = [
        render(env, r)
        for s in statements
        if any(a.startswith("glue:") for a in as_list(s["Action"]))
        for r in as_list(s["Resource"])
    ]
    database = env.config.lake.glue_database
    assert sorted(r.split(":")[-1] for r in glue_resources) == sorted(
        [
            "catalog",
            f"database/{database}",
            f"table/{database}/*",
            "catalog",
            "database/default",
            # CatalogSessionLookups: Spark's global_temp check, Hudi's lookup in `default`.
            "catalog",
            "database/global_temp",
            "database/default",
            "table/default/*",
        ]
    )
    writes = {
        render(env, r)
        for s in statements
        if "s3:PutObject" in as_list(s["Action"])
        for r in as_list(s["Resource"])
    }
    quarantine = {
        f"<quarantine_bucket>/{t.lake_table_name}{suffix}"
        for t in env.config.lake_tables
        for suffix in ("", "/*")
    }
    assert writes == {
        "<lake_bucket>/warehouse/*",
        "<assets_bucket>/tmp/*",
        "<assets_bucket>/spark-logs/*",
        # RewriteChangeFiles: an erase run writes a change file again without the key's lines.
        f"<change_bucket>/topics/{env.config.prefix}.*",
        *quarantine,
    }


def test_lake_job_role_default_database_get_and_create_allowed(env: Any) -> None:
    # The Glue Data Catalog client checks (and creates) `default` when the job starts.
    for action in ("glue:GetDatabase", "glue:CreateDatabase"):
        names = {r.split(":")[-1] for r in allowed(env, action)}
        assert {"catalog", "database/default"} <= names, (action, names)


def test_lake_job_role_quarantine_prefix_list_get_put_delete_allowed(env: Any) -> None:
    # Spark's JSON writer probes, lists, renames (copy + delete) under its output folder.
    assert "<quarantine_bucket>" in allowed(env, "s3:ListBucket")
    for table in env.config.lake_tables:
        folder = f"<quarantine_bucket>/{table.lake_table_name}"
        for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
            assert {folder, f"{folder}/*"} <= allowed(env, action), (action, table.name)


def test_lake_job_role_quarantine_objects_limited_to_table_folders(env: Any) -> None:
    folders = {t.lake_table_name for t in env.config.lake_tables}
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        quarantine = {r for r in allowed(env, action) if r.startswith("<quarantine_bucket>/")}
        assert quarantine
        assert {r.split("/")[1] for r in quarantine} == folders, action


def permits(env: Any, action: str, path: str) -> bool:
    """Whether an Allow statement of the lake stack grants ``action`` on ``path``
    (``<bucket>/key``, buckets named as :func:`render` names them)."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in allowed(env, action))


def job_paths(env: Any, table: Any) -> dict[str, str]:
    """The job's S3 folders of ``table`` as ``<bucket>/folder/`` (its rendered arguments)."""
    args = jobs(env)[table.name]["DefaultArguments"]
    return {
        name: render(env, args[f"--{name}_path"]).removeprefix("s3://")
        for name in ("changes", "warehouse", "quarantine")
    }


OBJECT_WRITES = ("s3:PutObject", "s3:DeleteObject")


def test_lake_job_role_hudi_reads_writes_deletes_and_lists_its_table(env: Any) -> None:
    # Hudi lists the table folder, reads and rewrites base files, writes and deletes its
    # timeline and markers under .hoodie/; the sink keeps its sidecar in the warehouse too.
    for table in env.config.lake_tables:
        warehouse = job_paths(env, table)["warehouse"]
        assert warehouse.split("/")[0] in allowed(env, "s3:ListBucket")
        folder = f"{warehouse}{env.config.lake.glue_database}.db/{table.lake_table_name}"
        for key in ("p/f1_0-1-0_20240101.parquet", ".hoodie/20240101.commit", ".hoodie/.temp/m"):
            for action in ("s3:GetObject", *OBJECT_WRITES):
                assert permits(env, action, f"{folder}/{key}"), (action, table.name, key)


def test_lake_job_role_reads_and_rewrites_change_files_never_deletes_them(env: Any) -> None:
    for table in env.config.lake_tables:
        changes = job_paths(env, table)["changes"]
        assert changes.split("/")[0] in allowed(env, "s3:ListBucket")
        change_file = f"{changes}partition=0/topic+0+0000000000.json"
        granted = {a for a in ("s3:GetObject", *OBJECT_WRITES) if permits(env, a, change_file)}
        assert granted == {"s3:GetObject", "s3:PutObject"}, table.name


def test_lake_job_role_writes_quarantine_of_its_tables(env: Any) -> None:
    for table in env.config.lake_tables:
        quarantine = job_paths(env, table)["quarantine"]
        assert quarantine.split("/")[0] in allowed(env, "s3:ListBucket")
        for action in ("s3:GetObject", *OBJECT_WRITES):
            assert permits(env, action, f"{quarantine}v00000001/part-0.json"), action


def test_lake_glue_job_table_workers_override_the_lakes(synth) -> None:  # type: ignore[no-untyped-def]
    prod = synth("prod")
    table = prod.config.table("public.order_lines")
    assert table.glue_job.number_of_workers is not None, "prod sizes order_lines on its own"
    job = jobs(prod)[table.name]
    assert job["NumberOfWorkers"] == table.glue_job.number_of_workers
    assert job["NumberOfWorkers"] != prod.config.lake.glue_job.number_of_workers


def test_lake_glue_job_auto_scaling_on(env: Any) -> None:
    for job in jobs(env).values():
        assert job["DefaultArguments"]["--enable-auto-scaling"] == "true"


def test_lake_glue_job_run_caps_and_dispatch_bounds_follow_the_tables_workers(env: Any) -> None:
    for table in env.config.lake_tables:
        job_config = env.config.lake.glue_job_of(table)
        args = jobs(env)[table.name]["DefaultArguments"]
        assert args["--max_bytes_per_run"] == str(job_config.bytes_per_run())
        assert args["--max_files_per_run"] == str(job_config.files_per_run())
        sizing = env.config.lake.dispatch_of(table)
        assert args["--dispatch_min_workers"] == str(sizing["dispatch_min_workers"])
        assert args["--dispatch_bytes_per_executor"] == str(sizing["dispatch_bytes_per_executor"])
        assert args.get("--dispatch_compaction_bytes_per_executor") == (
            str(sizing["dispatch_compaction_bytes_per_executor"])
            if table.hudi_table_type == "MERGE_ON_READ"
            else None
        )


def test_lake_glue_job_merge_on_read_compaction_budget_follows_the_tables_workers(
    env: Any,
) -> None:
    budgets = {
        table.name: jobs(env)[table.name]["DefaultArguments"].get("--compaction_io_mb")
        for table in env.config.lake_tables
    }
    assert budgets == {
        table.name: (
            str(env.config.lake.glue_job_of(table).compaction_io_mb())
            if table.hudi_table_type == "MERGE_ON_READ"
            else None
        )
        for table in env.config.lake_tables
    }


def test_lake_merge_job_log_groups_keep_logs_as_configured() -> None:
    template = synth_config_variant("dev", "lake", job_log_retention="THREE_MONTHS")["lake"]
    kept = {
        group["LogGroupName"]: group["RetentionInDays"]
        for group in props(template, "AWS::Logs::LogGroup")
        if str(group.get("LogGroupName", "")).startswith("/aws-glue/jobs/")
    }
    assert kept == {
        "/aws-glue/jobs/cdclake-dev-merge/error": 90,
        "/aws-glue/jobs/cdclake-dev-merge/output": 90,
    }


def test_lake_glue_wheel_not_downloaded_fails_naming_make_setup(tmp_path: Path) -> None:
    from environment.artifacts import glue_wheel
    from environment.config import ConfigError

    # Another version, or another platform's build, is not the wheel Glue 5.0 installs.
    (tmp_path / "orjson-3.11.4-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"")
    (tmp_path / "orjson-3.11.5-cp311-cp311-macosx_15_0_arm64.whl").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"orjson==3\.11\.5 .*run `make setup`"):
        glue_wheel("orjson==3.11.5", tmp_path)
