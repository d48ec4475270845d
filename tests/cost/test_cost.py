"""Issue 26, item 4: the cost model, the dispatcher beside a bare schedule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake import cost
from environment.config import EnvironmentConfig
from tests.cost.cost_helpers import (
    ENVS,
    bench_run,
    configs,
    initial_load_run,
    run_cost,
    with_schedule,
)


@pytest.fixture(scope="session")
def environments() -> dict[str, EnvironmentConfig]:
    return configs()


@pytest.fixture(scope="session")
def cli_json() -> dict[str, Any]:
    result = run_cost("--env", "prod", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("env", ENVS)
def test_estimate_idle_table_costs_nothing(
    env: str, environments: dict[str, EnvironmentConfig]
) -> None:
    idle = cost.estimate(environments[env], active_share=0.0, events_per_run=10_000, tables=1)
    assert idle.dispatcher == cost.NOTHING
    assert idle.bare_schedule.dpu_hours > 0  # the design it replaces pays for the same table


@pytest.mark.parametrize("env", ENVS)
def test_estimate_hundred_tables_tenth_active_within_target(
    env: str, environments: dict[str, EnvironmentConfig]
) -> None:
    profile = cost.estimate(environments[env], active_share=0.1, events_per_run=10_000, tables=100)
    assert profile.dispatcher.dpu_hours > 0
    assert profile.share_of_bare <= cost.TARGET_PROFILE_SHARE


def test_run_dpu_hours_tiny_run_billed_minimum(environments: dict[str, EnvironmentConfig]) -> None:
    job = environments["prod"].lake.glue_job  # G.2X: 2 DPU a worker
    assert cost.run_seconds(job, 1, workers=4) < cost.MINIMUM_BILLED_SECONDS
    assert cost.run_dpu_hours(job, 1, workers=4) == pytest.approx(60 * 4 * 2 / 3600)


def test_run_dpu_hours_long_run_billed_its_seconds(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["dev"].lake.glue_job  # G.1X: one executor of 4 vCPUs beside the driver
    seconds = (
        cost.GLUE_START_SECONDS
        + cost.NOOP_RUN_SECONDS
        + 1_000_000 / (cost.EVENTS_PER_VCPU_SECOND * 4)
    )
    assert cost.run_dpu_hours(job, 1_000_000, workers=2) == pytest.approx(seconds * 2 / 3600)


def test_dispatched_workers_small_run_starts_minimum(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["prod"].lake.glue_job  # 2 to 4 x G.2X
    assert (job.min_workers, job.number_of_workers) == (2, 4)
    assert cost.dispatched_workers(job, 10_000) == 2


def test_dispatched_workers_backlog_scales_to_maximum(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["prod"].lake.glue_job
    backlog = int(3 * job.bytes_per_executor() / cost.BYTES_PER_EVENT)
    assert cost.dispatched_workers(job, backlog) == 4


def test_estimate_table_own_workers_priced(environments: dict[str, EnvironmentConfig]) -> None:
    prod = environments["prod"]
    lines = prod.table("public.order_lines")  # its own 8 workers over the lake's 4
    assert cost.glue_job_of(prod, lines).number_of_workers == 8
    month = cost.estimate(prod, active_share=0.0, events_per_run=1)
    per_worker_type = 2 * 60 / 3600 * 2880  # G.2X, the minimum, every 15 min for 30 days
    assert month.bare_schedule.dpu_hours == pytest.approx((4 + 4 + 8) * per_worker_type)


def test_estimate_flex_job_priced_at_flex_rate(environments: dict[str, EnvironmentConfig]) -> None:
    dev = environments["dev"].lake.glue_job
    assert dev.flex
    month = cost.estimate(environments["dev"], active_share=0.5, events_per_run=10, tables=1)
    assert month.dispatcher.usd == pytest.approx(
        month.dispatcher.dpu_hours * cost.USD_PER_DPU_HOUR_FLEX
    )


def test_cycle_minutes_irregular_cron_refused(environments: dict[str, EnvironmentConfig]) -> None:
    config = with_schedule(environments["dev"], "cron(0 8,20 * * ? *)")
    with pytest.raises(cost.CostError, match=r"cron\(0 8,20 \* \* \? \*\) of dev"):
        cost.estimate(config, active_share=0.1, events_per_run=10)


def test_constants_bytes_per_event_from_bench_result() -> None:
    run = initial_load_run()
    assert run["input_bytes"] / run["rows"] == pytest.approx(cost.BYTES_PER_EVENT)


def test_constants_event_rate_from_bench_result() -> None:
    run = bench_run()
    measured = run["changes"] / run["seconds"] / run["machine"]["cpus"]
    assert measured == pytest.approx(cost.EVENTS_PER_VCPU_SECOND)


def test_cost_cli_json_has_fields(cli_json: dict[str, Any]) -> None:
    assert cli_json["env"] == "prod"
    assert cli_json["cycle_minutes"] == 15
    configured, profile = cli_json["estimates"]
    assert (configured["scope"], configured["tables"]) == ("configured", 3)
    assert (profile["scope"], profile["tables"]) == ("profile", 100)
    for design in ("dispatcher", "bare_schedule"):
        assert set(profile[design]) == {"runs", "dpu_hours", "usd"}
    assert cli_json["targets"] == {
        "idle_table_dpu_hours": 0.0,
        "idle_table_met": True,
        "profile_share_of_bare": profile["share_of_bare"],
        "profile_share_at_most": 0.15,
        "profile_met": True,
    }
    assert cli_json["constants"]["minimum_billed_seconds"] == 60.0


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--active-share", "1.5", "--active-share 1.5: a share of the tables"),
        ("--tables", "0", "--tables 0: at least one table"),
        ("--events-per-run", "-1", "--events-per-run -1: a count of events"),
    ],
)
def test_cost_cli_bad_option_one_line(option: str, value: str, says: str) -> None:
    result = run_cost("--env", "dev", option, value)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {says}")
    assert result.returncode == 2
