"""The pages over HTTP: security headers, redirects, roles, assets."""

from __future__ import annotations

import re

import httpx
import pytest

from controlcenter.pages.return_to import safe_next
from tests.conftest import UserFactory

PAGES = [
    "/chat",
    "/chat/some-id",
    "/setup",
    "/account",
    "/admin/users",
    "/admin/settings",
    "/admin/checklist",
    "/activity",
    "/admin/activity",
]


def assert_page_headers(response: httpx.Response) -> None:
    policy = response.headers["content-security-policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"  # no inline scripts, no other host
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_signed_out_pages_redirect_to_sign_in_with_the_path(
    client: httpx.AsyncClient,
) -> None:
    for path in PAGES:
        response = await client.get(path + "?tab=1")
        assert response.status_code == 303
        assert response.headers["location"] == f"/login?next={path}%3Ftab%3D1"
        assert_page_headers(response)
    home = await client.get("/")
    assert home.status_code == 303 and home.headers["location"] == "/login"


async def test_pages_by_role(client: httpx.AsyncClient, users: UserFactory) -> None:
    expected = {
        "user": {
            "/admin/users": 403,
            "/admin/settings": 403,
            "/admin/checklist": 403,
            "/admin/activity": 403,
        },
        "admin": {"/admin/users": 200, "/admin/settings": 403, "/admin/checklist": 403},
        "super_admin": {"/admin/users": 200, "/admin/settings": 200, "/admin/checklist": 200},
    }
    for role, admin_pages in expected.items():
        user = await users.create(role)
        client.cookies.set("session", user.token)
        for path in PAGES:
            response = await client.get(path)
            assert response.status_code == admin_pages.get(path, 200), (role, path)
            assert response.headers["content-type"].startswith("text/html")
            assert_page_headers(response)
        home = await client.get("/")
        assert home.headers["location"] == "/chat"
        signed_in = await client.get("/login?next=/setup")
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/setup"
        client.cookies.clear()


async def test_pages_load_nothing_from_another_host_and_no_inline_script(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create("super_admin")
    client.cookies.set("session", user.token)
    for path in [*PAGES, "/login"]:
        html = (await client.get(path, follow_redirects=True)).text
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), path
        for script in re.findall(r"<script[^>]*>", html):
            assert re.search(r'src="/static/[^"]+"', script), script
        assert not re.search(r"<[^>]+\son[a-z]+=", html), path
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
            response = await client.get(asset)
            assert response.status_code == 200, asset
            assert response.headers["x-content-type-options"] == "nosniff"


async def test_the_conversation_id_is_escaped_into_the_page(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    client.cookies.set("session", user.token)
    html = (await client.get('/chat/x"><img src=x onerror=alert(1)>')).text
    assert "<img src=x" not in html
    assert 'data-conversation-id="x&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in html


# Each `next` a browser would read as another site, as it travels in a query string: tabs and
# line breaks are dropped by the browser's URL parser and `\\` reads as `/`.
LEAVING_VECTORS = [
    "/%09/evil.example",
    "/%0A/evil.example",
    "/%0D/evil.example",
    "%09//evil.example",
    "/%09%5Cevil.example",
    "/%5C%09evil.example",
    "%0A%0D//evil.example",
    "%20//evil.example",
    "/%00/evil.example",
    "//evil.example",
    "///evil.example",
    "/%5Cevil.example",
    "%5C%5Cevil.example",
    "https://evil.example/",
    "https:evil.example",
    "http:/evil.example",
    "javascript:alert(1)",
    "%09javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "evil.example",
    "/%E2%80%A8/evil.example",
]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/setup", "/setup"),
        ("/chat/abc?x=1", "/chat/abc?x=1"),
        ("/%2F/evil.example", "/%2F/evil.example"),  # a path of this site, encoded slash kept
        ("/chat/zoë", "/chat/zoë"),
        (None, "/chat"),
        ("", "/chat"),
        ("/\t/evil.example", "/chat"),
        ("/\n/evil.example", "/chat"),
        ("/\r/evil.example", "/chat"),
        ("/\t\\evil.example", "/chat"),
        ("//evil.example/", "/chat"),
        ("/\\evil.example/", "/chat"),
        ("https://evil.example/", "/chat"),
        ("javascript:alert(1)", "/chat"),
    ],
)
def test_sign_in_returns_only_to_this_site(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected


@pytest.mark.parametrize("vector", LEAVING_VECTORS)
async def test_the_login_page_never_offers_another_site(
    client: httpx.AsyncClient, users: UserFactory, vector: str
) -> None:
    page = await client.get(f"/login?next={vector}")
    assert page.status_code == 200
    assert 'data-next="/chat"' in page.text
    user = await users.create()
    client.cookies.set("session", user.token)
    signed_in = await client.get(f"/login?next={vector}")
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/chat"
