"""The deployment's configuration: one pydantic-settings class, read once at start-up.

It imports nothing of the project, so that every module can read it."""

from __future__ import annotations

import os
import secrets
from functools import cached_property
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./var/controlcenter.db"


def check_database_url(url: str) -> str:
    """`url` as SQLAlchemy takes it: a plain path (no `scheme://`, the form the commands print
    after `database:`) is that SQLite file. Refused: a value that is neither a URL nor a path,
    and an in-memory SQLite database (the service opens several connections: a pool per
    process, the chat heartbeat's thread, each worker process; a second connection to
    ":memory:" is a second, empty database)."""
    if url.strip() == ":memory:":
        raise ValueError("SQLite must be a file database, not in-memory")
    if "://" not in url and url.strip():
        url = "sqlite+aiosqlite:///" + str(Path(url).expanduser())
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise ValueError(
            "not a database URL nor a path: use a path to an SQLite file, "
            "sqlite+aiosqlite:////absolute/path.db or postgresql+asyncpg://user@host/name"
        ) from exc
    if url.startswith("sqlite") and parsed.database in (None, "", ":memory:"):
        raise ValueError("SQLite must be a file database, not in-memory")
    return url


def parse_origins(value: str) -> frozenset[str]:
    """`ALLOWED_ORIGINS`: origins (`scheme://host[:port]`) separated by commas or spaces.

    Raises ValueError for an entry that is not an origin, so that a typo stops the start-up
    instead of silently refusing (or allowing) a front end.
    """
    origins: set[str] = set()
    for entry in value.replace(",", " ").split():
        origin = entry.rstrip("/").lower()
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.username is not None
            or parts.password is not None
            or parts.path
            or parts.query
            or parts.fragment
        ):
            raise ValueError(
                f"ALLOWED_ORIGINS: {entry!r} is not an origin like https://host[:port]"
            )
        origins.add(origin)
    return frozenset(origins)


def check_origins(value: str) -> str:
    """`value`, once `parse_origins` accepts it (the configuration's validator)."""
    parse_origins(value)
    return value


class Config(BaseSettings):
    """The service's environment variables (all optional; docs/reference.md lists them)."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    _check_database_url = field_validator("database_url")(check_database_url)
    secret_key: str | None = Field(default=None, repr=False)
    settings_encryption_key: str | None = Field(default=None, repr=False)
    app_id: str = "dashboard"
    provider_a_base_url: str = "https://api.anthropic.com"
    provider_b_base_url: str = "https://api.openai.com/v1"
    provider_a_model: str = "claude-sonnet-5-5"
    provider_b_model: str = "gpt-5.5"
    provider_timeout_s: float = 120.0
    provider_max_retries: int = 2
    provider_max_tokens: int = 4096
    crm_base_url: str = "https://services.leadconnectorhq.com"
    crm_timeout_s: float = 20.0
    crm_max_retries: int = 3
    crm_backoff_base_s: float = 0.5
    crm_max_wait_s: float = 20.0  # longest single wait before a retry, Retry-After included
    session_ttl_s: int = 604800
    cookie_secure: bool = False
    log_level: str = "INFO"
    log_format: Literal["json", "console"] = "console"
    var_dir: Path = Path("./var")
    max_body_bytes: int = 1024 * 1024
    mcp_cache_ttl_s: float = 30.0
    mcp_timeout_s: float = 15.0
    # How long a call to a tool that writes waits for the user's approval.
    chat_approval_timeout_s: float = Field(default=600, gt=0)
    outbox_poll_interval_s: float = 1.0
    outbox_max_backoff_s: float = 3600.0
    outbox_max_age_s: float = 86400.0
    outbox_base_backoff_s: float = 2.0
    # Renewed every quarter lease while the delivery runs: a dead process's job is taken
    # again within the lease plus one poll (within 30 s with the defaults), a slow one never.
    outbox_lease_s: float = 20.0
    outbox_delivery_timeout_s: float = 150.0
    # Deliveries in flight per process: enough to keep the CRM's rate limit busy while each
    # call takes seconds; the rate limit, not this, decides how fast the CRM is called.
    outbox_concurrency: int = Field(default=64, ge=1)
    # The CRM's burst limit per location (HighLevel: 100 requests per 10 s) and the share of it
    # the service spends (docs/outbox.md); how long a delivery waits for its turn before the
    # job is given back for later.
    crm_rate_limit_requests: int = Field(default=100, ge=1)
    crm_rate_limit_window_s: float = Field(default=10.0, gt=0)
    crm_rate_limit_share: float = Field(default=0.9, gt=0, le=1)
    outbox_rate_wait_s: float = Field(default=5.0, gt=0)
    # A settings save makes the waiting jobs due at once (`OutboxWorker`'s `wake_on`); the
    # recheck is for a change the settings' topic does not carry.
    outbox_settings_recheck_s: float = 300.0
    outbox_shutdown_grace_s: float = 10.0
    # Hardening (docs/security.md).
    allowed_origins: str = ""  # origins trusted for cookie-authenticated writes
    _check_allowed_origins = field_validator("allowed_origins")(check_origins)
    signin_window_s: float = 900.0
    signin_max_failures_per_email_and_address: int = Field(default=10, ge=1)
    signin_max_failures_per_address: int = Field(default=50, ge=1)
    signin_max_failures_per_email: int = Field(default=100, ge=1)
    # Slow clients of `serve` (docs/security.md): a request head must be complete within this
    # time, and a body must not stall (less than 1 KiB arriving) for this long.
    client_head_timeout_s: float = Field(default=30.0, gt=0)
    client_body_timeout_s: float = Field(default=30.0, gt=0)
    # Operations (docs/deploy.md). Set: /metrics asks for it as a bearer token.
    metrics_token: str | None = Field(default=None, repr=False)
    # Heartbeat of running chat answers; a dead process's are closed after 3 intervals.
    chat_liveness_interval_s: float = Field(default=5.0, gt=0)

    @cached_property
    def jwt_key(self) -> str:
        return self.secret_key or _generated_secret(self.var_dir / "secret_key", _random_key)

    @cached_property
    def fernet_key(self) -> str:
        return self.settings_encryption_key or _generated_secret(
            self.var_dir / "settings_encryption_key", lambda: Fernet.generate_key().decode()
        )

    @property
    def trusted_origins(self) -> frozenset[str]:
        return parse_origins(self.allowed_origins)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def _random_key() -> str:
    return secrets.token_urlsafe(48)


def _generated_secret(path: Path, make: object) -> str:
    """Read a key generated on first use; create it (mode 0600) when missing.

    Generated keys live beside the embedded database so that a newcomer needs no setup,
    while a deployment sets SECRET_KEY and SETTINGS_ENCRYPTION_KEY explicitly.
    """
    assert callable(make)
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = str(make())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process won the race: use its key
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value
