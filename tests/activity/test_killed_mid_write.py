"""A process that dies while the CRM is carrying out a write leaves the write's entry under
way: listed with its outcome `unknown`, and undone only once a read shows that the write took
effect (the object holds what it would have left)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from contextlib import AbstractContextManager, suppress
from pathlib import Path

import httpx

from tests.activity.conftest import Desk
from tests.conftest import RunningServer
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.outbox.conftest import wait_for
from tests.serve_process import serve_process, serving

CHAT = "/api/v1/control-center/chat"


def serve(
    server: RunningServer, desk: Desk, log: Path
) -> AbstractContextManager[tuple[str, subprocess.Popen[bytes]]]:
    """`controlcenter serve` on the test's database, its provider and CRM the fakes."""
    env = {"PROVIDER_A_BASE_URL": desk.llm.fake.url, "CRM_BASE_URL": desk.crm.url}
    return serve_process(server, log, env)


async def test_a_write_caught_by_a_killed_process_is_unknown_until_a_read_confirms_it(
    desk: Desk, server: RunningServer, fake_crm: FakeCrm, tmp_path: Path
) -> None:
    ada = fake_crm.add_contact(
        desk.location, firstName="Ada", lastName="Lovelace", phone="555-0100"
    )
    log = tmp_path / "serve.log"
    with serve(server, desk, log) as (url, process):
        await serving(url, process, log)
        args = {"contactId": ada["id"], "phone": "555-0199"}
        desk.llm.fake.script(
            Reply(tool_uses=[ToolUse("contacts_update-contact", args, id="toolu_1")]),
            Reply(text="Done."),
        )
        fake_crm.hold("PUT")  # the write reaches the CRM and is not answered

        async def chat() -> None:
            async with httpx.AsyncClient(timeout=120) as http:
                body = {"message": "Fix Ada's phone", "provider": "provider_a"}
                async with http.stream("POST", url + CHAT, json=body, headers=desk.broker.headers):
                    await asyncio.sleep(120)

        reader = asyncio.create_task(chat())
        try:
            await wait_for(lambda: bool(fake_crm.calls_to("PUT", f"/contacts/{ada['id']}")), 30)
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        finally:
            reader.cancel()
            with suppress(asyncio.CancelledError, httpx.HTTPError):
                await reader

    [entry] = await desk.entries()
    assert entry["summary"] == "Phone of Ada Lovelace: 555-0100 → 555-0199"
    assert (entry["state"], entry["undoable"], entry["toolCallId"]) == ("unknown", True, "toolu_1")
    # The write has not taken effect: the read says so, and nothing is written back.
    refused = await desk.undo(entry["id"])
    assert refused.status_code == 409 and refused.json() == {"error": "Changed since"}
    assert [c.method for c in fake_crm.calls if c.path == f"/contacts/{ada['id']}"][-1] == "GET"
    [still] = await desk.entries()
    assert (still["state"], still["undoable"]) == ("unknown", True)

    # The CRM carries out the write it was holding: now the read confirms it, and it is undone.
    fake_crm.release()
    await wait_for(lambda: fake_crm.state.contacts[ada["id"]]["phone"] == "555-0199", 10)
    undone = await desk.undo(entry["id"])
    assert undone.status_code == 200, undone.text
    assert undone.json()["entry"]["summary"] == "Phone of Ada Lovelace: 555-0199 → 555-0100"
    assert fake_crm.state.contacts[ada["id"]]["phone"] == "555-0100"
    listed = await desk.entries()
    assert [e["state"] for e in listed] == ["done", "undone"]
    assert json.dumps(listed).count("unknown") == 0
