"""The upgrade puts stored account addresses in their normal form (`common/emails.py`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import create_engine, text

from controlcenter.db.migrate import alembic_config, upgrade

ROWS = [
    # id, address as an older version stored it, created
    ("u1", "zoe\u0308@exa\u0308mple.com", "2026-01-01 00:00:00"),
    ("u2", "zo\u00eb@ex\u00e4mple.com", "2026-01-02 00:00:00"),  # a look-alike of u1
    ("u3", "ann@xn--exmple-cua.com", "2026-01-03 00:00:00"),  # already normal
    ("u4", "bob@b\u00fccher.example", "2026-01-04 00:00:00"),
    ("u5", "held@xn--exmple-cua.com", "2026-01-06 00:00:00"),  # normal, but newer than u6
    ("u6", "held@ex\u00e4mple.com", "2026-01-05 00:00:00"),
]


def test_stored_addresses_take_their_normal_form(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
    command.upgrade(alembic_config(url), "0008")
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        with engine.begin() as connection:
            for user_id, email, created in ROWS:
                connection.execute(
                    text(
                        "INSERT INTO users (id, email, name, role, password_hash, disabled,"
                        " created_at, updated_at) VALUES (:id, :email, '', 'user', 'x', 0,"
                        " :created, :created)"
                    ),
                    {"id": user_id, "email": email, "created": created},
                )
        upgrade(url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, email FROM users")).all()
            stored: dict[str, str] = {row[0]: row[1] for row in rows}
    finally:
        engine.dispose()
    assert stored == {
        "u1": "zo\u00eb@xn--exmple-cua.com",  # the oldest of the two takes the normal form
        "u2": "zo\u00eb@ex\u00e4mple.com",  # left as stored (and logged)
        "u3": "ann@xn--exmple-cua.com",
        "u4": "bob@xn--bcher-kva.example",
        "u5": "held@xn--exmple-cua.com",  # the one already in the normal form keeps it
        "u6": "held@ex\u00e4mple.com",
    }


FOLDED_ROWS = [
    # id, address as the NFC and lower-case rule stored it, created
    ("f1", "a@example.com", "2026-01-01 00:00:00"),
    ("f2", "\uff41@example.com", "2026-01-02 00:00:00"),  # a full-width look-alike of f1
    ("f3", "stra\u00dfe@example.com", "2026-01-03 00:00:00"),
    ("f4", "\uff42@example.com", "2026-01-04 00:00:00"),  # full-width, alone
]


def test_stored_addresses_are_folded_from_the_earlier_normal_form(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'f.db'}"
    command.upgrade(alembic_config(url), "0012")
    engine = create_engine(f"sqlite:///{tmp_path / 'f.db'}")
    try:
        with engine.begin() as connection:
            for user_id, email, created in FOLDED_ROWS:
                connection.execute(
                    text(
                        "INSERT INTO users (id, email, name, role, password_hash, disabled,"
                        " created_at, updated_at) VALUES (:id, :email, '', 'user', 'x', 0,"
                        " :created, :created)"
                    ),
                    {"id": user_id, "email": email, "created": created},
                )
        upgrade(url)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, email FROM users")).all()
            stored: dict[str, str] = {row[0]: row[1] for row in rows}
    finally:
        engine.dispose()
    assert stored == {
        "f1": "a@example.com",  # already in the normal form: keeps it
        "f2": "\uff41@example.com",  # left as stored (and logged)
        "f3": "strasse@example.com",
        "f4": "b@example.com",
    }
