"""A stored setting the chat cannot use is a configuration error naming the
setting: a clear error event for a provider key, one log line for an MCP address; never a
codec message, a traceback or a flood."""

from __future__ import annotations

import httpx
import pytest
from structlog.testing import capture_logs

from tests.chat.helpers import Llm, count_rows, set_settings, stream_chat, types
from tests.conftest import AppUser, RunningServer
from tests.fakes.llm import Reply
from tests.fakes.mcp_server import FakeMcp


@pytest.mark.parametrize("key", ["sk-ünïcode-key-0001", "sk-key\n-with-newline", "sk-\x00-nul"])
async def test_an_unusable_provider_key_is_a_clear_error_event(
    client: httpx.AsyncClient, server: RunningServer, llm: Llm, user: AppUser, key: str
) -> None:
    await set_settings(server, {llm.setting: key}, user)
    with capture_logs() as logs:
        response, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert response.status_code == 200
    assert events == [
        {
            "type": "error",
            "error": f"Configuration error: the setting {llm.setting} cannot be used "
            "(a credential must be printable ASCII)",
        }
    ]
    assert llm.fake.requests == []
    assert await count_rows(server) == (0, 0)  # refused before anything is saved
    [line] = [e for e in logs if e["event"] == "chat refused: configuration error"]
    assert line["setting"] == llm.setting and line["log_level"] == "warning"
    assert not any("traceback" in e or "exc_info" in e for e in logs)
    assert all(key not in str(e) for e in logs)


@pytest.mark.parametrize(
    "url", ["ftp://tools.example/mcp", "file:///etc/passwd", "tools.example/mcp", "http://"]
)
async def test_an_unusable_mcp_address_is_logged_once_and_chats_go_on(
    client: httpx.AsyncClient,
    server: RunningServer,
    llm: Llm,
    user: AppUser,
    fake_mcp: FakeMcp,
    url: str,
) -> None:
    await set_settings(server, {"mcpServerUrl": url}, user)
    llm.fake.script(Reply(text="One."), Reply(text="Two."))
    with capture_logs() as logs:
        for _ in range(2):
            _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
            assert types(events) == ["message_start", "content_delta", "message_complete"]
    assert [llm.offered_tools(r) for r in llm.fake.requests] == [[], []]
    errors = [e for e in logs if e["event"] == "configuration error"]
    assert len(errors) == 1
    assert errors[0]["setting"] == "mcpServerUrl"
    assert errors[0]["problem"] == "it must be an http:// or https:// URL"

    # Fixed: the tools are back, and the fix is logged once too.
    await set_settings(server, {"mcpServerUrl": fake_mcp.url}, user)
    with capture_logs() as logs:
        _, events = await stream_chat(client, user, {"message": "hi", "provider": llm.name})
    assert "schedule_showing" in llm.offered_tools(llm.fake.requests[-1])
    assert [e["setting"] for e in logs if e["event"] == "configuration error resolved"] == [
        "mcpServerUrl"
    ]
