"""The configured MCP servers: stored, read, changed and shown.

Credentials (the bearer token, the custom headers and the OAuth client credentials) are
encrypted by the service's one cipher (`admin_settings.cipher`) and shown masked by its one rule
(`admin_settings.names.mask_secret`), the bearer token, the OAuth client secret and every header
value alike, except a value that is exactly the placeholder `{crmLocationId}` (it holds nothing
secret, and the operator needs to see it). A masked value sent back keeps the stored one. The
OAuth client id and issuer are shown as they are. A server has either a bearer token or OAuth
client credentials.

Chats read the enabled servers through `enabled()`, kept in memory (`db.changes.Kept`, topic
`MCP_SERVERS`; chats that find nothing kept at once share one read) until a server is added,
changed or removed: in this process at once, in every other process and instance within a
second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from controlcenter.admin_settings.cipher import Cipher
from controlcenter.admin_settings.names import is_mask, mask_secret
from controlcenter.common.times import iso
from controlcenter.db import Database, utcnow
from controlcenter.db.changes import Kept, mark_changed
from controlcenter.tools.mcp.models import McpServerRow
from controlcenter.tools.mcp.server import (
    LOCATION_PLACEHOLDER,
    SETTING_SERVER,
    McpServer,
    OAuthClient,
    shown_url,
)

MCP_SERVERS = "mcp_servers"  # the topic of the kept servers

_ALL = select(McpServerRow).order_by(McpServerRow.name)


class NameTakenError(Exception):
    """Another server has this name (or it is the setting's server's name)."""


class ServerNotFoundError(Exception):
    pass


class MaskedUnknownError(Exception):
    """A masked value was sent where no stored value is to keep; `path` names the field."""

    def __init__(self, *path: str) -> None:
        self.path = list(path)
        super().__init__("/".join(path))


class CredentialsError(Exception):
    """The credentials sent do not go together; `field` names the field, `message` says why."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


BOTH_CREDENTIALS = "a server has either a bearer token or OAuth client credentials, not both"
ISSUER_REQUIRED = (
    "is required with oauthClientId: the client secret is only ever sent to that "
    "authorization server"
)


@dataclass(frozen=True)
class OAuthChanges:
    """OAuth client credentials as a body sends them: None leaves a field as it is. A masked
    `client_secret` keeps the stored one; `client_id` "" removes the credentials."""

    client_id: str | None = None
    client_secret: str | None = None
    issuer: str | None = None


@dataclass(frozen=True)
class ServerChanges:
    """A PATCH: None leaves a field as it is. `bearer_token` "" removes the token; `headers`
    replaces the set of headers (a masked value keeps the stored value of that header)."""

    name: str | None = None
    url: str | None = None
    enabled: bool | None = None
    bearer_token: str | None = None
    headers: Mapping[str, str] | None = None
    oauth: OAuthChanges = OAuthChanges()


@dataclass(frozen=True)
class StoredServer:
    id: str
    enabled: bool
    server: McpServer
    created_at: datetime
    updated_at: datetime


def shown(value: str) -> str:
    """A credential as the API shows it."""
    return value if value == LOCATION_PLACEHOLDER else mask_secret(value)


def server_view(stored: StoredServer) -> dict[str, Any]:
    """The JSON of one server, credentials masked."""
    server = stored.server
    oauth = server.oauth
    return {
        "id": stored.id,
        "name": server.name,
        "url": shown_url(server.url),
        "enabled": stored.enabled,
        "bearerToken": shown(server.bearer_token),
        "headers": {name: shown(value) for name, value in server.headers},
        "oauthClientId": oauth.client_id if oauth else "",
        "oauthClientSecret": shown(oauth.client_secret) if oauth else "",
        "oauthIssuer": oauth.issuer if oauth else "",
        "createdAt": iso(stored.created_at),
        "updatedAt": iso(stored.updated_at),
    }


class McpServerStore:
    def __init__(self, db: Database, cipher: Cipher, *, ttl_s: float) -> None:
        self._db = db
        self._cipher = cipher
        self._kept: Kept[None, tuple[McpServer, ...]] = Kept(
            db.changes, MCP_SERVERS, maxsize=1, ttl_s=ttl_s
        )
        self._reading = asyncio.Lock()  # chats that start at once share one read

    async def enabled(self) -> tuple[McpServer, ...]:
        """The enabled servers, by name; from memory when kept."""
        kept = self._kept.get(None)
        if kept is not None:
            return kept
        async with self._reading:
            kept = self._kept.get(None)
            if kept is not None:
                return kept
            read_under = self._kept.reading()
            servers = tuple(s.server for s in await self.all() if s.enabled)
            self._kept.keep(read_under, None, servers)
            return servers

    def forget(self) -> None:
        """Read the servers again at the next `enabled()` (this process only)."""
        self._db.changes.changed([MCP_SERVERS])

    async def all(self) -> list[StoredServer]:
        """Every server, by name. Raises SettingsDecryptError when a row cannot be decrypted."""
        rows = await self._db.run_read(_read_all)
        return [self._stored(row) for row in rows]

    async def get(self, server_id: str) -> StoredServer:
        row = await self._db.run_read(_read_server, server_id)
        if row is None:
            raise ServerNotFoundError(server_id)
        return self._stored(row)

    async def create(
        self,
        *,
        name: str,
        url: str,
        enabled: bool,
        bearer_token: str,
        headers: Mapping[str, str],
        user_id: str,
        oauth: OAuthChanges = OAuthChanges(),
    ) -> StoredServer:
        _check_name(name)
        if is_mask(bearer_token):
            raise MaskedUnknownError("bearerToken")
        for header, value in headers.items():
            if is_mask(value):
                raise MaskedUnknownError("headers", header)
        client = _oauth_client(bearer_token, None, oauth)
        row = McpServerRow(
            name=name,
            url=url,
            enabled=enabled,
            credentials_encrypted=self._credentials(bearer_token, list(headers.items()), client),
            updated_by=user_id,
        )
        try:
            await self._db.run_write(_add_server, row)
        except IntegrityError as exc:
            await self._refuse_taken(name, exc)
        return await self.get(row.id)

    async def update(self, server_id: str, changes: ServerChanges, user_id: str) -> StoredServer:
        """The server after `changes`. The stored credentials are decrypted and the new ones
        encrypted between reading the row and writing it, outside the unit of work (the cipher
        keeps what it decrypted in memory); the write goes through only while the row still
        holds the credentials read, else the change is made again on the newer row, so a
        concurrent change is never undone."""
        if changes.name is not None:
            _check_name(changes.name)
        written = False
        while not written:
            row = await self._db.run_read(_read_server, server_id)
            if row is None:
                raise ServerNotFoundError(server_id)
            values = self._changed(row, changes, user_id)
            try:
                written = await self._db.run_write(
                    _update_server, server_id, row.credentials_encrypted, values
                )
            except IntegrityError as exc:
                await self._refuse_taken(changes.name, exc)
        return await self.get(server_id)

    def _changed(self, row: McpServerRow, changes: ServerChanges, user_id: str) -> dict[str, Any]:
        """The columns `changes` sets on `row`, its credentials with the stored values kept
        where masked ones were sent. Raises MaskedUnknownError, CredentialsError."""
        current = self._stored(row).server
        values: dict[str, Any] = {}
        if changes.name is not None:
            values["name"] = changes.name
        if changes.url is not None:
            values["url"] = changes.url
        if changes.enabled is not None:
            values["enabled"] = changes.enabled
        token = current.bearer_token
        if changes.bearer_token is not None and not is_mask(changes.bearer_token):
            token = changes.bearer_token
        headers = list(current.headers)
        if changes.headers is not None:
            headers = _kept_headers(current.headers, changes.headers)
        client = _oauth_client(token, current.oauth, changes.oauth)
        values["credentials_encrypted"] = self._credentials(token, headers, client)
        values["updated_by"] = user_id
        values["updated_at"] = utcnow()
        return values

    async def _refuse_taken(self, name: str | None, exc: IntegrityError) -> NoReturn:
        """NameTakenError when the refused write's name is another server's; any other
        refusal (the saving user deleted meanwhile) as it is: the constraint is read from the
        stored rows, not from the driver's words, which differ per database."""
        if name is not None and await self._db.run_read(_name_taken, name):
            raise NameTakenError(name) from exc
        raise exc

    async def delete(self, server_id: str) -> None:
        await self._db.run_write(_delete_server, server_id)

    def _credentials(
        self, bearer_token: str, headers: Sequence[tuple[str, str]], oauth: OAuthClient | None
    ) -> str:
        plain: dict[str, Any] = {
            "bearerToken": bearer_token,
            "headers": [list(pair) for pair in headers],
        }
        if oauth is not None:
            plain["oauth"] = {
                "clientId": oauth.client_id,
                "clientSecret": oauth.client_secret,
                "issuer": oauth.issuer,
            }
        return self._cipher.encrypt(json.dumps(plain, separators=(",", ":")))

    def _stored(self, row: McpServerRow) -> StoredServer:
        plain = json.loads(
            self._cipher.decrypt(f"mcp server {row.name}", row.credentials_encrypted)
        )
        server = McpServer(
            name=row.name,
            url=row.url,
            bearer_token=plain.get("bearerToken", ""),
            headers=tuple((str(n), str(v)) for n, v in plain.get("headers", [])),
            oauth=_stored_oauth(plain.get("oauth")),
        )
        return StoredServer(row.id, row.enabled, server, row.created_at, row.updated_at)


def _read_all(session: Session) -> list[McpServerRow]:
    return list(session.scalars(_ALL))


def _read_server(session: Session, server_id: str) -> McpServerRow | None:
    return session.get(McpServerRow, server_id)


def _name_taken(session: Session, name: str) -> bool:
    return session.scalar(select(McpServerRow.id).where(McpServerRow.name == name)) is not None


def _add_server(session: Session, row: McpServerRow) -> None:
    session.add(row)
    mark_changed(session, MCP_SERVERS)


def _update_server(
    session: Session, server_id: str, credentials_read: str, values: dict[str, Any]
) -> bool:
    """Whether the server still held `credentials_read` and now has `values` (False: it was
    changed or removed since it was read, and nothing is written)."""
    changed = session.execute(
        update(McpServerRow)
        .where(
            McpServerRow.id == server_id,
            McpServerRow.credentials_encrypted == credentials_read,
        )
        .values(values)
    )
    if getattr(changed, "rowcount", 0) != 1:
        return False
    mark_changed(session, MCP_SERVERS)
    return True


def _delete_server(session: Session, server_id: str) -> None:
    """ServerNotFoundError when there is none."""
    row = session.get(McpServerRow, server_id)
    if row is None:
        raise ServerNotFoundError(server_id)
    session.delete(row)
    mark_changed(session, MCP_SERVERS)


def _check_name(name: str) -> None:
    if name == SETTING_SERVER:
        raise NameTakenError(name)  # the name of the server at the setting `mcpServerUrl`


def _stored_oauth(plain: Any) -> OAuthClient | None:
    if not isinstance(plain, dict):
        return None
    return OAuthClient(
        client_id=str(plain["clientId"]),
        client_secret=str(plain["clientSecret"]),
        issuer=str(plain.get("issuer", "")),
    )


def _oauth_client(
    bearer_token: str, stored: OAuthClient | None, sent: OAuthChanges
) -> OAuthClient | None:
    """The OAuth client credentials after `sent` (None: none), refused when they are
    incomplete or come with a bearer token."""
    before = stored or OAuthClient("", "")
    client_id = before.client_id if sent.client_id is None else sent.client_id
    secret = secret_before = before.client_secret
    if sent.client_secret is not None and is_mask(sent.client_secret):
        if not before.client_secret:
            raise MaskedUnknownError("oauthClientSecret")
    elif sent.client_secret is not None:
        secret = sent.client_secret
    issuer = before.issuer if sent.issuer is None else sent.issuer
    if not client_id:
        # Removing the client id removes the credentials; a new value without it is refused.
        given = (
            ("oauthClientSecret", sent.client_secret and not is_mask(sent.client_secret)),
            ("oauthIssuer", sent.issuer),
        )
        for field, value in given:
            if value:
                raise CredentialsError(field, "needs oauthClientId")
        return None
    if not secret:
        raise CredentialsError("oauthClientSecret", "is required with oauthClientId")
    if bearer_token:
        raise CredentialsError(
            "oauthClientId" if sent.client_id else "bearerToken", BOTH_CREDENTIALS
        )
    unchanged = stored is not None and (client_id, secret) == (stored.client_id, secret_before)
    if not issuer and (not unchanged or before.issuer):
        # A server stored before the issuer was required keeps working until its OAuth
        # credentials change; new ones are only ever sent to the named issuer, and a named
        # issuer is never removed.
        raise CredentialsError("oauthIssuer", ISSUER_REQUIRED)
    return OAuthClient(client_id, secret, issuer)


def _kept_headers(
    stored: Sequence[tuple[str, str]], sent: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The headers sent, a masked value standing for the stored value of the same name."""
    before = {name.lower(): value for name, value in stored}
    kept: list[tuple[str, str]] = []
    for name, value in sent.items():
        if is_mask(value):
            if name.lower() not in before:
                raise MaskedUnknownError("headers", name)
            value = before[name.lower()]
        kept.append((name, value))
    return kept
