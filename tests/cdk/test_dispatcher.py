"""The merge dispatcher in the template: no schedule starts a merge job; one schedule starts
the dispatcher, which may read the lake, start the merge jobs and publish the lake's lag, and
nothing else."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest

from tests.cdk.stack_helpers import as_list, flat, of_type, props, resources

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module", params=["dev", "prod"])
def env(request: pytest.FixtureRequest, synth) -> Any:  # type: ignore[no-untyped-def]
    return synth(request.param)


def _id(env: Any, construct: Any) -> str:
    stack = env.stacks["lake"]
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))


def _templates(env: Any) -> list[dict[str, Any]]:
    return [env.template(role) for role in env.stacks]


def _dispatcher_statements(env: Any) -> list[dict[str, Any]]:
    role = _id(env, env.stacks["lake"].dispatcher.function.role)
    statements: list[dict[str, Any]] = []
    for policy in props(env.template("lake"), "AWS::IAM::Policy"):
        if {"Ref": role} in policy["Roles"]:
            statements += policy["PolicyDocument"]["Statement"]
    return statements


def test_dispatcher_no_glue_trigger_starts_a_merge_job(env: Any) -> None:
    for template in _templates(env):
        assert of_type(template, "AWS::Glue::Trigger") == []


def test_dispatcher_no_schedule_targets_glue(env: Any) -> None:
    for template in _templates(env):
        for rule in props(template, "AWS::Events::Rule"):
            for target in rule.get("Targets", []):
                assert "glue" not in flat(target["Arn"]).lower(), rule
        for schedule in props(template, "AWS::Scheduler::Schedule"):
            assert "glue" not in flat(schedule["Target"]["Arn"]).lower(), schedule


def test_dispatcher_schedule_from_config_invokes_the_function(env: Any) -> None:
    function = _id(env, env.stacks["lake"].dispatcher.function)
    scheduled = [
        rule
        for rule in props(env.template("lake"), "AWS::Events::Rule")
        if rule.get("ScheduleExpression") == env.config.lake.dispatch.schedule
    ]
    assert len(scheduled) == 1
    (target,) = scheduled[0]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [function, "Arn"]}
    assert "Input" not in target  # the jobs are found by their tag, not named here


def test_dispatcher_finds_every_merge_job_by_its_tag(env: Any) -> None:
    from cdclake_merge.dispatch import MERGE_JOB_TAG

    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    value = function["Environment"]["Variables"]["MERGE_JOB_PREFIX"]
    tagged = {
        job["Name"]
        for job in props(env.template("lake"), "AWS::Glue::Job")
        if job.get("Tags", {}).get(MERGE_JOB_TAG) == value
    }
    assert tagged == {t.merge_job_name(env.config.prefix) for t in env.config.lake_tables}


def test_dispatcher_role_lists_job_names_only(env: Any) -> None:
    listing = [s for s in _dispatcher_statements(env) if "glue:ListJobs" in as_list(s["Action"])]
    assert [(as_list(s["Action"]), s["Resource"]) for s in listing] == [(["glue:ListJobs"], "*")]


def test_dispatcher_function_budget_from_config_outside_vpc(env: Any) -> None:
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    budget = env.config.lake.dispatch.max_concurrent_runs
    assert function["Environment"]["Variables"]["MAX_CONCURRENT_RUNS"] == str(budget)
    assert "VpcConfig" not in function


def test_dispatcher_function_retry_share_and_backoff_unit_from_config(env: Any) -> None:
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    dispatch = env.config.lake.dispatch
    variables = function["Environment"]["Variables"]
    assert (variables["RETRY_SHARE"], variables["BACKOFF_UNIT_SECONDS"]) == (
        str(dispatch.retry_share),
        str(dispatch.backoff_unit_seconds()),
    )


def test_dispatcher_role_starts_only_merge_jobs(env: Any) -> None:
    glue = [
        s
        for s in _dispatcher_statements(env)
        if any(a.startswith("glue:") for a in as_list(s["Action"]))
        and "glue:ListJobs" not in as_list(s["Action"])
    ]
    assert len(glue) == 1
    assert sorted(as_list(glue[0]["Action"])) == [
        "glue:GetJob",
        "glue:GetJobRuns",
        "glue:StartJobRun",
    ]
    [arn] = [flat(r) for r in as_list(glue[0]["Resource"])]
    pattern = arn.rsplit("job/", 1)[1]
    assert pattern == f"{env.config.prefix}-merge-*"
    for table in env.config.lake_tables:  # every merge job, by name
        assert fnmatch.fnmatchcase(table.merge_job_name(env.config.prefix), pattern)
    assert not fnmatch.fnmatchcase(f"{env.config.prefix}-other-job", pattern)


def test_dispatcher_role_writes_nothing(env: Any) -> None:
    actions = {a for s in _dispatcher_statements(env) for a in as_list(s["Action"])}
    s3 = {a for a in actions if a.startswith("s3:")}
    assert s3 == {"s3:ListBucket", "s3:GetObject"}
    reads = [s for s in _dispatcher_statements(env) if "s3:GetObject" in as_list(s["Action"])]
    objects = sorted(flat(r).split("/", 1)[1] for s in reads for r in as_list(s["Resource"]))
    database = env.config.lake.glue_database
    assert objects == [
        f"warehouse/{database}.db/*/.hoodie/*",
        f"warehouse/{database}.db/_cdclake/*",
    ]


def test_dispatcher_role_reads_no_erase_request(env: Any) -> None:
    # A request holds the key an erase is to remove; the dispatcher has no use for one.
    from cdclake_merge.erase_request import request_path

    reads = [s for s in _dispatcher_statements(env) if "s3:GetObject" in as_list(s["Action"])]
    objects = [flat(r).split("/", 1)[1] for s in reads for r in as_list(s["Resource"])]
    for table in env.config.lake_tables:
        name = f"{env.config.lake.glue_database}.{table.lake_table_name}"
        request = request_path("warehouse", name, "0" * 32)
        assert not [o for o in objects if fnmatch.fnmatchcase(request, o)], (request, objects)


def test_dispatcher_role_puts_metrics_only_in_the_lake_namespace(env: Any) -> None:
    statements = [
        s
        for s in _dispatcher_statements(env)
        if any(a.startswith("cloudwatch:") for a in as_list(s["Action"]))
    ]
    assert [as_list(s["Action"]) for s in statements] == [["cloudwatch:PutMetricData"]]
    # Written out: the alarms and the dashboard read this namespace.
    assert statements[0]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "CdcLake"}}


def test_dispatcher_function_publishes_under_its_environment(env: Any) -> None:
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    assert function["Environment"]["Variables"]["METRICS_ENVIRONMENT"] == env.config.env


def test_dispatcher_function_lists_the_capture_heartbeats_in_the_change_bucket(
    env: Any,
) -> None:
    import json

    from connectors.configs import heartbeat_changes_topic

    lake = env.stacks["lake"]
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, lake.dispatcher.function)
    ]
    value = json.dumps(function["Environment"]["Variables"]["HEARTBEAT_CHANGES"])
    assert _id(env, lake.change_bucket) in value
    assert value.endswith(f'"/topics/{heartbeat_changes_topic(env.config)}/"]]}}')


def test_dispatcher_asset_ships_handler_beside_merge_library(env: Any) -> None:
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    asset_hash = flat(function["Code"]["S3Key"]).split(".zip")[0]
    staged = Path(env.outdir) / f"asset.{asset_hash}"
    assert (staged / "handler.py").is_file()
    assert (staged / "cdclake_merge" / "dispatch.py").is_file()
    assert not list(staged.rglob("__pycache__"))


def test_dispatcher_failed_turn_not_retried(env: Any) -> None:
    # A retried turn would decide on what the next scheduled turn decides afresh anyway.
    function = _id(env, env.stacks["lake"].dispatcher.function)
    configs = [
        config
        for config in props(env.template("lake"), "AWS::Lambda::EventInvokeConfig")
        if config["FunctionName"] == {"Ref": function}
    ]
    assert [config["MaximumRetryAttempts"] for config in configs] == [0]


def test_dispatcher_function_turn_seconds_from_the_schedule(env: Any) -> None:
    function = resources(env.template("lake"), "AWS::Lambda::Function")[
        _id(env, env.stacks["lake"].dispatcher.function)
    ]
    # dev turns every 30 minutes, prod every 15 (config/): a table is due a turn before its
    # objective would be missed.
    expected = {"dev": "1800", "prod": "900"}[env.config.env]
    assert function["Environment"]["Variables"]["TURN_SECONDS"] == expected
