"""`serve --workers 2`: /metrics counts the requests of both worker processes, whichever
answers (prometheus-client's multiprocess mode, set up by `serve`)."""

from __future__ import annotations

import signal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.cli.conftest import Cli
from tests.cli.test_commands import free_port, wait_until_serving

HEALTH = {"route": "/healthz", "method": "GET", "status": "200"}


def healthz_count(url: str) -> float:
    # A new connection each time: the kernel spreads them over the workers.
    text = httpx.get(url + "/metrics", headers={"Connection": "close"}).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "controlcenter_http_requests_total" and sample.labels == HEALTH:
                return sample.value
    return 0.0


def test_metrics_are_summed_over_the_workers(cli: Cli) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = cli.popen("serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2")
    try:
        wait_until_serving(process, url)
        before = healthz_count(url)
        for _ in range(20):
            assert httpx.get(url + "/healthz", headers={"Connection": "close"}).status_code == 200
        assert [healthz_count(url) for _ in range(6)] == [before + 20] * 6
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
