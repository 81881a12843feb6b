"""The per-request lookups: Core statements from the tables, compiled once per dialect, whose
rows read as the model reads them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, MetaData, String, Table, bindparam, insert, inspect, select, update
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from controlcenter.auth.models import User
from controlcenter.auth.service import (
    Principal,
    principal_from_api_token,
    principal_from_basic,
    principal_from_jwt,
    revoke_session,
)
from controlcenter.auth.tokens import decode_session
from controlcenter.db import Database
from controlcenter.db.lookups import POSTGRES_LOOKUP_CONNECTIONS, Lookup
from tests.conftest import RunningServer, UserFactory

_users = User.__table__


def _by_email() -> Lookup:
    return Lookup(select(_users.c.id).where(_users.c.email == bindparam("email")).limit(1))


def test_a_lookup_is_compiled_once_per_dialect() -> None:
    lookup = _by_email()
    sqlite = lookup.compiled(SQLiteDialect_pysqlite())
    assert lookup.compiled(SQLiteDialect_pysqlite()) is sqlite
    postgres = lookup.compiled(PGDialect_asyncpg())  # type: ignore[no-untyped-call]
    assert postgres is not sqlite
    assert "users.email = ?" in sqlite.sql and "users.email = $1" in postgres.sql
    # The LIMIT's value is the statement's own; the named ones come from the caller.
    assert sqlite.parameters({"email": "a@example.com"}) == ["a@example.com", 1, 0]
    assert postgres.parameters({"email": "a@example.com"}) == ["a@example.com", 1]
    with pytest.raises(KeyError):
        sqlite.parameters({})


async def test_the_user_a_lookup_reads_is_the_model_s(
    server: RunningServer, users: UserFactory
) -> None:
    """Every column of the user, typed as the ORM types it (timestamps aware, flags bool)."""
    created = await users.create()
    by_token = await principal_from_api_token(server.db, created.api_token)
    by_basic = await principal_from_basic(server.db, created.email, created.api_token)
    assert by_token is not None and by_basic is not None
    async with server.db.read() as db:
        model = await db.get(User, created.id)
    assert model is not None
    for attribute in inspect(User).column_attrs:
        expected = getattr(model, attribute.key)
        assert getattr(by_token.user, attribute.key) == expected, attribute.key
        assert getattr(by_basic.user, attribute.key) == expected, attribute.key
    assert by_token.user.created_at.tzinfo is not None
    assert by_token.user.disabled is False


async def test_lookups_in_parallel_see_a_revocation_at_once(
    server: RunningServer, users: UserFactory
) -> None:
    """More lookups at once than the PostgreSQL lookups' pool has connections, before and
    right after a logout: connections given back without asyncpg's reset still answer, and
    none of them holds a snapshot from before the change."""
    created = await users.create()
    key = server.config.jwt_key
    claims = decode_session(key, created.token)
    assert claims is not None

    async def many() -> list[Principal | None]:
        count = POSTGRES_LOOKUP_CONNECTIONS * 3
        return await asyncio.gather(
            *(principal_from_jwt(server.db, created.token, key=key) for _ in range(count))
        )

    assert all(principal is not None for principal in await many())
    async with server.db.write() as db:
        await revoke_session(db, claims.session_id)
    assert all(principal is None for principal in await many())


async def test_lookups_arriving_together_each_get_their_own_answer(
    server: RunningServer, users: UserFactory
) -> None:
    """Lookups of many callers at once (on PostgreSQL, answered in batches by one statement):
    each gets the row of its own key, or None, exactly as when it comes alone."""
    created = [await users.create() for _ in range(4)]
    async with server.db.write() as db:
        disabled = await db.get(User, created[3].id)
        assert disabled is not None
        disabled.disabled = True
    key = server.config.jwt_key

    def calls() -> list[Any]:
        out: list[Any] = []
        for user in created:
            out.append(principal_from_jwt(server.db, user.token, key=key))
            out.append(principal_from_api_token(server.db, user.api_token))
            out.append(principal_from_basic(server.db, user.email, user.api_token))
            out.append(principal_from_basic(server.db, user.email, created[0].api_token))
            out.append(principal_from_basic(server.db, "x" + user.email, user.api_token))
        return out

    def ids(principals: list[Principal | None]) -> list[str | None]:
        return [p.user.id if p is not None else None for p in principals]

    alone = ids([await call for call in calls()])
    together = ids(await asyncio.gather(*calls(), *calls()))
    assert together == alone * 2
    for i, user in enumerate(created[:3]):  # token, API token, basic with their own token
        assert alone[i * 5 : i * 5 + 3] == [user.id] * 3
    assert alone[3] == created[0].id  # the first user's own token
    assert alone[8] is alone[13] is None  # another user's token: not theirs (nor a password)
    assert alone[15:] == [None] * 5  # disabled: no credential of theirs counts


async def test_a_longer_value_never_matches_a_shorter_key(
    server: RunningServer, users: UserFactory
) -> None:
    """An e-mail one character longer than a stored e-mail of the column's full length is not
    that user (PostgreSQL's cast to VARCHAR(n) would cut it down to the stored one)."""
    column = User.__table__.c.email.type
    assert isinstance(column, String) and column.length is not None
    length = column.length
    email = "a" * (length - len("@example.com")) + "@example.com"
    created = await users.create(email=email)
    assert await principal_from_basic(server.db, email, created.api_token) is not None
    assert await principal_from_basic(server.db, email + "m", created.api_token) is None
    together = await asyncio.gather(
        *(principal_from_basic(server.db, email + "m", created.api_token) for _ in range(8))
    )
    assert together == [None] * 8


_notes = Table("notes", MetaData(), Column("id", String, primary_key=True), Column("text", String))
_NOTE = Lookup(select(_notes.c.text).where(_notes.c.id == bindparam("id")))
_SECRET_NOTE = Lookup(select(_notes.c.text).where(_notes.c.id == bindparam("id")), secret=True)


async def test_a_sqlite_lookup_is_answered_again_until_anything_is_written(
    tmp_path: Path,
) -> None:
    """SQLite: a row read is answered again without its statement while the database is
    unchanged, and read anew at the first lookup after any commit, by this process's writers
    or another's (a second `Database` on the file stands for another process), or after the
    lookups' connection was opened again (its data versions start afresh). A secret lookup's
    row is kept under an HMAC of its parameters, never under the values."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}"
    here, elsewhere = Database(url), Database(url)
    statements: list[str] = []

    def traced() -> None:
        here._lookups._sqlite_connection().set_trace_callback(statements.append)

    async def note(text: str, db: Database) -> None:
        async with db.write() as session:
            await session.execute(update(_notes).values(text=text))

    def selects() -> int:
        return sum(1 for sql in statements if sql.startswith("SELECT notes.text"))

    try:
        async with here.write() as session:
            await session.run_sync(lambda s: _notes.create(s.connection()))
            await session.execute(insert(_notes).values(id="n1", text="first"))
        traced()
        assert await here.lookup(_NOTE, id="n1") == ("first",)
        assert await here.lookup(_NOTE, id="n2") is None
        assert [await here.lookup(_NOTE, id="n1") for _ in range(5)] == [("first",)] * 5
        assert await here.lookup(_NOTE, id="n2") is None
        assert selects() == 2  # one statement per key while nothing was written
        for _ in range(3):  # kept under an HMAC of its parameters, never the values
            assert await here.lookup(_SECRET_NOTE, id="n1") == ("first",)
        assert selects() == 3
        (hidden,) = (key for lookup, key in here._lookups._kept if lookup is _SECRET_NOTE)
        assert hidden != ("n1",) and len(hidden) == 1 and len(hidden[0]) == 32  # an HMAC

        await note("by another process", elsewhere)
        assert await here.lookup(_NOTE, id="n1") == ("by another process",)
        await note("by this process", here)
        assert await here.lookup(_NOTE, id="n1") == ("by this process",)
        assert selects() == 5

    finally:
        await here.dispose()
    # A connection opened afresh counts its data versions from where a new one starts, which
    # the closed one may have shown too: what it kept is dropped, not compared.
    again = Database(url)
    try:
        assert await again.lookup(_NOTE, id="n1") == ("by this process",)
        await again._lookups.close()
        await note("while closed", elsewhere)
        assert await again.lookup(_NOTE, id="n1") == ("while closed",)
    finally:
        await again.dispose()
        await elsewhere.dispose()
