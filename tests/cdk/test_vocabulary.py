"""One CDK vocabulary in the stacks: how findings are acknowledged, how constructs are found."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "stacks").rglob("*.py"))


def _offending(pattern: str, allowed: set[str]) -> list[str]:
    assert len(SOURCES) > 10  # the scan reads the stacks, not an empty folder
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SOURCES
        if path.name not in allowed
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(pattern, line)
    ]


def test_vocabulary_acknowledgments_only_through_nag_helpers() -> None:
    # stacks/__init__.py attaches the checks; nag.py is the one place that acknowledges.
    assert _offending(r"Validations\.of\(", {"nag.py", "__init__.py"}) == []


def test_vocabulary_no_lookup_of_internal_construct_ids() -> None:
    assert _offending(r"\bfind_child\(|\btry_find_child\(", set()) == []


def test_vocabulary_kms_keys_passed_as_encryption_key() -> None:
    assert _offending(r"\bkey: kms\.IKey|\bkey=(self\.)?(encryption_)?key\b", set()) == []


def test_vocabulary_log_groups_only_through_helper() -> None:
    assert _offending(r"\blogs\.LogGroup\(", {"log_storage.py"}) == []


def test_vocabulary_access_log_buckets_only_through_helper() -> None:
    # SSE-S3 is what marks an access-log bucket: every other bucket uses a KMS key.
    assert _offending(r"BucketEncryption\.S3_MANAGED", {"log_storage.py"}) == []


def test_vocabulary_fanout_spelled_one_way() -> None:
    # "fanout" in code and file names (FanOut in CamelCase); never "fan_out".
    python = [p for p in ROOT.rglob("*.py") if not {".venv", "node_modules"} & set(p.parts)]
    assert [p.name for p in python if "fan_out" in p.name] == []
    assert [
        f"{p.relative_to(ROOT)}:{n}"
        for p in python
        if p.name != "test_vocabulary.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "fan_out" in line
    ] == []
