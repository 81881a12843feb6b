"""The migrations build exactly the tables the models describe (0002 included)."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from controlcenter.db.migrate import upgrade
from controlcenter.tables import Base


def test_no_difference_after_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()
