"""The one way into the database: engine and sessions (`engine`), what the processes keep in
memory and how each learns it changed (`changes`), the statements whose SQL differs between
SQLite and PostgreSQL (`upserts`, `notifications`, `text_match`), and the schema's migrations
(`migrate`, `migrations/`)."""

from controlcenter.db.base import Base
from controlcenter.db.engine import (
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
