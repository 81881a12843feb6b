"""`make demo` as a newcomer runs it: one process, no key, prints how to sign in, chats with
the demo model through the real CRM tools, stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from tests.browser.conftest import PHONE, sign_in
from tests.fakes.server import listening_socket

STARTUP_TIMEOUT_S = 90.0


def free_port() -> int:
    sock = listening_socket("127.0.0.1", 0)
    port: int = sock.getsockname()[1]
    sock.close()
    return port


class Demo:
    def __init__(self, process: subprocess.Popen[str], lines: dict[str, list[str]]) -> None:
        self.process = process
        self.lines = lines

    @property
    def url(self) -> str:
        return self.lines["url"][0].rstrip("/")


@pytest.fixture(scope="module")
def demo(repo_root: Path) -> Iterator[Demo]:
    """One demo process for this module (its start is most of the cost); the last test stops it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "TEST_"))}
    env["PORT"] = str(free_port())
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.demo"],
        cwd=repo_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: dict[str, list[str]] = {}
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    assert process.stdout is not None
    try:
        while not {"url", "broker", "admin"} <= lines.keys():
            line = process.stdout.readline()
            if not line:
                pytest.fail(f"make demo ended early (exit {process.wait()}): {lines}")
            if time.monotonic() > deadline:
                pytest.fail("make demo printed no sign-in lines in time")
            key, _, rest = line.strip().partition(" ")
            lines[key] = rest.split(" ")
        yield Demo(process, lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdout.close()


def test_demo_prints_its_accounts_and_answers_with_the_crm_contact_search(demo: Demo) -> None:
    assert demo.url.startswith("http://127.0.0.1:")
    broker_email, broker_password = demo.lines["broker"]
    admin_email, admin_password = demo.lines["admin"]
    with httpx.Client(base_url=demo.url, timeout=30) as http:
        page = http.get("/login")
        assert page.status_code == 200 and "Sign in" in page.text

        admin = http.post(
            "/api/v1/auth/login", json={"email": admin_email, "password": admin_password}
        )
        assert admin.status_code == 200 and admin.json()["user"]["role"] == "super_admin"

        login = http.post(
            "/api/v1/auth/login", json={"email": broker_email, "password": broker_password}
        )
        assert login.status_code == 200 and login.json()["user"]["role"] == "user"
        headers = {"Authorization": f"Bearer {login.json()['token']}"}
        with http.stream(
            "POST",
            "/api/v1/control-center/chat",
            json={"message": "Show me my contacts"},
            headers=headers,
        ) as response:
            assert response.status_code == 200
            events = [
                json.loads(line[len("data: ") :])
                for line in response.iter_lines()
                if line.startswith("data: ")
            ]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_complete", kinds
    calls = [e["toolCall"] for e in events if e["type"] == "tool_call_start"]
    assert [call["name"] for call in calls] == ["contacts_get-contacts"]
    result = next(e["toolResult"] for e in events if e["type"] == "tool_result")
    assert result["success"] is True
    names = {c["firstName"] for c in result["result"]["contacts"]}
    assert {"Dana", "Omar", "Lena"} <= names
    assert "Dana Whitfield" in events[-1]["message"]["content"]


async def test_demo_gives_a_working_chat_in_the_browser(demo: Demo, browser: Browser) -> None:
    email, password = demo.lines["broker"]
    context = await browser.new_context(viewport=PHONE)
    try:
        page = await context.new_page()
        await page.goto(demo.url + "/")
        await sign_in(page, email, password)
        await page.wait_for_url("**/chat")
        await page.get_by_role("textbox", name="Message").fill("Who are my contacts?")
        await page.get_by_role("button", name="Send").click()
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".tool-name")).to_have_text(["Search contacts"])
        await expect(answer.locator(".tool-status")).to_have_text(["Succeeded"])
        await expect(answer.locator(".markdown strong", has_text="Dana Whitfield")).to_be_visible()
    finally:
        await context.close()


def test_demo_stops_on_ctrl_c(demo: Demo) -> None:
    demo.process.send_signal(signal.SIGINT)
    assert demo.process.wait(20) == 0
