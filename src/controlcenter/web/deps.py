"""FastAPI dependencies: the app's parts, the caller, and the role checks.

`Services` holds the long-lived objects of one app instance, built once by `app.py` in the
lifespan; this module and `app.py` are the only ones that see it. Every route asks here for
only what it uses (the database, the chat's parts, the caller). Domain types are imported for
type checking only: the routers of every domain import this module, so it imports none of
theirs at run time (no cycle between packages; `tests/test_layout.py`).

No `from __future__ import annotations` here: FastAPI reads the `Annotated` dependencies of
these functions at run time, and the domain types inside them stay quoted.
"""

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.web.errors import ApiError

if TYPE_CHECKING:
    from controlcenter.admin_settings.store import SettingsStore
    from controlcenter.auth.service import Principal, RequestAuth
    from controlcenter.chat.service import ChatParts
    from controlcenter.chat.stream import ChatRuns
    from controlcenter.crm.transport import CrmTransport
    from controlcenter.onboarding.service import OnboardingSaves
    from controlcenter.providers.base import Provider
    from controlcenter.tools.router import ToolRouter

SESSION_COOKIE = "session"


@dataclass
class Services:
    config: Config
    db: Database
    settings: "SettingsStore"
    crm: "CrmTransport"  # the shared pool every CRM client borrows
    providers: "Mapping[str, Provider]"
    tools: "ToolRouter"
    chat_runs: "ChatRuns"
    auth: "RequestAuth"
    chat: "ChatParts"  # the same objects, as the chat uses them
    onboarding: "OnboardingSaves"


async def get_services(request: Request) -> Services:
    """The app's services. Async, so `Depends` resolves it on the event loop instead of a
    thread-pool hop per request."""
    services: Services = request.app.state.services
    return services


async def get_config(request: Request) -> Config:
    return (await get_services(request)).config


async def get_database(request: Request) -> Database:
    return (await get_services(request)).db


async def get_settings_store(request: Request) -> "SettingsStore":
    return (await get_services(request)).settings


async def get_onboarding_saves(request: Request) -> "OnboardingSaves":
    return (await get_services(request)).onboarding


async def get_chat_parts(request: Request) -> "ChatParts":
    return (await get_services(request)).chat


# The two ways a caller shows a session, read by FastAPI's own security classes so that every
# protected route declares them in /openapi.json.
BEARER = HTTPBearer(
    auto_error=False, scheme_name="bearer_auth", description="A session JWT or an API token"
)
COOKIE = APIKeyCookie(
    name=SESSION_COOKIE,
    auto_error=False,
    scheme_name="cookie_auth",
    description="The session cookie set by POST /api/v1/auth/login",
)


async def optional_principal(
    services: Annotated[Services, Depends(get_services)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
    cookie: Annotated[str | None, Security(COOKIE)],
) -> "Principal | None":
    """The caller from `Authorization: Bearer` (preferred) or the `session` cookie.

    A bearer header that is present decides on its own (a wrong one is no session, even beside
    a valid cookie); the cookie only ever carries a session JWT, never an API token.
    """
    token = bearer.credentials.strip() if bearer is not None else None
    if not token and not cookie:
        return None
    return await services.auth.principal(token, cookie)


async def require_user(
    principal: Annotated["Principal | None", Depends(optional_principal)],
) -> "Principal":
    if principal is None:
        raise ApiError(401, "Unauthorized")
    return principal


def _role_check(
    allows: "Callable[[Principal], bool]", what: str
) -> "Callable[[Principal | None], Awaitable[Principal]]":
    async def check(
        principal: Annotated["Principal | None", Depends(optional_principal)],
    ) -> "Principal":
        if principal is None or not allows(principal):
            raise ApiError(403, "Forbidden")
        return principal

    check.__doc__ = f"The caller, when {what}; 403 otherwise."
    return check


require_super_admin = _role_check(lambda p: p.is_super_admin, "a super administrator")
# User administration (CONTRACT 8).
require_admin = _role_check(lambda p: p.is_admin, "an administrator or a super administrator")


ServicesDep = Annotated[Services, Depends(get_services)]
ConfigDep = Annotated[Config, Depends(get_config)]
DatabaseDep = Annotated[Database, Depends(get_database)]
SettingsDep = Annotated["SettingsStore", Depends(get_settings_store)]
ChatPartsDep = Annotated["ChatParts", Depends(get_chat_parts)]
OnboardingSavesDep = Annotated["OnboardingSaves", Depends(get_onboarding_saves)]
CurrentUser = Annotated["Principal", Depends(require_user)]
Admin = Annotated["Principal", Depends(require_admin)]
SuperAdmin = Annotated["Principal", Depends(require_super_admin)]
