"""Several workers over many jobs: each job reaches the CRM exactly once.

On PostgreSQL the claim is SELECT ... FOR UPDATE SKIP LOCKED; on SQLite it is a BEGIN
IMMEDIATE transaction. Each worker has its own database engine and pool and its own CRM client
pool, as separate processes would.
"""

from __future__ import annotations

from collections import Counter

from structlog.testing import capture_logs

from tests.conftest import RunningServer, UserFactory
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import fast_config, run_until_all_done, separate_workers
from tests.outbox.operator import COMPLETE_TAG, queue_tag_jobs

JOBS = 40


async def test_racing_workers_deliver_each_job_exactly_once(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    operator, brokers = await queue_tag_jobs(server, users, fake_crm, JOBS, "racer")

    count = 2 if server.db.is_sqlite else 4
    config = fast_config(server.config, outbox_concurrency=4)
    fake_crm.delay_s = 0.01  # keeps deliveries in flight while the others claim
    with capture_logs() as logs:
        async with separate_workers(config, count) as workers:
            await run_until_all_done(server.db, workers, within=60)
    delivered_by = Counter(e["worker"] for e in logs if e["event"] == "outbox job delivered")
    assert sum(delivered_by.values()) == JOBS
    assert len(delivered_by) >= 2  # they really raced

    upserted = Counter(call.body["email"] for call in fake_crm.calls_to("POST", "/contacts/upsert"))
    assert upserted == dict.fromkeys((b.email for b in brokers), 1)
    tag_calls = [call for call in fake_crm.calls if call.path.endswith("/tags")]
    assert len(tag_calls) == JOBS
    contacts = fake_crm.contacts(operator.location_id)
    assert len(contacts) == JOBS
    assert all(contact["tags"] == [COMPLETE_TAG] for contact in contacts)
