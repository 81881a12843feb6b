"""One account per mailbox: every spelling of an address (Unicode composed or decomposed, its
compatibility forms such as full-width letters, the domain in Unicode or IDNA's ASCII form, any
case) names the same account."""

from __future__ import annotations

import base64

import httpx
import pytest

from controlcenter.common.emails import normalise_email
from tests.conftest import RunningServer, UserFactory

URL = "/api/v1/admin/users"
EXISTS = {"error": "A user with this e-mail already exists"}
COMPOSED = "zo\u00eb@ex\u00e4mple.com"
STORED = "zo\u00eb@xn--exmple-cua.com"
FORMS = [
    COMPOSED,
    "zoe\u0308@exa\u0308mple.com",  # decomposed
    "zo\u00eb@xn--exmple-cua.com",  # the domain's ASCII form
    "ZO\u00cb@EX\u00c4MPLE.COM",
    "Zoe\u0308@XN--EXMPLE-CUA.com",
    f"  {COMPOSED} ",
    "\uff5a\uff4f\u00eb@ex\u00e4mple.com",  # full-width letters: a compatibility form (NFKC)
    "\uff3a\uff2f\u00cb@ex\u00e4mple.com",  # full-width capitals
    "zo\u00eb@ex\u00e4mple\uff0ecom",  # a full-width full stop in the domain
]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_has_one_normal_form(form: str) -> None:
    assert normalise_email(form) == STORED


def test_case_folding_is_unicodes_not_only_lower_case() -> None:
    assert normalise_email("STRA\u00dfE@example.com") == "strasse@example.com"
    assert normalise_email("\uff41@example.com") == "a@example.com"


def test_what_is_not_an_address_is_only_trimmed_and_folded() -> None:
    assert normalise_email(" No-At-Sign ") == "no-at-sign"
    assert normalise_email("E\u0301") == "\u00e9"


async def test_a_look_alike_of_an_account_is_refused_and_any_form_signs_in(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    boss = await users.create("super_admin")
    created = await client.post(
        URL, json={"email": COMPOSED, "password": "a long enough password"}, headers=boss.headers
    )
    assert created.status_code == 201, created.text
    assert created.json()["user"]["email"] == STORED
    for form in FORMS:
        again = await client.post(URL, json={"email": form.strip()}, headers=boss.headers)
        assert (again.status_code, again.json()) == (409, EXISTS), form
    for form in FORMS:
        login = await client.post(
            "/api/v1/auth/login", json={"email": form, "password": "a long enough password"}
        )
        assert login.status_code == 200, form
        assert login.json()["user"]["id"] == created.json()["user"]["id"]
        value = base64.b64encode(f"{form.strip()}:a long enough password".encode()).decode()
        index = await client.get(
            "/ocs/v2.php/apps/dashboard/api",
            headers={"Authorization": f"Basic {value}", "OCS-APIRequest": "true"},
        )
        assert index.status_code == 200, form
    client.cookies.clear()


async def test_the_factory_stores_the_normal_form(users: UserFactory) -> None:
    user = await users.create(email="Zoe\u0308@EXA\u0308MPLE.com")
    assert user.email == STORED
