"""Verified session JWTs are kept, but a kept one is still refused once it expires, and a
refused one is never kept."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from controlcenter.auth import tokens

KEY = "k" * 48


def test_a_kept_token_is_refused_after_its_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    token = tokens.encode_session(KEY, "user-1", "session-1", now, now + timedelta(seconds=60))
    claims = tokens.decode_session(KEY, token)
    assert claims == tokens.SessionClaims(user_id="user-1", session_id="session-1")
    assert tokens.decode_session(KEY, token) == claims  # from what was kept
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert tokens.decode_session(KEY, token) is None


def test_a_token_signed_with_another_key_is_not_taken_from_what_was_kept() -> None:
    now = datetime.now(UTC)
    token = tokens.encode_session(KEY, "user-1", "session-2", now, now + timedelta(seconds=60))
    assert tokens.decode_session(KEY, token) is not None
    assert tokens.decode_session("o" * 48, token) is None


def test_a_tampered_token_is_refused_and_not_kept() -> None:
    now = datetime.now(UTC)
    token = tokens.encode_session(KEY, "user-1", "session-3", now, now + timedelta(seconds=60))
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert tokens.decode_session(KEY, tampered) is None
    assert (KEY, tampered) not in tokens._verified
