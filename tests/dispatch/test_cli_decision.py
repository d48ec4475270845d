"""``cdclake dispatch``'s own parts on moto (in process): each configured table's Glue job
found or said missing, and the screen it prints."""

from __future__ import annotations

import re

import pytest

from cdclake.dispatch import aws_targets
from cdclake_merge.dispatch import Decision
from environment.config import load_config
from tests.dispatch.dispatch_helpers import World, create_job, rendered_rows

pytestmark = pytest.mark.moto

ORDERS = "public.orders"


def test_aws_targets_deployed_job_read_as_its_table(world: World) -> None:
    job = create_job(world, ORDERS)
    targets, _ = aws_targets(load_config("dev"), world.glue)
    assert [(t.table, t.job, t.lake_table) for t in targets] == [
        (ORDERS, job, "cdclake_dev.public_orders")
    ]


def test_aws_targets_missing_job_a_failed_decision_asking_if_deployed(world: World) -> None:
    create_job(world, ORDERS)
    _, missing = aws_targets(load_config("dev"), world.glue)
    assert [(d.table, d.start, d.failed, d.job, d.reason) for d in missing] == [
        (
            table,
            False,
            True,
            job,
            f"not read: Glue job {job} not found: is dev deployed?",
        )
        for table, job in (
            ("public.customers", "cdclake-dev-merge-public-customers"),
            ("public.order_lines", "cdclake-dev-merge-public-order-lines"),
        )
    ]


def test_render_header_names_every_column() -> None:
    rows = rendered_rows([], {})
    assert rows["table"] == [
        "table",
        "start",
        "files waiting",
        "workers",
        "lag",
        "reason",
        "run",
    ]


def test_render_started_table_shows_its_run_workers_and_lag() -> None:
    started = Decision(
        ORDERS,
        True,
        "2 change files wait",
        ("s3://c/a.json", "s3://c/b.json"),
        job="cdclake-dev-merge-public-orders",
        run_id="jr_1",
        watermark=1.0,  # long ago: a lag of many seconds
        workers=3,
    )
    table, start, files, workers, lag, reason, run = rendered_rows([started], {})[ORDERS]
    assert (table, start, files, workers, reason, run) == (
        ORDERS,
        "yes",
        "2",
        "3",
        "2 change files wait",
        "jr_1",
    )
    assert re.fullmatch(r"\d{1,3}(,\d{3})+ s", lag), lag


def test_render_unread_table_shows_dashes() -> None:
    unread = Decision(ORDERS, False, "not read: boom", failed=True)
    assert rendered_rows([unread], {})[ORDERS] == [
        ORDERS,
        "no",
        "0",
        "-",
        "-",
        "not read: boom",
        "",
    ]


def test_render_caught_up_table_shows_zero_lag() -> None:
    quiet = Decision(ORDERS, False, "no change files wait", watermark=1.0)
    assert rendered_rows([quiet], {})[ORDERS][4] == "0 s"


def test_render_local_run_shows_its_version_and_files() -> None:
    merged = Decision(ORDERS, True, "1 change files wait", ("c/a.json",), watermark=1.0)
    runs = {ORDERS: {"version": 4, "files_applied": 1}}
    assert rendered_rows([merged], runs)[ORDERS][6] == "v4: 1 files applied"


def test_render_local_run_error_shown_in_place_of_the_run() -> None:
    merged = Decision(ORDERS, True, "1 change files wait", ("c/a.json",), run_id="x")
    runs = {ORDERS: {"error": "Spark stopped"}}
    assert rendered_rows([merged], runs)[ORDERS][6] == "Spark stopped"


def test_render_long_path_in_a_reason_folded_whole_on_a_narrow_terminal() -> None:
    from rich.console import Console

    from cdclake.dispatch import render

    # A change file's path is one word wider than the column: folded, not cut.
    path = "s3://cdclake-dev-changes/topics/cdclake.public.orders/partition=0/orders+0+42.json"
    console = Console(record=True, width=100, color_system=None)
    render([Decision(ORDERS, False, f"not read: {path}", failed=True)], {}, console)
    lines = [line for line in console.export_text().splitlines() if line.startswith("│")]
    reason = "".join(line.split("│")[6].strip() for line in lines)
    assert reason == f"not read:{path}"
