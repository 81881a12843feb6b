"""The one way into the database: engine and sessions (`engine`), the SQLite driver, the
hot-path reads (`lookups`), and the schema's migrations (`migrate`, `migrations/`)."""

from controlcenter.db.engine import (
    Base,
    Database,
    UTCDateTime,
    as_utc,
    driver_of,
    new_id,
    refused_row,
    utcnow,
)

__all__ = [
    "Base",
    "Database",
    "UTCDateTime",
    "as_utc",
    "driver_of",
    "new_id",
    "refused_row",
    "utcnow",
]
