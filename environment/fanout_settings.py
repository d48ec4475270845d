"""The fan-out function's delivery settings, in one place: ``FanOut`` (the stack) declares its
event source mappings and environment from them, and the local stack's mapping driver
(cdclake/local/event_source.py) runs the handler by them. CDK-free, so the local stack can
import it without starting jsii."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class MappingSettings:
    """One ``AWS::Lambda::EventSourceMapping`` of the fan-out function."""

    batch_size: int
    batching_window_s: float
    bisect_on_error: bool
    retry_attempts: int
    max_record_age_s: int
    report_batch_item_failures: bool
    starting_position: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Bisect poison batches, bounded retries and age, then the on-failure queue.
MAPPING = MappingSettings(
    batch_size=100,
    batching_window_s=1.0,
    bisect_on_error=True,
    retry_attempts=5,
    max_record_age_s=6 * 3600,
    report_batch_item_failures=True,
    starting_position="TRIM_HORIZON",
)
#: PutEvents retries of the entries EventBridge rejected, inside one invocation.
PUT_EVENTS_MAX_ATTEMPTS = 4
PUT_EVENTS_BACKOFF_SECONDS = 0.2
#: How long the on-failure queue keeps what the mappings gave up on (SQS's maximum).
FAILED_RECORDS_RETENTION_DAYS = 14
