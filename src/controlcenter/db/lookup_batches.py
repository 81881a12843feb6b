"""PostgreSQL lookups of concurrent requests answered together, one statement per batch.

On PostgreSQL a lookup's own work (two index scans by key) is a small part of what it costs:
the server spends most of its ~75 us per statement on the protocol round (Bind, Execute, Sync),
the snapshot and the executor's start and end, and the service about as much again on
asyncpg's pool, protocol and the loop turn of the reply (`make bench --profile`, BENCHMARKS.md
"Issue 15, the dashboard on PostgreSQL"). So the lookups of the requests waiting at the same
moment go out as one statement: their parameters as arrays, unnested WITH ORDINALITY, each
joined LATERAL to the lookup's own statement (`batched_statement`), so each key is answered
exactly as the single statement answers it (LIMIT included), and the ordinality says whose
row it is.

Freshness is the single statement's: a request only ever joins a batch that has not been sent
yet, so the statement that answers it starts after the request arrived and sees every commit
before it (a revoked session, a disabled user, from any process or instance). A batch is sent
at once while fewer than `IN_FLIGHT` statements of its lookup are running in this process, so
a lone request waits for nobody; under load the requests arriving during a round trip form
the next batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from sqlalchemy import Select, String, bindparam, column, func, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.types import TypeEngine

IN_FLIGHT = 1  # statements per lookup per process: 1 measured best of 1, 2 and 4 (BENCHMARKS.md)
ORDINALITY = "batch_index"

Row = tuple[Any, ...]
Fetch = Callable[[dict[str, Any]], Awaitable[list[Row]]]


def batched_statement(statement: Select[Any]) -> Select[Any] | None:
    """`statement` for many keys at once: (ordinality, *the statement's columns) per row found,
    each of its required parameters now an array of the same name; None when it has none."""
    required: dict[str, TypeEngine[Any]] = {}
    for element in visitors.iterate(statement):
        if isinstance(element, BindParameter) and element.required:
            required.setdefault(element.key, _unbounded(element.type))
    if not required:
        return None
    keys = (
        func.unnest(*(bindparam(name, type_=ARRAY(kind)) for name, kind in required.items()))
        .table_valued(
            *(column(name, kind) for name, kind in required.items()), with_ordinality=ORDINALITY
        )
        .render_derived("batch_keys")
    )

    def key_column(element: Any, **_: Any) -> Any:
        if isinstance(element, BindParameter) and element.required and element.key in required:
            return keys.c[element.key]
        return None

    one = cast(Select[Any], visitors.replacement_traverse(statement, {}, key_column))
    one_row = one.lateral("batch_row")
    return select(keys.c[ORDINALITY], *one_row.c).select_from(keys.join(one_row, true()))


def _unbounded(kind: TypeEngine[Any]) -> TypeEngine[Any]:
    # The array's cast must not carry the column's length: PostgreSQL's explicit cast to
    # VARCHAR(n) truncates silently, so a longer value would match a shorter key.
    return String() if isinstance(kind, String) else kind


class LookupBatches:
    """The waiting requests of one lookup in one process, and its statements in flight."""

    def __init__(self, names: tuple[str, ...], fetch: Fetch) -> None:
        self._names = names
        self._fetch = fetch  # one statement for these arrays: (ordinality, *row) per row found
        self._waiting: list[tuple[dict[str, Any], asyncio.Future[Row | None]]] = []
        self._running = 0
        self._sending: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references

    async def one(self, parameters: dict[str, Any]) -> Row | None:
        future: asyncio.Future[Row | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((parameters, future))
        if self._running < IN_FLIGHT:
            self._send()
        return await future

    def _send(self) -> None:
        batch, self._waiting = self._waiting, []
        self._running += 1
        task = asyncio.ensure_future(self._answer(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _answer(self, batch: list[tuple[dict[str, Any], asyncio.Future[Row | None]]]) -> None:
        # In a task of its own: a waiter's cancellation never leaves the others unanswered.
        try:
            arrays = {name: [given[name] for given, _ in batch] for name in self._names}
            rows: list[Row | None] = [None] * len(batch)
            for found in await self._fetch(arrays):
                index = found[0] - 1
                if rows[index] is None:  # the first row, as a lone statement's `fetchrow`
                    rows[index] = found[1:]
        except BaseException as exc:
            for _, future in batch:
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):  # the loop is closing
                    future.cancel()
                else:
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, future), row in zip(batch, rows, strict=True):
                if not future.done():
                    future.set_result(row)
        finally:
            self._running -= 1
            if self._waiting and self._running < IN_FLIGHT:
                self._send()
