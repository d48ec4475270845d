"""Issue 29: what `make demo` prints at the end fits an 80-column terminal, headers whole."""

from __future__ import annotations

from rich.console import Console

from cdclake.comparison import Report
from cdclake.demo import summary_table
from cdclake_merge.job import RunResult


def test_demo_summary_80_columns_keeps_every_header() -> None:
    runs = [RunResult("lake.public_customers", 1, events_read=1_234, upserts=987, deletes=21)]
    reports = {
        "public.customers": (Report("public.customers", source_rows=40, lake_rows=40), runs),
        "public.orders": (Report("public.orders", source_rows=141, lake_rows=140), runs * 3),
    }
    console = Console(width=80, record=True, color_system=None)
    console.print(summary_table(reports))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if "validate" in line)
    for column in ("table", "source", "lake", "runs", "events", "upserts", "deletes"):
        assert column in header.split()
    assert "public.customers" in text and "DIFFERENT" in text and "1,234" in text
