"""``cdclake rebuild --env ENV --table SCHEMA.TABLE``: rebuild a lake table beside the live one.

The design is docs/merge-job.md's "Rebuild beside the live table"; the merge side is
:mod:`cdclake_merge.generations` and :mod:`cdclake_merge.rebuild`. This command does what
needs a database client, then has the rebuild's runs made:

1. begin the rebuild (:func:`~cdclake_merge.generations.begin_rebuild`: the next generation
   and the end of every change folder, listed now), or find the one in progress;
2. if its snapshot was not signalled yet, record a new signal id in the state object, then
   send the incremental-snapshot signal with that id to the lake capture's signal table only
   (the fan-out has nothing to rebuild). After the listing, never before: a snapshot read
   written before the listing would be skipped as already listed, and its row lost. A rebuild
   already signalled is continued, not signalled again (the snapshot Debezium started goes on
   across connector restarts);
   A table that keeps its history is begun as a copy of the live generation instead
   (:func:`begin_copy`: no snapshot, no signal, no database), for a change of its layout;
3. locally: rebuild runs in this process until the generation is caught up and swapped in,
   then one JSON line (generation, rows, seconds); on AWS: a run of the table's Glue job with
   ``--mode rebuild``; the dispatcher starts the next ones while the state object says
   ``building``. ``--wait`` follows them until the state object names the generation live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from cdclake.errors import fail, one_line
from cdclake.quarantine import ConfigDirOption, EnvOption, TableOption
from cdclake.snapshot import DsnOption, NoSslOption, SecretIdOption, database_errors

if TYPE_CHECKING:
    from cdclake.ops import LakePlace
    from cdclake_merge.generations import Generations
    from environment.config import EnvironmentConfig

console = Console(stderr=True, soft_wrap=True)
REBUILD_ARGUMENTS = {"--mode": "rebuild"}  # glue_jobs/merge_job.py
POLL_SECONDS = 15.0
LOCAL_POLL_SECONDS = 2.0


def sidecar_of(place: LakePlace) -> str:
    """The table's own sidecar (generation 1's), which holds the state object."""
    from cdclake_merge.pending import TablePaths

    return TablePaths.of(place.warehouse, place.lake_table).sidecar


def begin_and_signal(fs: Any, place: LakePlace, signal: Callable[[str], None]) -> Generations:
    """The table's rebuild in progress, begun here if none is, with its snapshot signalled
    (:func:`~cdclake_merge.generations.begin_signalled`)."""
    from cdclake_merge.generations import begin_signalled

    return begin_signalled(fs, sidecar_of(place), place.changes, signal)


def _no_spark() -> Any:
    """The Spark factory of a sink that only reads files (nothing here reads rows)."""
    raise RuntimeError("this step of cdclake rebuild reads no rows")


def begin_copy(
    config: EnvironmentConfig, place: LakePlace, fs: Any, before: Generations
) -> Generations:
    """A table that keeps its history: its rebuild by copy in progress, begun here if none is
    and the change is one a copy takes (else a one-line refusal, exit 2). Reads the live
    generation's files only; no database, no Spark."""
    from cdclake_merge.generations import begin_rebuild
    from cdclake_merge.rebuild import history_refusal

    live = config_generation_sink(config, place, _no_spark, fs)(before.live, False)
    refused = history_refusal(live, before)
    if refused is not None:
        fail(refused, 2)
    return begin_rebuild(fs, sidecar_of(place), place.changes, copy=True)


def _abandon(config: EnvironmentConfig, place: LakePlace, fs: Any, before: Generations) -> None:
    from cdclake_merge.rebuild import abandon

    if before.building is None:
        fail(f"{place.source_table}: no rebuild is in progress: nothing to abandon", 2)

    abandon(config_generation_sink(config, place, _no_spark, fs))
    console.print(
        f"{place.source_table}: rebuild of generation {before.building} abandoned; generation "
        f"{before.live} takes the table's runs again",
        highlight=False,
    )
    print(json.dumps({"table": place.source_table, "abandoned": before.building}))


def _swapped_already(
    config: EnvironmentConfig, place: LakePlace, fs: Any, before: Generations, *, json_output: bool
) -> None:
    """The command run again after a swap it did not live to report (killed, or its output
    lost): nothing is begun, since another rebuild would cost a whole snapshot or copy; a swap
    cut short before its catalog update is finished here locally, by the next run on AWS."""
    console.print(
        f"{place.source_table}: rebuild of generation {before.live} already swapped in; "
        f"generation {before.retired} is removed by the next merge run, and a rebuild can "
        "begin after it",
        highlight=False,
    )
    if not place.local:
        if before.catalog_pending:
            console.print("the catalog update is finished by the table's next run", highlight=False)
        if json_output:
            print(json.dumps({"table": place.source_table, "live": before.live, "swapped": True}))
        return
    from cdclake.lake_reader import local_spark
    from cdclake.ops import local_path
    from cdclake_merge.rebuild import follow_live

    started = time.monotonic()
    factory = local_spark(local_path(place.warehouse))
    state = follow_live(factory, config_generation_sink(config, place, factory, fs))
    print(json.dumps(_done(factory, place, state.live, started)))


def _done(
    factory: Callable[[], Any], place: LakePlace, generation: int, started: float
) -> dict[str, Any]:
    """The line a local rebuild prints when its generation is live."""
    rows = factory().sql(f"SELECT count(*) FROM {place.lake_table}").collect()[0][0]
    return {
        "table": place.source_table,
        "generation": generation,
        "rows": int(rows),
        "seconds": round(time.monotonic() - started, 1),
    }


def lake_signal(
    config: EnvironmentConfig, table: str, *, dsn: str | None, secret_id: str | None, no_ssl: bool
) -> Callable[[str], None]:
    """Sends the rebuild's snapshot signal to the lake capture's signal table."""
    from cdclake.snapshot import database_connection, send_signal

    replication = config.database.replication

    def signal(signal_id: str) -> None:
        with database_connection(config, dsn=dsn, secret_id=secret_id, no_ssl=no_ssl) as conn:
            send_signal(
                conn,
                signal_tables=[replication.signal_table],
                publication=replication.publication,
                table=table,
                signal_id=signal_id,
            )

    return signal


# --- local: this process ---------------------------------------------------------------------


def config_generation_sink(
    config: EnvironmentConfig, place: LakePlace, factory: Callable[[], Any], fs: Any
) -> Callable[[int, bool], Any]:
    """The table's sink of a generation (``catalog``: whether its commits sync the catalog),
    with config's spec and services, as ``cdclake merge --env local`` opens it; on AWS, for
    what reads its files without Spark (the check before a rebuild by copy)."""
    from cdclake_merge.sink import open_sink

    services = config.lake.services_of(config.lake_table(place.source_table))

    def generation_sink(generation: int, catalog: bool) -> Any:
        return open_sink(
            warehouse=place.warehouse,
            table=place.lake_table,
            key=place.key,
            fs=fs,
            spark_factory=factory,
            partition_fields=place.partition,
            table_type=place.table_type,
            quarantine_root=place.quarantine_root,
            sync_catalog=catalog,
            generation=generation,
            **services,
        )

    return generation_sink


def rebuild_locally(
    config: EnvironmentConfig,
    place: LakePlace,
    *,
    timeout: float,
    spark_factory: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Rebuild runs of the local table until its new generation is swapped in; what the
    command prints. RuntimeError when it is not caught up within ``timeout`` seconds."""
    from cdclake.lake_reader import local_spark
    from cdclake.ops import AnyFileSystem, local_path
    from cdclake_merge.generations import notifications_beside
    from cdclake_merge.rebuild import rebuild_step

    factory = spark_factory or local_spark(local_path(place.warehouse))
    table = config.lake_table(place.source_table)
    fs = AnyFileSystem()
    generation_sink = config_generation_sink(config, place, factory, fs)
    started = time.monotonic()
    notifications = notifications_beside(place.changes, place.source_table)
    while True:
        step = rebuild_step(
            factory,
            fs,
            generation_sink,
            place.merge_options(),
            notifications=notifications,
            keep_columns=table.drop_columns == "keep",
        )
        generation = step.state.live if step.swapped else step.state.building
        console.print(
            f"{place.source_table}: rebuild run of generation {generation}: "
            f"{step.result.files_applied} change files, version {step.result.version}"
            + ("; caught up and swapped in" if step.swapped else ""),
            highlight=False,
        )
        if step.swapped:
            break
        if time.monotonic() - started > timeout:
            raise RuntimeError(
                f"{place.source_table}: generation {generation} not caught up after "
                f"{timeout:g} s (is the snapshot still running, or change files still landing? "
                "cdclake rebuild again continues)"
            )
        if not step.result.committed:
            time.sleep(LOCAL_POLL_SECONDS)
    return _done(factory, place, step.state.live, started)


# --- AWS: runs of the table's Glue job --------------------------------------------------------


def wait_for_rebuild(
    glue: Any,
    fs: Any,
    place: LakePlace,
    generation: int,
    run_id: str,
    *,
    timeout: float,
    interval: float = POLL_SECONDS,
) -> Generations:
    """Follow the job's runs from ``run_id`` (the ones the dispatcher starts after it too)
    until the state object names ``generation`` live with its catalog moved. RuntimeError
    with a one-line reason: a run failed, or ``timeout`` seconds passed."""
    from cdclake.quarantine import wait_for_run
    from cdclake_merge.generations import read_generations

    job = str(place.job_name)
    deadline = time.monotonic() + timeout
    followed: set[str] = set()
    while True:
        run = wait_for_run(glue, job, run_id, interval=interval)
        followed.add(run_id)
        state = str(run.get("JobRunState"))
        if state != "SUCCEEDED":
            error = one_line(run.get("ErrorMessage") or "no error message", limit=None)
            raise RuntimeError(f"rebuild run {run_id} of Glue job {job} ended {state}: {error}")
        generations = read_generations(fs, sidecar_of(place))
        if generations.live == generation and not generations.catalog_pending:
            return generations
        console.print(
            f"{place.source_table}: generation {generation} still building after run {run_id}",
            highlight=False,
        )
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{place.source_table}: generation {generation} still building after "
                    f"{timeout:g} s; the dispatcher starts its next runs (cdclake status "
                    "--env ENV shows it)"
                )
            newer = [r for r in _runs(glue, job) if r["Id"] not in followed]
            if newer:
                run_id = str(newer[0]["Id"])
                break
            time.sleep(interval)


def _runs(glue: Any, job: str) -> list[dict[str, Any]]:
    """The job's recent runs, newest first."""
    runs = list(glue.get_job_runs(JobName=job).get("JobRuns", []))
    return sorted(runs, key=lambda r: r.get("StartedOn") or 0, reverse=True)


# --- CLI ---------------------------------------------------------------------------------------


def rebuild(
    env: EnvOption,
    table: TableOption,
    dsn: DsnOption = None,
    secret_id: SecretIdOption = None,
    no_ssl: NoSslOption = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="AWS: follow the rebuild's runs until it is swapped in"),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(help="seconds to wait for the rebuild to catch up (locally, or --wait)"),
    ] = 3600.0,
    json_output: Annotated[bool, typer.Option("--json", help="AWS: print JSON")] = False,
    abandon: Annotated[
        bool,
        typer.Option(
            "--abandon",
            help="give up the rebuild in progress (its new generation deleted; the live one "
            "takes the runs again)",
        ),
    ] = False,
    config_dir: ConfigDirOption = None,
) -> None:
    """Rebuild a table beside the live one from a fresh incremental snapshot, then swap it in.

    Locally the rebuild runs here to the end; on AWS its runs are the table's Glue job's
    (``--mode rebuild``). A rebuild in progress is continued, never signalled twice. A table
    that keeps its history is rebuilt as a copy of the live one instead (no snapshot), for a
    change of its table type, partitioning or record index size.
    """
    from cdclake.ops import AnyFileSystem
    from cdclake.quarantine import resolve, start_mode_run
    from cdclake_merge.generations import read_generations
    from environment.config import load_config

    place, glue = resolve(env, table, config_dir=config_dir)
    config = load_config(env, config_dir=config_dir)
    fs = AnyFileSystem()
    before = read_generations(fs, sidecar_of(place))
    if abandon:
        _abandon(config, place, fs, before)
        return
    if before.building is None and before.retired is not None:
        _swapped_already(config, place, fs, before, json_output=json_output or wait)
        return
    if place.history:
        state = begin_copy(config, place, fs, before)
    else:
        if not (before.snapshot_id and before.signal_sent) and env != "local" and dsn is None:
            fail(
                f"--env {env}: the rebuild's snapshot signal needs the database: give --dsn "
                "(an SSM port forward, docs/database.md)",
                2,
            )
        signal = lake_signal(config, table, dsn=dsn, secret_id=secret_id, no_ssl=no_ssl)
        with database_errors():
            state = begin_and_signal(fs, place, signal)
    generation = state.building
    assert generation is not None  # begin_rebuild returns a rebuild in progress
    how = "continued" if before.building is not None else "begun"
    source = f"a copy of generation {state.live}" if state.copy else f"snapshot {state.snapshot_id}"
    console.print(f"{table}: rebuild of generation {generation} {how} ({source})", highlight=False)
    if place.local:
        _rebuild_here(config, place, timeout)
        return
    try:
        run_id = start_mode_run(glue, place, dict(REBUILD_ARGUMENTS))
    except RuntimeError as exc:
        fail(str(exc))
    shown: dict[str, Any] = {
        "table": table,
        "generation": generation,
        "job": place.job_name,
        "job_run": run_id,
        "snapshot_id": state.snapshot_id,
    }
    console.print(f"{table}: rebuild run {run_id} of Glue job {place.job_name}", highlight=False)
    if wait:
        started = time.monotonic()
        try:
            wait_for_rebuild(glue, fs, place, generation, run_id, timeout=timeout)
        except RuntimeError as exc:
            fail(str(exc))
        shown["live"] = generation
        shown["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(shown) if json_output or wait else run_id)


def _rebuild_here(config: EnvironmentConfig, place: LakePlace, timeout: float) -> None:
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.job import MergeError

    try:
        done = rebuild_locally(config, place, timeout=timeout)
    except (MergeError, CatalogSyncError, RuntimeError) as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc), 2)
    print(json.dumps(done))
