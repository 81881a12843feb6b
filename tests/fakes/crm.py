"""A loopback fake of HighLevel's LeadConnector API v2, in memory, as a real HTTP server.

It validates what the real API validates (the bearer token and what it may reach, the
`Version` header of each endpoint family, the location, required and unknown fields) and
answers in the real API's shapes, including its NestJS-style errors
(`{"statusCode": 422, "message": [...], "error": "Unprocessable Entity"}`).

Tokens: an agency token may only call `POST /oauth/locationToken`, which hands out a location
token for one of the agency's locations; location tokens and private integration tokens reach
their own location only. A record of another location answers 403, as the real API does.

Faults for tests: `outage(503)` (every call answers that status), `refuse_connections()` (the
port stops listening), `rate_limit(n, retry_after)` (the next n calls answer 429), `delay_s`
(every call waits first). Inspection: `contacts(location_id)`, `calls`.

Run alone with seeded demo data: `python -m tests.fakes.crm --port 8100`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import string
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer

V_2021_07_28 = "2021-07-28"
V_2021_04_15 = "2021-04-15"
FAMILY_VERSIONS = {
    "contacts": V_2021_07_28,
    "opportunities": V_2021_07_28,
    "locations": V_2021_07_28,
    "users": V_2021_07_28,
    "emails": V_2021_07_28,
    "payments": V_2021_07_28,
    "oauth": V_2021_07_28,
    "conversations": V_2021_04_15,
    "calendars": V_2021_04_15,
}
NO_LOCATION_ACCESS = "The token does not have access to this location."
AGENCY_NOT_ALLOWED = (
    "This authClass type is not allowed to access this scope. "
    "Please reach out to the Platform team to get it added."
)
CONTACT_FIELDS = frozenset(
    {
        "firstName",
        "lastName",
        "name",
        "email",
        "phone",
        "companyName",
        "address1",
        "city",
        "state",
        "postalCode",
        "country",
        "website",
        "timezone",
        "source",
        "tags",
        "customFields",
        "dnd",
        "gender",
        "dateOfBirth",
        "assignedTo",
    }
)
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MESSAGE_TYPES = ("SMS", "Email", "WhatsApp", "GMB", "IG", "FB", "Custom", "Live_Chat")
OPPORTUNITY_STATUSES = ("open", "won", "lost", "abandoned")


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
        self.token_ttl_s = 86399
        self._outage_status: int | None = None
        self._rate_limited = 0
        self._retry_after: str | None = None
        self._lock = threading.Lock()
        self._server: LoopbackServer | None = None
        self._port = 0
        self.app = Starlette(routes=self._routes())

    # -- server ---------------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1") -> FakeCrm:
        self._server = LoopbackServer(self.app, host=host, port=port or self._port).start()
        self._port = self._server.port
        return self

    def stop(self) -> None:
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

    def refuse_connections(self) -> None:
        """Stop listening: clients get connection refused (the state is kept)."""
        self.stop()

    def accept_connections(self) -> None:
        if self._server is None:
            self.start(self._port)

    def reset(self) -> None:
        """Forget all data, calls and faults (the server keeps running)."""
        with self._lock:
            self.state = State()
            self.calls = []
            self.delay_s = 0.0
            self.token_ttl_s = 86399
            self._outage_status = None
            self._rate_limited = 0
            self._retry_after = None
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
        pipeline = {
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
        self, location_id: str, name: str, data_type: str = "TEXT"
    ) -> dict[str, Any]:
        key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        custom = {
            "id": new_id(),
            "locationId": location_id,
            "name": name,
            "fieldKey": f"contact.{key}",
            "dataType": data_type,
            "model": "contact",
        }
        self.state.custom_fields[custom["id"]] = custom
        return custom

    def add_template(self, location_id: str, name: str, **fields: Any) -> dict[str, Any]:
        template = {
            "id": new_id(),
            "locationId": location_id,
            "name": name,
            "type": fields.pop("type", "html"),
            "updatedAt": now_iso(),
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
            **fields,
        }
        self.state.transactions[transaction["_id"]] = transaction
        return transaction

    # -- inspection -----------------------------------------------------------------------

    def contacts(self, location_id: str) -> list[dict[str, Any]]:
        return [c for c in self.state.contacts.values() if c["locationId"] == location_id]

    def contact(self, contact_id: str) -> dict[str, Any] | None:
        return self.state.contacts.get(contact_id)

    def calls_to(self, method: str, path: str) -> list[Call]:
        return [c for c in list(self.calls) if c.method == method and c.path == path]

    # -- the HTTP side --------------------------------------------------------------------

    def _routes(self) -> list[Route]:
        def route(path: str, method: str, handler: Handler, status: int = 200) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self._serve(request, handler, status)

            return Route(path, endpoint, methods=[method])

        return [
            route("/oauth/locationToken", "POST", self._location_token),
            route("/contacts/", "GET", self._get_contacts),
            route("/contacts/", "POST", self._create_contact, 201),
            route("/contacts/upsert", "POST", self._upsert_contact),
            route("/contacts/{contactId}", "GET", self._get_contact),
            route("/contacts/{contactId}", "PUT", self._update_contact),
            route("/contacts/{contactId}/tags", "POST", self._add_tags, 201),
            route("/contacts/{contactId}/tags", "DELETE", self._remove_tags),
            route("/contacts/{contactId}/tasks", "GET", self._get_tasks),
            route("/contacts/{contactId}/tasks", "POST", self._create_task, 201),
            route("/contacts/{contactId}/notes", "GET", self._get_notes),
            route("/contacts/{contactId}/notes", "POST", self._create_note, 201),
            route("/conversations/search", "GET", self._search_conversations),
            route("/conversations/messages", "POST", self._send_message, 201),
            route("/conversations/{conversationId}/messages", "GET", self._get_messages),
            route("/opportunities/search", "GET", self._search_opportunities),
            route("/opportunities/pipelines", "GET", self._get_pipelines),
            route("/opportunities/", "POST", self._create_opportunity, 201),
            route("/opportunities/{id}", "GET", self._get_opportunity),
            route("/opportunities/{id}", "PUT", self._update_opportunity),
            route("/calendars/", "GET", self._get_calendars),
            route("/calendars/events", "GET", self._get_events),
            route("/calendars/appointments/{eventId}/notes", "GET", self._get_appointment_notes),
            route("/calendars/{calendarId}/free-slots", "GET", self._free_slots),
            route("/locations/{locationId}", "GET", self._get_location),
            route("/locations/{locationId}/customFields", "GET", self._get_custom_fields),
            route("/locations/{locationId}/tags", "GET", self._get_location_tags),
            route("/emails/builder", "GET", self._get_templates),
            route("/payments/orders", "GET", self._list_orders),
            route("/payments/orders/{orderId}", "GET", self._get_order),
            route("/payments/transactions", "GET", self._list_transactions),
            route("/payments/transactions/{id}", "GET", self._get_transaction),
            route("/users/", "GET", self._get_users),
        ]

    async def _serve(self, request: Request, handler: Handler, status: int) -> Response:
        body = await _body(request)
        token = _bearer(request)
        principal = self._principal(token)
        call = Call(
            method=request.method,
            path=request.url.path,
            query=dict(request.query_params),
            version=request.headers.get("version"),
            token_kind=principal.kind if principal else None,
            location_id=principal.location_id if principal else None,
            body=body,
        )
        self.calls.append(call)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
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
            self._check_version(request)
            if principal is None:
                raise HttpError(401, "Invalid JWT")
            is_oauth = request.url.path.startswith("/oauth/")
            if (principal.kind == "agency") != is_oauth:
                raise HttpError(401, AGENCY_NOT_ALLOWED)
            request.state.body = body
            result = await handler(request, principal)
        except HttpError as exc:
            call.status = exc.status
            return exc.response()
        call.status = status
        return JSONResponse(result, status_code=status)

    def _principal(self, token: str | None) -> Principal | None:
        if not token:
            return None
        if token in self.state.agency_tokens:
            return Principal("agency", company_id=self.state.agency_tokens[token])
        if token in self.state.location_tokens:
            return Principal("location", location_id=self.state.location_tokens[token])
        return None

    @staticmethod
    def _check_version(request: Request) -> None:
        family = request.url.path.lstrip("/").split("/", 1)[0]
        version = request.headers.get("version")
        if not version:
            raise HttpError(400, "Version header was not found")
        if version != FAMILY_VERSIONS[family]:
            raise HttpError(400, f"Version {version} is not supported for /{family}")

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

    @staticmethod
    def _apply_contact(contact: dict[str, Any], fields: dict[str, Any]) -> None:
        for key, value in fields.items():
            contact[key] = list(value) if key == "tags" else value
        if isinstance(contact.get("email"), str):
            contact["email"] = contact["email"].lower()
        if "name" not in fields:
            parts = [contact.get("firstName"), contact.get("lastName")]
            contact["name"] = " ".join(p for p in parts if p) or contact.get("name")
        contact["dateUpdated"] = now_iso()

    @staticmethod
    def _validate_contact(body: Any, *, allow_location: bool) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise invalid("body must be an object")
        errors: list[str] = []
        allowed = CONTACT_FIELDS | ({"locationId"} if allow_location else set())
        errors += [f"property {key} should not exist" for key in body if key not in allowed]
        email = body.get("email")
        if email is not None and (not isinstance(email, str) or not EMAIL_RE.match(email)):
            errors.append("email must be an email")
        tags = body.get("tags")
        if tags is not None and (
            not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
        ):
            errors.append("each value in tags must be a string")
        for key in CONTACT_FIELDS - {"tags", "customFields", "dnd", "email"}:
            if key in body and body[key] is not None and not isinstance(body[key], str):
                errors.append(f"{key} must be a string")
        if errors:
            raise invalid(*errors)
        return {k: v for k, v in body.items() if k != "locationId"}

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
            "userType": "Location",
            "companyId": company_id,
            "locationId": location_id,
            "traceId": new_id(),
        }

    # -- contacts -------------------------------------------------------------------------

    async def _get_contacts(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        limit = _int(q.get("limit"), 20, "limit", 1, 100)
        query = (q.get("query") or "").lower()
        found = [
            c
            for c in self.contacts(location_id)
            if not query
            or any(
                query in str(c.get(k) or "").lower()
                for k in ("name", "email", "phone", "companyName")
            )
        ]
        return {"contacts": found[:limit], "meta": {"total": len(found), "currentPage": 1}}

    async def _create_contact(self, request: Request, principal: Principal) -> Any:
        body = request.state.body
        location_id = self._own(
            principal, body.get("locationId") if isinstance(body, dict) else None
        )
        fields = self._validate_contact(body, allow_location=True)
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
        fields = self._validate_contact(body, allow_location=True)
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
        fields = self._validate_contact(request.state.body, allow_location=False)
        self._apply_contact(contact, fields)
        return {"succeded": True, "contact": contact}

    @staticmethod
    def _tags_body(body: Any) -> list[str]:
        tags = body.get("tags") if isinstance(body, dict) else None
        if not isinstance(tags, list) or not tags or not all(isinstance(t, str) for t in tags):
            raise invalid("tags should not be empty", "each value in tags must be a string")
        extra = [k for k in body if k != "tags"]
        if extra:
            raise invalid(*(f"property {k} should not exist" for k in extra))
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

    async def _get_tasks(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        return {"tasks": [t for t in self.state.tasks.values() if t["contactId"] == contact["id"]]}

    async def _create_task(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        body = request.state.body if isinstance(request.state.body, dict) else {}
        errors = _unknown(body, {"title", "body", "dueDate", "completed", "assignedTo"})
        if not isinstance(body.get("title"), str) or not body.get("title"):
            errors.append("title must be a string")
        if not isinstance(body.get("dueDate"), str):
            errors.append("dueDate must be a valid ISO 8601 date string")
        if not isinstance(body.get("completed"), bool):
            errors.append("completed must be a boolean value")
        if errors:
            raise invalid(*errors)
        return {"task": self.add_task(contact["id"], **body)}

    async def _get_notes(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        return {"notes": [n for n in self.state.notes.values() if n["contactId"] == contact["id"]]}

    async def _create_note(self, request: Request, principal: Principal) -> Any:
        contact = self._contact_of(request, principal)
        body = request.state.body if isinstance(request.state.body, dict) else {}
        errors = _unknown(body, {"body", "userId"})
        if not isinstance(body.get("body"), str) or not body.get("body"):
            errors.append("body should not be empty")
        if errors:
            raise invalid(*errors)
        return {"note": self.add_note(contact["id"], **body)}

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
            "messages": {
                "lastMessageId": page[0]["id"] if page else None,
                "nextPage": len(found) > limit,
                "messages": page,
            }
        }

    async def _send_message(self, request: Request, principal: Principal) -> Any:
        body = request.state.body if isinstance(request.state.body, dict) else {}
        errors = _unknown(
            body,
            {
                "type",
                "contactId",
                "message",
                "subject",
                "html",
                "emailTo",
                "emailFrom",
                "attachments",
            },
        )
        if body.get("type") not in MESSAGE_TYPES:
            errors.append(f"type must be one of the following values: {', '.join(MESSAGE_TYPES)}")
        if not isinstance(body.get("contactId"), str):
            errors.append("contactId must be a string")
        if errors:
            raise invalid(*errors)
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
            "message": "Message queued successfully.",
        }

    # -- opportunities --------------------------------------------------------------------

    async def _search_opportunities(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("location_id"), "location_id")
        limit = _int(q.get("limit"), 20, "limit", 1, 100)
        status = q.get("status")
        if status and status not in (*OPPORTUNITY_STATUSES, "all"):
            raise invalid(
                "status must be one of the following values: open, won, lost, abandoned, all"
            )
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
        errors = _unknown(
            body,
            {
                "pipelineId",
                "name",
                "pipelineStageId",
                "status",
                "monetaryValue",
                "assignedTo",
                "contactId",
            }
            | ({"locationId"} if existing is None else set()),
        )
        if "status" in body and body["status"] not in OPPORTUNITY_STATUSES:
            errors.append("status must be one of the following values: open, won, lost, abandoned")
        if "monetaryValue" in body and not isinstance(body["monetaryValue"], int | float):
            errors.append("monetaryValue must be a number")
        if errors:
            raise invalid(*errors)
        pipeline_id = body.get("pipelineId") or (existing or {}).get("pipelineId")
        pipeline = self._record(self.state.pipelines, str(pipeline_id), principal, "Pipeline")
        stage_id = body.get("pipelineStageId")
        if stage_id is not None and stage_id not in {s["id"] for s in pipeline["stages"]}:
            raise HttpError(400, "Pipeline stage not found")

    async def _create_opportunity(self, request: Request, principal: Principal) -> Any:
        body = request.state.body if isinstance(request.state.body, dict) else {}
        self._own(principal, body.get("locationId"))
        missing = [
            f"{k} must be a string"
            for k in ("pipelineId", "name", "contactId")
            if not isinstance(body.get(k), str)
        ]
        if "status" not in body:
            missing.append("status must be one of the following values: open, won, lost, abandoned")
        if missing:
            raise invalid(*missing)
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

    async def _update_opportunity(self, request: Request, principal: Principal) -> Any:
        opportunity = self._record(
            self.state.opportunities, request.path_params["id"], principal, "Opportunity"
        )
        body = request.state.body if isinstance(request.state.body, dict) else {}
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
            self.state.events, request.path_params["eventId"], principal, "Appointment"
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
        return {"tags": [{"name": name, "locationId": location_id} for name in sorted(names)]}

    async def _get_users(self, request: Request, principal: Principal) -> Any:
        location_id = self._own(principal, request.query_params.get("locationId"))
        return {
            "users": [u for u in self.state.users.values() if u.get("locationId") == location_id]
        }

    async def _get_templates(self, request: Request, principal: Principal) -> Any:
        q = request.query_params
        location_id = self._own(principal, q.get("locationId"))
        limit = _int(q.get("limit"), 10, "limit", 1, 100)
        offset = _int(q.get("offset"), 0, "offset", 0, None)
        search = (q.get("search") or "").lower()
        found = [
            t
            for t in self.state.templates.values()
            if t["locationId"] == location_id and search in t["name"].lower()
        ]
        return {"builders": found[offset : offset + limit], "total": [{"total": len(found)}]}

    # -- payments -------------------------------------------------------------------------

    def _alt(self, request: Request, principal: Principal) -> str:
        q = request.query_params
        if q.get("altType") != "location":
            raise invalid("altType must be one of the following values: location")
        return self._own(principal, q.get("altId"), "altId")

    async def _list_orders(self, request: Request, principal: Principal) -> Any:
        return self._listing(request, principal, self.state.orders)

    async def _list_transactions(self, request: Request, principal: Principal) -> Any:
        return self._listing(request, principal, self.state.transactions)

    def _listing(
        self, request: Request, principal: Principal, table: dict[str, dict[str, Any]]
    ) -> Any:
        location_id = self._alt(request, principal)
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
        self._alt(request, principal)
        return self._record(self.state.orders, request.path_params["orderId"], principal, "Order")

    async def _get_transaction(self, request: Request, principal: Principal) -> Any:
        self._alt(request, principal)
        return self._record(
            self.state.transactions, request.path_params["id"], principal, "Transaction"
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


def _unknown(body: dict[str, Any], allowed: set[str]) -> list[str]:
    return [f"property {key} should not exist" for key in body if key not in allowed]


# -- demo data ---------------------------------------------------------------------------------

DEMO_AGENCY_TOKEN = "demo-agency-token-0000000000"
DEMO_COMPANY_ID = "demoCompany000000001"
DEMO_LOCATION_ID = "demoLocation00000001"
DEMO_OPERATOR_LOCATION_ID = "demoOperator00000001"
DEMO_OPERATOR_TOKEN = "pit-demo-operator-000000000000"


def seed_demo(fake: FakeCrm) -> dict[str, str]:
    """A brokerage sub-account with contacts, deals, a calendar and a conversation."""
    fake.add_agency(DEMO_COMPANY_ID, DEMO_AGENCY_TOKEN)
    fake.add_location(DEMO_LOCATION_ID, company_id=DEMO_COMPANY_ID, name="Harbor Commercial Realty")
    fake.add_location(
        DEMO_OPERATOR_LOCATION_ID, company_id=DEMO_COMPANY_ID, name="Control Center Operator"
    )
    fake.private_token(DEMO_OPERATOR_LOCATION_ID, DEMO_OPERATOR_TOKEN)
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
