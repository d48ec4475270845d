"""glue_jobs/merge_job.py, the file Glue runs, run here on real Hudi with the job's own default
arguments as the synthesized template declares them (buckets mapped to local folders)."""

from __future__ import annotations

import itertools
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.merge.support import expected_rows, run_local_session, visible

ENTRY = Path(__file__).resolve().parents[2] / "glue_jobs" / "merge_job.py"
# The arguments a job definition must pass (an older one passes no others).
MINIMAL_ARGV = (
    *("merge_job.py", "--table", "public.t", "--changes_path", "/c", "--warehouse_path", "/w"),
    *("--database", "d", "--record_key", "id", "--quarantine_path", "/q"),
)


def job_arguments(template: dict[str, Any], table: str) -> dict[str, Any]:
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Glue::Job":
            continue
        arguments = resource["Properties"]["DefaultArguments"]
        if arguments["--table"] == table:
            return dict(arguments)
    raise AssertionError(f"no Glue job for {table}")


def local_argv(arguments: dict[str, Any], buckets: Path) -> list[str]:
    """The job's arguments as Glue passes them, each bucket a local folder."""
    argv = ["merge_job.py", "--JOB_NAME", "local"]
    for name, value in arguments.items():
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            # Another stack's value (the bootstrap function's name): its export's name stands
            # in, as these runs never invoke it.
            value = value["Fn::ImportValue"]
        elif isinstance(value, dict):  # {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/path/"]]}
            parts = value["Fn::Join"][1]
            value = "".join(
                str(buckets / p["Ref"]) if isinstance(p, dict) else p.removeprefix("s3://")
                for p in parts
            )
        argv += [name, value]
    return argv


@pytest.fixture(scope="module")
def orders_job(synth) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return job_arguments(synth("dev").template("lake"), "public.orders")


def test_parse_arguments_template_defaults_fill_what_glue_passes(
    orders_job: dict[str, Any],
) -> None:
    module = runpy.run_path(str(ENTRY))
    args = module["parse_arguments"](local_argv(orders_job, Path("/b")))
    assert (args["table"], args["record_key"], args["table_type"]) == (
        "public.orders",
        "id",
        "COPY_ON_WRITE",
    )
    assert args["partition_fields"] == "order_date"
    assert args["changes_path"].endswith("/topics/cdclake-dev.public.orders/")


def test_glue_entry_template_arguments_carry_table_column_settings(synth) -> None:  # type: ignore[no-untyped-def]
    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    module = runpy.run_path(str(ENTRY))
    options = module["merge_options"](module["parse_arguments"](local_argv(customers, Path("/b"))))
    assert options.exclude_columns == frozenset({"password_hash"})
    assert options.column_types == {}
    assert "--format" not in customers  # the script has no such option any more


def test_glue_entry_template_tombstone_retention_reaches_run(synth) -> None:  # type: ignore[no-untyped-def]
    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    module = runpy.run_path(str(ENTRY))
    options = module["merge_options"](module["parse_arguments"](local_argv(customers, Path("/b"))))
    assert options.tombstone_retention_days == 7  # config/dev.yaml, not the library's 14


def test_glue_entry_template_table_services_reach_the_sink(synth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    module = runpy.run_path(str(ENTRY))
    args = module["parse_arguments"](local_argv(customers, tmp_path))
    sink = module["open_table"](args, module["merge_options"](args), None)
    assert (sink.retain_hours, sink.savepoint_days, sink.record_index_file_groups) == (12, 3, 44)


def test_glue_entry_template_clean_interval_reaches_the_sink(synth, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    assert customers["--clean_every_commits"] == "1"  # dev's 60-minute objective
    module = runpy.run_path(str(ENTRY))
    quarter_hourly = {**customers, "--clean_every_commits": "4"}  # a 15-minute objective's
    args = module["parse_arguments"](local_argv(quarter_hourly, tmp_path))
    assert module["open_table"](args, module["merge_options"](args), None).clean_every_commits == 4


def test_glue_entry_template_compaction_budget_reaches_a_merge_on_read_sink(  # type: ignore[no-untyped-def]
    synth, tmp_path: Path
) -> None:
    lines = job_arguments(synth("dev").template("lake"), "public.order_lines")
    module = runpy.run_path(str(ENTRY))
    args = module["parse_arguments"](local_argv(lines, tmp_path))
    assert module["open_table"](args, module["merge_options"](args), None).compaction_io_mb == 18000


def test_glue_entry_column_types_survive_commas_in_spark_types() -> None:
    module = runpy.run_path(str(ENTRY))
    argv = list(MINIMAL_ARGV)
    argv += ["--max_bad_fraction", "0", "--column_types", '{"amount": "decimal(10,2)"}']
    options = module["merge_options"](module["parse_arguments"](argv))
    assert options.column_types == {"amount": "decimal(10,2)"}


def test_glue_entry_run_without_retention_uses_library_default() -> None:
    from cdclake_merge.job import DEFAULT_TOMBSTONE_RETENTION_DAYS

    module = runpy.run_path(str(ENTRY))
    argv = list(MINIMAL_ARGV)
    argv += ["--max_bad_fraction", "0"]
    options = module["merge_options"](module["parse_arguments"](argv))
    assert options.tombstone_retention_days == DEFAULT_TOMBSTONE_RETENTION_DAYS


def test_glue_entry_template_run_cap_reaches_run(synth) -> None:  # type: ignore[no-untyped-def]
    from environment.config import load_config

    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    module = runpy.run_path(str(ENTRY))
    options = module["merge_options"](module["parse_arguments"](local_argv(customers, Path("/b"))))
    dev = load_config("dev")
    glue_job = dev.lake.glue_job_of(dev.table("public.customers"))
    assert (options.max_files, options.max_bytes) == (
        glue_job.files_per_run(),
        glue_job.bytes_per_run(),
    )


def test_glue_entry_older_job_without_run_cap_applies_everything() -> None:
    module = runpy.run_path(str(ENTRY))
    argv = list(MINIMAL_ARGV)
    argv += ["--max_bad_fraction", "0"]
    options = module["merge_options"](module["parse_arguments"](argv))
    assert (options.max_files, options.max_bytes) == (None, None)


def test_glue_entry_run_cap_not_a_number_refused_before_a_session() -> None:
    module = runpy.run_path(str(ENTRY))
    argv = list(MINIMAL_ARGV)
    argv += ["--max_bad_fraction", "0", "--max_files_per_run", "10k"]
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"](argv)
    assert str(refused.value) == (
        "cdclake merge failed: --max_files_per_run must be a positive whole number, not '10k'"
    )


def test_glue_entry_script_failure_ends_on_its_line_for_the_runs_error_message() -> None:
    # Glue records a script's uncaught exception as the run's ErrorMessage ("Type: message"):
    # the dispatcher parks a table on the merge's own words there (cdclake_merge.failures).
    from cdclake_merge.failures import deterministic_kind

    argv = [*MINIMAL_ARGV[1:], "--max_bad_fraction", "0", "--max_files_per_run", "10k"]
    ran = subprocess.run(
        [sys.executable, str(ENTRY), *argv], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 1, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last == (
        "RunFailed: cdclake merge failed: --max_files_per_run must be a positive whole number, "
        "not '10k'"
    )
    assert deterministic_kind(last) == "ConfigError"


def test_glue_entry_template_arguments_without_mode_merge(orders_job: dict[str, Any]) -> None:
    module = runpy.run_path(str(ENTRY))
    assert "--mode" not in orders_job  # a run argument only: `cdclake quarantine replay`
    assert module["parse_arguments"](local_argv(orders_job, Path("/b")))["mode"] == "merge"


def test_glue_entry_unknown_mode_refused_before_a_session() -> None:
    module = runpy.run_path(str(ENTRY))
    argv = list(MINIMAL_ARGV)
    argv += ["--max_bad_fraction", "0", "--mode", "replay-all"]
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"](argv)
    assert str(refused.value) == (
        "cdclake: --mode must be one of merge, replay, restore, rebuild, erase, not 'replay-all'"
    )


def test_glue_entry_erase_request_not_an_id_refused_before_a_session() -> None:
    module = runpy.run_path(str(ENTRY))
    argv = [*MINIMAL_ARGV, "--max_bad_fraction", "0", "--mode", "erase"]
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"]([*argv, "--erase_request", "../../x"])
    assert str(refused.value) == (
        "cdclake erase failed: --erase_request must be the 32 hex digits `cdclake erase` "
        "started the run with, not '../../x'"
    )


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.slow
def test_glue_entry_template_arguments_merge_generated_events_into_hudi(  # type: ignore[no-untyped-def]
    spark, orders_job: dict[str, Any], tmp_path: Path, capsys
) -> None:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    argv = local_argv(orders_job, tmp_path / "buckets")
    args = dict(zip(argv[1::2], argv[2::2], strict=True))
    source = tmp_path / "generated"
    generate_files(source, GeneratorOptions(events=300, seed=9, keys=40))
    shutil.copytree(next((source / "topics").iterdir()), args["--changes_path"])
    module = runpy.run_path(str(ENTRY))

    assert module["main"](argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_merge"]
    assert summary["committed"] and summary["table"] == "cdclake_dev.public_orders"
    assert module["main"](argv) == 0  # the console rerun: nothing new, nothing written
    rerun = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_merge"]
    assert rerun["committed"] is False

    rows = spark.table("cdclake_dev.public_orders")
    assert "order_date" in {r[0] for r in spark.sql("DESCRIBE cdclake_dev.public_orders").collect()}
    from cdclake_merge.export import rows_as_json

    exported = visible([json.loads(r) for r in rows_as_json(rows.drop(*_hoodie(rows)), ("id",))])
    assert exported == expected_rows(source)


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.slow
def test_glue_entry_restore_mode_rolls_the_table_back_to_its_savepoint(  # type: ignore[no-untyped-def]
    spark, synth, tmp_path: Path, capsys
) -> None:
    from cdclake_merge.generator import GeneratorOptions, generate_files

    # public.customers: the other tests here register public.orders in the shared metastore.
    customers = job_arguments(synth("dev").template("lake"), "public.customers")
    argv = local_argv(customers, tmp_path / "buckets")
    args = dict(zip(argv[1::2], argv[2::2], strict=True))
    first, later = tmp_path / "first", tmp_path / "later"
    generate_files(first, GeneratorOptions(events=100, seed=3, keys=20))
    generate_files(later, GeneratorOptions(events=100, seed=4, keys=20))
    shutil.copytree(next((first / "topics").iterdir()), args["--changes_path"])
    module = runpy.run_path(str(ENTRY))
    assert module["main"](argv) == 0  # version 1, the day's savepoint
    for path in next((later / "topics").iterdir()).rglob("*.json"):  # later offsets
        target = Path(args["--changes_path"]) / path.parent.name / path.name.replace("+00", "+10")
        shutil.copy(path, target)
    assert module["main"](argv) == 0  # version 2
    capsys.readouterr()

    assert module["main"]([*argv, "--mode", "restore", "--restore_to", "latest"]) == 0

    restored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_restore"]
    assert restored == {"table": "cdclake_dev.public_customers", "version": 1}
    root = Path(args["--warehouse_path"]) / "cdclake_dev.db" / "public_customers"
    rows = spark.read.format("hudi").load(f"file://{root}")
    assert rows.where("not _hoodie_is_deleted").count() == len(expected_rows(first))


def _hoodie(frame: Any) -> list[str]:
    return [c for c in frame.columns if c.startswith("_hoodie")]


def test_local_session_sets_the_glue_jobs_spark_conf(spark: Any) -> None:
    # The Glue job passes the same mapping as its --conf (tests/cdk/test_lake_stack.py).
    from cdclake_merge.session import SPARK_CONF

    assert {key: spark.conf.get(key, None) for key in SPARK_CONF} == dict(SPARK_CONF)


def test_local_session_start_prints_nothing_on_stderr(tmp_path: Path) -> None:
    """A CLI run's stderr is for its own lines: PySpark's start says nothing there (Spark
    announces its default log level unless the gateway's logger has a level of its own)."""
    started = run_local_session(tmp_path / "warehouse", "session.range(3).count()")
    assert started.stderr == ""


def test_local_session_driver_java_options_from_the_environment_reach_the_jvm(
    tmp_path: Path,
) -> None:
    started = run_local_session(
        tmp_path / "warehouse",
        "print(session.sparkContext._jvm.java.lang.System.getProperty('cdclake.probe'))",
        java_options="-XX:TieredStopAtLevel=1 -Dcdclake.probe=set",
    )
    assert started.stdout.strip() == "set"


def test_local_session_hive_resources_under_the_warehouse_not_the_temp_folder(
    tmp_path: Path,
) -> None:
    # Hive's session state made <tmp>/<session id>_resources and never removed it: one folder
    # left behind by every local merge.
    temp = tmp_path / "tmp"
    temp.mkdir()
    run_local_session(
        tmp_path / "warehouse",
        "session.sql('SHOW DATABASES').collect()",
        java_options=f"-XX:TieredStopAtLevel=1 -Djava.io.tmpdir={temp}",
    )
    assert [p.name for p in temp.iterdir() if p.name.endswith("_resources")] == []
    assert (tmp_path / "warehouse" / ".hive-resources").is_dir()


def test_local_session_shared_session_keeps_the_optimising_compiler(spark: Any) -> None:
    """The shared session is started without ``JAVA_OPTIONS_ENV``'s options: it keeps the
    optimising compiler the environment takes from the processes the tests start."""
    import os

    from cdclake_merge.session import JAVA_OPTIONS_ENV

    if "TieredStopAtLevel" not in os.environ.get(JAVA_OPTIONS_ENV, ""):
        pytest.skip(f"{JAVA_OPTIONS_ENV} does not set -XX:TieredStopAtLevel here")
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert not [a for a in runtime.getInputArguments() if "TieredStopAtLevel" in a]


@pytest.mark.parametrize("mode", [0o751, 0o640, 0o007])
def test_local_session_local_permissions_set_in_the_jvm_exact(
    spark: Any, tmp_path: Path, mode: int
) -> None:
    # jvm/local-fs: set with java.nio, not by a `chmod` process per file (session.LOCAL_FS_JAR).
    jvm = spark.sparkContext._jvm
    path = tmp_path / "f"
    path.write_text("x")
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.setPermission(hadoop_path, jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
    assert fs.getClass().getName() == "io.cdclake.local.NioLocalFileSystem"
    assert path.stat().st_mode & 0o777 == mode


def test_spark_jars_without_merge_jar_names_it_and_make_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake_merge.session import HUDI_BUNDLE, JARS_ENV, MissingJars, spark_jars

    (tmp_path / HUDI_BUNDLE).touch()
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    with pytest.raises(MissingJars, match=r"^cdclake-merge\.jar not found in .*: run `make setup`"):
        spark_jars()


# --- rebuild (issue #49): the entry follows the table's generations ---------------------------


REQUEST = "0123456789abcdef0123456789abcdef"  # an erase request's id, as `cdclake erase` names one


def _notes_argv(root: Path) -> list[str]:
    """A job of public.notes over folders under ``root``, its change files in the topic folder
    the S3 sink writes."""
    return [
        *("merge_job.py", "--table", "public.notes", "--database", "rebuild_entry"),
        *("--changes_path", str(root / "topics" / "cdclake-t.public.notes") + "/"),
        *("--warehouse_path", str(root / "warehouse"), "--quarantine_path", str(root / "q")),
        *("--record_key", "id", "--max_bad_fraction", "0"),
    ]


def _note_events(root: Path, name: str, lsn: int, notes: bool) -> None:
    from tests.merge.support import envelope, with_schema

    fields = [{"field": "id", "type": "int32"}, {"field": "name", "type": "string"}]
    folder = root / "topics" / "cdclake-t.public.notes" / "partition=0"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for id_ in (1, 2):
        after: dict[str, Any] = {"id": id_, "name": f"n{id_}"}
        if notes:
            after["note"] = "kept?"
        event = envelope("c" if notes else "r", lsn=lsn + id_, commit=lsn + id_, after=after)
        extra = [{"field": "note", "type": "string"}] if notes else []
        lines.append(json.dumps(with_schema(event, [*fields, *extra])))
    (folder / name).write_text("\n".join(lines) + "\n")


@pytest.mark.spark
def test_glue_entry_replay_while_a_rebuild_is_building_refused(spark: Any, tmp_path: Path) -> None:
    from cdclake_merge.generations import Generations, write_generations
    from cdclake_merge.storage import LocalFileSystem

    argv = _notes_argv(tmp_path)
    sidecar = tmp_path / "warehouse" / "rebuild_entry.db" / "_cdclake" / "public_notes"
    write_generations(LocalFileSystem(), str(sidecar), Generations(building=2))
    module = runpy.run_path(str(ENTRY))
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"]([*argv, "--mode", "replay"])
    assert str(refused.value) == (
        "cdclake replay failed: a rebuild of the table (generation 2) is in progress: its live "
        "generation takes no commit until the rebuild is swapped in"
    )


@pytest.mark.spark
def test_glue_entry_erase_while_a_replaced_generation_remains_refused(
    spark: Any, tmp_path: Path
) -> None:
    from cdclake_merge.generations import Generations, write_generations
    from cdclake_merge.storage import LocalFileSystem

    argv = _notes_argv(tmp_path)
    sidecar = tmp_path / "warehouse" / "rebuild_entry.db" / "_cdclake" / "public_notes"
    write_generations(LocalFileSystem(), str(sidecar), Generations(live=2, retired=1))
    module = runpy.run_path(str(ENTRY))
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"]([*argv, "--mode", "erase", "--erase_request", REQUEST])
    assert "generation 1 of rebuild_entry.public_notes, which a rebuild's swap replaced" in str(
        refused.value
    )


@pytest.mark.spark
@pytest.mark.hudi
def test_glue_entry_erase_run_that_failed_keeps_its_request_for_a_rerun(
    spark: Any, tmp_path: Path
) -> None:
    from cdclake_merge.erase_request import request_path, write_request
    from cdclake_merge.storage import LocalFileSystem

    argv = _notes_argv(tmp_path)
    _note_events(tmp_path, "a.json", 100, notes=False)
    module = runpy.run_path(str(ENTRY))
    module["main"](argv)
    warehouse, table = str(tmp_path / "warehouse"), "rebuild_entry.public_notes"
    request = write_request(LocalFileSystem(), warehouse, table, {"id": "1"})
    with pytest.raises(module["RunFailed"], match="still holds"):  # not deleted at the source
        module["main"]([*argv, "--mode", "erase", "--erase_request", request])
    assert Path(request_path(warehouse, table, request)).exists()


@pytest.mark.spark
def test_glue_entry_erase_request_removed_or_never_written_refused(
    spark: Any, tmp_path: Path
) -> None:
    module = runpy.run_path(str(ENTRY))
    with pytest.raises(module["RunFailed"]) as refused:
        module["main"]([*_notes_argv(tmp_path), "--mode", "erase", "--erase_request", REQUEST])
    folder = tmp_path / "warehouse" / "erase-requests" / "rebuild_entry.public_notes"
    assert str(refused.value) == (
        f"cdclake erase failed: erase request {REQUEST} is not in {folder}: an erase that "
        "succeeded removed it, or it expired unused; start another with `cdclake erase`"
    )


@pytest.mark.spark
@pytest.mark.hudi
@pytest.mark.slow
def test_glue_entry_rebuild_mode_dropping_columns_swaps_in_a_table_without_them(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path, capsys
) -> None:
    argv = _notes_argv(tmp_path)
    module = runpy.run_path(str(ENTRY))
    _note_events(tmp_path, "a.json", 10, notes=True)
    assert module["main"](argv) == 0  # generation 1, with note
    assert module["main"]([*argv, "--mode", "rebuild"]) == 0  # begun: the change folders listed
    _note_events(tmp_path, "b.json", 20, notes=False)  # the snapshot's reads, note dropped
    capsys.readouterr()

    rebuild = ["--mode", "rebuild", "--snapshot_done", "true", "--drop_columns", "drop"]
    assert module["main"]([*argv, *rebuild]) == 0

    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["cdclake_rebuild"]
    assert (run["live"], run["swapped"], run["upserts"]) == (2, True, 2)
    spark.catalog.refreshTable("rebuild_entry.public_notes")
    rows = spark.table("rebuild_entry.public_notes")
    assert "note" not in rows.columns
    assert sorted((r["id"], r["name"]) for r in rows.collect()) == [(1, "n1"), (2, "n2")]


def test_glue_entry_template_without_drop_columns_keeps_them(orders_job: dict[str, Any]) -> None:
    module = runpy.run_path(str(ENTRY))
    assert "--drop_columns" not in orders_job  # config's default, keep: templates as they were
    args = module["parse_arguments"](local_argv(orders_job, Path("/b")))
    assert module["rebuild_arguments"](args) == (False, True)


def test_glue_entry_config_dropping_columns_reaches_the_rebuild() -> None:
    from environment.config import load_config

    dev = load_config("dev")
    dropping = dev.table("public.orders").model_copy(update={"drop_columns": "drop"})
    arguments = {f"--{n}": v for n, v in dev.lake.rebuild_of(dropping).items()}
    module = runpy.run_path(str(ENTRY))
    argv = [*MINIMAL_ARGV, "--max_bad_fraction", "0", *itertools.chain(*arguments.items())]
    args = module["parse_arguments"](argv)
    assert module["rebuild_arguments"](args) == (False, False)
