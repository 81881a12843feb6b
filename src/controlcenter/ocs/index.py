"""The dashboard index's answer, as the route sends it (docs/reference.md). Every
body except the 200's is pre-rendered, and the 200's JSON is the pre-rendered envelope around
the encoded message."""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring  # json's C encoder, when built

from starlette.responses import Response

from controlcenter.auth.service import PasswordGuard
from controlcenter.auth.throttle import (
    TOO_MANY_ATTEMPTS,
    SignInThrottle,
    TooManyAttemptsError,
)
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.ocs.envelope import (
    NOT_FOUND,
    NOT_LOGGED_IN,
    Format,
    choose_format,
    envelope,
    media_type,
    render,
)
from controlcenter.ocs.service import index_caller, index_message
from controlcenter.web.middleware.raw_answer import json_body

PATH = "/ocs/v2.php/apps/{app_id}/api"

_FORMATS: tuple[Format, Format] = ("json", "xml")
_UNAUTHORISED = {f: render(envelope(997, NOT_LOGGED_IN, []), f) for f in _FORMATS}
_NOT_FOUND = {f: render(envelope(404, NOT_FOUND, []), f) for f in _FORMATS}
# Nextcloud's security middleware answers this in JSON whatever format was asked.
_CSRF_FAILED = b'{"message":"CSRF check failed"}'
_TOO_MANY = json_body({"error": TOO_MANY_ATTEMPTS})  # the login's refusal, same bytes
_JSON = media_type("json").encode()
_XML = media_type("xml").encode()
# The 200's JSON split around its message, from `render` itself, so the bytes cannot drift:
# json.dumps writes a string inside a document exactly as `encode_basestring` writes it alone.
_MARK = "\x00message\x00"
_OK_HEAD, _OK_TAIL = render(envelope(200, "OK", {"message": _MARK}), "json").split(
    encode_basestring(_MARK).encode()
)


def ok_json(message: str) -> bytes:
    """`render(envelope(200, "OK", {"message": message}), "json")`, without building and
    encoding the document on every request."""
    return _OK_HEAD + encode_basestring(message).encode() + _OK_TAIL


def _answer(
    status: int, body: bytes, content_type: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> Response:
    response = Response(body, status_code=status)
    # The length and the type after the answer's own headers, where Starlette puts them.
    response.raw_headers[:0] = list(headers)
    response.raw_headers.append((b"content-type", content_type))
    return response


@dataclass(frozen=True)
class DashboardIndex:
    """What the index answers from, made once when the app starts (`app.state.index`): the
    database, the app id it answers for, the session key and the sign-in throttle."""

    database: Database
    app_id: str
    key: str
    throttle: SignInThrottle

    @classmethod
    def from_config(cls, database: Database, config: Config) -> DashboardIndex:
        throttle = SignInThrottle.from_config(database, config)
        return cls(database, config.app_id, config.jwt_key, throttle)


async def answer_index(
    index: DashboardIndex,
    app_id: str,
    *,
    authorization: str | None,
    session_cookie: str | None,
    accept: str | None,
    ocs_apirequest: str | None,
    query_format: str | None,
    client: str | None,
) -> Response:
    """The index's answer to a request carrying these headers (each the first of its name, as
    Starlette's `Headers.get` reads it), this `session` cookie and this `?format=`, from the
    client address `client` (the sign-in throttle counts password attempts against it)."""
    fmt: Format = choose_format(query_format, accept)
    if app_id != index.app_id:
        return _answer(404, _NOT_FOUND[fmt], media_type(fmt).encode())
    try:
        principal = await index_caller(
            index.database,
            authorization=authorization,
            session_cookie=session_cookie,
            key=index.key,
            guard=PasswordGuard(index.throttle, client),
        )
    except TooManyAttemptsError as exc:
        retry_after = str(exc.retry_after_s).encode()
        return _answer(429, _TOO_MANY, b"application/json", ((b"retry-after", retry_after),))
    if principal is None:
        return _answer(401, _UNAUTHORISED[fmt], media_type(fmt).encode())
    if (ocs_apirequest or "").strip().lower() != "true":
        return _answer(412, _CSRF_FAILED, b"application/json")
    message = index_message(principal.user)
    if fmt == "json":
        return _answer(200, ok_json(message), _JSON)
    return _answer(200, render(envelope(200, "OK", {"message": message}), fmt), _XML)
