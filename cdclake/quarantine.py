"""``cdclake quarantine list | replay``: the lines a merge could not apply, and applying them later.

How the merge keeps them (cdclake_merge.hudi ``stage``): the commit of version N writes the
run's bad lines to ``<quarantine root>/v<N, 8 digits>/`` as JSON lines ``{source_file, line,
reason, raw}``. A run that stopped above ``max_bad_fraction`` wrote ``failed-v<N>/`` and
committed nothing: those lines are still in pending change files, and the next run reads
them again, so they are not listed here.

A replay, after a fix (config or code) that makes some of them readable:

1. every listed line not replayed yet is parsed again with the merge's own parser
   (``cdclake_merge.debezium.parse_line``) and the table's current spec;
2. the lines that now parse are written, in their original order, to
   ``<quarantine root>/replays/r<N>/lines.json`` and applied by ``run_merge`` through the
   table's sink, as one commit. The merge's ordering rules apply: a replayed change older
   than what the table holds for its key is skipped as stale, never applied over it;
3. ``replays/r<N>/_ledger.json`` records which lines that commit applied. Listing leaves
   them out, so a second replay finds nothing and commits nothing.

Lines that still fail are not merged and stay where they are; the ledger keeps their
current reason. The replay commit does not move the table's change-file positions.
A replay that died after its commit and before its ledger is safe to run again: each
replayed change is then not newer than the stored row and is skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cdclake.ops import AnyFileSystem, LakePlace, local_path

VERSION_FOLDER = re.compile(r"^v(\d{8})$")
REPLAYS = "replays"
LEDGER = "_ledger.json"
LINES = "lines.json"
# TableState / Changes fields that say which change files are applied: a replay reads its
# own folder from nothing and leaves the table's positions as they were.
INPUT_FIELDS = ("positions", "legacy_applied", "applied_files")


@dataclass(frozen=True)
class QuarantinedLine:
    folder: str  # v<N>: the commit that quarantined it
    source_file: str
    line: int
    reason: str
    raw: str

    @property
    def id(self) -> str:
        return f"{self.folder}:{self.source_file}:{self.line}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "quarantined_by": self.folder,
            "source_file": self.source_file,
            "line": self.line,
            "reason": self.reason,
        }


@dataclass
class ReplayResult:
    replay: str | None = None
    version: int | None = None  # the commit that applied the lines
    applied: list[str] = field(default_factory=list)
    still_failing: dict[str, str] = field(default_factory=dict)  # id -> current reason
    merge: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay,
            "version": self.version,
            "applied": len(self.applied),
            "still_failing": len(self.still_failing),
            "still_failing_lines": [
                {"id": k, "reason": v} for k, v in sorted(self.still_failing.items())
            ],
            "merge": self.merge,
        }


def _part_files(fs: Any, folder: str) -> list[str]:
    return [
        f"{folder.rstrip('/')}/{name}"
        for name in fs.list_dir(folder)
        if name.endswith(".json") and not name.startswith((".", "_"))
    ]


def quarantined(fs: Any, root: str, upto_version: int | None = None) -> list[QuarantinedLine]:
    """Every line the table's commits quarantined, oldest commit first (replayed ones too).

    Folders of versions above ``upto_version`` were staged by runs that never committed.
    """
    lines: list[QuarantinedLine] = []
    for name in fs.list_dir(root):
        match = VERSION_FOLDER.match(name)
        if match is None or (upto_version is not None and int(match.group(1)) > upto_version):
            continue
        for part in _part_files(fs, f"{root.rstrip('/')}/{name}"):
            for text in fs.read_text(part).splitlines():
                if not text.strip():
                    continue
                row = json.loads(text)
                lines.append(
                    QuarantinedLine(
                        folder=name,
                        source_file=str(row.get("source_file", "")),
                        line=int(row.get("line") or 0),
                        reason=str(row.get("reason", "")),
                        raw=str(row.get("raw", "")),
                    )
                )
    return sorted(lines, key=lambda q: (q.folder, q.source_file, q.line))


def ledgers(fs: Any, root: str) -> list[dict[str, Any]]:
    folder = f"{root.rstrip('/')}/{REPLAYS}"
    found = []
    for name in fs.list_dir(folder):
        path = f"{folder}/{name}/{LEDGER}"
        if fs.exists(path):
            found.append(json.loads(fs.read_text(path)))
    return sorted(found, key=lambda entry: str(entry["replay"]))


@dataclass(frozen=True)
class Listing:
    pending: list[QuarantinedLine]  # not applied by any replay
    replayed: dict[str, str]  # id -> the replay that applied it
    reasons: dict[str, str]  # id -> the newest reason (a replay re-parses)


def listing(fs: Any, root: str, upto_version: int | None = None) -> Listing:
    replayed: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for entry in ledgers(fs, root):
        for line_id in entry.get("applied", ()):
            replayed[line_id] = str(entry["replay"])
        reasons.update(entry.get("still_failing", {}))
    lines = quarantined(fs, root, upto_version)
    pending = [q for q in lines if q.id not in replayed]
    return Listing(pending, replayed, {q.id: reasons.get(q.id, q.reason) for q in lines})


# --- replay ---------------------------------------------------------------------------------


def _input_defaults(state: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields(state):
        if f.name in INPUT_FIELDS:
            values[f.name] = f.default_factory() if callable(f.default_factory) else f.default
    return values


class ReplaySink:
    """The table's sink, seen by ``run_merge`` as if no change file had ever been applied.

    So the replay folder's file is pending; what gets committed keeps the table's own
    change-file positions and names the replay in the commit's run record.
    """

    def __init__(self, sink: Any, replay: str) -> None:
        self._sink = sink
        self._replay = replay
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)

    def load(self) -> Any:
        self._real = self._sink.load()
        if getattr(self._real, "legacy_applied", None) is not None:
            raise ValueError(
                f"table {self._sink.table}: its last commit predates change-file positions; "
                "run its merge once, then replay"
            )
        return replace(self._real, **_input_defaults(self._real))

    def read_live(self, spark: Any, state: Any) -> Any:
        return self._sink.read_live(spark, state)

    def read_state(self, spark: Any, state: Any) -> Any:
        return self._sink.read_state(spark, state)

    def stage(self, spark: Any, previous: Any, changes: Any) -> Any:
        kept = {
            f.name: getattr(self._real, f.name)
            for f in fields(changes)
            if f.name in INPUT_FIELDS and hasattr(self._real, f.name)
        }
        run = {**changes.run, "replay": self._replay}
        return self._sink.stage(spark, self._real, replace(changes, run=run, **kept))

    def commit(self, spark: Any, staged: Any) -> Any:
        return self._sink.commit(spark, staged)


def _spark_factory(warehouse: str) -> Callable[[], Any]:
    holder: dict[str, Any] = {}

    def get() -> Any:
        if "spark" not in holder:
            from cdclake_merge.session import local_session

            spark = local_session(local_path(warehouse))
            # Spark's own metastore client creates the embedded metastore's schema on first
            # use; Hudi's catalog sync opens another client that does not, and fails on a
            # warehouse no Spark catalog call has touched yet (a commit to an existing table
            # makes none before the sync).
            spark.sql("SHOW DATABASES").collect()
            holder["spark"] = spark
        return holder["spark"]

    return get


def open_table(place: LakePlace, spark_factory: Callable[[], Any]) -> Any:
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem

    return open_sink(
        warehouse=place.warehouse,
        table=place.lake_table,
        key=place.key,
        fs=LocalFileSystem(),
        spark_factory=spark_factory,
        partition_fields=place.partition,
        table_type=place.table_type,
        quarantine_root=place.quarantine_root,
    )


def replay(place: LakePlace, *, spark_factory: Callable[[], Any] | None = None) -> ReplayResult:
    """Apply the quarantined lines that the table's current spec reads (see the module doc)."""
    from cdclake_merge.debezium import parse_line
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.storage import LocalFileSystem, join

    if not place.local:
        raise ValueError("replay runs against the local stack only (see docs/operations.md)")
    fs = LocalFileSystem()
    factory = spark_factory or _spark_factory(place.warehouse)
    sink = open_table(place, factory)
    state = sink.load()
    pending = listing(fs, place.quarantine_root, state.version).pending
    options = MergeOptions(
        table=place.lake_table,
        key=place.key,
        changes="",
        column_types=dict(place.column_types),
        exclude_columns=frozenset(place.exclude),
        max_bad_fraction=place.max_bad_fraction,
    )
    result = ReplayResult()
    readable: list[QuarantinedLine] = []
    for item in pending:
        outcome = parse_line(item.raw, options.spec)
        if outcome.kind == "bad":
            result.still_failing[item.id] = str(outcome.reason)
        else:
            readable.append(item)
    if not readable:
        return result
    result.replay = f"r{state.version + 1:08d}"
    folder = join(place.quarantine_root, REPLAYS, result.replay)
    fs.delete(folder)  # a replay that died before its commit left this behind
    fs.write_text(join(folder, LINES), "".join(item.raw + "\n" for item in readable))
    merged = run_merge(
        factory, fs, ReplaySink(sink, result.replay), replace(options, changes=folder)
    )
    result.version, result.merge = merged.version, merged.as_dict()
    result.applied = [item.id for item in readable]
    ledger = {
        "replay": result.replay,
        "version": merged.version,
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "applied": result.applied,
        "still_failing": result.still_failing,
        "merge": result.merge,
    }
    fs.write_text(join(folder, LEDGER), json.dumps(ledger, indent=2))
    return result


# --- CLI ------------------------------------------------------------------------------------

app = typer.Typer(
    help="Lines the merge could not apply: list them, re-apply them after a fix.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)
EnvOption = Annotated[str, typer.Option("--env", help="environment: config/<env>.yaml")]
TableOption = Annotated[str, typer.Option("--table", help="SCHEMA.TABLE as in config")]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", help="environment file to take the table's spec from (a fix being tried)"
    ),
]
ConfigDirOption = Annotated[
    Path | None, typer.Option("--config-dir", help="folder of the environment files")
]


def _fail(message: str, code: int = 1) -> None:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def resolve(
    env: str, table: str, config_file: Path | None = None, config_dir: Path | None = None
) -> LakePlace:
    """The table of ``env`` (exits with a one-line error otherwise)."""
    from cdclake.config import ConfigError, load_config
    from cdclake.ops import aws_place, local_place

    try:
        config = load_config(env, path=config_file, config_dir=config_dir)
    except ConfigError as exc:
        _fail(str(exc).splitlines()[0], 2)
    if config.env != env:
        _fail(f"--config {config_file} is for environment {config.env}, not {env}", 2)
    try:
        config.lake_table(table)
        if env == "local":
            return local_place(config, table)
        import boto3

        return aws_place(config, table, boto3.client("glue", region_name=config.region))
    except ValueError as exc:
        _fail(str(exc), 2)
    except LookupError as exc:
        _fail(str(exc))
    raise AssertionError("unreachable")


def _current_version(place: LakePlace, fs: Any) -> int | None:
    from cdclake_merge.sink import open_existing_sink

    sink = open_existing_sink(
        warehouse=place.warehouse, table=place.lake_table, fs=fs, spark_factory=lambda: None
    )
    return sink.load().version if sink is not None else 0


@app.command("list")
def list_command(
    env: EnvOption,
    table: TableOption,
    show_all: Annotated[bool, typer.Option("--all", help="also lines already replayed")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    config_dir: ConfigDirOption = None,
) -> None:
    """The table's quarantined lines: where each came from (file, line) and why."""
    place = resolve(env, table, config_dir=config_dir)
    fs = AnyFileSystem()
    found = listing(fs, place.quarantine_root, _current_version(place, fs))
    lines = quarantined(fs, place.quarantine_root) if show_all else found.pending
    rows = [
        {
            **q.as_dict(),
            "reason": found.reasons.get(q.id, q.reason),
            "replayed_by": found.replayed.get(q.id),
        }
        for q in lines
        if show_all or q.id not in found.replayed
    ]
    if json_output:
        print(json.dumps({"table": table, "quarantine": place.quarantine_root, "lines": rows}))
        return
    grid = Table(title=f"{table}: {len(found.pending)} quarantined line(s) not replayed")
    for column in ("by", "source file", "line", "reason", *(["replayed by"] if show_all else [])):
        grid.add_column(column, overflow="fold")
    for row in rows:
        cells = [row["quarantined_by"], row["source_file"], str(row["line"]), row["reason"]]
        grid.add_row(*cells, *([row["replayed_by"] or "-"] if show_all else []))
    Console().print(grid)


@app.command("replay")
def replay_command(
    env: EnvOption,
    table: TableOption,
    config_file: ConfigOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Re-apply the quarantined lines the merge can read now, as one commit; once each."""
    if env != "local":
        _fail(
            f"--env {env}: replay runs on the local stack only for now; see docs/operations.md "
            "(Quarantined lines after a fix)",
            2,
        )
    place = resolve(env, table, config_file)
    from cdclake_merge.hudi import CatalogSyncError
    from cdclake_merge.job import MergeError

    try:
        result = replay(place)
    except (MergeError, CatalogSyncError) as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(str(exc), 2)
    if json_output:
        print(json.dumps(result.as_dict(), indent=2))
        return
    out = Console()
    if result.replay is None:
        out.print(f"{table}: nothing to replay", highlight=False)
    else:
        merge = result.merge
        out.print(
            f"{table}: replayed {len(result.applied)} line(s) as version {result.version} "
            f"({merge.get('upserts', 0)} upserts, {merge.get('deletes', 0)} deletes, "
            f"{merge.get('stale_skipped', 0)} older than the table, skipped)",
            highlight=False,
        )
    for line_id, reason in sorted(result.still_failing.items()):
        out.print(f"  still quarantined: {line_id}: {reason}", highlight=False)
