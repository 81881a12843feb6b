"""The page routes (docs/ui.md): who may see a page, and its template.

Pages carry no data of their own: each page's script reads and writes through the JSON API
with the session cookie, so a page and the API can never disagree on a rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from controlcenter.auth.deps import optional_principal
from controlcenter.auth.models import SUPER_ADMIN
from controlcenter.auth.principal import Principal
from controlcenter.auth.service import current_user
from controlcenter.chat.request import MESSAGE_MAX_CHARS
from controlcenter.pages.fields import CHECKLIST, ONBOARDING_TAGS, SETTING_GROUPS, SETUP_FIELDS
from controlcenter.pages.headers import ASSET_HEADERS, with_page_headers
from controlcenter.pages.return_to import safe_next
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.static_files import HeaderedStaticFiles

HERE = Path(__file__).parent
ADMIN_ROLES = frozenset({"admin", SUPER_ADMIN})
EVERYONE = frozenset({"user", "admin", SUPER_ADMIN})

templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(include_in_schema=False)
Caller = Annotated[Principal | None, Depends(optional_principal)]


def _redirect(url: str) -> Response:
    return with_page_headers(RedirectResponse(url, status_code=303))


def _render(
    request: Request, name: str, caller: Principal | None, status: int = 200, **context: Any
) -> Response:
    user = caller.user if caller is not None else None
    response = templates.TemplateResponse(
        request,
        name,
        {"user": user, "is_admin": user is not None and user.role in ADMIN_ROLES, **context},
        status_code=status,
    )
    return with_page_headers(response)


def _page(
    request: Request,
    caller: Principal | None,
    template: str,
    roles: frozenset[str] = EVERYONE,
    **context: Any,
) -> Response:
    """A signed-in page: signed out goes to sign-in and back, a wrong role gets a 403 page."""
    if caller is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return _redirect("/login?next=" + quote(path, safe="/"))
    if caller.user.role not in roles:
        return _render(request, "forbidden.html", caller, status=403, title="Not allowed")
    return _render(request, template, caller, **context)


@router.get("/")
async def home(caller: Caller) -> Response:
    return _redirect("/chat" if caller is not None else "/login")


@router.get("/login")
async def login(request: Request, caller: Caller, next: str | None = None) -> Response:
    if caller is not None:
        return _redirect(safe_next(next))
    return _render(request, "login.html", None, title="Sign in", next=safe_next(next))


@router.get("/chat")
async def chat(request: Request, caller: Caller) -> Response:
    return _page(
        request,
        caller,
        "chat.html",
        title="Chat",
        conversation_id="",
        message_max=MESSAGE_MAX_CHARS,
    )


@router.get("/chat/{conversation_id}")
async def chat_conversation(request: Request, caller: Caller, conversation_id: str) -> Response:
    return _page(
        request,
        caller,
        "chat.html",
        title="Chat",
        conversation_id=conversation_id,
        message_max=MESSAGE_MAX_CHARS,
    )


@router.get("/setup")
async def setup(request: Request, caller: Caller) -> Response:
    return _page(request, caller, "setup.html", title="Setup", fields=SETUP_FIELDS)


@router.get("/admin/settings")
async def admin_settings(request: Request, caller: Caller) -> Response:
    return _page(
        request,
        caller,
        "admin_settings.html",
        frozenset({SUPER_ADMIN}),
        title="Settings",
        groups=SETTING_GROUPS,
    )


@router.get("/admin/mcp")
async def admin_mcp(request: Request, caller: Caller) -> Response:
    return _page(request, caller, "admin_mcp.html", frozenset({SUPER_ADMIN}), title="MCP servers")


@router.get("/admin/checklist")
async def admin_checklist(request: Request, caller: Caller) -> Response:
    return _page(
        request,
        caller,
        "admin_checklist.html",
        frozenset({SUPER_ADMIN}),
        title="Checklist",
        integrations=CHECKLIST,
        tags=ONBOARDING_TAGS,
    )


@router.get("/admin/users")
async def admin_users(request: Request, caller: Caller) -> Response:
    return _page(request, caller, "admin_users.html", ADMIN_ROLES, title="Users")


@router.get("/activity")
async def activity(request: Request, caller: Caller) -> Response:
    return _page(request, caller, "activity.html", title="Activity", scope="own")


@router.get("/admin/activity")
async def admin_activity(request: Request, caller: Caller) -> Response:
    return _page(request, caller, "activity.html", ADMIN_ROLES, title="All activity", scope="admin")


@router.get("/account")
async def account(request: Request, caller: Caller, database: DatabaseDep) -> Response:
    # The profile shows the row as it is now (a kept caller has no brokerage).
    if caller is not None:
        user = await current_user(database, caller.user.id)
        caller = Principal(user, caller.session_id) if user is not None else None
    return _page(request, caller, "account.html", title="Account")


def mount_pages(app: FastAPI) -> None:
    """The pages and their assets (`/static/...`), registered on the app."""
    app.include_router(router)
    app.mount(
        "/static",
        HeaderedStaticFiles(directory=HERE / "static", headers=ASSET_HEADERS),
        name="static",
    )
