"""The outbox at the CRM's rate limit (docs/outbox.md): deliveries run many at a time but
never above the location's budget, shared by every worker through the database; a 429
pauses the location and is not an attempt; a job that cannot get its turn in time is given
back, but never once it has begun; one location's wait never holds back another's. On SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from controlcenter.auth.models import UserRecord
from controlcenter.crm.errors import CrmRateLimited
from controlcenter.crm.rate_limit import LocationRateLimiter, RateLimit
from controlcenter.outbox.models import DONE, PENDING, OutboxJob
from controlcenter.outbox.worker import OutboxWorker
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import committed_writes, reads, writing
from tests.fakes.clock import FakeClock
from tests.fakes.crm import FakeCrm
from tests.outbox.conftest import (
    all_jobs,
    fast_config,
    get_job,
    run_until_all_done,
    separate_workers,
)
from tests.outbox.operator import operator_location, queue_tag_jobs

# A small budget, so that the tests meet it in seconds: 10 requests per second at the fake,
# of which the service spends 90% (9/s, a bucket of 1).
LIMIT = {"crm_rate_limit_requests": 10, "crm_rate_limit_window_s": 1.0}


async def _run(server: RunningServer, *, workers: int = 0, **overrides: object) -> None:
    """The server's own worker, or `workers` separate ones; LIMIT unless `overrides` say."""
    config = fast_config(server.config, **{**LIMIT, **overrides})
    if not workers:
        own = OutboxWorker(server.db, config, server.worker_handlers(), name="w0")
        await run_until_all_done(server.db, [own], within=60)
        return
    async with separate_workers(config, workers) as separate:
        await run_until_all_done(server.db, separate, within=60)


def _busiest_window(times: list[float], window_s: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t < start + window_s) for i, start in enumerate(times))


async def test_the_fake_refuses_beyond_highlevels_burst_limit(fake_crm: FakeCrm) -> None:
    location = fake_crm.add_location()["id"]
    token = fake_crm.private_token(location)
    fake_crm.burst_limit(3, 10.0)
    headers = {"Authorization": f"Bearer {token}", "Version": "2021-07-28"}
    async with httpx.AsyncClient(base_url=fake_crm.url, headers=headers) as http:
        answers = [await http.get(f"/locations/{location}") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[3].json() == {"statusCode": 429, "message": "Too Many Requests"}
    assert "Retry-After" not in answers[3].headers  # HighLevel documents none
    assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["2", "1", "0", "0"]
    assert answers[0].headers["X-RateLimit-Max"] == "3"
    assert answers[0].headers["X-RateLimit-Interval-Milliseconds"] == "10000"
    assert fake_crm.burst_refusals == 1


async def test_two_workers_share_the_budget_and_never_exceed_it(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    jobs = 24  # two CRM calls each: 48 calls, over 5 s at the budget
    await queue_tag_jobs(server, users, fake_crm, jobs)
    # The same 9 requests a second as LIMIT, over a 2 s window: the 10% the service leaves
    # unspent is then two requests, 0.22 s of the time a request takes between its token and
    # the CRM (HighLevel's 10 s window leaves ten, 1.1 s), where one is a margin the two
    # workers' scheduling on a loaded machine can use up.
    budget = {"crm_rate_limit_requests": 20, "crm_rate_limit_window_s": 2.0}
    fake_crm.burst_limit(20, 2.0)
    fake_crm.delay_s = 0.2  # many in flight at once, as with a slow CRM
    await _run(server, workers=2, outbox_concurrency=16, **budget)
    assert fake_crm.burst_refusals == 0
    calls = [call.at for call in fake_crm.calls if call.location_id]
    assert len(calls) == 2 * jobs
    assert _busiest_window(calls, 2.0) <= 20
    assert fake_crm.most_in_flight > 1  # deliveries side by side, not one at a time
    assert all(job.attempts == 1 for job in await all_jobs(server.db))


async def test_a_429_pauses_the_location_and_is_not_an_attempt(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    await queue_tag_jobs(server, users, fake_crm, 1)
    fake_crm.rate_limit(1, retry_after="1")
    await _run(server)
    (job,) = await all_jobs(server.db)
    assert job.status == DONE and job.attempts == 1
    refused, *after = [call for call in fake_crm.calls if call.location_id]
    assert refused.status == 429
    # Nothing went to the location during the pause it asked for.
    assert after and after[0].at - refused.at >= 0.9


async def test_a_job_that_cannot_get_its_turn_in_time_is_given_back(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    await queue_tag_jobs(server, users, fake_crm, 1)
    (job,) = await all_jobs(server.db)
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=0.1)
    location = operator_location(fake_crm).location_id  # any location id will do
    await limiter.pause(location, 30.0)
    try:
        await limiter.acquire(location)
    except CrmRateLimited as exc:
        assert exc.retry_after is not None and 29.0 < exc.retry_after <= 30.2
    else:
        raise AssertionError("a paused location gave a token")
    # Through the worker: the operator's location paused, the job waits without an attempt.
    operator, waiting = await _given_back_for_a_pause(server, job.id)
    assert (waiting.next_attempt_at - waiting.created_at).total_seconds() > 20
    assert not [call for call in fake_crm.calls if call.location_id == operator]


async def test_one_locations_wait_never_holds_back_another(server: RunningServer) -> None:
    clock = FakeClock()
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=3.0, clock=clock)
    await limiter.pause("slow-location", 1.5)
    waiting = asyncio.create_task(limiter.acquire("slow-location"))
    await clock.until_sleeping()  # it is waiting for its location now
    await limiter.acquire("other-location")  # the clock has not moved: no wait at all
    assert not waiting.done()
    clock.advance(1.7)  # the pause, then the refill of one token (1/9 s)
    await waiting  # and its turn comes once the pause is over


async def test_a_job_that_has_begun_waits_for_its_later_tokens(server: RunningServer) -> None:
    """Giving a job back halfway would spend its first requests' tokens again."""
    clock = FakeClock()
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=0.1, clock=clock)
    begun = limiter.gate("busy-location")
    await begun.acquire()  # the bucket's one token
    second = asyncio.create_task(begun.acquire())  # the next comes in ~0.11 s, past max_wait
    await clock.until_sleeping()
    assert not second.done()
    clock.advance(0.12)
    await second  # it waited anyway
    await limiter.pause("busy-location", 0.5)
    with pytest.raises(CrmRateLimited):
        await limiter.gate("busy-location").acquire()  # a new job's first request
    third = asyncio.create_task(begun.acquire())  # the begun job waits out the pause
    await clock.until_sleeping()
    clock.advance(0.5)  # the pause is over: the next token is 1/9 s on
    await asyncio.sleep(0)
    assert not third.done()
    clock.advance(0.12)
    await third


async def test_a_late_take_keeps_the_rate_and_never_bunches(server: RunningServer) -> None:
    """A take a little after its token fell due is counted from when it did: the next token
    falls due one interval after this one did, and the taker's delays do not slow the rate.
    A take later than a quarter of an interval is counted from a quarter interval before it,
    never from when the bucket filled: the next one is never closer than three quarters."""
    clock = FakeClock()
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=5.0, clock=clock)
    interval = 1 / 9  # 9 tokens a second, a bucket of one
    await limiter.acquire("late-location")  # the new bucket's token
    clock.advance(interval + 0.02)  # the next fell due 20 ms ago
    await limiter.acquire("late-location")  # at once, counted from 20 ms ago
    assert not clock.waits
    assert await _next_wait(limiter, clock, "late-location") == pytest.approx(
        interval - 0.02, abs=0.001
    )
    clock.advance(1.0)  # the bucket full for most of a second
    await limiter.acquire("late-location")
    assert await _next_wait(limiter, clock, "late-location") == pytest.approx(
        interval * 0.75, abs=0.001
    )


async def _next_wait(limiter: LocationRateLimiter, clock: FakeClock, location: str) -> float:
    """How long the location's next taker sleeps for its token (it must sleep); it is then
    given its token."""
    taker = asyncio.create_task(limiter.acquire(location))
    sleeping = asyncio.create_task(clock.until_sleeping())
    await asyncio.wait({taker, sleeping}, return_when=asyncio.FIRST_COMPLETED)
    assert not taker.done(), "the next token was there at once"
    wait = clock.waits[-1]
    clock.advance(wait)  # exactly: the token is due then, not a moment later
    await taker
    return wait


async def test_only_a_taken_token_is_a_write_transaction(server: RunningServer) -> None:
    """Waiting for a token takes no write transaction, only taking one does: on SQLite every
    write transaction waits for the one write lock, beside the onboarding saves."""
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=5.0)  # 9/s
    with committed_writes(server.db) as committed:
        for _ in range(4):  # a bucket of one: three of them wait for the refill
            await limiter.acquire("looked-at-location")
    # Only the limiter's: the app's own tasks (chat liveness) write now and then.
    takes = [
        statements
        for statements in committed
        if any("crm_rate_buckets" in statement for statement in statements)
    ]
    assert len(takes) == 4


async def test_the_queues_next_taker_takes_at_the_due_moment_without_looking_first(
    server: RunningServer,
) -> None:
    """A take says when the next token falls due, and the next taker in the process sleeps
    until then and takes: only a taker with nothing learnt yet looks at the bucket first. A
    pause sends the next taker back to looking, since the due moment it knew is gone."""
    clock = FakeClock()
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=5.0, clock=clock)
    with reads(server.db) as looked, committed_writes(server.db) as committed:
        await limiter.acquire("grid-location")  # the new bucket: looked at, then taken
        waits = [await _next_wait(limiter, clock, "grid-location") for _ in range(3)]
        await limiter.pause("grid-location", 1.0)
        waits.append(await _next_wait(limiter, clock, "grid-location"))
    interval = 1 / 9
    assert waits == pytest.approx([interval] * 3 + [1 + interval], abs=1e-5)
    looks = [statement for statement in looked if "crm_rate_buckets" in statement]
    takes = [s for s in committed if any("crm_rate_buckets" in statement for statement in s)]
    assert (len(looks), len(takes)) == (2, 6)  # four takes after waits, the pause, the first


async def test_a_first_token_taken_ahead_serves_the_jobs_first_request(
    server: RunningServer,
) -> None:
    """`take_first` takes the job's first token before its request is prepared; the request
    then uses it instead of taking another, and the job's later requests wait patiently."""
    clock = FakeClock()
    limiter = LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=0.05, clock=clock)
    gate = limiter.gate("ahead-location")
    await gate.take_first()  # the bucket's one token
    await gate.acquire()  # the first request: the token taken ahead
    assert not clock.waits  # no wait
    second = asyncio.create_task(gate.acquire())  # the next token, ~0.11 s on, past max_wait
    await clock.until_sleeping()
    clock.advance(0.12)
    await second
    await limiter.pause("ahead-location", 30.0)
    with pytest.raises(CrmRateLimited):  # refused like any job's first token
        await limiter.gate("ahead-location").take_first()


async def test_a_job_given_back_for_the_rate_limit_has_read_nothing(
    server: RunningServer, users: UserFactory, fake_crm: FakeCrm
) -> None:
    """A delivery takes its location's first token before it reads its broker: a job the
    location cannot serve soon goes back to the outbox without a read (here its broker is
    gone, which a read would have made a dead job) and without an attempt."""
    _, (broker,) = await queue_tag_jobs(server, users, fake_crm, 1)
    (job,) = await all_jobs(server.db)
    async with writing(server.db) as db:
        await db.delete(await db.get(UserRecord, broker.id))
    await _given_back_for_a_pause(server, job.id)


async def _given_back_for_a_pause(server: RunningServer, job_id: str) -> tuple[str, OutboxJob]:
    """The operator's location paused for 30 s and the worker run once: the job is back,
    waiting for the rate limit, without an attempt. The location and the job as stored."""
    operator = (await server.settings.get_many(["crmOwnerLocationId"]))["crmOwnerLocationId"]
    await LocationRateLimiter(server.db, RateLimit(10, 1.0), max_wait_s=0.1).pause(operator, 30.0)
    config = fast_config(server.config, **LIMIT, outbox_rate_wait_s=0.2)
    worker = OutboxWorker(server.db, config, server.worker_handlers())
    assert await worker.run_once() == 1
    waiting = await get_job(server.db, job_id)
    assert (waiting.status, waiting.attempts) == (PENDING, 0)
    assert waiting.last_error is not None and "rate limit" in waiting.last_error
    return operator, waiting
