"""Whether a stored setting can be used where it is used.

PUT checks only that every value is a string (and `notificationEmail` an e-mail address), so a
value that cannot work is stored all the same: a credential that cannot travel in an HTTP
header, a tool server address that is not http(s). Each place that uses one checks it first
and reports a configuration error naming the setting, once, instead of failing inside an HTTP
client with a traceback per attempt.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from controlcenter.admin_settings.names import SettingName
from controlcenter.common.logs import get_logger

log = get_logger(__name__)

NOT_PRINTABLE_ASCII = "a credential must be printable ASCII"
NOT_HTTP_URL = "it must be an http:// or https:// URL"


class UnusableSettingError(Exception):
    """A stored setting that cannot be used as it is; the message names it, never its value."""

    def __init__(self, name: SettingName, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__(f"Configuration error: the setting {name} cannot be used ({reason})")


def credential_problem(value: str) -> str | None:
    """Why `value` cannot be sent as a credential in an HTTP header, or None."""
    if value.isascii() and value.isprintable():
        return None
    return NOT_PRINTABLE_ASCII


def url_problem(value: str) -> str | None:
    """Why `value` cannot be used as an http(s) server address, or None."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return NOT_HTTP_URL
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return NOT_HTTP_URL
    if not value.isprintable():
        return NOT_HTTP_URL
    return None


def check_credential(name: SettingName, value: str) -> None:
    """Raises UnusableSettingError when `value` cannot be sent as a credential."""
    reason = credential_problem(value)
    if reason is not None:
        raise UnusableSettingError(name, reason)


class OnceReporter:
    """Logs each configuration problem once while it lasts: a problem that goes away and
    comes back is reported again. Keyed by setting name (values are never kept)."""

    def __init__(self) -> None:
        self._current: dict[str, str] = {}

    def problem(self, error: UnusableSettingError, **fields: object) -> None:
        if self._current.get(error.name) == error.reason:
            return
        self._current[error.name] = error.reason
        log.error("configuration error", setting=error.name, problem=error.reason, **fields)

    def fine(self, name: str) -> None:
        if self._current.pop(name, None) is not None:
            log.info("configuration error resolved", setting=name)
