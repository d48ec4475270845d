"""Builders for hand-written Debezium events used across the merge tests."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

SOURCE_TS = 1_700_000_000_000


def source(lsn: int, commit: int | None = None, ts_ms: int = SOURCE_TS) -> dict[str, Any]:
    sequence = json.dumps([None if commit is None else str(commit), str(lsn)])
    return {
        "version": "2.7.3.Final",
        "connector": "postgresql",
        "name": "test",
        "ts_ms": ts_ms,
        "snapshot": "false",
        "db": "app",
        "sequence": sequence,
        "schema": "public",
        "table": "t",
        "txId": 1,
        "lsn": lsn,
        "xmin": None,
    }


def envelope(
    op: str,
    *,
    lsn: int,
    commit: int | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    ts_ms: int = SOURCE_TS,
) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "source": source(lsn, commit, ts_ms),
        "op": op,
        "ts_ms": ts_ms + 5,
        "transaction": None,
    }


def with_schema(payload: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    value = {"type": "struct", "fields": fields, "optional": True, "name": "t.Value"}
    return {
        "schema": {
            "type": "struct",
            "name": "t.Envelope",
            "fields": [
                {**value, "field": "before"},
                {**value, "field": "after"},
                {"type": "struct", "fields": [], "field": "source"},
                {"type": "string", "field": "op"},
            ],
        },
        "payload": payload,
    }


def decimal_b64(value: str, scale: int) -> str:
    unscaled = int(Decimal(value).scaleb(scale))
    length = max((unscaled.bit_length() + 8) // 8, 1)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def line(event: dict[str, Any] | None) -> str:
    return json.dumps(event)
