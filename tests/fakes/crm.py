"""A loopback fake of HighLevel's LeadConnector API v2, in memory, as a real HTTP server.

Every request is checked against the operation it implements as HighLevel's OpenAPI
description declares it (tests/fakes/crm_spec.py: path and method, `Version`, required and
declared query parameters and body properties, their types), then against what the real API
checks beyond the description (the bearer token and what it may reach, the location, the
records). It answers in the spec's shapes and with NestJS' errors
(`{"statusCode": 422, "message": [...], "error": "Unprocessable Entity"}`).

Tokens: an agency token may only call `POST /oauth/locationToken`, which hands out a location
token for one of the agency's locations; location tokens and private integration tokens reach
their own location only. A record of another location answers 403, as the real API does.

Faults for tests: `outage(503)` (every call answers that status), `refuse_connections()` (the
port stops listening), `rate_limit(n, retry_after)` (the next n calls answer 429), `delay_s`
(every call waits first), `hold()` (every call waits, unanswered, until `release()`).
HighLevel's burst limit is enforced per resource (a location, or the agency for its own calls):
100 requests in any 10 s (`burst_limit(n, s)` changes it), beyond which it answers 429 `Too Many
Requests` without a Retry-After, as documented; every answer carries the documented
`X-RateLimit-*` headers. Inspection: `contacts(location_id)`, `calls`,
`burst_refusals`, `most_in_flight` (the most calls that waited out `delay_s` at once).

Run alone with seeded demo data: `python -m tests.fakes.crm --port 8100`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import secrets
import string
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.crm_spec import (
    BY_ID,
    OPERATIONS,
    Operation,
    answer_problems,
    body_errors,
    query_errors,
)
from tests.fakes.server import LoopbackServer

NO_LOCATION_ACCESS = "The token does not have access to this location."
# HighLevel's documented limits per app and resource: a burst of 100 requests per 10 s, and
# 200,000 a day (the fake reports the daily one without counting it).
BURST = (100, 10.0)
DAILY_LIMIT = 200_000
AGENCY_NOT_ALLOWED = (
    "This authClass type is not allowed to access this scope. "
    "Please reach out to the Platform team to get it added."
)
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def new_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(20))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class HttpError(Exception):
    def __init__(self, status: int, message: str | list[str], **extra: Any) -> None:
        super().__init__(str(message))
        self.status = status
        self.message = message
        self.extra = extra

    def response(self) -> JSONResponse:
        names = {
            400: "Bad Request",
            401: "Unauthorized",
            403: "Forbidden",
            404: "Not Found",
            422: "Unprocessable Entity",
        }
        body: dict[str, Any] = {"statusCode": self.status, "message": self.message}
        if self.status in names and not self.extra:
            body["error"] = names[self.status]
        body.update(self.extra)
        return JSONResponse(body, status_code=self.status)


def invalid(*messages: str) -> HttpError:
    return HttpError(422, list(messages))


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    version: str | None
    token_kind: str | None  # "agency", "location", or None when the token was unknown
    location_id: str | None
    body: Any
    status: int = 0
    operation_id: str | None = None  # the spec operation the request was routed to
    at: float = 0.0  # time.monotonic() of its arrival


@dataclass
class Principal:
    kind: str  # "agency" or "location"
    company_id: str | None = None
    location_id: str | None = None


@dataclass
class State:
    agency_tokens: dict[str, str] = field(default_factory=dict)  # token -> company id
    location_tokens: dict[str, str] = field(default_factory=dict)  # token -> location id
    locations: dict[str, dict[str, Any]] = field(default_factory=dict)
    contacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)
    conversations: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    opportunities: dict[str, dict[str, Any]] = field(default_factory=dict)
    calendars: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    appointment_notes: dict[str, dict[str, Any]] = field(default_factory=dict)
    custom_fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    transactions: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)


Handler = Callable[[Request, Principal], Awaitable[Any]]


class FakeCrm:
    """The fake's state, its seeding and inspection helpers, its faults and its server."""

    def __init__(self) -> None:
        self.state = State()
        self.calls: list[Call] = []
        self.delay_s = 0.0
        self._in_flight = 0  # calls waiting out `delay_s` now
        self.most_in_flight = 0  # the most that ever did at once
        self.token_ttl_s = 86399
        self._outage_status: int | None = None
        self._rate_limited = 0
        self._retry_after: str | None = None
        self._burst = BURST
        self._recent: dict[str, deque[float]] = {}  # resource -> arrival times in the window
        self.burst_refusals = 0
        self._lock = threading.Lock()
        self._holding = False
        self._held_method: str | None = None
        # Each held call's wake-up, with the server's event loop that waits on it.
        self._held: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._server: LoopbackServer | None = None
        self._port = 0
        self.app = Starlette(
            routes=self._routes(),
            exception_handlers={HTTPException: self._no_route},
        )

    # -- server ---------------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1") -> FakeCrm:
        self._server = LoopbackServer(self.app, host=host, port=port or self._port).start()
        self._port = self._server.port
        return self

    def stop(self) -> None:
        self.release()  # a held call would keep the server from stopping
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # -- faults ---------------------------------------------------------------------------

    def outage(self, status: int | None = 503) -> None:
        """Every call answers `status` until `outage(None)`."""
        self._outage_status = status

    def rate_limit(self, times: int, retry_after: str | None = "1") -> None:
        """The next `times` calls answer 429 with this Retry-After (None: no header)."""
        self._rate_limited = times
        self._retry_after = retry_after

    def hold(self, method: str | None = None) -> None:
        """Every call from now on (of `method` only, when given) waits, unanswered, until
        `release()`: a CRM that hangs, for tests of what must never wait for it, or a write
        caught in flight."""
        with self._lock:
            self._holding = True
            self._held_method = method

    def release(self) -> None:
        """The held calls go on (and are answered as the fake's faults say), new ones too."""
        with self._lock:
            self._holding = False
            held, self._held = self._held, []
        for loop, released in held:
            if not loop.is_closed():
                loop.call_soon_threadsafe(released.set)

    async def _unless_held(self, method: str) -> None:
        with self._lock:
            if not self._holding or self._held_method not in (None, method):
                return
            released = asyncio.Event()
            self._held.append((asyncio.get_running_loop(), released))
        await released.wait()

    def burst_limit(self, requests: int, interval_s: float) -> None:
        """HighLevel's burst limit per resource: `requests` in any `interval_s` seconds."""
        with self._lock:
            self._burst = (requests, interval_s)

    def refuse_connections(self) -> None:
        """Stop listening: clients get connection refused (the state is kept)."""
        self.stop()

    def accept_connections(self) -> None:
        if self._server is None:
            self.start(self._port)

    def reset(self) -> None:
        """Forget all data, calls and faults (the server keeps running)."""
        self.release()
        with self._lock:
            self.state = State()
            self.calls = []
            self.delay_s = 0.0
            self.most_in_flight = 0
            self.token_ttl_s = 86399
            self._outage_status = None
            self._rate_limited = 0
            self._retry_after = None
            self._burst = BURST
            self._recent = {}
            self.burst_refusals = 0
        self.accept_connections()

    # -- seeding --------------------------------------------------------------------------

    def add_agency(self, company_id: str | None = None, token: str | None = None) -> str:
        """An agency (company) with its OAuth token; returns the token."""
        token = token or f"agency-{secrets.token_hex(16)}"
        self.state.agency_tokens[token] = company_id or new_id()
        return token

    def company_of(self, agency_token: str) -> str:
        return self.state.agency_tokens[agency_token]

    def add_location(
        self, location_id: str | None = None, *, company_id: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        location_id = location_id or new_id()
        location = {
            "id": location_id,
            "companyId": company_id,
            "name": fields.pop("name", f"Location {location_id[:6]}"),
            "email": fields.pop("email", f"office-{location_id[:6].lower()}@example.com"),
            "timezone": fields.pop("timezone", "America/New_York"),
            "tags": fields.pop("tags", []),
            **fields,
        }
        self.state.locations[location_id] = location
        return location

    def private_token(self, location_id: str, token: str | None = None) -> str:
        """A private integration token of one location."""
        token = token or f"pit-{secrets.token_hex(16)}"
        self.state.location_tokens[token] = location_id
        return token

    def add_contact(self, location_id: str, **fields: Any) -> dict[str, Any]:
        contact = self._new_contact(location_id, fields)
        self.state.contacts[contact["id"]] = contact
        return contact

    def add_task(self, contact_id: str, **fields: Any) -> dict[str, Any]:
        task = {
            "id": new_id(),
            "contactId": contact_id,
            "title": fields.pop("title", "Follow up"),
            "body": fields.pop("body", ""),
            "dueDate": fields.pop("dueDate", now_iso()),
            "completed": fields.pop("completed", False),
            **fields,
        }
        self.state.tasks[task["id"]] = task
        return task

    def add_note(self, contact_id: str, body: str, **fields: Any) -> dict[str, Any]:
        note = {
            "id": new_id(),
            "contactId": contact_id,
            "body": body,
            "dateAdded": now_iso(),
            **fields,
        }
        self.state.notes[note["id"]] = note
        return note

    def add_conversation(self, contact_id: str, **fields: Any) -> dict[str, Any]:
        contact = self.state.contacts[contact_id]
        conversation = {
            "id": new_id(),
            "locationId": contact["locationId"],
            "contactId": contact_id,
            "fullName": contact.get("name") or "",
            "email": contact.get("email"),
            "phone": contact.get("phone"),
            "type": fields.pop("type", "TYPE_PHONE"),
            "unreadCount": fields.pop("unreadCount", 0),
            "lastMessageBody": "",
            "dateUpdated": int(time.time() * 1000),
            **fields,
        }
        self.state.conversations[conversation["id"]] = conversation
        return conversation

    def add_message(self, conversation_id: str, body: str, **fields: Any) -> dict[str, Any]:
        conversation = self.state.conversations[conversation_id]
        message = {
            "id": new_id(),
            "conversationId": conversation_id,
            "locationId": conversation["locationId"],
            "contactId": conversation["contactId"],
            "body": body,
            "direction": fields.pop("direction", "inbound"),
            "messageType": fields.pop("messageType", "TYPE_SMS"),
            "status": fields.pop("status", "delivered"),
            "dateAdded": now_iso(),
            **fields,
        }
        self.state.messages[message["id"]] = message
        conversation["lastMessageBody"] = body
        return message

    def add_pipeline(self, location_id: str, name: str, stages: list[str]) -> dict[str, Any]:
        pipeline: dict[str, Any] = {
            "id": new_id(),
            "locationId": location_id,
            "name": name,
            "stages": [
                {"id": new_id(), "name": stage, "position": index}
                for index, stage in enumerate(stages)
            ],
        }
        self.state.pipelines[pipeline["id"]] = pipeline
        return pipeline

    def add_opportunity(
        self, pipeline_id: str, contact_id: str, name: str, **fields: Any
    ) -> dict[str, Any]:
        pipeline = self.state.pipelines[pipeline_id]
        opportunity = {
            "id": new_id(),
            "locationId": pipeline["locationId"],
            "pipelineId": pipeline_id,
            "pipelineStageId": fields.pop("pipelineStageId", pipeline["stages"][0]["id"]),
            "contactId": contact_id,
            "name": name,
            "status": fields.pop("status", "open"),
            "monetaryValue": fields.pop("monetaryValue", 0),
            "createdAt": now_iso(),
            "updatedAt": now_iso(),
            **fields,
        }
        opportunity["contact"] = self._contact_summary(contact_id)
        self.state.opportunities[opportunity["id"]] = opportunity
        return opportunity

    def add_calendar(self, location_id: str, name: str, **fields: Any) -> dict[str, Any]:
        calendar = {"id": new_id(), "locationId": location_id, "name": name, **fields}
        self.state.calendars[calendar["id"]] = calendar
        return calendar

    def add_event(
        self, calendar_id: str, contact_id: str, start: datetime, **fields: Any
    ) -> dict[str, Any]:
        calendar = self.state.calendars[calendar_id]
        end = start + timedelta(minutes=fields.pop("minutes", 60))
        event = {
            "id": new_id(),
            "calendarId": calendar_id,
            "locationId": calendar["locationId"],
            "contactId": contact_id,
            "title": fields.pop("title", "Appointment"),
            "appointmentStatus": fields.pop("appointmentStatus", "confirmed"),
            "startTime": start.isoformat(),
            "endTime": end.isoformat(),
            **fields,
        }
        self.state.events[event["id"]] = event
        return event

    def add_appointment_note(self, event_id: str, body: str) -> dict[str, Any]:
        note = {"id": new_id(), "appointmentId": event_id, "body": body, "dateAdded": now_iso()}
        self.state.appointment_notes[note["id"]] = note
        return note

    def add_custom_field(
        self, location_id: str, name: str, data_type: str = "TEXT", *, key: str | None = None
    ) -> dict[str, Any]:
        """A contact custom field; its key is `contact.<name in snake case>` unless given."""
        slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        custom = {
            "id": new_id(),
            "locationId": location_id,
            "name": name,
            "fieldKey": key or f"contact.{slug}",
            "dataType": data_type,
            "model": "contact",
        }
        self.state.custom_fields[custom["id"]] = custom
        return custom

    def add_template(self, location_id: str, name: str, **fields: Any) -> dict[str, Any]:
        template = {  # FetchBuilderSuccesfulResponseDto's fields
            "id": new_id(),
            "locationId": location_id,
            "name": name,
            "templateType": fields.pop("templateType", "html"),
            "isPlainText": fields.pop("isPlainText", False),
            "previewUrl": f"https://previews.example/{name.lower().replace(' ', '-')}",
            "version": "2",
            "updatedBy": fields.pop("updatedBy", "Demo User"),
            "dateAdded": now_iso(),
            "lastUpdated": now_iso(),
            **fields,
        }
        self.state.templates[template["id"]] = template
        return template

    def add_order(
        self, location_id: str, contact_id: str, amount: float, **fields: Any
    ) -> dict[str, Any]:
        order = {
            "_id": new_id(),
            "altId": location_id,
            "altType": "location",
            "contactId": contact_id,
            "amount": amount,
            "currency": fields.pop("currency", "USD"),
            "status": fields.pop("status", "completed"),
            "createdAt": now_iso(),
            "updatedAt": now_iso(),
            **fields,
        }
        self.state.orders[order["_id"]] = order
        return order

    def add_transaction(
        self, location_id: str, contact_id: str, amount: float, **fields: Any
    ) -> dict[str, Any]:
        transaction = {
            "_id": new_id(),
            "altId": location_id,
            "altType": "location",
            "contactId": contact_id,
            "amount": amount,
            "currency": fields.pop("currency", "USD"),
            "status": fields.pop("status", "succeeded"),
            "createdAt": now_iso(),
            "updatedAt": now_iso(),
            **fields,
        }
        self.state.transactions[transaction["_id"]] = transaction
        return transaction

    # -- inspection -----------------------------------------------------------------------

    def contacts(self, location_id: str) -> list[dict[str, Any]]:
        return [c for c in self.state.contacts.values() if c["locationId"] == location_id]

    def contact(self, contact_id: str) -> dict[str, Any] | None:
        return self.state.contacts.get(contact_id)

    def custom_values(self, contact_id: str) -> dict[str, Any]:
        """A contact's custom field values by field key (the fake stores them by id)."""
        keys = {f["id"]: f["fieldKey"] for f in self.state.custom_fields.values()}
        contact = self.state.contacts[contact_id]
        return {keys[entry["id"]]: entry["value"] for entry in contact.get("customFields") or []}

    def calls_to(self, method: str, path: str) -> list[Call]:
        return [c for c in list(self.calls) if c.method == method and c.path == path]

    # -- the HTTP side --------------------------------------------------------------------

    def _routes(self) -> list[Route]:
        handlers: dict[str, Handler] = {
            "get-location-access-token": self._location_token,
            "search-contacts-advanced": self._search_contacts,
            "get-contacts": self._get_contacts,
            "get-contact": self._get_contact,
            "delete-contact": self._delete_contact,
            "get-task": self._get_task,
            "delete-task": self._delete_task,
            "get-note": self._get_note,
            "delete-note": self._delete_note,
            "delete-opportunity": self._delete_opportunity,
            "create-contact": self._create_contact,
            "update-contact": self._update_contact,
            "upsert-contact": self._upsert_contact,
            "add-tags": self._add_tags,
            "remove-tags": self._remove_tags,
            "get-all-tasks": self._get_tasks,
            "create-task": self._create_task,
            "get-all-notes": self._get_notes,
            "create-note": self._create_note,
            "search-conversation": self._search_conversations,
            "get-messages": self._get_messages,
            "send-a-new-message": self._send_message,
            "search-opportunity": self._search_opportunities,
            "get-opportunity": self._get_opportunity,
            "create-opportunity": self._create_opportunity,
            "update-opportunity": self._update_opportunity,
            "get-pipelines": self._get_pipelines,
            "get-calendars": self._get_calendars,
            "get-calendar-events": self._get_events,
            "get-appointment-notes": self._get_appointment_notes,
            "get-slots": self._free_slots,
            "get-location": self._get_location,
            "get-custom-fields": self._get_custom_fields,
            "get-location-tags": self._get_location_tags,
            "fetch-template": self._get_templates,
            "list-orders": self._list_orders,
            "get-order-by-id": self._get_order,
            "list-transactions": self._list_transactions,
            "get-transaction-by-id": self._get_transaction,
            "get-user-by-location": self._get_users,
        }
        assert set(handlers) == set(BY_ID), "one handler per declared operation"

        def route(operation: Operation) -> Route:
            handler = handlers[operation.operation_id]

            async def endpoint(request: Request) -> Response:
                return await self._serve(request, operation, handler)

            return Route(operation.path, endpoint, methods=[operation.method])

        # Literal paths before templated ones, as NestJS matches `/contacts/search` first.
        ordered = sorted(OPERATIONS, key=lambda op: "{" in op.path)
        return [route(operation) for operation in ordered]

    @staticmethod
    async def _no_route(request: Request, exc: Exception) -> Response:
        """NestJS' answer to a path or method that no operation declares."""
        return JSONResponse(
            {
                "statusCode": 404,
                "message": f"Cannot {request.method} {request.url.path}",
                "error": "Not Found",
            },
            status_code=404,
        )

    async def _serve(self, request: Request, operation: Operation, handler: Handler) -> Response:
        token = _bearer(request)
        principal = self._principal(token)
        resource = None
        if principal is not None:
            resource = principal.location_id or f"company:{principal.company_id}"
        remaining = self._count(resource)
        if remaining < 0:
            body = await _body(request)
            self.calls.append(self._call(request, operation, principal, body, status=429))
            answer: Response = JSONResponse(
                {"statusCode": 429, "message": "Too Many Requests"}, 429
            )
        else:
            answer = await self._answer(request, operation, handler, principal)
        if resource is not None:
            requests, interval_s = self._burst
            answer.headers.update(
                {
                    "X-RateLimit-Max": str(requests),
                    "X-RateLimit-Remaining": str(max(remaining, 0)),
                    "X-RateLimit-Interval-Milliseconds": str(round(interval_s * 1000)),
                    "X-RateLimit-Limit-Daily": str(DAILY_LIMIT),
                    "X-RateLimit-Daily-Remaining": str(DAILY_LIMIT - 1),
                }
            )
        return answer

    def _count(self, resource: str | None) -> int:
        """Counts a request against its resource's burst window: the requests left, or -1
        when this one is over the limit (it is refused and not counted)."""
        if resource is None:
            return 0
        requests, interval_s = self._burst
        now = time.monotonic()
        with self._lock:
            recent = self._recent.setdefault(resource, deque())
            while recent and recent[0] <= now - interval_s:
                recent.popleft()
            if len(recent) >= requests:
                self.burst_refusals += 1
                return -1
            recent.append(now)
            return requests - len(recent)

    @staticmethod
    def _call(
        request: Request,
        operation: Operation,
        principal: Principal | None,
        body: Any,
        status: int = 0,
    ) -> Call:
        return Call(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            version=request.headers.get("version"),
            token_kind=principal.kind if principal else None,
            location_id=principal.location_id if principal else None,
            body=body,
            status=status,
            operation_id=operation.operation_id,
            at=time.monotonic(),
        )

    async def _answer(
        self,
        request: Request,
        operation: Operation,
        handler: Handler,
        principal: Principal | None,
    ) -> Response:
        body = await _body(request)
        call = self._call(request, operation, principal, body)
        self.calls.append(call)
        await self._unless_held(request.method)
        if self.delay_s:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
            try:
                await asyncio.sleep(self.delay_s)
            finally:
                self._in_flight -= 1
        with self._lock:
            limited = self._rate_limited > 0
            if limited:
                self._rate_limited -= 1
        if limited:
            call.status = 429
            headers = {"Retry-After": self._retry_after} if self._retry_after is not None else {}
            return JSONResponse(
                {"statusCode": 429, "message": "Too Many Requests"}, 429, headers=headers
            )
        if self._outage_status is not None:
            call.status = self._outage_status
            return JSONResponse(
                {"statusCode": call.status, "message": "Service Unavailable"}, call.status
            )
        try:
            self._check_version(request, operation)
            if principal is None:
                raise HttpError(401, "Invalid JWT")
            is_oauth = request.url.path.startswith("/oauth/")
            if (principal.kind == "agency") != is_oauth:
                raise HttpError(401, AGENCY_NOT_ALLOWED)
            self._check_spec(request, operation, body)
            request.state.body = body
            result = await handler(request, principal)
        except HttpError as exc:
            call.status = exc.status
            return exc.response()
        undeclared = answer_problems(operation, result)
        if undeclared:  # the fake's own bug: fail loudly rather than teach a wrong shape
            call.status = 500
            message = f"fake answered {undeclared} outside {operation.operation_id}'s schema"
            return JSONResponse({"statusCode": 500, "message": message}, status_code=500)
        call.status = operation.status
        return JSONResponse(result, status_code=operation.status)

    @staticmethod
    def _check_spec(request: Request, operation: Operation, body: Any) -> None:
        form = request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        )
        if operation.body is not None and body is not None and form != operation.form:
            raise HttpError(400, "Unsupported content type")
        errors = query_errors(operation, request.query_params)
        errors += body_errors(operation, body)
        if errors:
            raise invalid(*errors)

    def _principal(self, token: str | None) -> Principal | None:
        if not token:
            return None
        if token in self.state.agency_tokens:
            return Principal("agency", company_id=self.state.agency_tokens[token])
        if token in self.state.location_tokens:
            return Principal("location", location_id=self.state.location_tokens[token])
        return None

    @staticmethod
    def _check_version(request: Request, operation: Operation) -> None:
        version = request.headers.get("version")
        if not version:
            raise HttpError(400, "Version header was not found")
        if version != operation.version:
            raise HttpError(400, f"Version {version} is not supported for {operation.path}")

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _own(principal: Principal, location_id: Any, name: str = "locationId") -> str:
        if not isinstance(location_id, str) or not location_id:
            raise invalid(f"{name} should not be empty", f"{name} must be a string")
        if location_id != principal.location_id:
            raise HttpError(403, NO_LOCATION_ACCESS)
        return location_id

    @staticmethod
    def _record(
        table: dict[str, dict[str, Any]], key: str, principal: Principal, what: str
    ) -> dict[str, Any]:
        record = table.get(key)
        if record is None:
            raise HttpError(404, f"{what} not found")
        owner = record.get("locationId") or record.get("altId")
        if owner != principal.location_id:
            raise HttpError(403, NO_LOCATION_ACCESS)
        return record

    def _contact_of(self, request: Request, principal: Principal) -> dict[str, Any]:
        return self._record(
            self.state.contacts, request.path_params["contactId"], principal, "Contact"
        )

    def _contact_summary(self, contact_id: str) -> dict[str, Any]:
        contact = self.state.contacts.get(contact_id, {})
        return {
            "id": contact_id,
            "name": contact.get("name"),
            "email": contact.get("email"),
            "phone": contact.get("phone"),
            "tags": list(contact.get("tags", [])),
        }

    def _new_contact(self, location_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        contact: dict[str, Any] = {
            "id": new_id(),
            "locationId": location_id,
            "firstName": None,
            "lastName": None,
            "email": None,
            "phone": None,
            "companyName": None,
            "source": None,
            "tags": [],
            "customFields": [],
            "dateAdded": now_iso(),
        }
        self._apply_contact(contact, fields)
        return contact

    def _apply_contact(self, contact: dict[str, Any], fields: dict[str, Any]) -> None:
        for key, value in fields.items():
            if key == "customFields":
                contact[key] = self._merge_custom_fields(contact, value)
            else:
                contact[key] = list(value) if key == "tags" else value
        if isinstance(contact.get("email"), str):
            contact["email"] = contact["email"].lower()
        if "name" not in fields:
            parts = [contact.get("firstName"), contact.get("lastName")]
            contact["name"] = " ".join(p for p in parts if p) or contact.get("name")
        contact["dateUpdated"] = now_iso()

    def _merge_custom_fields(
        self, contact: dict[str, Any], sent: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """HighLevel updates only the custom fields a request names, by id, and keeps the
        others (unlike `tags`, which a contact update replaces); it answers them as
        CustomFieldSchema `{id, value}`. An id that is not a custom field of the contact's
        location is ignored."""
        known = {
            f["id"]
            for f in self.state.custom_fields.values()
            if f["locationId"] == contact["locationId"]
        }
        merged = {entry["id"]: entry["value"] for entry in contact.get("customFields") or []}
        for entry in sent:
            if entry.get("id") in known:
                merged[entry["id"]] = entry.get("field_value")
        return [{"id": key, "value": value} for key, value in merged.items()]

    @staticmethod
    def _validate_contact(body: Any) -> dict[str, Any]:
        """What HighLevel checks beyond the schema: an e-mail must look like one."""
        fields = dict(body) if isinstance(body, dict) else {}
        email = fields.get("email")
        if email is not None and not EMAIL_RE.match(str(email)):
            raise invalid("email must be an email")
        fields.pop("locationId", None)
        return fields

    def _duplicate(
        self, location_id: str, fields: dict[str, Any]
    ) -> tuple[dict[str, Any], str] | None:
        for contact in self.contacts(location_id):
            email = fields.get("email")
            if email and contact.get("email") == str(email).lower():
                return contact, "email"
        for contact in self.contacts(location_id):
            phone = fields.get("phone")
            if phone and contact.get("phone") == phone:
                return contact, "phone"
        return None

    # -- oauth ----------------------------------------------------------------------------

    async def _location_token(self, request: Request, principal: Principal) -> Any:
        form = request.state.body
        if not isinstance(form, dict):
            raise invalid("companyId must be a string", "locationId must be a string")
        company_id, location_id = form.get("companyId"), form.get("locationId")
        errors = [
            f"{n} must be a string"
            for n, v in (("companyId", company_id), ("locationId", location_id))
            if not v
        ]
        if errors:
            raise invalid(*errors)
        if company_id != principal.company_id:
            raise HttpError(401, "The token does not have access to this company.")
        location = self.state.locations.get(str(location_id))
        if location is None or location.get("companyId") != company_id:
            raise HttpError(400, "Location not found")
        token = f"loc-{secrets.token_hex(16)}"
        self.state.location_tokens[token] = str(location_id)
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.token_ttl_s,
            "scope": "contacts.readonly contacts.write",
            "locationId": location_id,
        }

    # -- contacts -------------------------------------------------------------------------

    def _find_contacts(self, location_id: str, query: str) -> list[dict[str, Any]]:
        query = query.lower()
        return [
            c
            for c in self.contacts(location_id)
            if not query
            or any(
                query in str(c.get(k) or "").lower()
                for k in ("name", "email", "phone", "companyName")
            )
        ]

    async def _search_contacts(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        location_id = self._own(principal, body.get("locationId"))
        limit = int(body.get("pageLimit", 20))
        page = int(body.get("page", 1))
        if not 1 <= limit <= 500:
            raise invalid("pageLimit must not be greater than 500")
        if page < 1:
            raise invalid("page must not be less than 1")
        found = self._find_contacts(location_id, str(body.get("query") or ""))
        first = (page - 1) * limit
        return {"contacts": found[first : first + limit], "total": len(found)}

    async def _get_contacts(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        limit = _int(q.get("limit"), 20, "limit", 1, 100)
        found = self._find_contacts(location_id, q.get("query") or "")
        return {"contacts": found[:limit], "count": len(found)}

    async def _create_contact(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        location_id = self._own(
            principal, body.get("locationId") if isinstance(body, dict) else None
        )
        fields = self._validate_contact(body)
        duplicate = self._duplicate(location_id, fields)
        if duplicate is not None:
            contact, matched = duplicate
            raise HttpError(
                400,
                "This location does not allow duplicated contacts.",
                meta={
                    "contactName": contact.get("name"),
                    "contactId": contact["id"],
                    "matchingField": matched,
                },
            )
        contact = self._new_contact(location_id, fields)
        self.state.contacts[contact["id"]] = contact
        return {"contact": contact}

    async def _upsert_contact(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        location_id = self._own(
            principal, body.get("locationId") if isinstance(body, dict) else None
        )
        fields = self._validate_contact(body)
        if not fields.get("email") and not fields.get("phone"):
            raise HttpError(400, "email or phone is required")
        duplicate = self._duplicate(location_id, fields)
        if duplicate is None:
            contact = self._new_contact(location_id, fields)
            self.state.contacts[contact["id"]] = contact
            return {"new": True, "contact": contact, "traceId": new_id()}
        contact = duplicate[0]
        self._apply_contact(contact, fields)
        return {"new": False, "contact": contact, "traceId": new_id()}

    async def _get_contact(self, request: Request, principal: Principal) -> Any:
        return {"contact": self._contact_of(request, principal)}

    async def _update_contact(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        fields = self._validate_contact(request.state.body)
        self._apply_contact(contact, fields)
        return {"succeded": True, "contact": contact}

    @staticmethod
    def _tags_body(body: Any) -> list[str]:
        tags: list[str] = body["tags"]
        if not tags:
            raise invalid("tags should not be empty")
        return [t.strip() for t in tags if t.strip()]

    async def _add_tags(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        for tag in self._tags_body(request.state.body):
            if tag not in contact["tags"]:
                contact["tags"].append(tag)
        contact["dateUpdated"] = now_iso()
        return {"tags": list(contact["tags"])}

    async def _remove_tags(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        remove = set(self._tags_body(request.state.body))
        contact["tags"] = [t for t in contact["tags"] if t not in remove]
        contact["dateUpdated"] = now_iso()
        return {"tags": list(contact["tags"])}

    async def _delete_contact(self, request: Request, principal: Principal) -> Any:
        """The contact goes, and its tasks and notes with it."""
        contact = self._contact_of(request, principal)
        del self.state.contacts[contact["id"]]
        for table in (self.state.tasks, self.state.notes):
            for key in [k for k, v in table.items() if v["contactId"] == contact["id"]]:
                del table[key]
        return {"succeded": True}

    def _of_contact(
        self, request: Request, principal: Principal, table: dict[str, dict[str, Any]], key: str
    ) -> dict[str, Any]:
        """A contact's task or note: the contact first (404, or 403 for another location's),
        then the record, which must be that contact's."""
        contact = self._contact_of(request, principal)
        record = table.get(request.path_params[key])
        if record is None or record["contactId"] != contact["id"]:
            raise HttpError(404, f"{'Task' if table is self.state.tasks else 'Note'} not found")
        return record

    async def _get_task(self, request: Request, principal: Principal) -> Any:
        return {"task": self._of_contact(request, principal, self.state.tasks, "taskId")}

    async def _delete_task(self, request: Request, principal: Principal) -> Any:
        task = self._of_contact(request, principal, self.state.tasks, "taskId")
        del self.state.tasks[task["id"]]
        return {"succeded": True}

    async def _get_note(self, request: Request, principal: Principal) -> Any:
        return {"note": self._of_contact(request, principal, self.state.notes, "id")}

    async def _delete_note(self, request: Request, principal: Principal) -> Any:
        note = self._of_contact(request, principal, self.state.notes, "id")
        del self.state.notes[note["id"]]
        return {"succeded": True}

    async def _get_tasks(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        return {"tasks": [t for t in self.state.tasks.values() if t["contactId"] == contact["id"]]}

    async def _create_task(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        body = request.state.body
        try:
            datetime.fromisoformat(body["dueDate"].replace("Z", "+00:00"))
        except ValueError as exc:
            raise invalid("dueDate must be a valid ISO 8601 date string") from exc
        return {"task": self.add_task(contact["id"], **body)}

    async def _get_notes(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        return {"notes": [n for n in self.state.notes.values() if n["contactId"] == contact["id"]]}

    async def _create_note(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        body = dict(request.state.body)
        return {"note": self.add_note(contact["id"], body.pop("body"), **body)}

    # -- conversations --------------------------------------------------------------------

    async def _search_conversations(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        limit = _int(q.get("limit"), 20, "limit", 1, 100)
        query = (q.get("query") or "").lower()
        found = [
            c
            for c in self.state.conversations.values()
            if c["locationId"] == location_id
            and (not q.get("contactId") or c["contactId"] == q.get("contactId"))
            and (
                not query
                or any(
                    query in str(c.get(k) or "").lower()
                    for k in ("fullName", "email", "phone", "lastMessageBody")
                )
            )
        ]
        return {"conversations": found[:limit], "total": len(found)}

    async def _get_messages(self, request: Request, principal: Principal) -> Any:
        conversation = self._record(
            self.state.conversations,
            request.path_params["conversationId"],
            principal,
            "Conversation",
        )
        limit = _int(request.query_params.get("limit"), 20, "limit", 1, 100)
        found = [
            m for m in self.state.messages.values() if m["conversationId"] == conversation["id"]
        ]
        page = found[-limit:]
        return {
            "lastMessageId": page[0]["id"] if page else None,
            "nextPage": len(found) > limit,
            "messages": page,
        }

    async def _send_message(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        contact = self._record(self.state.contacts, body["contactId"], principal, "Contact")
        if body["type"] == "Email":
            if not contact.get("email"):
                raise HttpError(400, "Contact does not have an email address")
            if not body.get("html") and not body.get("message"):
                raise HttpError(400, "Email body is required")
        elif not body.get("message"):
            raise HttpError(400, "Message body is required")
        elif body["type"] == "SMS" and not contact.get("phone"):
            raise HttpError(400, "Missing phone number")
        conversation = next(
            (c for c in self.state.conversations.values() if c["contactId"] == contact["id"]), None
        ) or self.add_conversation(contact["id"])
        message = self.add_message(
            conversation["id"],
            str(body.get("message") or body.get("html")),
            direction="outbound",
            messageType=f"TYPE_{body['type'].upper()}",
            status="pending",
        )
        return {
            "conversationId": conversation["id"],
            "messageId": message["id"],
            "msg": "Message queued successfully.",
            "status": message["status"],
        }

    # -- opportunities --------------------------------------------------------------------

    async def _search_opportunities(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("location_id"), "location_id")
        limit = _int(q.get("limit"), 20, "limit", 1, 100)
        status = q.get("status")
        query = (q.get("q") or "").lower()
        found = [
            o
            for o in self.state.opportunities.values()
            if o["locationId"] == location_id
            and (not q.get("pipeline_id") or o["pipelineId"] == q.get("pipeline_id"))
            and (
                not q.get("pipeline_stage_id") or o["pipelineStageId"] == q.get("pipeline_stage_id")
            )
            and (not q.get("contact_id") or o["contactId"] == q.get("contact_id"))
            and (not status or status == "all" or o["status"] == status)
            and (
                not query
                or query in o["name"].lower()
                or query in str(o["contact"].get("name") or "").lower()
            )
        ]
        return {"opportunities": found[:limit], "meta": {"total": len(found), "currentPage": 1}}

    async def _get_pipelines(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.query_params.get("locationId"))
        return {
            "pipelines": [
                p for p in self.state.pipelines.values() if p["locationId"] == location_id
            ]
        }

    async def _get_opportunity(self, request: Request, principal: Principal) -> Any:
        return {
            "opportunity": self._record(
                self.state.opportunities, request.path_params["id"], principal, "Opportunity"
            )
        }

    def _check_opportunity(
        self, body: dict[str, Any], principal: Principal, existing: dict[str, Any] | None
    ) -> None:
        pipeline_id = body.get("pipelineId") or (existing or {}).get("pipelineId")
        pipeline = self._record(self.state.pipelines, str(pipeline_id), principal, "Pipeline")
        stage_id = body.get("pipelineStageId")
        if stage_id is not None and stage_id not in {s["id"] for s in pipeline["stages"]}:
            raise HttpError(400, "Pipeline stage not found")

    async def _create_opportunity(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        self._own(principal, body.get("locationId"))
        self._check_opportunity(body, principal, None)
        self._record(self.state.contacts, body["contactId"], principal, "Contact")
        fields = {
            k: v
            for k, v in body.items()
            if k not in ("locationId", "pipelineId", "contactId", "name")
        }
        return {
            "opportunity": self.add_opportunity(
                body["pipelineId"], body["contactId"], body["name"], **fields
            )
        }

    async def _delete_opportunity(self, request: Request, principal: Principal) -> Any:
        opportunity = self._record(
            self.state.opportunities, request.path_params["id"], principal, "Opportunity"
        )
        del self.state.opportunities[opportunity["id"]]
        return {"succeded": True}

    async def _update_opportunity(self, request: Request, principal: Principal) -> Any:
        opportunity = self._record(
            self.state.opportunities, request.path_params["id"], principal, "Opportunity"
        )
        body = request.state.body
        self._check_opportunity(body, principal, opportunity)
        opportunity.update(body)
        opportunity["updatedAt"] = now_iso()
        return {"opportunity": opportunity}

    # -- calendars ------------------------------------------------------------------------

    async def _get_calendars(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.query_params.get("locationId"))
        return {
            "calendars": [
                c for c in self.state.calendars.values() if c["locationId"] == location_id
            ]
        }

    async def _get_events(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        start = _int(q.get("startTime"), None, "startTime", 0, None)
        end = _int(q.get("endTime"), None, "endTime", 0, None)
        if not (q.get("calendarId") or q.get("userId") or q.get("groupId")):
            raise HttpError(400, "One of calendarId, userId or groupId is required")
        found = []
        for event in self.state.events.values():
            when = datetime.fromisoformat(event["startTime"]).timestamp() * 1000
            if (
                event["locationId"] == location_id
                and start <= when <= end
                and (not q.get("calendarId") or event["calendarId"] == q.get("calendarId"))
                and (not q.get("userId") or event.get("assignedUserId") == q.get("userId"))
            ):
                found.append(event)
        return {"events": found}

    async def _get_appointment_notes(self, request: Request, principal: Principal) -> Any:
        event = self._record(
            self.state.events, request.path_params["appointmentId"], principal, "Appointment"
        )
        q = request.query_params
        limit = _int(q.get("limit"), None, "limit", 1, 100)
        offset = _int(q.get("offset"), None, "offset", 0, None)
        found = [
            n for n in self.state.appointment_notes.values() if n["appointmentId"] == event["id"]
        ]
        return {"notes": found[offset : offset + limit], "hasMore": len(found) > offset + limit}

    async def _free_slots(self, request: Request, principal: Principal) -> Any:
        calendar = self._record(
            self.state.calendars, request.path_params["calendarId"], principal, "Calendar"
        )
        q = request.query_params
        start = _int(q.get("startDate"), None, "startDate", 0, None)
        end = _int(q.get("endDate"), None, "endDate", 0, None)
        if end < start:
            raise HttpError(400, "endDate must be after startDate")
        if end - start > 31 * 86400 * 1000:
            raise HttpError(400, "Date range can not be more than 31 days")
        booked = {
            datetime.fromisoformat(e["startTime"]).astimezone(UTC).replace(tzinfo=None)
            for e in self.state.events.values()
            if e["calendarId"] == calendar["id"]
        }
        answer: dict[str, Any] = {}
        day = datetime.fromtimestamp(start / 1000, UTC).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        last = datetime.fromtimestamp(end / 1000, UTC)
        while day <= last:
            slots = [
                (day + timedelta(hours=hour)).isoformat()
                for hour in range(9, 17)
                if start <= (day + timedelta(hours=hour)).timestamp() * 1000 <= end
                and (day + timedelta(hours=hour)).replace(tzinfo=None) not in booked
            ]
            if slots and day.weekday() < 5:
                answer[day.date().isoformat()] = {"slots": slots}
            day += timedelta(days=1)
        answer["traceId"] = new_id()
        return answer

    # -- locations, users, e-mail templates -------------------------------------------------

    async def _get_location(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.path_params["locationId"])
        location = self.state.locations.get(location_id)
        if location is None:
            raise HttpError(404, "Location not found")
        return {"location": {k: v for k, v in location.items() if k != "tags"}}

    async def _get_custom_fields(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.path_params["locationId"])
        return {
            "customFields": [
                f for f in self.state.custom_fields.values() if f["locationId"] == location_id
            ]
        }

    async def _get_location_tags(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.path_params["locationId"])
        names = set(self.state.locations.get(location_id, {}).get("tags", []))
        for contact in self.contacts(location_id):
            names.update(contact["tags"])
        return {
            "tags": [
                {"id": _tag_id(location_id, name), "name": name, "locationId": location_id}
                for name in sorted(names)
            ]
        }

    async def _get_users(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.query_params.get("locationId"))
        return {
            "users": [u for u in self.state.users.values() if u.get("locationId") == location_id]
        }

    async def _get_templates(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        offset = _int(q.get("offset"), 0, "offset", 0, None)
        search = (q.get("search") or "").lower()
        found = [
            t
            for t in self.state.templates.values()
            if t["locationId"] == location_id and search in t["name"].lower()
        ]
        if offset >= len(found):
            raise HttpError(404, "Template not found")
        return {k: v for k, v in found[offset].items() if k != "locationId"}

    # -- payments -------------------------------------------------------------------------

    def _alt(self, request: Request, principal: Principal, *, typed: bool) -> str:
        q = request.query_params
        if typed and q.get("altType") != "location":
            raise invalid("altType must be one of the following values: location")
        return self._own(principal, q.get("altId"), "altId")

    async def _list_orders(self, request: Request, principal: Principal) -> Any:
        return self._listing(request, principal, self.state.orders, typed=False)

    async def _list_transactions(self, request: Request, principal: Principal) -> Any:
        return self._listing(request, principal, self.state.transactions, typed=True)

    def _listing(
        self,
        request: Request,
        principal: Principal,
        table: dict[str, dict[str, Any]],
        *,
        typed: bool,
    ) -> Any:
        location_id = self._alt(request, principal, typed=typed)
        q = request.query_params
        limit = _int(q.get("limit"), 10, "limit", 1, 100)
        offset = _int(q.get("offset"), 0, "offset", 0, None)
        found = [
            r
            for r in table.values()
            if r["altId"] == location_id
            and (not q.get("contactId") or r["contactId"] == q.get("contactId"))
            and (not q.get("status") or r["status"] == q.get("status"))
        ]
        return {"data": found[offset : offset + limit], "totalCount": len(found)}

    async def _get_order(self, request: Request, principal: Principal) -> Any:
        self._alt(request, principal, typed=False)
        return self._record(self.state.orders, request.path_params["orderId"], principal, "Order")

    async def _get_transaction(self, request: Request, principal: Principal) -> Any:
        self._alt(request, principal, typed=True)
        return self._record(
            self.state.transactions, request.path_params["transactionId"], principal, "Transaction"
        )


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _body(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        return None
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return dict((await request.form()).items())
    try:
        import json

        return json.loads(raw)
    except ValueError:
        return None


def _int(value: str | None, default: int | None, name: str, low: int, high: int | None) -> int:
    if value is None or value == "":
        if default is None:
            raise invalid(f"{name} should not be empty")
        return default
    try:
        number = int(float(value))
    except ValueError as exc:
        raise invalid(f"{name} must be a number") from exc
    if number < low or (high is not None and number > high):
        raise invalid(
            f"{name} must not be less than {low}"
            if number < low
            else f"{name} must not be greater than {high}"
        )
    return number


def _tag_id(location_id: str, name: str) -> str:
    """A stable id per tag name, as the real tags have one."""
    return hashlib.sha1(f"{location_id}:{name}".encode()).hexdigest()[:20]  # noqa: S324


# -- demo data ---------------------------------------------------------------------------------

DEMO_AGENCY_TOKEN = "demo-agency-token-0000000000"
DEMO_COMPANY_ID = "demoCompany000000001"
DEMO_LOCATION_ID = "demoLocation00000001"
DEMO_OPERATOR_LOCATION_ID = "demoOperator00000001"
DEMO_OPERATOR_TOKEN = "pit-demo-operator-000000000000"


def define_onboarding_fields(fake: FakeCrm, location_id: str) -> dict[str, str]:
    """The contact custom fields docs/outbox.md asks the operator to create, one per onboarding
    answer; their ids by key."""
    from controlcenter.onboarding.crm_sync import custom_field_key
    from controlcenter.onboarding.models import FIELDS

    keys = [custom_field_key(name) for name in FIELDS]
    return {key: fake.add_custom_field(location_id, key, key=key)["id"] for key in keys}


def seed_demo(fake: FakeCrm) -> dict[str, str]:
    """A brokerage sub-account with contacts, deals, a calendar and a conversation."""
    fake.add_agency(DEMO_COMPANY_ID, DEMO_AGENCY_TOKEN)
    fake.add_location(DEMO_LOCATION_ID, company_id=DEMO_COMPANY_ID, name="Harbor Commercial Realty")
    fake.add_location(
        DEMO_OPERATOR_LOCATION_ID, company_id=DEMO_COMPANY_ID, name="Control Center Operator"
    )
    fake.private_token(DEMO_OPERATOR_LOCATION_ID, DEMO_OPERATOR_TOKEN)
    define_onboarding_fields(fake, DEMO_OPERATOR_LOCATION_ID)
    loc = DEMO_LOCATION_ID
    dana = fake.add_contact(
        loc,
        firstName="Dana",
        lastName="Whitfield",
        email="dana@northpier.example",
        phone="+15550100001",
        companyName="North Pier Logistics",
        tags=["tenant-rep", "warehouse"],
    )
    omar = fake.add_contact(
        loc,
        firstName="Omar",
        lastName="Reyes",
        email="omar@reyescap.example",
        phone="+15550100002",
        companyName="Reyes Capital",
        tags=["investor"],
    )
    lena = fake.add_contact(
        loc,
        firstName="Lena",
        lastName="Okafor",
        email="lena@okafordental.example",
        companyName="Okafor Dental",
        tags=["retail", "lease-renewal"],
    )
    fake.add_note(dana["id"], "Needs 40,000 sq ft with 6 dock doors by Q3.")
    fake.add_task(
        dana["id"],
        title="Send warehouse shortlist",
        dueDate=(datetime.now(UTC) + timedelta(days=2)).isoformat(),
    )
    pipeline = fake.add_pipeline(loc, "Leasing", ["New lead", "Touring", "LOI", "Lease signed"])
    fake.add_opportunity(
        pipeline["id"],
        dana["id"],
        "North Pier - Harbor Industrial Park",
        monetaryValue=185000,
        pipelineStageId=pipeline["stages"][1]["id"],
    )
    fake.add_opportunity(
        pipeline["id"],
        omar["id"],
        "Reyes Capital - 5th Ave retail acquisition",
        monetaryValue=2400000,
    )
    fake.add_opportunity(
        pipeline["id"], lena["id"], "Okafor Dental renewal", monetaryValue=36000, status="won"
    )
    calendar = fake.add_calendar(loc, "Property tours")
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(
        hour=14, minute=0, second=0, microsecond=0
    )
    tour = fake.add_event(
        calendar["id"], dana["id"], tomorrow, title="Tour: Harbor Industrial Park"
    )
    fake.add_appointment_note(tour["id"], "Bring floor plans and the loading dock specs.")
    conversation = fake.add_conversation(omar["id"])
    fake.add_message(conversation["id"], "Can we see the rent roll before Friday?")
    fake.add_custom_field(loc, "Square footage needed", "NUMERICAL")
    fake.add_template(loc, "Listing announcement")
    fake.add_order(loc, lena["id"], 1500.0)
    fake.add_transaction(loc, lena["id"], 1500.0)
    return {"agency_token": DEMO_AGENCY_TOKEN, "company_id": DEMO_COMPANY_ID, "location_id": loc}


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the fake CRM with demo data.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args()
    fake = FakeCrm()
    seed_demo(fake)
    fake.start(args.port, host=args.host)
    print(
        f"Fake CRM on http://{args.host}:{args.port}\n"
        f"  CRM_BASE_URL=http://{args.host}:{args.port}\n"
        f"  settings: crmAgencyApiKey={DEMO_AGENCY_TOKEN} crmAgencyId={DEMO_COMPANY_ID}\n"
        f"            crmPrivateToken={DEMO_OPERATOR_TOKEN}\n"
        f"            crmOwnerLocationId={DEMO_OPERATOR_LOCATION_ID}\n"
        "  link a user: controlcenter users set-crm --email <e-mail> "
        f"--location-id {DEMO_LOCATION_ID}\n"
        "Ctrl-C to stop.",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
