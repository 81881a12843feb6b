"""The suite's watch on the server's answers (tests/plugins/answers.py) sees driver text in an
error body and in an `error` event, and nothing in answers that carry none."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.answer_watch import AnswerWatch


async def _body_error(_: object) -> Response:
    return JSONResponse({"error": "(sqlite3.IntegrityError) FOREIGN KEY constraint failed"}, 500)


async def _fine_error(_: object) -> Response:
    return JSONResponse({"error": "Conversation not found"}, 404)


async def _fine_success(_: object) -> Response:
    return JSONResponse({"text": "SELECT name FROM people is valid SQL"})  # not an error


async def _event_error(_: object) -> Response:
    async def frames() -> AsyncIterator[bytes]:
        yield b'data: {"type":"content_delta","delta":"UNIQUE is a word"}\n\n'
        yield b'data: {"type":"error","error":"duplicate key value violates unique constraint"}\n\n'

    return StreamingResponse(frames(), media_type="text/event-stream")


async def test_driver_text_is_found_in_error_bodies_and_error_events_only() -> None:
    watch = AnswerWatch()
    app = watch.wrap(
        Starlette(
            routes=[
                Route("/body", _body_error),
                Route("/fine", _fine_error),
                Route("/ok", _fine_success),
                Route("/events", _event_error),
            ]
        )
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as http:
        for path in ("/fine", "/ok"):
            await http.get(path)
        assert watch.found == []
        await http.get("/body")
        await http.get("/events")
    assert [problem.split(" ", 1)[0] for problem in watch.found] == ["/body", "/events"]
    assert "violates" in watch.found[1] and "content_delta" not in watch.found[1]
