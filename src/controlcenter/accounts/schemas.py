"""Request bodies of the user and token endpoints (docs/accounts.md).

Strict (no coercion) and closed: an unknown key is refused, so a misspelt `disabeld` never
passes silently as a change that was not made.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from controlcenter.admin_settings.schemas import EmailOrEmpty
from controlcenter.auth.schemas import USER_EXAMPLE, User
from controlcenter.common.emails import ADDRESS_SCHEMA, normalise_email
from controlcenter.web.openapi_doc import absent, schema_extra
from controlcenter.web.validation import StoredStr

PASSWORD_MIN = 12
PASSWORD_MAX = 1024
LOCATION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""HighLevel location ids: 1-64 letters, digits, `_` or `-`."""


def _location_id(value: str) -> str:
    if not LOCATION_ID.fullmatch(value):
        raise PydanticCustomError(
            "location_id", "must be 1-64 letters, digits, '_' or '-' (a CRM location id)"
        )
    return value


def _length(low: int, high: int) -> Any:
    """Length bounds checked after `StoredStr`'s own check, in pydantic's words, and shown in
    the JSON schema."""

    def check(value: str) -> str:
        if len(value) < low:
            raise PydanticCustomError(
                "string_too_short",
                "String should have at least {min_length} characters",
                {"min_length": low},
            )
        if len(value) > high:
            raise PydanticCustomError(
                "string_too_long",
                "String should have at most {max_length} characters",
                {"max_length": high},
            )
        return value

    return [AfterValidator(check), Field(json_schema_extra={"minLength": low, "maxLength": high})]


Email = Annotated[
    EmailOrEmpty,
    *_length(3, 320),
    AfterValidator(normalise_email),
    # In place of the setting's "or empty": no account has an empty address.
    Field(json_schema_extra={"anyOf": [ADDRESS_SCHEMA]}, description="an e-mail address"),
]
"""An e-mail address (syntax only, as for settings), in the form that identifies an account
(`common/emails.py`)."""
Name = Annotated[StoredStr, *_length(0, 200)]
Password = Annotated[StoredStr, *_length(PASSWORD_MIN, PASSWORD_MAX)]
Role = Literal["user", "admin", "super_admin"]
LocationId = Annotated[
    StoredStr,
    AfterValidator(_location_id),
    Field(json_schema_extra={"pattern": LOCATION_ID.pattern}),
]
Label = Annotated[StoredStr, *_length(1, 200)]

_CLOSED = ConfigDict(strict=True, extra="forbid")


def _closed(example: dict[str, Any]) -> ConfigDict:
    return schema_extra(example, strict=True, extra="forbid")


class UserCreate(BaseModel):
    """`password` absent: one is generated and returned once."""

    model_config = _closed({"email": "new.broker@example.com", "name": "Nia", "role": "user"})
    email: Email
    name: Name = ""
    role: Role = "user"
    password: Password = None  # type: ignore[assignment]  # absent is fine, null is not


class UserPatch(BaseModel):
    """Only the fields sent change; `crmLocationId: null` unlinks the CRM location."""

    model_config = _closed({"role": "admin"})
    # Absent leaves a field unchanged; null is refused (it is not "absent"), except below.
    name: Name = None  # type: ignore[assignment]
    role: Role = None  # type: ignore[assignment]
    disabled: bool = None  # type: ignore[assignment]
    crmLocationId: LocationId | None = None


class PasswordReset(BaseModel):
    """`password` absent: one is generated and returned once."""

    model_config = _CLOSED
    password: Password = None  # type: ignore[assignment]


class TokenCreate(BaseModel):
    model_config = _closed({"label": "laptop"})
    label: Label


class PasswordChange(BaseModel):
    model_config = _CLOSED
    currentPassword: Annotated[
        StoredStr,
        *_length(0, PASSWORD_MAX),
        Field(description="the caller's password now; a wrong one is refused (400)"),
    ]
    newPassword: Password


# The answers, for the interface description.

ADMIN_USER_EXAMPLE = {
    **USER_EXAMPLE,
    "createdAt": "2026-11-23T09:00:00.000Z",
    "disabled": False,
    "crmLocationId": None,
}


class AdminUser(User):
    """The user object plus what an administrator needs."""

    model_config = schema_extra(ADMIN_USER_EXAMPLE)
    createdAt: AwareDatetime
    disabled: bool
    crmLocationId: str | None


class AdminUserAnswer(BaseModel):
    user: AdminUser


class NewUser(BaseModel):
    user: AdminUser
    password: str = absent("the generated password, only when none was given")


class UserPage(BaseModel):
    users: list[AdminUser]
    nextCursor: str | None


class PasswordSet(BaseModel):
    success: Literal[True]
    password: str = absent("the generated password, only when none was given")


class ApiToken(BaseModel):
    id: str
    label: str
    createdAt: AwareDatetime
    lastUsedAt: AwareDatetime | None


class TokenList(BaseModel):
    tokens: list[ApiToken]


class NewToken(BaseModel):
    token: ApiToken
    secret: str = Field(description="shown in this answer only, never again")
