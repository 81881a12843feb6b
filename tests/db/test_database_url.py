"""Database URLs the service refuses with a clear message instead of misbehaving later."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from controlcenter.config import Config
from controlcenter.db import Database


@pytest.mark.parametrize("url", ["sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"])
def test_an_in_memory_sqlite_database_is_refused(url: str) -> None:
    # Every connection to ":memory:" is a database of its own: the pool's second connection
    # would see another, empty one.
    with pytest.raises(ValueError, match="SQLite must be a file database, not in-memory"):
        Database(url)


def test_the_configuration_refuses_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite+aiosqlite:///:memory:")
    with pytest.raises(ValidationError, match="SQLite must be a file database, not in-memory"):
        Config()
