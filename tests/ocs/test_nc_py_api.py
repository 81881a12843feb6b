"""A real Nextcloud client, nc_py_api from PyPI, calls the index over HTTP."""

from __future__ import annotations

import pytest
from nc_py_api import AsyncNextcloud, NextcloudException

from tests.conftest import RunningServer, UserFactory

PATH = "/ocs/v2.php/apps/dashboard/api"


def nextcloud(server: RunningServer, user: str, secret: str) -> AsyncNextcloud:
    return AsyncNextcloud(nextcloud_url=server.url, nc_auth_user=user, nc_auth_pass=secret)


async def test_password_and_api_token_get_the_message(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    for secret in (user.password, user.api_token):
        data = await nextcloud(server, user.email, secret).ocs("GET", PATH)
        assert set(data) == {"message"}
        assert isinstance(data["message"], str) and data["message"]


@pytest.mark.parametrize("which", ["password", "email"])
async def test_wrong_credentials_raise_its_not_logged_in_error(
    server: RunningServer, users: UserFactory, which: str
) -> None:
    user = await users.create()
    email, secret = user.email, user.password
    if which == "password":
        secret += "-wrong"
    else:
        email = "nobody@example.com"
    with pytest.raises(NextcloudException) as caught:
        await nextcloud(server, email, secret).ocs("GET", PATH)
    assert caught.value.status_code == 401
    response = caught.value.response
    assert response is not None
    assert response.json()["ocs"]["meta"] == {
        "status": "failure",
        "statuscode": 997,
        "message": "Current user is not logged in",
    }


async def test_another_app_is_a_404_error(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    with pytest.raises(NextcloudException) as caught:
        await nextcloud(server, user.email, user.api_token).ocs("GET", "/ocs/v2.php/apps/other/api")
    assert caught.value.status_code == 404
    assert caught.value.response is not None
    assert caught.value.response.json()["ocs"]["meta"]["statuscode"] == 404
