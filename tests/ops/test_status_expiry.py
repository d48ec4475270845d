"""`cdclake status` warns before a waiting change file expires unapplied (table-life issue)."""

from __future__ import annotations

import datetime as dt

from cdclake.status import expiry_warning


def test_expiry_warning_under_half_the_expiration_is_none() -> None:
    assert expiry_warning(dt.timedelta(days=6, hours=23), 14) is None


def test_expiry_warning_at_half_the_expiration_says_the_days_left() -> None:
    warning = expiry_warning(dt.timedelta(days=7), 14)
    assert warning is not None
    assert "waited 7 of the 14 days" in warning and "it expires in 7 days" in warning


def test_expiry_warning_past_the_expiration_says_it_expired() -> None:
    warning = expiry_warning(dt.timedelta(days=15), 14)
    assert warning is not None and "it has expired" in warning
