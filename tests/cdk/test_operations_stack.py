"""The operations stack: lake freshness alarms and the dashboard, by what they watch."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cdk.stack_helpers import (
    as_list,
    assert_rule_dead_letters,
    lake_alarms,
    masked,
    resources,
)

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def dev_synth(synth):  # type: ignore[no-untyped-def]
    return synth("dev")


@pytest.fixture(scope="module")
def dev(dev_synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return dict(dev_synth.template("operations"))


def _alarms(template: dict[str, Any], metric: str, kind: str) -> dict[str, dict[str, Any]]:
    """The lake alarms of a kind on a CdcLake metric, by their Table dimension."""
    return {
        table: {**alarm, "dims": {d["Name"]: d["Value"] for d in alarm["Dimensions"]}}
        for table, alarm in lake_alarms(template)[kind].items()
        if (alarm["Namespace"], alarm["MetricName"]) == ("CdcLake", metric)
    }


def _dashboard_body(template: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's JSON body, other stacks' names as <import>, this stack's as <ref>."""
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["DashboardBody"]["Fn::Join"][1]
    body: dict[str, Any] = json.loads(
        "".join(
            p if isinstance(p, str) else ("<import>" if "Fn::ImportValue" in p else "<ref>")
            for p in parts
        )
    )
    return body


def _dashboard_metrics(template: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric, dimensions) of every graph line; other stacks' names as <import>."""
    body = _dashboard_body(template)
    found = []
    for widget in body["widgets"]:
        for line in widget.get("properties", {}).get("metrics", []):
            names = [item for item in line if isinstance(item, str)]
            assert names[0] != ".", line  # CDK writes every line out in full
            namespace, metric, *pairs = names
            found.append((namespace, metric, dict(zip(pairs[::2], pairs[1::2], strict=True))))
    return found


def _annotations(template: dict[str, Any], title: str) -> list[float]:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["DashboardBody"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<token>" for p in parts)
    for widget in json.loads(text)["widgets"]:
        if widget.get("properties", {}).get("title") == title:
            return [a["value"] for a in widget["properties"]["annotations"]["horizontal"]]
    raise AssertionError(f"no widget titled {title!r}")


def test_operations_lag_alarm_per_lake_table_at_its_objective(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    config = dev_synth.config
    alarms = _alarms(dev, "LagSeconds", "Lag")
    assert sorted(alarms) == sorted(t.name for t in config.lake_tables)
    for table in config.lake_tables:
        alarm = alarms[table.name]
        objective = config.lake.freshness_of(table) * 60
        assert alarm["dims"] == {"Environment": "dev", "Table": table.name}
        assert (alarm["Statistic"], alarm["Threshold"], alarm["Period"]) == (
            "Maximum",
            objective,
            objective,
        )
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["EvaluationPeriods"] == 1


def test_operations_lag_alarm_missing_data_breaches(dev) -> None:  # type: ignore[no-untyped-def]
    # A table whose merge job never runs reports no lag at all: that is stale too.
    lag = _alarms(dev, "LagSeconds", "Lag")
    assert {a["TreatMissingData"] for a in lag.values()} == {"breaching"}


def test_operations_change_files_expiring_alarm_per_lake_table_at_half_their_life(  # type: ignore[no-untyped-def]
    dev_synth, dev
) -> None:
    config = dev_synth.config
    alarms = _alarms(dev, "LagSeconds", "ChangeFilesExpiring")
    assert sorted(alarms) == sorted(t.name for t in config.lake_tables)
    half_life = config.lake.change_file_expiration_days * 86400 // 2
    for alarm in alarms.values():
        assert (alarm["Statistic"], alarm["Threshold"], alarm["Period"]) == (
            "Maximum",
            half_life,
            3600,
        )
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        # Missing lag is the freshness alarm's page; this one pages on an old file alone.
        assert alarm["TreatMissingData"] == "notBreaching"


def test_operations_quarantine_alarm_on_any_line(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    alarms = _alarms(dev, "Quarantined", "Quarantined")
    assert sorted(alarms) == sorted(t.name for t in dev_synth.config.lake_tables)
    for alarm in alarms.values():
        assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
            "Sum",
            0,
            "GreaterThanThreshold",
        )
        assert alarm["TreatMissingData"] == "notBreaching"


def test_operations_alarms_notify_the_database_alarm_topic(dev) -> None:  # type: ignore[no-untyped-def]
    alarms = list(resources(dev, "AWS::CloudWatch::Alarm").values())
    assert alarms
    targets = {
        json.dumps(action) for a in alarms for action in a["AlarmActions"] + a.get("OKActions", [])
    }
    (target,) = targets  # one topic for every alarm, imported from the database stack
    assert "Fn::ImportValue" in target and "AlarmsTopic" in target
    assert resources(dev, "AWS::SNS::Topic") == {}  # reused, not a second topic


def test_operations_dispatcher_errors_alarm_pages_within_the_hour(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    lake = dev_synth.stacks["lake"]
    function = str(lake.resolve(lake.get_logical_id(lake.dispatcher.function.node.default_child)))
    alarms = [
        a
        for a in resources(dev, "AWS::CloudWatch::Alarm").values()
        if a.get("Namespace") == "AWS/Lambda" and a["MetricName"] == "Errors"
    ]
    (alarm,) = alarms
    ((dimension),) = alarm["Dimensions"]
    assert dimension["Name"] == "FunctionName"
    assert function in json.dumps(dimension["Value"])  # the dispatcher's name, from the lake
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 3600, 0)
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"  # no turn failed: nothing to page
    assert alarm["AlarmActions"]


def test_operations_heartbeat_alarm_at_the_smallest_objective_pages_on_silence(
    dev_synth: Any, dev: dict[str, Any]
) -> None:
    # A stopped source or sink leaves every lag at 0: the capture's heartbeat age pages within
    # the strictest objective of the tables it carries, and so does no age at all.
    config = dev_synth.config
    smallest = min(config.lake.freshness_of(t) for t in config.lake_tables) * 60
    (alarm,) = [
        a
        for a in resources(dev, "AWS::CloudWatch::Alarm").values()
        if (a.get("Namespace"), a["MetricName"]) == ("CdcLake", "HeartbeatAgeSeconds")
    ]
    assert alarm["Dimensions"] == [{"Name": "Environment", "Value": "dev"}]
    assert (alarm["Statistic"], alarm["Threshold"], alarm["Period"]) == (
        "Maximum",
        smallest,
        smallest,
    )
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "breaching"
    assert alarm["AlarmActions"]


def test_operations_dashboard_capture_heartbeat_age_at_its_alarm(dev: dict[str, Any]) -> None:
    lines = _dashboard_metrics(dev)
    assert ("CdcLake", "HeartbeatAgeSeconds", {"Environment": "dev"}) in lines
    (threshold,) = [
        a["Threshold"]
        for a in resources(dev, "AWS::CloudWatch::Alarm").values()
        if a["MetricName"] == "HeartbeatAgeSeconds"
    ]
    assert _annotations(dev, "Capture heartbeat age (seconds)") == [threshold]


def test_operations_table_freshness_overrides_lake_default() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_sns as sns
    from aws_cdk.assertions import Template

    from environment.config import load_config
    from stacks.components.lake_alarms import LakeAlarms

    config = load_config("dev")
    orders = config.table("public.orders").model_copy(update={"freshness_minutes": 15})
    stack = cdk.Stack(cdk.App())
    LakeAlarms(
        stack,
        "Alarms",
        config=config.lake.model_copy(update={"freshness_minutes": 120}),
        tables=[config.table("public.customers"), orders],
        environment="dev",
        dispatcher=lambda_.Function.from_function_name(stack, "Dispatcher", "dispatcher"),
        topic=sns.Topic(stack, "Topic"),
    )
    lag = _alarms(dict(Template.from_stack(stack).to_json()), "LagSeconds", "Lag")
    assert lag["public.orders"]["Threshold"] == 15 * 60
    assert lag["public.customers"]["Threshold"] == 120 * 60


def test_operations_dashboard_lake_lines_per_table(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    for table in dev_synth.config.lake_tables:
        dims = {"Environment": "dev", "Table": table.name}
        for metric in ("LagSeconds", "EventsApplied", "Upserts", "Deletes", "Quarantined"):
            assert ("CdcLake", metric, dims) in lines, (metric, table.name)
        assert ("CdcLake", "RunDurationSeconds", dims) in lines


def test_operations_dashboard_database_writer_metrics_and_thresholds(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    writer = {"DBClusterIdentifier": "cdclake-dev-aurora", "Role": "WRITER"}
    lines = _dashboard_metrics(dev)
    for metric in ("OldestReplicationSlotLag", "TransactionLogsDiskUsage", "CPUUtilization"):
        assert ("AWS/RDS", metric, writer) in lines
    alarms = dev_synth.config.database.alarms
    assert _annotations(dev, "Oldest replication slot lag (bytes)") == [
        alarms.replication_slot_lag_bytes
    ]
    assert _annotations(dev, "Transaction logs disk usage (bytes)") == [
        alarms.transaction_logs_disk_usage_bytes
    ]


def test_operations_dashboard_s3_sink_consumer_lag_per_lake_topic(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    for table in dev_synth.config.lake_tables:
        dims = {
            "Cluster Name": "cdclake-dev-msk",
            "Consumer Group": "connect-cdclake-dev-s3-sink",
            "Topic": f"cdclake-dev.{table.name}",
        }
        assert ("AWS/Kafka", "MaxOffsetLag", dims) in lines
        assert ("AWS/Kafka", "EstimatedMaxTimeLag", dims) in lines


def test_operations_dashboard_connector_tasks(dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    for connector in ("cdclake-dev-debezium-source", "cdclake-dev-s3-sink"):
        for metric in ("RunningTaskCount", "ErroredTaskCount"):
            assert ("AWS/KafkaConnect", metric, {"ConnectorName": connector}) in lines


def test_operations_dashboard_fanout_path(dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    # Streams, function, rules and alarms by their names from config, none imported: a fan-out
    # table or consumer removed, or the fan-out turned off, takes no export this stack uses.
    assert (
        "AWS/Kinesis",
        "GetRecords.IteratorAgeMilliseconds",
        {"StreamName": "cdclake-dev-public.orders"},
    ) in lines
    for metric in ("Errors", "Throttles", "DestinationDeliveryFailures", "IteratorAge"):
        assert ("AWS/Lambda", metric, {"FunctionName": "cdclake-dev-fanout"}) in lines
    rule = {"EventBusName": "cdclake-dev-changes", "RuleName": "cdclake-dev-order_notifications"}
    assert ("AWS/Events", "FailedInvocations", rule) in lines
    assert ("AWS/Events", "InvocationsSentToDlq", rule) in lines
    alarm = "arn:<ref>:cloudwatch:eu-west-1:111111111111:alarm:"
    assert _alarm_widgets(dev) == {
        "fanout failed records (messages)": f"{alarm}cdclake-dev-fanout-failed-records",
        "order_notifications dead letters (messages)": (
            f"{alarm}cdclake-dev-order_notifications-dlq"
        ),
        "order_notifications undelivered (messages)": (
            f"{alarm}cdclake-dev-order_notifications-delivery-dlq"
        ),
    }


def _alarm_widgets(template: dict[str, Any]) -> dict[str, str]:
    """Title -> alarm ARN of each alarm graph (tokens as <ref>/<import>)."""
    body = _dashboard_body(template)
    return {
        w["properties"]["title"]: arn
        for w in body["widgets"]
        for arn in w.get("properties", {}).get("annotations", {}).get("alarms", [])
        if w["type"] == "metric"
    }


def test_operations_dashboard_names_the_fanout_alarms_and_rules_it_watches(synth) -> None:  # type: ignore[no-untyped-def]
    # The names the dashboard draws are the ones the fan-out stack gives its resources.
    fanout = synth("prod").template("fanout")
    alarm_names = {a.get("AlarmName") for a in resources(fanout, "AWS::CloudWatch::Alarm").values()}
    rule_names = {r.get("Name") for r in resources(fanout, "AWS::Events::Rule").values()}
    stream_names = {s.get("Name") for s in resources(fanout, "AWS::Kinesis::Stream").values()}
    functions = resources(fanout, "AWS::Lambda::Function").values()
    function_names = {f.get("FunctionName") for f in functions}
    operations = synth("prod").template("operations")
    drawn_alarms = {arn.rsplit(":", 1)[1] for arn in _alarm_widgets(operations).values()}
    drawn = _dashboard_metrics(operations)
    drawn_rules = {d["RuleName"] for n, _, d in drawn if n == "AWS/Events" and "EventBusName" in d}
    drawn_streams = {d["StreamName"] for n, _, d in drawn if n == "AWS/Kinesis"}
    drawn_functions = {d["FunctionName"] for n, _, d in drawn if n == "AWS/Lambda"}
    assert len(drawn_alarms) == 1 + 2 * len(synth("prod").config.fanout.consumers)
    assert drawn_alarms <= alarm_names
    assert drawn_rules and drawn_rules <= rule_names
    assert drawn_streams and drawn_streams == stream_names
    assert drawn_functions & function_names == {"cdclake-prod-fanout"}


def test_operations_dashboard_glue_job_metrics(dev_synth, dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    for job in dev_synth.stacks["lake"].merge_jobs.jobs.values():
        dims = {"JobName": job.name, "JobRunId": "ALL", "Type": "count"}
        assert ("Glue", "glue.driver.aggregate.elapsedTime", dims) in lines
        assert ("Glue", "glue.driver.aggregate.numFailedTasks", dims) in lines


def _failure_rule(template: dict[str, Any]) -> dict[str, Any]:
    """The rule on Glue's job state changes (the only one with source aws.glue)."""
    (rule,) = [
        r
        for r in resources(template, "AWS::Events::Rule").values()
        if r.get("EventPattern", {}).get("source") == ["aws.glue"]
    ]
    return rule


def _render(transformer: dict[str, Any], event: dict[str, Any]) -> Any:
    """What EventBridge delivers for ``event``: each <name> of the template replaced by the value
    at its path (escaped inside the template's JSON string), then the JSON decoded."""
    text = transformer["InputTemplate"]
    for name, path in transformer["InputPathsMap"].items():
        value: Any = event
        for part in path.removeprefix("$.").split("."):
            value = value[part]
        text = text.replace(f"<{name}>", json.dumps(value)[1:-1])
    return json.loads(text)


# A Glue "Glue Job State Change" event as Glue sends it when a run fails.
GLUE_FAILED_RUN = {
    "version": "0",
    "id": "ad3c3da1-148c-d5da-9a6a-79f1bc9a8a2e",
    "detail-type": "Glue Job State Change",
    "source": "aws.glue",
    "account": "111111111111",
    "time": "2026-06-18T12:34:06Z",
    "region": "eu-west-1",
    "resources": [],
    "detail": {
        "jobName": "cdclake-dev-merge-public-orders",
        "severity": "ERROR",
        "state": "FAILED",
        "jobRunId": "jr_ca2144d747b45ad412d3c66a1b6934b6",
        "message": 'ValueError: column "balance" changed type',
    },
}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_operations_failed_runs_rule_matches_env_merge_jobs_failed_states(synth, env: str) -> None:  # type: ignore[no-untyped-def]
    built = synth(env)
    rule = _failure_rule(dict(built.template("operations")))
    job_names = sorted(t.merge_job_name(built.config.prefix) for t in built.config.lake_tables)
    # The lake stack's own jobs, exactly: no other environment's, none missing.
    assert job_names == sorted(str(j.name) for j in built.stacks["lake"].merge_jobs.jobs.values())
    assert rule["EventPattern"] == {
        "source": ["aws.glue"],
        "detail-type": ["Glue Job State Change"],
        "detail": {"jobName": job_names, "state": ["FAILED", "TIMEOUT", "ERROR"]},
    }
    assert "EventBusName" not in rule  # the default bus, where Glue sends its events
    assert rule["State"] == "ENABLED"


def test_operations_failed_runs_rule_notifies_the_database_alarm_topic(dev) -> None:  # type: ignore[no-untyped-def]
    (target,) = _failure_rule(dev)["Targets"]
    alarm_actions = {
        json.dumps(action)
        for alarm in resources(dev, "AWS::CloudWatch::Alarm").values()
        for action in alarm["AlarmActions"]
    }
    assert {json.dumps(target["Arn"])} == alarm_actions  # the one topic every alarm notifies
    assert "RoleArn" not in target  # SNS authorizes EventBridge by the topic's policy
    # Imported: the rule's target adds no topic policy or key grant here.
    assert resources(dev, "AWS::SNS::TopicPolicy") == {}
    assert resources(dev, "AWS::KMS::Key") == {}


def test_operations_failed_runs_message_one_readable_line(dev) -> None:  # type: ignore[no-untyped-def]
    transformer = _failure_rule(dev)["Targets"][0]["InputTransformer"]
    assert set(transformer["InputPathsMap"].values()) == {
        "$.detail.jobName",
        "$.detail.state",
        "$.detail.jobRunId",
        "$.detail.message",
    }
    assert _render(transformer, GLUE_FAILED_RUN) == (
        "[dev] Glue merge job cdclake-dev-merge-public-orders ended FAILED "
        '(run jr_ca2144d747b45ad412d3c66a1b6934b6): ValueError: column "balance" changed type'
        " | Read the run's error (Glue console or cdclake status --env dev), fix the cause, "
        "rerun the job (a rerun is safe). docs/operations.md#metrics-alarms-and-the-dashboard"
    )


def test_operations_failed_runs_alarm_topic_lets_eventbridge_publish(dev_synth) -> None:  # type: ignore[no-untyped-def]
    # The topic is encrypted with its own key: EventBridge needs the topic's policy and the key.
    database = dict(dev_synth.template("database"))
    topics = resources(database, "AWS::SNS::Topic")
    ((topic_id, topic),) = topics.items()
    key_id = topic["KmsMasterKeyId"]["Fn::GetAtt"][0]
    events_principal = {"Service": "events.amazonaws.com"}

    (policy,) = resources(database, "AWS::SNS::TopicPolicy").values()
    assert policy["Topics"] == [{"Ref": topic_id}]
    # Granted once, by the database stack: the operations stack's rule adds nothing there.
    assert [s for s in policy["PolicyDocument"]["Statement"] if s["Principal"] != "*"] == [
        {
            "Action": "sns:Publish",
            "Condition": {"StringEquals": {"aws:SourceAccount": dev_synth.config.account}},
            "Effect": "Allow",
            "Principal": events_principal,
            "Resource": {"Ref": topic_id},
            "Sid": "EventBridgeRulesPublish",
        }
    ]

    key_policy = resources(database, "AWS::KMS::Key")[key_id]["KeyPolicy"]
    granted = [
        s
        for s in key_policy["Statement"]
        if "events.amazonaws.com" in as_list(s.get("Principal", {}).get("Service", []))
    ]
    assert [(s["Effect"], sorted(as_list(s["Action"]))) for s in granted] == [
        ("Allow", ["kms:Decrypt", "kms:GenerateDataKey*"])
    ]


def test_operations_failed_runs_without_merge_jobs_refused() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_sns as sns

    from stacks.components.merge_job_failures import MergeJobFailures

    stack = cdk.Stack(cdk.App())
    with pytest.raises(ValueError, match="at least one merge job"):
        MergeJobFailures(
            stack,
            "Failures",
            job_names=[],
            environment="dev",
            topic=sns.Topic(stack, "Topic"),
            retain=False,
        )


def test_operations_dashboard_failed_merge_runs(dev) -> None:  # type: ignore[no-untyped-def]
    lines = _dashboard_metrics(dev)
    rule = {"RuleName": "<ref>"}  # the failure rule of this stack, on the default bus
    assert ("AWS/Events", "TriggeredRules", rule) in lines
    assert ("AWS/Events", "FailedInvocations", rule) in lines


def _failure_dead_letters(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (target,) = _failure_rule(template)["Targets"]
    queue_id = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    return queue_id, template["Resources"][queue_id]


def test_operations_failed_runs_undelivered_page_kept_in_encrypted_queue(dev) -> None:  # type: ignore[no-untyped-def]
    queue_id, _ = _failure_dead_letters(dev)
    assert_rule_dead_letters(dev, queue_id)  # this rule only


def test_operations_failed_runs_dead_letters_page_the_alarm_topic(dev) -> None:  # type: ignore[no-untyped-def]
    queue_id, _ = _failure_dead_letters(dev)
    (alarm,) = [
        a
        for a in resources(dev, "AWS::CloudWatch::Alarm").values()
        if a.get("Dimensions")
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    ]
    assert (alarm["MetricName"], alarm["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 1)
    (action,) = alarm["AlarmActions"]
    assert "AlarmsTopic" in json.dumps(action)


@pytest.mark.parametrize(("env", "policy"), [("dev", "Delete"), ("prod", "Retain")])
def test_operations_failed_runs_dead_letters_retained_in_prod(synth, env: str, policy: str) -> None:  # type: ignore[no-untyped-def]
    _, queue = _failure_dead_letters(dict(synth(env).template("operations")))
    assert (queue["DeletionPolicy"], queue["UpdateReplacePolicy"]) == (policy, policy)


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_operations_template_matches_snapshot(synth, snapshot, env: str) -> None:  # type: ignore[no-untyped-def]
    assert masked(synth(env).template("operations"))["Resources"] == snapshot
