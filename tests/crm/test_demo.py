"""`python -m tests.fakes.crm` serves seeded demo data the service can be pointed at."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fakes.crm import (
    DEMO_AGENCY_TOKEN,
    DEMO_COMPANY_ID,
    DEMO_LOCATION_ID,
    DEMO_OPERATOR_LOCATION_ID,
    DEMO_OPERATOR_TOKEN,
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_demo_fake_serves_seeded_data(repo_root: Path) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.crm", "--port", str(port)],
        cwd=repo_root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "demo fake did not start"
                time.sleep(0.1)
        with httpx.Client(base_url=url, headers={"Version": "2021-07-28"}) as http:
            exchange = http.post(
                "/oauth/locationToken",
                data={"companyId": DEMO_COMPANY_ID, "locationId": DEMO_LOCATION_ID},
                headers={"Authorization": f"Bearer {DEMO_AGENCY_TOKEN}"},
            )
            assert exchange.status_code == 200
            token = exchange.json()["access_token"]
            contacts = http.get(
                "/contacts/",
                params={"locationId": DEMO_LOCATION_ID},
                headers={"Authorization": f"Bearer {token}"},
            ).json()["contacts"]
            assert {c["firstName"] for c in contacts} == {"Dana", "Omar", "Lena"}
            operator = http.get(
                f"/locations/{DEMO_OPERATOR_LOCATION_ID}",
                headers={"Authorization": f"Bearer {DEMO_OPERATOR_TOKEN}"},
            )
            assert operator.status_code == 200
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert f"CRM_BASE_URL=http://127.0.0.1:{port}" in output
