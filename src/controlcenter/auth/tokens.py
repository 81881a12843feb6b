"""Session JWTs and API tokens: creation and parsing, no database."""

from __future__ import annotations

import binascii
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

import jwt

API_TOKEN_PREFIX = "cct_"  # noqa: S105 - a public prefix, not a secret
_ALGORITHM = "HS256"


@dataclass(frozen=True)
class SessionClaims:
    user_id: str
    session_id: str


def encode_session(
    key: str, user_id: str, session_id: str, issued: datetime, expires: datetime
) -> str:
    claims = {"sub": user_id, "sid": session_id, "iat": issued, "exp": expires}
    return jwt.encode(claims, key, algorithm=_ALGORITHM)


def decode_session(key: str, token: str) -> SessionClaims | None:
    """The claims of a valid token; None for a tampered, expired, malformed or unsigned one."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[_ALGORITHM],  # pins HS256: "alg: none" and others are refused
            options={"require": ["sub", "sid", "iat", "exp"]},
        )
    except jwt.PyJWTError:
        return None
    user_id, session_id = claims.get("sub"), claims.get("sid")
    if not isinstance(user_id, str) or not isinstance(session_id, str):
        return None
    return SessionClaims(user_id=user_id, session_id=session_id)


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith(API_TOKEN_PREFIX)


def new_api_token() -> str:
    return API_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_api_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def parse_basic(value: str) -> tuple[str, str] | None:
    """`user:secret` from the base64 part of an HTTP basic header; None when malformed.

    UTF-8, as every current client sends it (RFC 7617's `charset="UTF-8"`).
    """
    try:
        decoded = binascii.a2b_base64(value.strip(), strict_mode=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, separator, secret = decoded.partition(":")
    if not separator or not user or not secret:
        return None
    return user, secret
