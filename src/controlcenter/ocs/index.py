"""The dashboard index's answer (SPEC 4.1, CONTRACT section 4), whichever way the request came
in: `ocs.fast_path.IndexFastPath` for GET, the FastAPI route for the other methods. No HTTP
framework here: an answer is its status, body and headers. Every answer except the 200 is
pre-rendered, and the 200's JSON is the pre-rendered envelope around the encoded message."""

from __future__ import annotations

from json.encoder import encode_basestring  # json's C encoder, when built

from starlette.routing import compile_path

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
from controlcenter.web.direct import Answer, session_cookie
from controlcenter.web.middleware.raw_answer import json_body

PATH = "/ocs/v2.php/apps/{app_id}/api"
PATH_PATTERN = compile_path(PATH)[0]  # the regex Starlette's route matches with


def _answers(status: int, rendered: dict[Format, bytes]) -> dict[Format, Answer]:
    return {fmt: Answer(status, body, media_type(fmt).encode()) for fmt, body in rendered.items()}


_FORMATS: tuple[Format, Format] = ("json", "xml")
_UNAUTHORISED = _answers(401, {f: render(envelope(997, NOT_LOGGED_IN, []), f) for f in _FORMATS})
_NOT_FOUND = _answers(404, {f: render(envelope(404, NOT_FOUND, []), f) for f in _FORMATS})
# Nextcloud's security middleware answers this in JSON whatever format was asked.
_CSRF_FAILED = Answer(412, b'{"message":"CSRF check failed"}', b"application/json")
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


async def answer_index(
    db: Database,
    config: Config,
    app_id: str,
    *,
    authorization: str | None,
    cookie: str | None,
    accept: str | None,
    ocs_apirequest: str | None,
    query_format: str | None,
    client: str | None,
) -> Answer:
    """The index's answer to a request carrying these headers (each the first of its name, as
    Starlette's `Headers.get` reads it) and this `?format=`, from the client address `client`
    (the sign-in throttle counts password attempts against it)."""
    fmt: Format = choose_format(query_format, accept)
    if app_id != config.app_id:
        return _NOT_FOUND[fmt]
    guard = PasswordGuard(SignInThrottle.from_config(db, config), client)
    try:
        principal = await index_caller(
            db,
            authorization=authorization,
            session_cookie=session_cookie(cookie),
            key=config.jwt_key,
            guard=guard,
        )
    except TooManyAttemptsError as exc:
        retry_after = str(exc.retry_after_s).encode()
        return Answer(429, _TOO_MANY, b"application/json", ((b"retry-after", retry_after),))
    if principal is None:
        return _UNAUTHORISED[fmt]
    if (ocs_apirequest or "").strip().lower() != "true":
        return _CSRF_FAILED
    message = index_message(principal.user)
    if fmt == "json":
        return Answer(200, ok_json(message), _JSON)
    return Answer(200, render(envelope(200, "OK", {"message": message}), fmt), _XML)
