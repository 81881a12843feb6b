"""Sign-in's request and the user as callers see it, for the interface
description and the sign-in's checks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from controlcenter.common.emails import ADDRESS_SCHEMA
from controlcenter.web.openapi_doc import schema_extra

USER_EXAMPLE = {
    "id": "7c0e0c6a-2b8e-4d2f-9f55-1b0f2a3c4d5e",
    "email": "broker@example.com",
    "name": "Dana Broker",
    "role": "user",
    "brokerage": "Harbor Commercial",
}


class LoginRequest(BaseModel):
    model_config = schema_extra(
        {"email": "broker@example.com", "password": "correct horse battery"},
        strict=True,
        extra="ignore",
    )
    email: str = Field(
        json_schema_extra={"anyOf": [ADDRESS_SCHEMA]},
        description="the account's e-mail address; anything else finds no account (401)",
    )
    password: str


class User(BaseModel):
    """The `user` object callers see (never the password hash)."""

    model_config = schema_extra(USER_EXAMPLE)
    id: str
    email: str
    name: str
    role: Literal["user", "admin", "super_admin"]
    brokerage: str | None


class LoginAnswer(BaseModel):
    token: str
    user: User


class UserAnswer(BaseModel):
    user: User
