"""The one way into the database: engine and sessions (`engine`), the statements whose SQL
differs between SQLite and PostgreSQL (`upserts`, `notifications`, `text_match`), and the
schema's migrations (`migrate`, `migrations/`)."""

from controlcenter.db.engine import (
    Base,
    Database,
    UTCDateTime,
    as_utc,
    new_id,
    utcnow,
)

__all__ = [
    "Base",
    "Database",
    "UTCDateTime",
    "as_utc",
    "new_id",
    "utcnow",
]
