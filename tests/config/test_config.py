"""The environment config: valid files load, invalid ones fail naming file, field and reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from environment.config import ConfigError, load_config
from tests.config.config_helpers import minimal as _minimal
from tests.config.config_helpers import write_config as _write

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_load_config_shipped_environments_are_valid(env: str) -> None:
    config = load_config(env)
    assert config.env == env
    assert config.tables, "every environment names its tables"


def test_load_config_minimal_file_fills_defaults(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _minimal()))
    table = config.table("public.orders")
    assert table.hudi_table_type == "COPY_ON_WRITE"
    assert table.lake_table_name == "public_orders"
    assert table.event_source == "cdc.public.orders"
    assert config.lake_tables == [table]
    assert config.fanout_tables == []


def test_load_config_routing_overrides_event_source(tmp_path: Path) -> None:
    data = _minimal()
    data["tables"] = [
        {
            "name": "public.orders",
            "primary_key": ["id"],
            "fanout": True,
            "routing": {"source": "shop.orders", "detail_type": "OrderChanged"},
        }
    ]
    table = load_config(path=_write(tmp_path, data)).table("public.orders")
    assert (table.event_source, table.event_detail_type) == ("shop.orders", "OrderChanged")


def test_load_config_bad_field_names_file_field_and_reason(tmp_path: Path) -> None:
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"], "hudi_table_type": "COW"}]
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=path)
    message = str(excinfo.value)
    assert str(path) in message
    assert "tables.0.hudi_table_type" in message
    assert "COPY_ON_WRITE" in message and "'COW'" in message


def test_load_config_unknown_key_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["tabels"] = []
    with pytest.raises(ConfigError, match=r"tabels: Extra inputs are not permitted"):
        load_config(path=_write(tmp_path, data))


def test_load_config_excluded_primary_key_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"], "exclude_columns": ["id"]}]
    with pytest.raises(ConfigError, match=r"tables\.0: .*primary key column\(s\) \['id'\]"):
        load_config(path=_write(tmp_path, data))


def test_load_config_consumer_of_non_fanout_table_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["fanout"] = {"consumers": [{"name": "billing", "tables": ["public.orders"]}]}
    with pytest.raises(ConfigError, match=r"fanout.consumers\[0\] \(billing\).*public.orders"):
        load_config(path=_write(tmp_path, data))


def test_load_config_duplicate_table_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"]}] * 2
    with pytest.raises(ConfigError, match="tables listed twice"):
        load_config(path=_write(tmp_path, data))


def test_load_config_invalid_yaml_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("tables: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path=path)


def test_load_config_missing_environment_lists_available() -> None:
    with pytest.raises(ConfigError, match=r"available environments: \['dev', 'local', 'prod'\]"):
        load_config("staging")


def test_environment_config_is_immutable() -> None:
    config = load_config("dev")
    with pytest.raises(Exception, match="frozen"):
        config.prefix = "other"  # type: ignore[misc]


@pytest.mark.cdk
def test_app_invalid_config_fails_synth_with_clear_message(tmp_path: Path) -> None:
    data = _minimal()
    data["account"] = "not-an-account"
    _write(tmp_path, data, name="broken")
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"env": "broken", "config_dir": str(tmp_path)}),
        "CDK_OUTDIR": str(tmp_path / "out"),
    }
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert f"invalid environment config {tmp_path / 'broken.yaml'}" in result.stderr
    assert "account: String should match pattern" in result.stderr
    assert "Traceback" not in result.stderr


def test_environment_config_lake_table_unknown_names_the_configured_ones() -> None:
    config = load_config("dev")
    assert config.lake_table("public.orders").primary_key == ["id"]
    with pytest.raises(ValueError, match=r"not a lake table of dev \(configured: public\."):
        config.lake_table("public.nope")


def test_load_config_each_error_on_its_own_line_with_the_value_given(tmp_path: Path) -> None:
    data = {**_minimal(), "account": "1234", "tables": "public.orders"}
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=path)
    head, account, tables = str(excinfo.value).split("\n")
    assert head == f"invalid environment config {path}:"
    assert account.startswith("  account: ") and account.endswith(" (got '1234')")
    assert tables.startswith("  tables: ") and tables.endswith(" (got 'public.orders')")


def test_load_config_error_of_the_whole_file_is_at_top_level_without_its_value(
    tmp_path: Path,
) -> None:
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"]}] * 2
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=path)
    (line,) = str(excinfo.value).split("\n")[1:]
    # the whole file is not echoed back as the value
    assert line == "  (top level): Value error, tables listed twice: ['public.orders']"


def test_load_config_top_level_list_is_rejected_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- env: test\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=path)
    assert str(excinfo.value) == (
        f"invalid environment config {path}: expected a mapping at top level"
    )


def test_load_config_without_environment_or_path_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"^load_config needs an environment name or a path$"):
        load_config()


def test_environment_config_table_unknown_names_table_and_environment() -> None:
    with pytest.raises(
        KeyError, match=r"table 'public\.nope' is not configured for environment 'dev'"
    ):
        load_config("dev").table("public.nope")


def test_environment_config_lake_table_unknown_lists_every_lake_table() -> None:
    config = load_config("dev")
    names = ", ".join(t.name for t in config.lake_tables)
    assert names.count(", ") == len(config.lake_tables) - 1 > 0
    with pytest.raises(ValueError) as excinfo:
        config.lake_table("public.nope")
    assert str(excinfo.value).endswith(f"(configured: {names})")


def test_table_config_merge_job_name_uses_hyphens_only() -> None:
    table = load_config("dev").table("public.order_lines")
    assert table.merge_job_name("cdclake-dev") == "cdclake-dev-merge-public-order-lines"


def test_environment_config_resource_name_joins_prefix_and_parts_with_hyphens() -> None:
    config = load_config("dev")
    assert config.resource_name("merge", "orders") == f"{config.prefix}-merge-orders"


def test_lake_config_freshness_of_table_setting_wins_over_the_lake_default(
    tmp_path: Path,
) -> None:
    data = _minimal()
    data["lake"] = {"freshness_minutes": 45, "dispatch": {"schedule": "rate(5 minutes)"}}
    data["tables"] = [
        {"name": "public.orders", "primary_key": ["id"], "freshness_minutes": 15},
        {"name": "public.customers", "primary_key": ["id"]},
    ]
    config = load_config(path=_write(tmp_path, data))
    minutes = [config.lake.freshness_of(t) for t in config.tables]
    assert minutes == [15, 45]


def test_glue_job_config_run_cap_defaults_follow_workers_and_timeout() -> None:
    from environment.lake import GlueJobConfig

    small = GlueJobConfig(worker_type="G.1X", number_of_workers=2, timeout_minutes=60)
    wide = GlueJobConfig(worker_type="G.2X", number_of_workers=5, timeout_minutes=60)
    long = GlueJobConfig(worker_type="G.1X", number_of_workers=2, timeout_minutes=120)
    # One worker is the driver: 4 G.2X executors have 8 times the vCPUs of 1 G.1X executor.
    assert wide.bytes_per_run() == 8 * small.bytes_per_run()
    assert long.files_per_run() == 2 * small.files_per_run()


def test_load_config_run_cap_sizes_read_with_units(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"glue_job": {"max_bytes_per_run": "2GiB", "max_files_per_run": 500}}
    glue_job = load_config(path=_write(tmp_path, data)).lake.glue_job
    assert (glue_job.bytes_per_run(), glue_job.files_per_run()) == (2 * 1024**3, 500)


def test_load_config_run_cap_not_a_size_names_the_field(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"glue_job": {"max_bytes_per_run": "lots"}}
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, data))
    assert "lake.glue_job.max_bytes_per_run" in str(excinfo.value)


def test_load_config_dispatch_budget_at_glue_quota_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"dispatch": {"max_concurrent_runs": 50}}
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, data))
    assert "lake.dispatch.max_concurrent_runs" in str(excinfo.value)


def test_load_config_dispatch_schedule_not_an_expression_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"dispatch": {"schedule": "every 5 minutes"}}
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, data))
    assert "lake.dispatch.schedule" in str(excinfo.value)
    assert "cron(...) or rate(...)" in str(excinfo.value)


def test_load_config_dispatch_slower_than_freshness_names_schedule_and_table(
    tmp_path: Path,
) -> None:
    data = _minimal()
    data["lake"] = {"dispatch": {"schedule": "rate(2 hours)"}, "freshness_minutes": 60}
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, data))
    message = str(excinfo.value)
    assert "lake.dispatch.schedule rate(2 hours) turns every 120 min" in message
    assert "public.orders's freshness objective (60 min)" in message


def test_dispatch_config_interval_of_every_n_minutes_cron_is_n() -> None:
    from environment.lake import DispatchConfig

    assert DispatchConfig(schedule="cron(0/20 * * * ? *)").interval_minutes() == 20


def test_load_config_dispatch_schedule_without_a_fixed_interval_is_rejected(
    tmp_path: Path,
) -> None:
    # A table is due a turn before its objective would be missed: a turn has a length.
    data = _minimal()
    data["lake"] = {"dispatch": {"schedule": "cron(0 12 * * ? *)"}}
    with pytest.raises(ConfigError, match=r"lake\.dispatch\.schedule: .*must turn at a fixed"):
        load_config(path=_write(tmp_path, data))


# --- a table's own merge workers (issue 26, right-sized runs) -----------------------------------


def _sized_tables(own: dict[str, object], **lake_job: object) -> dict[str, object]:
    data = _minimal()
    data["lake"] = {"glue_job": {"worker_type": "G.1X", "number_of_workers": 4, **lake_job}}
    data["tables"] = [
        {"name": "public.orders", "primary_key": ["id"], "glue_job": own},
        {"name": "public.customers", "primary_key": ["id"]},
    ]
    return data


def test_glue_job_of_table_override_wins_over_lake(tmp_path: Path) -> None:
    own = {"worker_type": "G.2X", "number_of_workers": 10, "min_workers": 3}
    config = load_config(path=_write(tmp_path, _sized_tables(own, timeout_minutes=30)))
    job = config.lake.glue_job_of(config.table("public.orders"))
    assert (job.worker_type, job.number_of_workers, job.min_workers) == ("G.2X", 10, 3)
    assert job.timeout_minutes == 30  # what the table leaves out comes from the lake


def test_glue_job_of_table_without_override_is_the_lakes(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _sized_tables({"min_workers": 3})))
    assert config.lake.glue_job_of(config.table("public.customers")) == config.lake.glue_job


def test_glue_job_of_run_caps_follow_the_tables_workers(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _sized_tables({"number_of_workers": 7})))
    own = config.lake.glue_job_of(config.table("public.orders"))
    lake = config.lake.glue_job
    # One worker is the driver: 6 executors against the lake's 3.
    assert own.bytes_per_run() == 2 * lake.bytes_per_run()
    assert own.files_per_run() == 2 * lake.files_per_run()


def test_glue_job_config_bytes_per_executor_is_the_byte_caps_unit() -> None:
    from environment.lake import GlueJobConfig

    job = GlueJobConfig(worker_type="G.2X", number_of_workers=5, timeout_minutes=60)
    assert job.bytes_per_run() == 4 * job.bytes_per_executor()


def test_load_config_table_min_workers_above_its_maximum_names_the_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, _sized_tables({"min_workers": 5})))
    message = str(excinfo.value)
    assert "tables[public.orders].glue_job" in message
    assert "min_workers (5) is more than number_of_workers (4)" in message


def test_load_config_lake_min_workers_above_its_maximum_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"glue_job": {"number_of_workers": 3, "min_workers": 4}}
    with pytest.raises(ConfigError, match=r"min_workers \(4\) is more than number_of_workers"):
        load_config(path=_write(tmp_path, data))


def test_load_config_table_one_worker_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, _sized_tables({"number_of_workers": 1})))
    assert "tables.0.glue_job.number_of_workers" in str(excinfo.value)


def test_load_config_flex_on_large_workers_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(path=_write(tmp_path, _sized_tables({"worker_type": "G.4X"}, flex=True)))
    assert "tables[public.orders].glue_job: flex runs on G.1X or G.2X workers only, not G.4X" in (
        str(excinfo.value)
    )


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        (
            "glue_job",
            {"number_of_workers": 4},
            "glue_job sizes the lake's merge: the table has lake",
        ),
        ("expected_rows", 5, "expected_rows sizes the lake table"),
        ("retain_hours", 6, "retain_hours keeps lake file versions"),
    ],
)
def test_load_config_lake_setting_of_a_fanout_only_table_is_rejected(
    tmp_path: Path, setting: str, value: object, reason: str
) -> None:
    data = _minimal()
    data["tables"] = [
        {
            "name": "public.orders",
            "primary_key": ["id"],
            "lake": False,
            "fanout": True,
            setting: value,
        }
    ]
    with pytest.raises(ConfigError, match=reason):
        load_config(path=_write(tmp_path, data))


def test_record_index_file_groups_default_rows_fit_hudis_ten() -> None:
    from environment.capacity import DEFAULT_EXPECTED_ROWS, record_index_file_groups

    assert record_index_file_groups(DEFAULT_EXPECTED_ROWS) == 10


def test_record_index_file_groups_a_billion_rows_take_hudis_estimate() -> None:
    from environment.capacity import record_index_file_groups

    # Hudi: ceil(rows * 2.0) / (1 GiB / 48 bytes) = 2e9 / 22,369,621 = 89 file groups.
    assert record_index_file_groups(1_000_000_000) == 89


def test_record_index_file_groups_capped_at_hudis_most() -> None:
    from environment.capacity import record_index_file_groups

    assert record_index_file_groups(10**13) == 1000


def test_load_config_expected_rows_sizes_the_tables_record_index(tmp_path: Path) -> None:
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"], "expected_rows": 10**9}]
    assert load_config(path=_write(tmp_path, data)).tables[0].record_index_file_groups == 89


def test_services_of_a_tables_retain_hours_overrides_the_lakes(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"retain_hours": 24}
    data["tables"] = [
        {"name": "public.orders", "primary_key": ["id"], "retain_hours": 6},
        {"name": "public.items", "primary_key": ["id"]},
    ]
    config = load_config(path=_write(tmp_path, data))
    orders, items = config.tables
    assert config.lake.services_of(orders)["retain_hours"] == 6
    assert config.lake.services_of(items)["retain_hours"] == 24


def test_services_of_clean_interval_is_an_hour_of_commits_at_the_tables_objective(
    tmp_path: Path,
) -> None:
    data = _minimal()
    data["lake"] = {"freshness_minutes": 15}
    data["tables"] = [
        {"name": "public.orders", "primary_key": ["id"]},
        {"name": "public.items", "primary_key": ["id"], "freshness_minutes": 5},
        {"name": "public.audits", "primary_key": ["id"], "freshness_minutes": 120},
    ]
    config = load_config(path=_write(tmp_path, data))
    every = [config.lake.services_of(t)["clean_every_commits"] for t in config.tables]
    assert every == [4, 12, 1]  # a table slower than an hour cleans after each commit


def test_load_config_change_files_expiring_before_savepoints_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"change_file_expiration_days": 8, "savepoint_days": 7}
    with pytest.raises(ConfigError, match=r"change_file_expiration_days \(8\) must be more"):
        load_config(path=_write(tmp_path, data))


def test_load_config_change_files_outliving_savepoints_loads(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"change_file_expiration_days": 9, "savepoint_days": 7}
    assert load_config(path=_write(tmp_path, data)).lake.savepoint_days == 7


def test_glue_job_compaction_io_is_a_quarter_timeout_of_executor_rewrites() -> None:
    from environment.lake import GlueJobConfig

    job = GlueJobConfig(worker_type="G.1X", number_of_workers=2, timeout_minutes=60)
    # 1 executor x 4 vCPUs x 900 s x 5 MiB/s
    assert job.compaction_io_mb() == 18_000


# --- the dispatcher's failures and sizing (issue 47) ---------------------------------------------


def test_load_config_dispatch_retry_share_above_one_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"dispatch": {"retry_share": 1.5}}
    with pytest.raises(ConfigError, match=r"lake\.dispatch\.retry_share"):
        load_config(path=_write(tmp_path, data))


def test_load_config_dispatch_retry_share_zero_is_rejected(tmp_path: Path) -> None:
    data = _minimal()
    data["lake"] = {"dispatch": {"retry_share": 0}}
    with pytest.raises(ConfigError, match=r"lake\.dispatch\.retry_share"):
        load_config(path=_write(tmp_path, data))


def test_dispatch_config_backoff_unit_of_a_rate_is_one_turn() -> None:
    from environment.lake import DispatchConfig

    assert DispatchConfig(schedule="rate(15 minutes)").backoff_unit_seconds() == 900


def test_dispatch_config_backoff_unit_of_one_minute_turns_is_five_minutes() -> None:
    from environment.lake import DispatchConfig

    assert DispatchConfig(schedule="rate(1 minute)").backoff_unit_seconds() == 300


def test_lake_config_dispatch_of_sizes_within_a_freshness_sooner_than_half_the_timeout(
    tmp_path: Path,
) -> None:
    data = _sized_tables({}, timeout_minutes=120)
    data["lake"]["freshness_minutes"] = 20  # type: ignore[index]
    config = load_config(path=_write(tmp_path, data))
    sizing = config.lake.dispatch_of(config.lake_table("public.orders"))
    # 4 vCPUs x 20 minutes at 768 KiB a second a vCPU (half the timeout is 60 minutes)
    assert sizing["dispatch_bytes_per_executor"] == 4 * 1200 * 768 * 1024


def test_lake_config_dispatch_of_sizes_within_half_a_timeout_sooner_than_freshness(
    tmp_path: Path,
) -> None:
    data = _sized_tables({}, timeout_minutes=30)
    config = load_config(path=_write(tmp_path, data))
    sizing = config.lake.dispatch_of(config.lake_table("public.orders"))
    # 4 vCPUs x 15 minutes (freshness 60)
    assert sizing["dispatch_bytes_per_executor"] == 4 * 900 * 768 * 1024


def test_lake_config_dispatch_of_merge_on_read_sizes_its_compaction(tmp_path: Path) -> None:
    data = _sized_tables({})
    data["tables"][0]["hudi_table_type"] = "MERGE_ON_READ"  # type: ignore[index]
    config = load_config(path=_write(tmp_path, data))
    sizing = config.lake.dispatch_of(config.lake_table("public.orders"))
    # 4 vCPUs x 30 minutes (half of 60) at 5 MiB a second a vCPU
    assert sizing["dispatch_compaction_bytes_per_executor"] == 4 * 1800 * 5 * 1024**2


def test_lake_config_dispatch_of_copy_on_write_has_no_compaction(tmp_path: Path) -> None:
    config = load_config(path=_write(tmp_path, _sized_tables({})))
    sizing = config.lake.dispatch_of(config.lake_table("public.orders"))
    assert "dispatch_compaction_bytes_per_executor" not in sizing


def test_load_config_default_schedule_keeps_a_five_minute_objective(tmp_path: Path) -> None:
    # The shortest objective there is: the default schedule turns often enough for it.
    data = _minimal()
    data["tables"] = [{"name": "public.orders", "primary_key": ["id"], "freshness_minutes": 5}]
    config = load_config(path=_write(tmp_path, data))
    assert config.lake.dispatch.turn_seconds() == 60


def test_lake_config_dispatch_of_carries_what_decides_a_run_is_due(tmp_path: Path) -> None:
    data = _sized_tables({})
    data["tables"][0]["freshness_minutes"] = 5  # type: ignore[index]
    config = load_config(path=_write(tmp_path, data))
    sizing = config.lake.dispatch_of(config.lake_table("public.orders"))
    # The table's objective, Glue's start (environment.capacity) and a G.1X executor's
    # 4 vCPUs at 768 KiB a second each.
    assert (
        sizing["dispatch_freshness_seconds"],
        sizing["dispatch_start_seconds"],
        sizing["dispatch_executor_bytes_per_second"],
    ) == (300, 30, 4 * 768 * 1024)
