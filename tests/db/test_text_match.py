"""`lowered`: Unicode lower-casing on both databases, whatever the text's own collation."""

from __future__ import annotations

import pytest
from sqlalchemy import ColumnElement, literal, select
from sqlalchemy.orm import Session

from controlcenter.db import Database
from controlcenter.db.text_match import lowered


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ÉCOLE Müller", "école müller"), ("ΣΟΦΊΑ", "σοφία"), ("ASCII 100%", "ascii 100%")],
)
async def test_lowered_folds_beyond_ascii(db: Database, text: str, expected: str) -> None:
    value: ColumnElement[str] = literal(text)
    if not db.is_sqlite:
        value = value.collate("C")  # a collation whose own lower() folds only ASCII

    def folded(session: Session) -> str | None:
        return session.scalar(select(lowered(value)))

    assert await db.run_read(folded) == expected
