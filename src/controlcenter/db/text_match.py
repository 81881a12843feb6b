"""Case-insensitive text matching that holds beyond ASCII on both databases.

SQLite's own `lower()` and `LIKE` fold only ASCII letters, and PostgreSQL's `lower()` follows
the database's character type (`C` folds only ASCII too). `lowered(x)` is the text lower-cased
by Unicode's rules on either: on SQLite by Python's `str.lower`, registered on each connection
as the function `unicode_lower` (`register_sqlite_functions`, called by the engine's `connect`
listener); on PostgreSQL by `lower()` under the ICU root collation, whatever the database's
own locale. Compare it with a value lower-cased by `str.lower` (SQLAlchemy's
`contains(..., autoescape=True)` escapes the LIKE wildcards of that value).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnExpressionArgument, String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

SQLITE_FUNCTION = "unicode_lower"
ICU_ROOT = "und-x-icu"  # created by initdb in every PostgreSQL built with ICU


class lowered(FunctionElement[str]):
    """`lowered(expression)`: the text lower-cased by Unicode's rules (module docstring)."""

    type = String()
    inherit_cache = True
    name = "lowered"

    def __init__(self, expression: ColumnExpressionArgument[str]) -> None:
        super().__init__(expression)


@compiles(lowered, "sqlite")
def _sqlite(element: lowered, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{SQLITE_FUNCTION}({compiler.process(element.clauses, **kw)})"


@compiles(lowered, "postgresql")
def _postgresql(element: lowered, compiler: SQLCompiler, **kw: Any) -> str:
    return f'lower(({compiler.process(element.clauses, **kw)}) COLLATE "{ICU_ROOT}")'


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


def register_sqlite_functions(dbapi_connection: Any) -> None:
    """On a new SQLite connection: the functions `lowered` compiles to."""
    dbapi_connection.create_function(SQLITE_FUNCTION, 1, _lower, deterministic=True)
