"""Issue 26, item 4: the cost model, the dispatcher beside a bare schedule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake import cost
from environment.capacity import WORKER_VCPUS
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


def test_estimate_tenth_active_prices_both_designs(
    environments: dict[str, EnvironmentConfig],
) -> None:
    # prod: every 15 min for 30 days (2,880 cycles), 4 x G.2X configured, 2 dispatched; a run of
    # 10,000 events lasts under the minute, so every run is billed 60 s.
    month = cost.estimate(environments["prod"], active_share=0.1, events_per_run=10_000, tables=1)
    minute_per_worker = 60 * 2 / 3600  # DPU-hours of one G.2X worker billed the minimum
    assert month.bare_schedule.runs == 2880
    # 288 busy cycles and 2,592 idle ones, each a run of the 4 configured workers.
    assert month.bare_schedule.dpu_hours == pytest.approx((288 + 2592) * 4 * minute_per_worker)
    assert month.dispatcher.runs == pytest.approx(288)
    assert month.dispatcher.dpu_hours == pytest.approx(288 * 2 * minute_per_worker)
    assert month.share_of_bare == pytest.approx(0.05)


def test_estimate_flex_job_priced_at_flex_rate(environments: dict[str, EnvironmentConfig]) -> None:
    dev = environments["dev"].lake.glue_job
    assert dev.flex
    month = cost.estimate(environments["dev"], active_share=0.5, events_per_run=10, tables=1)
    assert month.dispatcher.usd == pytest.approx(
        month.dispatcher.dpu_hours * cost.USD_PER_DPU_HOUR_FLEX
    )


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
    assert cli_json["objectives"]["events_per_hour"] == 40_000
    customers = cli_json["objectives"]["tables"][0]
    assert (customers["table"], customers["freshness_minutes"]) == ("public.customers", 60)
    assert [p["freshness_minutes"] for p in customers["prices"]] == [5, 60]
    assert set(customers["prices"][0]) == {
        *("freshness_minutes", "run_seconds", "minutes_between_runs", "events_per_run"),
        *("workers", "runs", "dpu_hours", "usd"),
    }
    assert [t["tables"] for t in cli_json["turns"]] == [3, 100]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--active-share", "1.5", "--active-share 1.5: a share of the tables"),
        ("--tables", "0", "--tables 0: at least one table"),
        ("--events-per-run", "-1", "--events-per-run -1: a count of events"),
        ("--events-per-hour", "-1", "--events-per-hour -1: a count of events"),
    ],
)
def test_cost_cli_bad_option_one_line(option: str, value: str, says: str) -> None:
    result = run_cost("--env", "dev", option, value)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {says}")
    assert result.returncode == 2


@pytest.fixture
def prod_report(environments: dict[str, EnvironmentConfig]) -> dict[str, Any]:
    # Made for each test (cheap): mutmut credits a call to the test whose setup made it.
    return cost.report(environments["prod"]).as_dict()


def test_report_profile_figures_of_both_designs(prod_report: dict[str, Any]) -> None:
    # 100 tables x 2,880 cycles; a tenth active. Every run is billed the minute (60 s):
    # dispatched 2 x G.2X (4 DPU), bare 4 x G.2X (8 DPU); standard rate 0.44 USD.
    _, profile = prod_report["estimates"]
    assert profile == {
        "scope": "profile",
        "tables": 100,
        "active_share": 0.1,
        "events_per_run": 10_000,
        "dispatcher": {"runs": 28_800.0, "dpu_hours": 1_920.0, "usd": 844.8},
        "bare_schedule": {"runs": 288_000.0, "dpu_hours": 38_400.0, "usd": 16_896.0},
        "share_of_bare": 0.05,
    }


def test_report_configured_tables_figures(prod_report: dict[str, Any]) -> None:
    # prod's 3 lake tables: bare runs 4, 4 and 8 workers (order_lines' own), 2,880 times each.
    configured, _ = prod_report["estimates"]
    assert (configured["scope"], configured["tables"]) == ("configured", 3)
    assert configured["dispatcher"] == {"runs": 864.0, "dpu_hours": 57.6, "usd": 25.34}
    assert configured["bare_schedule"] == {"runs": 8_640.0, "dpu_hours": 1_536.0, "usd": 675.84}
    assert configured["share_of_bare"] == 0.0375


def test_report_targets_met(prod_report: dict[str, Any]) -> None:
    assert (prod_report["env"], prod_report["cycle_minutes"]) == ("prod", 15)
    assert prod_report["targets"] == {
        "idle_table_dpu_hours": 0.0,
        "idle_table_met": True,
        "profile_share_of_bare": 0.05,
        "profile_share_at_most": 0.15,
        "profile_met": True,
    }


def test_report_constants_listed(prod_report: dict[str, Any]) -> None:
    assert prod_report["constants"] == {
        "usd_per_dpu_hour": 0.44,
        "usd_per_dpu_hour_flex": 0.29,
        "minimum_billed_seconds": 60.0,
        "glue_start_seconds": 30.0,
        "noop_run_seconds": 0.47,
        "bytes_per_event": 3607,
        "events_per_vcpu_second": 241.4,
        "month_minutes": 43_200,
        "usd_per_lambda_request": 0.20 / 1_000_000,
        "usd_per_lambda_gb_second": 0.0000166667,
        "dispatcher_memory_gb": 0.125,
        "turn_seconds_per_table": 0.0491,
        "s3_lists_per_table": 4.0,
        "s3_gets_per_table": 3.0,
        "usd_per_s3_list": 0.005 / 1000,
        "usd_per_s3_get": 0.0004 / 1000,
        "usd_per_put_metric_data": 0.01 / 1000,
    }


def test_report_turns_of_the_configured_tables_and_of_the_profile(
    prod_report: dict[str, Any],
) -> None:
    # 2,880 turns over prod's 3 lake tables, then over the profile's 100 (turns_month's sums).
    assert prod_report["turns"] == [
        {
            "turns": 2880.0,
            "tables": 3,
            "lambda_usd": 0.0015,
            "s3_usd": 0.1976,
            "cloudwatch_usd": 0.0576,
            "usd": 0.2566,
        },
        {
            "turns": 2880.0,
            "tables": 100,
            "lambda_usd": 0.03,
            "s3_usd": 6.12,
            "cloudwatch_usd": 0.0576,
            "usd": 6.2076,
        },
    ]


def test_report_objectives_of_each_lake_table(prod_report: dict[str, Any]) -> None:
    # prod's tables share the lake's job and a 60-minute objective: the same two prices each,
    # at 40,000 events an hour (objective_month's figures, rounded).
    five = {
        "freshness_minutes": 5,
        "run_seconds": 32.0,
        "minutes_between_runs": 4.47,
        "events_per_run": 2978,
        "workers": 2,
        "runs": 9672.1,
        "dpu_hours": 644.804,
        "usd": 283.71,
    }
    sixty = {
        "freshness_minutes": 60,
        "run_seconds": 50.9,
        "minutes_between_runs": 59.15,
        "events_per_run": 39435,
        "workers": 2,
        "runs": 730.3,
        "dpu_hours": 48.688,
        "usd": 21.42,
    }
    assert prod_report["objectives"] == {
        "events_per_hour": 40_000,
        "tables": [
            {"table": table, "freshness_minutes": 60, "prices": [five, sixty]}
            for table in ("public.customers", "public.orders", "public.order_lines")
        ],
    }


# --- the objective's price and the turns' own (issue 47 item 3) ---------------------------------

# A run that applies nothing: Glue's start and the no-op work, billed the minute.
IDLE_RUN_SECONDS = 30.0 + 0.47


@pytest.mark.parametrize(("minutes", "runs"), [(5, 2_592_000 / 269.53), (60, 2_592_000 / 3569.53)])
def test_objective_month_run_every_objective_less_a_run_billed_the_minute(
    environments: dict[str, EnvironmentConfig], minutes: int, runs: float
) -> None:
    job = environments["prod"].lake.glue_job  # 2 x G.2X at least: 4 DPU
    price = cost.objective_month(job, freshness_minutes=minutes, events_per_hour=0)
    assert price.run_seconds == pytest.approx(IDLE_RUN_SECONDS)
    assert price.minutes_between_runs == pytest.approx((minutes * 60 - IDLE_RUN_SECONDS) / 60)
    assert price.month.runs == pytest.approx(runs)
    assert price.month.dpu_hours == pytest.approx(runs * 60 * 4 / 3600)
    assert price.month.usd == pytest.approx(runs * 60 * 4 / 3600 * 0.44)


def test_objective_month_five_minutes_costs_more_than_sixty_at_the_same_changes(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["prod"].lake.glue_job
    five, sixty = (
        cost.objective_month(job, freshness_minutes=m, events_per_hour=40_000) for m in (5, 60)
    )
    # Both runs are short (2 x G.2X: one executor of 8 vCPUs), each billed at least the minute.
    per_event = 1 / (cost.EVENTS_PER_VCPU_SECOND * 8)
    rate = 40_000 / 3600
    for price, objective in ((five, 300), (sixty, 3600)):
        run = (IDLE_RUN_SECONDS + per_event * rate * objective) / (1 + per_event * rate)
        assert price.run_seconds == pytest.approx(run)
        assert price.events_per_run == round(rate * (objective - run))
        assert price.month.runs == pytest.approx(2_592_000 / (objective - run))
        billed = max(run, 60.0)
        assert price.month.dpu_hours == pytest.approx(price.month.runs * billed * 4 / 3600)
    assert five.month.usd == pytest.approx(283.71, abs=0.01)
    assert sixty.month.usd == pytest.approx(21.42, abs=0.01)


def test_objectives_each_lake_table_at_its_own_and_the_compared(
    environments: dict[str, EnvironmentConfig],
) -> None:
    priced = cost.objectives(environments["prod"], events_per_hour=40_000)
    assert [(t.table, t.freshness_minutes) for t in priced] == [
        ("public.customers", 60),
        ("public.orders", 60),
        ("public.order_lines", 60),
    ]
    assert [p.freshness_minutes for p in priced[0].prices] == [5, 60]


def test_turns_month_prod_each_turn_a_call_and_each_tables_requests(
    environments: dict[str, EnvironmentConfig],
) -> None:
    # prod: a turn every 15 min (2,880 a month) over 3 lake tables, each 4 LIST and 3 GET,
    # with the heartbeat's LIST; 2 PutMetricData (the lags, the heartbeat age).
    turns = cost.turns_month(environments["prod"])
    assert (turns.turns, turns.tables) == (2880, 3)
    assert turns.lambda_usd == pytest.approx(2880 * (0.2e-6 + 3 * 0.0491 * 0.125 * 0.0000166667))
    assert turns.s3_usd == pytest.approx(2880 * (13 * 0.005e-3 + 9 * 0.0004e-3))
    assert turns.cloudwatch_usd == pytest.approx(2880 * 2 * 0.01e-3)
    assert turns.usd == pytest.approx(turns.lambda_usd + turns.s3_usd + turns.cloudwatch_usd)


def test_turns_month_one_minute_turns_cost_fifteen_times_prods(
    environments: dict[str, EnvironmentConfig],
) -> None:
    prod = environments["prod"]
    every_minute = cost.turns_month(with_schedule(prod, "rate(1 minute)"), 100)
    assert every_minute.turns == 43_200
    assert every_minute.usd == pytest.approx(15 * cost.turns_month(prod, 100).usd)


def test_report_targets_missed_when_idle_tables_cost() -> None:
    design = cost.Design(1.0, 1.0, 1.0)
    profile = cost.Estimate("profile", 1, 0.1, 1, dispatcher=design, bare_schedule=design)
    turns = cost.Turns(0.0, 0, 0.0, 0.0, 0.0)
    missed = cost.Report("x", 15, profile, profile, 0.5, 0, (), turns, turns)
    assert (missed.idle_target_met, missed.profile_target_met) == (False, False)


def test_design_json_rounds_each_figure() -> None:
    assert cost.Design(1.26, 2.34567, 3.456).as_dict() == {
        "runs": 1.3,
        "dpu_hours": 2.346,
        "usd": 3.46,
    }


def test_turns_json_rounds_each_figure() -> None:
    turns = cost.Turns(2880.04, 3, 0.0014598, 0.194112, 0.05761234)
    assert turns.as_dict() == {
        "turns": 2880.0,
        "tables": 3,
        "lambda_usd": 0.0015,
        "s3_usd": 0.1941,
        "cloudwatch_usd": 0.0576,
        "usd": 0.2532,
    }


def test_estimate_share_of_bare_nothing_billed_is_zero() -> None:
    nothing = cost.Estimate("profile", 1, 0.0, 0, cost.NOTHING, cost.NOTHING)
    assert nothing.share_of_bare == 0.0


def test_estimate_share_rounded_in_json() -> None:
    estimate = cost.Estimate("profile", 1, 0.1, 1, cost.Design(1, 1.0, 1), cost.Design(1, 3.0, 1))
    assert estimate.as_dict()["share_of_bare"] == 0.3333


def test_estimate_run_without_events_starts_nothing(
    environments: dict[str, EnvironmentConfig],
) -> None:
    month = cost.estimate(environments["prod"], active_share=0.5, events_per_run=0, tables=1)
    assert month.dispatcher == cost.NOTHING


def test_estimate_profile_bounds_accepted(environments: dict[str, EnvironmentConfig]) -> None:
    month = cost.estimate(environments["prod"], active_share=1.0, events_per_run=0, tables=1)
    assert (month.scope, month.tables, month.active_share) == ("profile", 1, 1.0)


def test_estimate_standard_job_priced_at_standard_rate(
    environments: dict[str, EnvironmentConfig],
) -> None:
    assert not environments["prod"].lake.glue_job.flex
    month = cost.estimate(environments["prod"], active_share=0.5, events_per_run=10, tables=1)
    assert month.bare_schedule.usd == pytest.approx(
        month.bare_schedule.dpu_hours * cost.USD_PER_DPU_HOUR
    )


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_capped_run_at_most_workers_ends_within_half_its_timeout_at_the_incremental_rate(
    environments: dict[str, EnvironmentConfig], env: str
) -> None:
    config = environments[env]
    for table in config.lake_tables:
        job = cost.glue_job_of(config, table)
        vcpus = (job.number_of_workers - 1) * WORKER_VCPUS[job.worker_type]
        events = job.bytes_per_run() / cost.BYTES_PER_EVENT
        seconds = events / (cost.EVENTS_PER_VCPU_SECOND * vcpus)
        assert seconds <= job.timeout_minutes * 60 * 0.5, (table.name, seconds)


def test_estimate_one_event_a_run_still_starts_the_run(
    environments: dict[str, EnvironmentConfig],
) -> None:
    # A table with a single change in a cycle has a file waiting: the dispatcher starts it.
    month = cost.estimate(environments["prod"], active_share=0.1, events_per_run=1, tables=1)
    assert month.dispatcher.runs == pytest.approx(288)


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ({"active_share": 1.5}, "--active-share 1.5: a share of the tables, from 0 to 1"),
        ({"events_per_run": -1}, "--events-per-run -1: a count of events, 0 or more"),
        ({"tables": 0}, "--tables 0: at least one table"),
    ],
)
def test_estimate_bad_profile_refused_naming_the_option(
    environments: dict[str, EnvironmentConfig], profile: dict[str, Any], says: str
) -> None:
    # In process: the CLI tests see the same words from a process of their own.
    given = {"active_share": 0.1, "events_per_run": 10, "tables": 1, **profile}
    with pytest.raises(cost.CostError) as refused:
        cost.estimate(environments["prod"], **given)
    assert str(refused.value) == says


def test_objective_month_negative_rate_refused_naming_the_option(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["prod"].lake.glue_job
    with pytest.raises(cost.CostError) as refused:
        cost.objective_month(job, freshness_minutes=60, events_per_hour=-1)
    assert str(refused.value) == "--events-per-hour -1: a count of events, 0 or more"


def test_objective_month_busy_table_sized_to_an_objective_of_events(
    environments: dict[str, EnvironmentConfig],
) -> None:
    job = environments["prod"].lake.glue_job  # at most 4 x G.2X
    # 20 million events an hour: an hour's change files (72 GB) need more executors than the
    # job has, so the run starts with all 4 workers, 3 executors of 8 vCPUs beside the driver.
    price = cost.objective_month(job, freshness_minutes=60, events_per_hour=20_000_000)
    assert price.workers == 4
    per_event = 1 / (cost.EVENTS_PER_VCPU_SECOND * 3 * 8)
    rate = 20_000_000 / 3600
    run = (IDLE_RUN_SECONDS + per_event * rate * 3600) / (1 + per_event * rate)
    assert price.run_seconds == pytest.approx(run)
