"""`cdclake status`'s lag from CloudWatch against the area's moto server: the newest
``LagSeconds`` datapoint, aged to the moment the screen is drawn."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest

from cdclake.status import metric_lag
from cdclake_merge.metrics import publish_lags

pytestmark = pytest.mark.moto

# A table of its own: the session's moto also holds the metrics of `deployed`'s dev tables.
TABLE = "public.status_lag_probe"


def test_status_metric_lag_two_hour_old_datapoint_aged_to_now(
    aws_env: None, moto_endpoint: str
) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="eu-west-1")
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    published_at = now - dt.timedelta(hours=2)  # the dispatcher has been silent since
    assert publish_lags("dev", {TABLE: 30.0}, client=cloudwatch, now=published_at)
    assert metric_lag(cloudwatch, "dev", TABLE, now) == (30.0 + 7200.0, published_at)
