"""The built-in CRM tool catalogue: the broker's own HighLevel sub-account, for the model.

Names follow HighLevel's own MCP server (`<group>_<operation>`), so a model that knows one
knows the other. Arguments never carry a location: the client is bound to the broker's
location (see broker.py), and every schema forbids properties it does not list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from controlcenter.crm.client import CrmClient, segment
from controlcenter.crm.errors import (
    CrmAuthError,
    CrmError,
    CrmNotFound,
    CrmRateLimited,
    CrmRequestError,
    CrmUnavailable,
)
from controlcenter.tools.base import Tool, ToolContext, ToolError

NOT_CONNECTED = (
    "The CRM is not connected for this user: no CRM location is linked to the account, or "
    "the CRM agency credentials are not configured. Ask an administrator to link the "
    "user's CRM sub-account and set the CRM agency settings."
)

Run = Callable[[CrmClient, dict[str, Any]], Awaitable[Any]]

# -- schema pieces -------------------------------------------------------------------------


def _id(what: str) -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "pattern": "^[A-Za-z0-9_-]+$",
        "description": f"The {what} id, as returned by the CRM.",
    }


def _text(description: str, max_length: int = 1000) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description}


def _limit(default: int, maximum: int = 100) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "description": f"How many records to return (default {default}, at most {maximum}).",
    }


OFFSET = {"type": "integer", "minimum": 0, "description": "How many records to skip (paging)."}
TAGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 100},
    "minItems": 1,
    "maxItems": 50,
    "uniqueItems": True,
    "description": "Tag names.",
}
CONTACT_PROPERTIES: dict[str, Any] = {
    "firstName": _text("First name.", 100),
    "lastName": _text("Last name.", 100),
    "name": _text("Full name, when first and last name are not separate.", 200),
    "email": {"type": "string", "format": "email", "maxLength": 320, "description": "E-mail."},
    "phone": _text("Phone number in E.164 form, e.g. +15551234567.", 30),
    "companyName": _text("Company (business) name.", 200),
    "address1": _text("Street address.", 300),
    "city": _text("City.", 100),
    "state": _text("State or region.", 100),
    "postalCode": _text("Postal code.", 20),
    "country": _text("Two-letter country code, e.g. US.", 2),
    "website": _text("Website address.", 300),
    "source": _text("Where the contact came from, e.g. 'referral'.", 100),
}
EMAIL_OR_PHONE = [{"required": ["email"]}, {"required": ["phone"]}]
OPPORTUNITY_STATUS = {
    "type": "string",
    "enum": ["open", "won", "lost", "abandoned"],
    "description": "Deal status.",
}
DATE_TIME = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 date-time, e.g. 2026-05-01T09:00:00Z (UTC when no offset).",
}
DAY = {
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2}$",
    "description": "A date, YYYY-MM-DD.",
}


def _schema(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }
    schema.update(extra)
    return schema


# -- the handlers ----------------------------------------------------------------------------


def _pick(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: args[name] for name in names if name in args}


def _contact_fields(args: dict[str, Any]) -> dict[str, Any]:
    return _pick(args, *CONTACT_PROPERTIES, "tags")


def _contact_path(args: dict[str, Any], tail: str = "") -> str:
    return f"/contacts/{segment(args['contactId'])}{tail}"


async def _get_contacts(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {
        "locationId": crm.location_id,
        "query": args.get("query"),
        "limit": args.get("limit", 20),
    }
    return await crm.get("/contacts/", params)


async def _get_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_contact_path(args))


async def _create_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post("/contacts/", {**_contact_fields(args), "locationId": crm.location_id})


async def _update_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.put(_contact_path(args), _contact_fields(args))


async def _upsert_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {**_contact_fields(args), "locationId": crm.location_id}
    return await crm.post("/contacts/upsert", body, idempotent=True)


async def _add_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post(_contact_path(args, "/tags"), {"tags": args["tags"]}, idempotent=True)


async def _remove_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.delete(_contact_path(args, "/tags"), {"tags": args["tags"]})


async def _get_tasks(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_contact_path(args, "/tasks"))


async def _create_task(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {
        "title": args["title"],
        "dueDate": _iso(_moment(args["dueDate"], "dueDate")),
        "completed": args.get("completed", False),
        **_pick(args, "body"),
    }
    return await crm.post(_contact_path(args, "/tasks"), body)


async def _get_notes(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_contact_path(args, "/notes"))


async def _create_note(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post(_contact_path(args, "/notes"), {"body": args["body"]})


async def _search_conversations(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {"locationId": crm.location_id, **_pick(args, "contactId", "query")}
    params["limit"] = args.get("limit", 20)
    return await crm.get("/conversations/search", params)


async def _get_messages(crm: CrmClient, args: dict[str, Any]) -> Any:
    path = f"/conversations/{segment(args['conversationId'])}/messages"
    return await crm.get(path, {"limit": args.get("limit", 20)})


async def _send_message(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = _pick(args, "type", "contactId", "message", "subject", "html")
    return await crm.post("/conversations/messages", body)


async def _search_opportunities(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {
        "location_id": crm.location_id,
        "q": args.get("query"),
        "pipeline_id": args.get("pipelineId"),
        "pipeline_stage_id": args.get("pipelineStageId"),
        "contact_id": args.get("contactId"),
        "status": args.get("status"),
        "limit": args.get("limit", 20),
    }
    return await crm.get("/opportunities/search", params)


async def _get_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/opportunities/{segment(args['opportunityId'])}")


async def _create_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {
        "locationId": crm.location_id,
        "status": args.get("status", "open"),
        **_pick(args, "pipelineId", "name", "contactId", "pipelineStageId", "monetaryValue"),
    }
    return await crm.post("/opportunities/", body)


async def _update_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = _pick(args, "name", "pipelineId", "pipelineStageId", "status", "monetaryValue")
    return await crm.put(f"/opportunities/{segment(args['opportunityId'])}", body)


async def _get_pipelines(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get("/opportunities/pipelines", {"locationId": crm.location_id})


async def _get_calendars(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get("/calendars/", {"locationId": crm.location_id})


async def _get_calendar_events(crm: CrmClient, args: dict[str, Any]) -> Any:
    start = _moment(args["startTime"], "startTime") if "startTime" in args else _now()
    end = _moment(args["endTime"], "endTime") if "endTime" in args else start + timedelta(days=7)
    if end < start:
        raise ToolError("endTime must be after startTime.")
    params = {
        "locationId": crm.location_id,
        "startTime": _ms(start),
        "endTime": _ms(end),
        **_pick(args, "calendarId", "userId"),
    }
    return await crm.get("/calendars/events", params)


async def _get_appointment_notes(crm: CrmClient, args: dict[str, Any]) -> Any:
    path = f"/calendars/appointments/{segment(args['appointmentId'])}/notes"
    return await crm.get(path, {"limit": args.get("limit", 20), "offset": args.get("offset", 0)})


async def _get_free_slots(crm: CrmClient, args: dict[str, Any]) -> Any:
    first, last = _day(args["startDate"], "startDate"), _day(args["endDate"], "endDate")
    if last < first:
        raise ToolError("endDate must not be before startDate.")
    if (last - first).days > 30:
        raise ToolError("The range can cover at most 31 days; ask for a shorter range.")
    start = datetime.combine(first, time.min, UTC)
    end = datetime.combine(last, time.max, UTC)
    params = {"startDate": _ms(start), "endDate": _ms(end), **_pick(args, "timezone")}
    return await crm.get(f"/calendars/{segment(args['calendarId'])}/free-slots", params)


async def _get_location(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/locations/{segment(crm.location_id)}")


async def _get_custom_fields(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/locations/{segment(crm.location_id)}/customFields")


async def _get_location_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/locations/{segment(crm.location_id)}/tags")


async def _fetch_templates(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {
        "locationId": crm.location_id,
        "search": args.get("search"),
        "limit": args.get("limit", 10),
        "offset": args.get("offset", 0),
    }
    return await crm.get("/emails/builder", params)


def _alt(crm: CrmClient) -> dict[str, Any]:
    return {"altId": crm.location_id, "altType": "location"}


async def _list_orders(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {**_alt(crm), **_pick(args, "contactId", "status")}
    params.update(limit=args.get("limit", 10), offset=args.get("offset", 0))
    return await crm.get("/payments/orders", params)


async def _get_order(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/payments/orders/{segment(args['orderId'])}", _alt(crm))


async def _list_transactions(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {**_alt(crm), **_pick(args, "contactId")}
    params.update(limit=args.get("limit", 10), offset=args.get("offset", 0))
    return await crm.get("/payments/transactions", params)


async def _get_transaction(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(f"/payments/transactions/{segment(args['transactionId'])}", _alt(crm))


# -- time helpers ----------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _moment(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ToolError(
            f"{name} must be an ISO 8601 date-time, e.g. 2026-05-01T09:00:00Z."
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ToolError(f"{name} must be a date, YYYY-MM-DD.") from exc


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- errors the model can act on ---------------------------------------------------------------


def tool_error(exc: CrmError, what: str) -> ToolError:
    """A message the model can act on; the API's own words where they help."""
    if isinstance(exc, CrmRateLimited):
        return ToolError("CRM rate limit reached; try again in a minute.")
    if isinstance(exc, CrmUnavailable):
        return ToolError("The CRM is not reachable right now; try again later.")
    if isinstance(exc, CrmAuthError) and exc.status == 403:
        return ToolError(f"That {what} is not in this user's CRM account, so it cannot be used.")
    if isinstance(exc, CrmAuthError):
        return ToolError(
            "The CRM refused the credentials; ask an administrator to check the CRM settings."
        )
    if isinstance(exc, CrmNotFound):
        message = exc.message.rstrip(". ") or f"{what.capitalize()} not found"
        return ToolError(f"{message}.")
    if isinstance(exc, CrmRequestError):
        return ToolError(f"The CRM refused the request: {exc.message}")
    return ToolError(f"CRM error: {exc.message}")


def _tool(name: str, what: str, description: str, schema: dict[str, Any], run: Run) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
        crm = ctx.crm
        if not isinstance(crm, CrmClient):
            raise ToolError(NOT_CONNECTED)
        try:
            return await run(crm, args)
        except CrmError as exc:
            raise tool_error(exc, what) from exc

    return Tool(name=name, description=description, input_schema=schema, handler=handler)


# -- the catalogue ---------------------------------------------------------------------------

CONTACT_ID = {"contactId": _id("contact")}


def crm_tools() -> list[Tool]:
    """About thirty tools over the broker's own sub-account, priority groups first."""
    return [
        _tool(
            "contacts_get-contacts",
            "contact",
            "Search the broker's CRM contacts by name, e-mail, phone or company. Use it to find "
            "a person before acting on them, or to list recent contacts. Returns `contacts` "
            "(id, name, email, phone, companyName, tags, ...) and `meta.total`.",
            _schema(
                {
                    "query": _text("Text to look for in name, e-mail, phone or company.", 200),
                    "limit": _limit(20),
                }
            ),
            _get_contacts,
        ),
        _tool(
            "contacts_get-contact",
            "contact",
            "Get one contact's full record by id (all fields, tags, custom fields). Use it when "
            "you have a contactId, e.g. from contacts_get-contacts. Returns `contact`.",
            _schema(CONTACT_ID, ["contactId"]),
            _get_contact,
        ),
        _tool(
            "contacts_create-contact",
            "contact",
            "Create a new contact. Needs an e-mail or a phone. Fails when a contact with the same "
            "e-mail or phone exists (the error names it): then update that one instead, or use "
            "contacts_upsert-contact. Returns the new `contact`.",
            _schema({**CONTACT_PROPERTIES, "tags": TAGS}, anyOf=EMAIL_OR_PHONE),
            _create_contact,
        ),
        _tool(
            "contacts_update-contact",
            "contact",
            "Change fields of an existing contact. Only the fields given change. To add or "
            "remove single tags use contacts_add-tags / contacts_remove-tags (a `tags` list here "
            "replaces all tags). Returns the updated `contact`.",
            _schema(
                {**CONTACT_ID, **CONTACT_PROPERTIES, "tags": TAGS}, ["contactId"], minProperties=2
            ),
            _update_contact,
        ),
        _tool(
            "contacts_upsert-contact",
            "contact",
            "Create a contact, or update the existing one with the same e-mail (or phone). Use it "
            "when unsure whether the person is already in the CRM. Returns `contact` and `new` "
            "(true when it was created).",
            _schema({**CONTACT_PROPERTIES, "tags": TAGS}, anyOf=EMAIL_OR_PHONE),
            _upsert_contact,
        ),
        _tool(
            "contacts_add-tags",
            "contact",
            "Add tags to a contact, keeping the tags it already has. Returns the contact's `tags`.",
            _schema({**CONTACT_ID, "tags": TAGS}, ["contactId", "tags"]),
            _add_tags,
        ),
        _tool(
            "contacts_remove-tags",
            "contact",
            "Remove tags from a contact; other tags stay. Returns the contact's remaining `tags`.",
            _schema({**CONTACT_ID, "tags": TAGS}, ["contactId", "tags"]),
            _remove_tags,
        ),
        _tool(
            "contacts_get-all-tasks",
            "contact",
            "List the tasks (to-dos, follow-ups) of one contact, with due dates and whether they "
            "are completed. Returns `tasks`.",
            _schema(CONTACT_ID, ["contactId"]),
            _get_tasks,
        ),
        _tool(
            "contacts_create-task",
            "contact",
            "Create a follow-up task on a contact, due at a given time. Returns the new `task`.",
            _schema(
                {
                    **CONTACT_ID,
                    "title": _text("What to do, in a few words.", 200),
                    "body": _text("Details.", 5000),
                    "dueDate": DATE_TIME,
                    "completed": {
                        "type": "boolean",
                        "description": "Already done (default false).",
                    },
                },
                ["contactId", "title", "dueDate"],
            ),
            _create_task,
        ),
        _tool(
            "contacts_get-all-notes",
            "contact",
            "List the notes written on a contact (call summaries, requirements, history). "
            "Returns `notes` (id, body, dateAdded).",
            _schema(CONTACT_ID, ["contactId"]),
            _get_notes,
        ),
        _tool(
            "contacts_create-note",
            "contact",
            "Add a note to a contact, e.g. a summary of a call or the space they need. Returns "
            "the new `note`.",
            _schema(
                {**CONTACT_ID, "body": _text("The note's text.", 10000)}, ["contactId", "body"]
            ),
            _create_note,
        ),
        _tool(
            "conversations_search-conversation",
            "conversation",
            "Find conversations (SMS, e-mail, chat threads) by contact or text. Use it to see who "
            "wrote recently or to get a conversationId. Returns `conversations` and `total`.",
            _schema(
                {
                    **{"contactId": _id("contact")},
                    "query": _text("Text to look for (name, e-mail, phone, last message).", 200),
                    "limit": _limit(20),
                }
            ),
            _search_conversations,
        ),
        _tool(
            "conversations_get-messages",
            "conversation",
            "Read the latest messages of one conversation, oldest first. Returns "
            "`messages.messages` (body, direction, messageType, dateAdded) and "
            "`messages.nextPage`.",
            _schema(
                {"conversationId": _id("conversation"), "limit": _limit(20)}, ["conversationId"]
            ),
            _get_messages,
        ),
        _tool(
            "conversations_send-a-new-message",
            "contact",
            "Send a message to a contact now: SMS (needs the contact's phone) or Email (needs "
            "their e-mail, a subject and the text). It really goes out, so only send what the "
            "user asked for. Returns `conversationId` and `messageId`.",
            _schema(
                {
                    "type": {
                        "type": "string",
                        "enum": ["SMS", "Email", "WhatsApp"],
                        "description": "Channel.",
                    },
                    "contactId": _id("contact"),
                    "message": _text("The text of the message.", 5000),
                    "subject": _text("E-mail subject (Email only).", 300),
                    "html": _text("E-mail body as HTML (Email only, instead of message).", 50000),
                },
                ["type", "contactId"],
                anyOf=[{"required": ["message"]}, {"required": ["html"]}],
            ),
            _send_message,
        ),
        _tool(
            "opportunities_search-opportunity",
            "opportunity",
            "Search deals (opportunities) in the pipelines, by text, pipeline, stage, contact or "
            "status. Returns `opportunities` (name, status, monetaryValue, pipelineStageId, "
            "contact) and `meta.total`.",
            _schema(
                {
                    "query": _text("Text to look for in the deal or contact name.", 200),
                    "pipelineId": _id("pipeline"),
                    "pipelineStageId": _id("pipeline stage"),
                    "contactId": _id("contact"),
                    "status": {**OPPORTUNITY_STATUS, "enum": [*OPPORTUNITY_STATUS["enum"], "all"]},
                    "limit": _limit(20),
                }
            ),
            _search_opportunities,
        ),
        _tool(
            "opportunities_get-opportunity",
            "opportunity",
            "Get one deal (opportunity) by id: its name, value, status, pipeline stage and "
            "contact. Returns `opportunity`.",
            _schema({"opportunityId": _id("opportunity")}, ["opportunityId"]),
            _get_opportunity,
        ),
        _tool(
            "opportunities_create-opportunity",
            "opportunity",
            "Create a deal for a contact in a pipeline (get pipeline and stage ids from "
            "opportunities_get-pipelines). Returns the new `opportunity`.",
            _schema(
                {
                    "pipelineId": _id("pipeline"),
                    "name": _text("Deal name, e.g. 'Acme - 5th Ave lease'.", 200),
                    "contactId": _id("contact"),
                    "pipelineStageId": _id("pipeline stage"),
                    "status": OPPORTUNITY_STATUS,
                    "monetaryValue": {"type": "number", "minimum": 0, "description": "Value."},
                },
                ["pipelineId", "name", "contactId"],
            ),
            _create_opportunity,
        ),
        _tool(
            "opportunities_update-opportunity",
            "opportunity",
            "Change a deal: move it to another stage, mark it won/lost, rename it or change its "
            "value. Only the fields given change. Returns the updated `opportunity`.",
            _schema(
                {
                    "opportunityId": _id("opportunity"),
                    "name": _text("Deal name.", 200),
                    "pipelineId": _id("pipeline"),
                    "pipelineStageId": _id("pipeline stage"),
                    "status": OPPORTUNITY_STATUS,
                    "monetaryValue": {"type": "number", "minimum": 0, "description": "Value."},
                },
                ["opportunityId"],
                minProperties=2,
            ),
            _update_opportunity,
        ),
        _tool(
            "opportunities_get-pipelines",
            "pipeline",
            "List the sales pipelines and their stages (ids and names, in order). Use it to "
            "understand stage ids in deals or before moving a deal. Returns `pipelines`.",
            _schema({}),
            _get_pipelines,
        ),
        _tool(
            "calendars_get-calendars",
            "calendar",
            "List the calendars (e.g. property tours, consultations). Returns `calendars` with "
            "their ids, needed by the other calendar tools.",
            _schema({}),
            _get_calendars,
        ),
        _tool(
            "calendars_get-calendar-events",
            "calendar",
            "List appointments of a calendar (or of a user) between two times; by default the "
            "next 7 days. Returns `events` (title, startTime, endTime, contactId, "
            "appointmentStatus).",
            _schema(
                {
                    "calendarId": _id("calendar"),
                    "userId": _id("user"),
                    "startTime": DATE_TIME,
                    "endTime": DATE_TIME,
                },
                anyOf=[{"required": ["calendarId"]}, {"required": ["userId"]}],
            ),
            _get_calendar_events,
        ),
        _tool(
            "calendars_get-appointment-notes",
            "appointment",
            "Read the notes of one appointment (event id from calendars_get-calendar-events). "
            "Returns `notes` and `hasMore`.",
            _schema(
                {"appointmentId": _id("appointment"), "limit": _limit(20), "offset": OFFSET},
                ["appointmentId"],
            ),
            _get_appointment_notes,
        ),
        _tool(
            "calendars_get-free-slots",
            "calendar",
            "Find open booking times of a calendar between two dates (at most 31 days). Returns "
            "one entry per date (YYYY-MM-DD) with its `slots` (start times).",
            _schema(
                {
                    "calendarId": _id("calendar"),
                    "startDate": DAY,
                    "endDate": DAY,
                    "timezone": _text("IANA time zone for the answer, e.g. America/Chicago.", 64),
                },
                ["calendarId", "startDate", "endDate"],
            ),
            _get_free_slots,
        ),
        _tool(
            "locations_get-location",
            "location",
            "Get the broker's own CRM account (sub-account): business name, address, e-mail, "
            "phone, time zone. Returns `location`.",
            _schema({}),
            _get_location,
        ),
        _tool(
            "locations_get-custom-fields",
            "location",
            "List the custom fields defined in the CRM (name, fieldKey, dataType). Use it to "
            "understand custom field ids in contacts. Returns `customFields`.",
            _schema({}),
            _get_custom_fields,
        ),
        _tool(
            "locations_get-tags",
            "location",
            "List the tags used in the CRM account. Use it to pick existing tag names before "
            "tagging. Returns `tags` (name).",
            _schema({}),
            _get_location_tags,
        ),
        _tool(
            "emails_fetch-template",
            "e-mail template",
            "List the e-mail templates, optionally searching by name. Returns `builders` "
            "(id, name, type, updatedAt) and `total`.",
            _schema(
                {
                    "search": _text("Text in the template name.", 200),
                    "limit": _limit(10),
                    "offset": OFFSET,
                }
            ),
            _fetch_templates,
        ),
        _tool(
            "payments_list-orders",
            "order",
            "List payment orders (what contacts bought), optionally for one contact or status. "
            "Returns `data` (amount, currency, status, contactId) and `totalCount`.",
            _schema(
                {
                    "contactId": _id("contact"),
                    "status": _text("Order status, e.g. completed.", 50),
                    "limit": _limit(10),
                    "offset": OFFSET,
                }
            ),
            _list_orders,
        ),
        _tool(
            "payments_get-order-by-id",
            "order",
            "Get one payment order by id, e.g. to answer what a contact bought. Returns the order "
            "(items, amount, currency, status, contactId).",
            _schema({"orderId": _id("order")}, ["orderId"]),
            _get_order,
        ),
        _tool(
            "payments_list-transactions",
            "transaction",
            "List payment transactions (charges), optionally for one contact. Returns `data` "
            "(amount, currency, status, createdAt) and `totalCount`.",
            _schema({"contactId": _id("contact"), "limit": _limit(10), "offset": OFFSET}),
            _list_transactions,
        ),
        _tool(
            "payments_get-transaction-by-id",
            "transaction",
            "Get one payment transaction (charge) by id, e.g. to check whether a payment went "
            "through. Returns the transaction (amount, currency, status, contactId, createdAt).",
            _schema({"transactionId": _id("transaction")}, ["transactionId"]),
            _get_transaction,
        ),
    ]
