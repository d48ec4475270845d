"""The merge job's Glue Data Catalog calls checked against exactly the catalog statements the
lake stack gives its role.

No moto service stands behind Hive's metastore client, so the calls are recorded, not
enforced: a real merge in the shared SparkSession (Hudi's catalog sync in ``hms`` mode) runs
against Spark's embedded metastore, whose handler audits every call it serves (Hudi's and
Spark's session catalog's) through log4j; the test adds a file appender for that logger to the
running JVM for the recording. On Glue the same IMetaStoreClient calls go to AWS's Glue Data
Catalog client, which makes each one Glue API calls with the role's credentials; each recorded
call is mapped to those (``GLUE_CATALOG_ACTIONS``) on the catalog, database and table ARNs and
evaluated against the role's statements from the template. The table lives in a database of
its own (the metastore is shared by the session's Spark tests), renamed to the template's
database for the evaluation, and is dropped afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.iam.iam_helpers.metastore import (
    MetastoreCall,
    glue_catalog_accesses,
    metastore_audit,
    metastore_calls,
)
from tests.iam.iam_helpers.runs import Call, Run, docs_row
from tests.iam.iam_helpers.statements import Access, allowing, label, needed_for, unallowed
from tests.iam.iam_helpers.templates import logical_id, role_policy, symbolic_resolver

pytestmark = [pytest.mark.cdk, pytest.mark.spark, pytest.mark.hudi, pytest.mark.slow]

JOB = "MergeJobsJobPublicOrders"
DATABASE = "cdclake_iam_catalog"
TABLE = "public_orders"
PHASES = ("first merge", "added column", "register")
COMPONENT = "Glue merge job (catalog sync)"
CHECKED_BY = "recorded (the embedded metastore's audit log), mapped to Glue API calls"
#: Found by removal (test_catalog_sync_each_needed_statement_removed_denies_a_call_it_grants).
NEEDED = {"CatalogSync", "CatalogSessionLookups"}


def _event(lsn: int, after: dict[str, Any]) -> dict[str, Any]:
    source = {
        "version": "2.7.3.Final",
        "connector": "postgresql",
        "name": "iam",
        "ts_ms": 1_700_000_000_000,
        "snapshot": "false",
        "db": "app",
        "sequence": json.dumps([None, str(lsn)]),
        "schema": "public",
        "table": "orders",
        "txId": 1,
        "lsn": lsn,
        "xmin": None,
    }
    return {
        "before": None,
        "after": after,
        "source": source,
        "op": "c",
        "ts_ms": 1,
        "transaction": None,
    }


@pytest.fixture(scope="module")
def lake(templates: dict[str, Any]) -> dict[str, Any]:
    return templates["lake"]


@pytest.fixture(scope="module")
def statements(templates: dict[str, Any], lake: dict[str, Any], account: str) -> list[Any]:
    """The merge job role's statements, resolved (Glue ARNs need only region and account)."""
    job = logical_id(lake, "AWS::Glue::Job", JOB)
    role = lake["Resources"][job]["Properties"]["Role"]["Fn::GetAtt"][0]
    resolve = symbolic_resolver(templates, account)
    return list(resolve(list(role_policy(lake, role).statements), "lake"))


@pytest.fixture(scope="module")
def glue_database(lake: dict[str, Any]) -> str:
    """The template's catalog database (the lake stack's GlueDatabaseName output)."""
    (name,) = [o["Value"] for k, o in lake["Outputs"].items() if k.startswith("GlueDatabaseName")]
    return str(name)


@pytest.fixture(scope="module")
def recording(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A partitioned table merged twice (created with two partitions; a column and a
    partition added), then registered again (``HudiTable.register``): each phase's calls."""
    from cdclake_merge.job import MergeOptions, run_merge
    from cdclake_merge.sink import open_sink
    from cdclake_merge.storage import LocalFileSystem

    folder = tmp_path_factory.mktemp("catalog-iam")
    fs = LocalFileSystem()
    name = f"{DATABASE}.{TABLE}"
    sink = open_sink(
        warehouse=str(folder / "warehouse"),
        table=name,
        key=("id",),
        fs=fs,
        spark_factory=lambda: spark,
        partition_fields=("region",),
    )
    changes = folder / "changes"
    options = MergeOptions(table=name, key=("id",), changes=str(changes))
    batches = {
        "first merge": [
            _event(10, {"id": 1, "name": "a", "region": "eu"}),
            _event(11, {"id": 2, "name": "b", "region": "us"}),
        ],
        "added column": [_event(20, {"id": 3, "name": "c", "region": "ap", "email": "c@x"})],
    }
    phases: dict[str, list[MetastoreCall]] = {}
    results: dict[str, Any] = {}
    # On AWS the lake stack creates the database (AWS::Glue::Database): Hudi's sync finds it
    # and creates only its table.
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    try:
        with metastore_audit(spark, folder / "metastore-audit.log") as recorded:
            for phase in PHASES:
                start = len(recorded())
                if phase in batches:
                    part = changes / "topics" / "app.public.orders" / "partition=0"
                    part.mkdir(parents=True, exist_ok=True)
                    lines = "".join(json.dumps(e) + "\n" for e in batches[phase])
                    (part / f"{len(results)}.json").write_text(lines)
                    results[phase] = run_merge(lambda: spark, fs, sink, options)
                else:
                    sink.register(spark, sink.load())
                phases[phase] = recorded()[start:]
        columns = spark.table(name).columns
        partitions = {r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect()}
        yield {"phases": phases, "results": results, "columns": columns, "partitions": partitions}
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {DATABASE} CASCADE")


@pytest.fixture(scope="module")
def accesses(
    recording: dict[str, Any], account: str, glue_database: str
) -> dict[str, list[Access]]:
    return {
        phase: glue_catalog_accesses(calls, account, {DATABASE: glue_database})
        for phase, calls in recording["phases"].items()
    }


@pytest.fixture(scope="module")
def needed(statements: list[Any], accesses: dict[str, list[Access]]) -> dict[int, list[Access]]:
    return needed_for(statements, [a for run in accesses.values() for a in run])


def _names(recording: dict[str, Any], phase: str) -> set[str]:
    return {c.name for c in recording["phases"][phase] if c.database == DATABASE}


def _sid(statement: dict[str, Any]) -> str:
    return str(statement.get("Sid") or label(statement))


def test_catalog_sync_first_merge_creates_table_and_partitions(
    recording: dict[str, Any],
) -> None:
    assert recording["results"]["first merge"].committed
    assert _names(recording, "first merge") >= {"create_table", "get_partitions", "add_partitions"}


def test_catalog_sync_added_column_alters_table_and_adds_partition(
    recording: dict[str, Any],
) -> None:
    assert recording["results"]["added column"].committed
    assert {"alter_table", "add_partitions"} <= _names(recording, "added column")
    assert recording["columns"][-2:] == ["email", "region"]
    assert recording["partitions"] == {"region=eu", "region=us", "region=ap"}


def test_catalog_sync_register_syncs_the_table_again(recording: dict[str, Any]) -> None:
    assert "alter_table" in _names(recording, "register")


@pytest.mark.parametrize("phase", PHASES)
def test_catalog_sync_phase_every_glue_call_allowed_by_template_statements(
    statements: list[Any], accesses: dict[str, list[Access]], phase: str
) -> None:
    run = accesses[phase]
    assert run
    denied = unallowed(statements, run)
    assert not denied, "\n".join(sorted({f"{a.action} {a.resource} ({a.request})" for a in denied}))


def test_catalog_sync_each_needed_statement_removed_denies_a_call_it_grants(
    statements: list[Any], needed: dict[int, list[Access]]
) -> None:
    for index, denied in needed.items():
        assert all(allowing([statements[index]], a.action, a.resource) for a in denied)
    assert {_sid(statements[i]) for i in needed} == NEEDED


def test_catalog_sync_same_calls_on_another_database_denied(
    statements: list[Any], recording: dict[str, Any], account: str
) -> None:
    """CatalogSync's database scope is evaluated: the run's own calls renamed to another
    environment's database are denied, each of them."""
    calls = [c for run in recording["phases"].values() for c in run if c.database == DATABASE]
    elsewhere = glue_catalog_accesses(calls, account, {DATABASE: "cdclake_prod"})
    denied = unallowed(statements, elsewhere)
    assert {a.request for a in denied} == {a.request for a in elsewhere}


def test_catalog_sync_unmapped_metastore_call_raises() -> None:
    line = "main\tugi=root\tip=unknown-ip-addr\tcmd=drop_table : db=d tbl=t\t"
    with pytest.raises(LookupError, match="drop_table"):
        metastore_calls(line)


def test_catalog_sync_add_partitions_is_attributed_to_the_thread_s_last_table() -> None:
    audit = (
        "main\tugi=root\tip=x\tcmd=get_table : db=d tbl=t\t\n"
        "other\tugi=root\tip=x\tcmd=get_table : db=e tbl=u\t\n"
        "main\tugi=root\tip=x\tcmd=add_partitions\t\n"
    )
    added = metastore_calls(audit)[-1]
    assert (added.name, added.database, added.table) == ("add_partitions", "d", "t")


def test_catalog_sync_needed_statements_match_docs_table(
    statements: list[Any],
    accesses: dict[str, list[Access]],
    needed: dict[int, list[Access]],
    repo_root: Path,
) -> None:
    calls = [Call(a.action, (a.resource,)) for run in accesses.values() for a in run]
    failed = {index: Run(False, []) for index in needed}
    row = docs_row(COMPONENT, CHECKED_BY, Run(True, calls), statements, failed)
    assert row in (repo_root / "docs" / "iam.md").read_text().splitlines(), row
