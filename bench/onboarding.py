"""Onboarding POST latency while the CRM takes 5 s to answer and the outbox worker delivers.

Each POST writes the record and its outbox jobs; the worker of `controlcenter serve` delivers
them to the fake CRM (its own process) while the load goes on. The baseline, measured in the
same run at the same concurrency, is GET /api/v1/onboarding: the same session check and
one read, without the write.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from bench.chat import percentile
from bench.deploy import Deployment, Options
from bench.fakes import FakeProc
from bench.procs import Profiler
from bench.results import Row, ms
from bench.seed import Account, save_settings, seed_accounts
from bench.timeline import step
from controlcenter.db import Database

CRM_DELAY_S = 5.0
CONCURRENCY = 16
TARGET_S = 0.020  # issue 15: p99 < 20 ms at 16 concurrent with a 5 s CRM
# Issue 15: the outbox at 90% of HighLevel's 100 requests per 10 s per location, measured
# over this long while the POSTs' jobs are delivered.
HIGHLEVEL_REQUESTS_PER_S = 10.0
TARGET_JOBS_PER_S = 9.0
OUTBOX_S = 20.0  # also --quick's (was 25 s, 20 s quick): four CRM round trips
PATH = "/api/v1/onboarding"
BODY = {
    "yearsInBusiness": "10+",
    "gciLast12Months": "100k-250k",
    "usingOtherCrm": False,
    "goalsSelected": ["more leads", "automation"],
    "brokerageName": "Bench Realty",
}


async def _load(url: str, accounts: list[Account], post: bool) -> tuple[list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    queue = list(accounts)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:

        async def worker() -> None:
            while queue:
                account = queue.pop()
                headers = {"Authorization": f"Bearer {account.session}"}
                started = time.perf_counter()
                try:
                    if post:
                        response = await http.post(PATH, json=BODY, headers=headers)
                    else:
                        response = await http.get(PATH, headers=headers)
                    latencies.append(time.perf_counter() - started)
                    data: Any = response.json()
                    if response.status_code != 200 or (post and data.get("success") is not True):
                        errors.append(f"HTTP {response.status_code}: {response.text[:100]}")
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])

        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(CONCURRENCY))), 300)
    return sorted(latencies), errors


async def _delivered(database_url: str) -> tuple[int, int]:
    database = Database(database_url)
    try:
        async with database.read() as db:
            rows = await db.execute(text("SELECT status, count(*) FROM outbox_jobs GROUP BY 1"))
            counts = {status: n for status, n in rows.all()}
    finally:
        await database.dispose()
    return counts.get("done", 0), sum(counts.values())


def run(deployment: Deployment, options: Options) -> list[Row]:
    db_kind = deployment.db_kind
    posts = 60 if options.quick else 300
    with tempfile.TemporaryDirectory(prefix="bench-onboarding-") as tmp, ExitStack() as stack:
        crm = FakeProc("crm", Path(tmp), CRM_DELAY_S)
        stack.callback(crm.stop)
        crm.launch()  # its start overlaps the seeding
        url_db, key = deployment.database_url, deployment.secret_key
        with step("seeded"):
            accounts = asyncio.run(seed_accounts(url_db, key, "onb", posts))
            (admin,) = asyncio.run(seed_accounts(url_db, key, "admin", 1, role="super_admin"))
        with step("fake CRM serving"):
            crm.ready()
        settings = {
            "crmOwnerLocationId": crm.info["location_id"],
            "crmPrivateToken": crm.info["private_token"],
            "tagOnboardingComplete": "onboarding-complete",
            "tagHighGCI": "high-gci",
        }
        asyncio.run(save_settings(url_db, deployment.fernet_key, settings, admin.id))
        service, url = deployment.service(
            {"CRM_BASE_URL": crm.info["url"], "OUTBOX_POLL_INTERVAL_S": "0.2"}
        )
        with service:
            with step("service answered"):
                service.wait_http(url + "/healthz")
            with step("service settled"):
                service.wait_settled()
            with step("GETs (warm-up, baseline)"):
                asyncio.run(_load(url, accounts[:CONCURRENCY], post=False))  # warm-up
                base, base_errors = asyncio.run(_load(url, accounts, post=False))
            with (
                step("POSTs"),
                Profiler(service.pid, options.profile_dir, "onboarding-post"),
            ):
                lat, errors = asyncio.run(_load(url, accounts, post=True))
            time.sleep(CRM_DELAY_S + 2)  # let the worker finish the first deliveries
            done, total = asyncio.run(_delivered(url_db))
            with step("outbox window"):
                delivery = _delivery_rate(url_db, OUTBOX_S)
        crm.stop()  # it writes what it refused when it stops, into the directory above
        stats = crm.stats()
        delivered, _ = asyncio.run(_delivered(url_db))
        refused, requests = stats.get("burst_refusals"), stats.get("requests")
    p50, p99 = percentile(lat, 50), percentile(lat, 99)
    note = f"{len(errors)} errors, first: {errors[0]}" if errors else ""
    if base_errors:
        note += f" baseline errors: {base_errors[0]}"
    return [
        Row(
            db_kind,
            f"onboarding POST x{posts} @{CONCURRENCY}, CRM 5 s",
            f"p50 {ms(p50)}, p99 {ms(p99)}; {len(errors)} errors; outbox {done}/{total} delivered",
            baseline=f"GET p50 {ms(percentile(base, 50))}, p99 {ms(percentile(base, 99))}",
            ratio=f"p99 x{p99 / percentile(base, 99):.1f}" if base else "",
            target=f"p99 < {ms(TARGET_S)}",
            met=p99 < TARGET_S and not errors,
            note=note,
        ),
        Row(
            db_kind,
            "outbox delivery, CRM 5 s",
            f"{delivery.jobs_per_s:.1f} jobs/s over {delivery.seconds:.0f} s "
            f"({delivery.delivered} jobs, {delivery.left} still queued at the end); "
            f"CRM 429s: {refused if refused is not None else 'n/a'}; "
            f"{_per_job(requests, delivered)} CRM requests per delivered job",
            baseline=f"HighLevel: {HIGHLEVEL_REQUESTS_PER_S:g} requests/s per location",
            ratio=f"{delivery.jobs_per_s / TARGET_JOBS_PER_S:.0%} of target",
            target=f">= {TARGET_JOBS_PER_S:g} jobs/s, no 429",
            met=delivery.jobs_per_s >= TARGET_JOBS_PER_S and refused == 0,
            note=(
                "every save here is high-GCI: 3 jobs, delivered together in 2 CRM requests "
                "(docs/outbox.md), so 9 requests/s allow at most 13.5 jobs/s"
            ),
        ),
    ]


def _per_job(requests: int | None, delivered: int) -> str:
    """Requests per job, counting those of deliveries still in flight when it stopped."""
    return f"{requests / delivered:.2f}" if requests is not None and delivered else "n/a"


@dataclass(frozen=True)
class Delivery:
    delivered: int
    seconds: float
    left: int

    @property
    def jobs_per_s(self) -> float:
        return self.delivered / self.seconds if self.seconds else 0.0


def _delivery_rate(database_url: str, seconds: float) -> Delivery:
    """Jobs delivered per second while the backlog lasts (at most `seconds`)."""
    first, total = asyncio.run(_delivered(database_url))
    started = time.monotonic()
    done = first
    while time.monotonic() - started < seconds and done < total:
        time.sleep(1.0)
        done, total = asyncio.run(_delivered(database_url))
    return Delivery(done - first, time.monotonic() - started, total - done)
