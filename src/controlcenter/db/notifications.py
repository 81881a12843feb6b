"""PostgreSQL's notifications (NOTIFY/LISTEN), the one database-specific piece that processes
sharing a database use to wake each other. SQLite has none: there, `notify` does nothing and
`listen` opens nothing, and the callers poll instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import ARRAY, String, bindparam, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

Handler = Callable[[str], None]


# Built once, run with each call's channel and payloads: one NOTIFY per payload.
_NOTIFY = select(
    func.pg_notify(
        bindparam("channel", type_=String),
        func.unnest(bindparam("payloads", type_=ARRAY(String))).column_valued("payload"),
    )
)


def notify(session: Session, channel: str, payloads: Sequence[str]) -> None:
    """NOTIFY `channel` once per payload, delivered when the session's transaction commits
    (PostgreSQL); one statement for any number of payloads."""
    if not payloads or session.get_bind().dialect.name != "postgresql":
        return
    session.execute(_NOTIFY, {"channel": channel, "payloads": list(payloads)})


class Listener:
    """One LISTEN connection (asyncpg's `add_listener`) whose notifications go to a handler per
    channel; `on_lost` is called when the server closes it."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    @classmethod
    async def open(
        cls, url: str, handlers: Mapping[str, Handler], on_lost: Callable[[Listener], None]
    ) -> Listener:
        """Raises what connecting raises."""
        import asyncpg  # type: ignore[import-untyped]  # loaded by PostgreSQL deployments only

        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        connection = await asyncpg.connect(dsn)
        listener = cls(connection)
        try:
            for channel, handler in handlers.items():
                await connection.add_listener(channel, _deliver(handler))
        except BaseException:
            await connection.close()
            raise
        connection.add_termination_listener(lambda _: on_lost(listener))
        return listener

    async def close(self) -> None:
        await self._connection.close()


def _deliver(handler: Handler) -> Callable[[Any, int, str, str], None]:
    def delivered(connection: Any, pid: int, channel: str, payload: str) -> None:
        handler(payload)

    return delivered
