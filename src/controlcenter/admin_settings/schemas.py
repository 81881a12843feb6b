"""The PUT settings request: any of the 21 names, each an optional string."""

from __future__ import annotations

from typing import Annotated, Any

from email_validator import EmailNotValidError, validate_email
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    create_model,
)
from pydantic_core import PydanticCustomError

from controlcenter.admin_settings.names import NOTIFICATION_EMAIL, SETTING_NAMES
from controlcenter.common.emails import ADDRESS_SCHEMA
from controlcenter.web.validation import STORABLE

VALUE_MAX_CHARS = 8192
"""The longest value a setting takes: every real one fits with room to spare (API keys and
tokens are 40-200 characters, an OAuth access token a few thousand at most, a PEM private key
of RSA-4096 about 3,300, a URL 2,048 in any browser), while a megabyte pasted by mistake, or
sent on purpose, is refused before it is encrypted and stored."""

SettingValue = Annotated[str, StringConstraints(max_length=VALUE_MAX_CHARS), STORABLE]


def _email_or_empty(value: str) -> str:
    # An empty value is dropped later (it cannot clear a setting), so it is not an error here.
    if value == "":
        return value
    try:
        validate_email(value, check_deliverability=False)  # syntax only: no DNS lookups
    except EmailNotValidError as exc:
        raise PydanticCustomError(
            "value_error", "value is not a valid email address: {reason}", {"reason": str(exc)}
        ) from None
    return value


EmailOrEmpty = Annotated[
    SettingValue,
    AfterValidator(_email_or_empty),
    Field(
        json_schema_extra={"anyOf": [ADDRESS_SCHEMA, {"maxLength": 0}]},
        description="an e-mail address, or empty",
    ),
]


def _field_type(name: str) -> Any:
    return EmailOrEmpty if name == NOTIFICATION_EMAIL else SettingValue


# Built from the one list of names so the request can never drift from GET's 21 names. The
# default None is never validated, so an explicit null still fails while absence passes.
_FIELDS: dict[str, Any] = {name: (_field_type(name), None) for name in SETTING_NAMES}
SettingsInput: type[BaseModel] = create_model(
    "SettingsInput",
    __config__=ConfigDict(
        strict=True,
        extra="ignore",
        json_schema_extra={
            "example": {"tagOnboardingComplete": "onboarding-complete", "tagHighGCI": "high-gci"}
        },
    ),
    **_FIELDS,
)

# GET's answer: all 21 names, secrets masked (for the interface description).
Settings: type[BaseModel] = create_model(
    "Settings",
    **{name: (str, ...) for name in SETTING_NAMES},  # type: ignore[call-overload]
)


class SettingsAnswer(BaseModel):
    settings: Settings  # built by create_model


# Checked first so that a body that is not an object gets the plain "valid dictionary" issue
# rather than one naming an internal class.
_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any], config=ConfigDict(strict=True))


def parse_settings(body: object) -> dict[str, str]:
    """The settings the caller sent (absent ones left out). Raises pydantic's ValidationError."""
    _OBJECT.validate_python(body)
    given: dict[str, str] = SettingsInput.model_validate(body).model_dump(exclude_unset=True)
    return given
