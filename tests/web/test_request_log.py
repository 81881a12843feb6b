"""`controlcenter serve` logs each request exactly once: the service's `request` line (client,
method, path with its query, http version, route template, status, duration, request id),
written when the answer ends; uvicorn's access log is off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import RunningServer
from tests.outbox.conftest import wait_for
from tests.serve_process import serve_process, serving

INDEX = "/ocs/v2.php/apps/dashboard/api"


def records(log: Path) -> list[dict[str, Any]]:
    """The JSON records of the log's finished lines (the first line, `database: ...`, is the
    command's echo; the last may be being written)."""
    finished = log.read_text().split("\n")[:-1]
    return [json.loads(line) for line in finished if line.startswith("{")]


async def test_one_request_is_one_log_line(server: RunningServer, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {"LOG_FORMAT": "json", "LOG_LEVEL": "INFO"}
    with serve_process(server, log, env) as (url, process):
        await serving(url, process, log)
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.get(
                INDEX + "?format=xml", headers={"X-Request-ID": "one-line-401"}
            )
            missing = await http.get("/no/such/page", headers={"X-Request-ID": "one-line-404"})
            healthy = await http.get("/healthz", headers={"X-Request-ID": "one-line-200"})
        assert (refused.status_code, missing.status_code, healthy.status_code) == (401, 404, 200)
        # A line is written as its answer ends, just after the client has it.
        await wait_for(lambda: any(r.get("request_id") == "one-line-200" for r in records(log)), 30)
    logged = records(log)
    assert not [r for r in logged if r["logger"] == "uvicorn.access"]
    expected = {
        "one-line-401": (INDEX + "?format=xml", "/ocs/v2.php/apps/{app_id}/api", 401),
        "one-line-404": ("/no/such/page", "unmatched", 404),
        "one-line-200": ("/healthz", "/healthz", 200),
    }  # fmt: skip
    for request_id, (path, route, status) in expected.items():
        [line] = [r for r in logged if r.get("request_id") == request_id]
        assert (line["logger"], line["event"], line["level"]) == (
            "controlcenter.request",
            "request",
            "info",
        )
        assert (line["method"], line["path"], line["route"], line["status"]) == (
            "GET",
            path,
            route,
            status,
        )
        assert line["http"] == "1.1" and line["client"].startswith("127.0.0.1:")
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    # Every request the test made is one line, the start-up's health checks included.
    lines = [r for r in logged if r["logger"] == "controlcenter.request"]
    assert len(lines) == len({r["request_id"] for r in lines})
