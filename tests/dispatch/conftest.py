"""The dispatch tests' lake on moto."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dispatch.dispatch_helpers import REGION, World, lake_on_moto


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A fresh lake per test (each test starts, fails or publishes what the next must not
    see), away from any endpoint or profile of the machine's."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with lake_on_moto() as created:
        yield created
