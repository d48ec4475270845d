"""Failed merge runs: a rule on Glue's job state changes that notifies the alarm topic at once.

A merge run that ends FAILED or TIMEOUT (or ERROR) otherwise shows only when the table's lag
alarm trips, up to its freshness objective later. Glue sends a ``Glue Job State Change`` event
to the default bus when a run ends (``detail``: ``jobName``, ``jobRunId``, ``state``,
``severity``, ``message``); the rule matches this environment's merge jobs by name and sends
one readable line per failed run to the topic. A page EventBridge cannot deliver (after its
retries) lands in a dead-letter queue whose alarm notifies the same topic and shows on the
dashboard: a lost page is not silent.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.components.dead_letters import dead_letter_queue

#: Run states that need someone: Glue's abnormal terminations. STOPPED (a run stopped by hand)
#: and SUCCEEDED are left out. Glue documents these events for SUCCEEDED, FAILED, TIMEOUT and
#: STOPPED; ERROR (a trigger started a deleted job) is a run state it may never send: matched
#: all the same, it costs nothing.
FAILED_STATES = ("FAILED", "TIMEOUT", "ERROR")
RUNBOOK = "docs/operations.md#metrics-alarms-and-the-dashboard"


def failed_runs(job_names: Sequence[str]) -> events.EventPattern:
    """Glue's state change events of ``job_names`` ending in one of the failed states."""
    return events.EventPattern(
        source=["aws.glue"],
        detail_type=["Glue Job State Change"],
        detail={"jobName": sorted(job_names), "state": list(FAILED_STATES)},
    )


def failure_message(environment: str) -> events.RuleTargetInput:
    """One line: the job, how its run ended, the run id, Glue's message, what to do."""
    field = events.EventField.from_path
    return events.RuleTargetInput.from_text(
        f"[{environment}] Glue merge job {field('$.detail.jobName')} ended "
        f"{field('$.detail.state')} (run {field('$.detail.jobRunId')}): "
        f"{field('$.detail.message')} | Read the run's error (Glue console or cdclake status "
        f"--env {environment}), fix the cause, rerun the job (a rerun is safe). {RUNBOOK}"
    )


class MergeJobFailures(Construct):
    """``rule``: failed runs of ``job_names`` (default bus) -> one line each to ``topic``;
    what cannot be delivered -> ``dead_letters`` (kept with the stack when ``retain``).

    ``topic`` must let ``events.amazonaws.com`` publish and, when encrypted, use its key: the
    SNS target grants that on a topic of this stack only (the composing stack passes the alarm
    topic imported, whose owner grants it).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_names: Sequence[str],
        environment: str,
        topic: sns.ITopic,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        if not job_names:
            raise ValueError("MergeJobFailures needs at least one merge job name")
        self.dead_letters = dead_letter_queue(
            self,
            "DeadLetters",
            retain=retain,
            what="failed merge runs that were not paged",
            alarm_topic=topic,
        )
        self.rule = events.Rule(
            self,
            "Rule",
            description=f"Failed Glue merge runs of {environment} to the alarm topic",
            event_pattern=failed_runs(job_names),
            targets=[
                targets.SnsTopic(
                    topic,
                    message=failure_message(environment),
                    dead_letter_queue=self.dead_letters.queue,
                )
            ],
        )
