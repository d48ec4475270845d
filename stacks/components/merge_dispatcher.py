"""The environment's merge dispatcher: one schedule starts a Lambda (lambdas/dispatcher) that
starts a lake table's Glue job only when its waiting changes are due, a turn and an expected
run before they would miss the table's freshness objective (docs/cost.md, docs/operations.md).
The Lambda learns the turn's length (``TURN_SECONDS``) and a transient failure's first wait
(``BACKOFF_UNIT_SECONDS``) from the schedule's config; each table's objective is in its own
job's default arguments.

The merge jobs themselves have no schedule: a bare schedule starts every table's job every
cycle, changes or not, and a start during a table's own long run fails. The Lambda finds the
jobs by their tag (``cdclake_merge.dispatch.MERGE_JOB_TAG`` = ``job_prefix``; their default
arguments say the rest), so the number of tables has no limit here: a schedule's input, which
EventBridge caps at 8,192 characters, could name only a few hundred. The Lambda needs no VPC:
it only calls S3, Glue and CloudWatch, where it publishes each table's ``LagSeconds`` every turn
(``environment`` names their ``Environment`` dimension, as the merge jobs' ``--environment``
does) and the age of the capture's newest heartbeat change file under ``heartbeats``
(``cdclake_merge.heartbeat``). A turn the schedule could not start (the function gone, its
permission lost, Lambda refusing the invoke) lands in a dead-letter queue whose alarm pages:
the lag alarms would otherwise be the first to notice, a freshness objective later.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from environment.lake import DispatchConfig
from environment.paths import REPO_ROOT
from stacks.components.dead_letters import dead_letter_queue
from stacks.components.log_storage import log_group
from stacks.components.powertools_function import powertools_function

MERGE_LIBRARY = REPO_ROOT / "glue_jobs" / "lib" / "cdclake_merge"
TIMEOUT = cdk.Duration.minutes(5)


class MergeDispatcher(Construct):
    """The dispatcher function and its schedule; the composing stack grants what it reads
    (the lake's change and table folders), the jobs it may start and the metrics it puts."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DispatchConfig,
        job_prefix: str,
        environment: str,
        heartbeats: str,
        alarm_topic: sns.ITopic,
        retain: bool,
    ) -> None:
        """``retain``: keep the dead-letter queue when the stack is deleted."""
        super().__init__(scope, construct_id)
        self.dead_letters = dead_letter_queue(
            self,
            "DeadLetters",
            retain=retain,
            what="dispatcher turns the schedule could not start",
            alarm_topic=alarm_topic,
        )
        self.function = powertools_function(
            self,
            package="dispatcher",
            description="Start the lake tables' merge jobs whose change files wait",
            service="merge-dispatcher",
            timeout=TIMEOUT,
            log_group=log_group(self, "Logs"),
            environment={
                "MERGE_JOB_PREFIX": job_prefix,
                "MAX_CONCURRENT_RUNS": str(config.max_concurrent_runs),
                "RETRY_SHARE": str(config.retry_share),
                "TURN_SECONDS": str(config.turn_seconds()),
                "BACKOFF_UNIT_SECONDS": str(config.backoff_unit_seconds()),
                "METRICS_ENVIRONMENT": environment,
                "HEARTBEAT_CHANGES": heartbeats,
            },
            libraries=[MERGE_LIBRARY],
        )
        # A failed turn is not retried: the next scheduled one decides afresh from S3 and Glue.
        self.function.configure_async_invoke(retry_attempts=0)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Start the merge jobs whose change files wait",
            schedule=events.Schedule.expression(config.schedule),
            targets=[
                targets.LambdaFunction(
                    self.function, retry_attempts=0, dead_letter_queue=self.dead_letters.queue
                )
            ],
        )
