"""glue_jobs/merge_job.py, the Glue entry script, runs on a laptop with the same arguments."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest

ENTRY = Path(__file__).resolve().parents[2] / "glue_jobs" / "merge_job.py"


def test_parse_arguments_without_awsglue_accepts_glue_names() -> None:
    module = runpy.run_path(str(ENTRY))
    args = module["parse_arguments"](
        [
            "merge_job.py",
            "--JOB_NAME",
            "j",
            "--table",
            "public.orders",
            "--changes_path",
            "s3://c/",
            "--warehouse_path",
            "s3://w/",
            "--database",
            "lake",
            "--record_key",
            "id",
            "--quarantine_path",
            "s3://q/",
            "--max_bad_fraction",
            "0.01",
        ]
    )
    assert args["table_type"] == "COPY_ON_WRITE" and args["format"] == "hudi"
    assert args["partition_fields"] == ""


@pytest.mark.spark
def test_glue_entry_parquet_run_merges_generated_events(spark, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from cdclake_merge.generator import GeneratorOptions, generate_files

    source = tmp_path / "generated"
    generate_files(source, GeneratorOptions(events=300, seed=9, keys=40))
    changes = tmp_path / "changes"
    shutil.copytree(source / "topics", changes)
    module = runpy.run_path(str(ENTRY))
    argv = [
        "merge_job.py",
        "--table",
        "public.orders",
        "--changes_path",
        str(changes),
        "--warehouse_path",
        str(tmp_path / "wh"),
        "--database",
        "glue",
        "--record_key",
        "id",
        "--quarantine_path",
        str(tmp_path / "q"),
        "--format",
        "parquet",
        "--max_bad_fraction",
        "0.01",
    ]
    assert module["main"](argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_merge"]
    assert summary["committed"] and summary["table"] == "glue.public_orders"
    assert module["main"](argv) == 0  # the console rerun: nothing new, nothing written
    rerun = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_merge"]
    assert rerun["committed"] is False
