"""HighLevel's operations as its OpenAPI description declares them, for the fake CRM to enforce.

Written from GoHighLevel/highlevel-api-docs (apps/contacts.json, conversations.json,
opportunities.json, calendars.json, locations.json, emails.json, payments.json, oauth.json,
users.json) for the operations the service calls; the files themselves are not copied.
Each `Operation` carries what the fake checks on every request:

- the method and path (a request to anything else answers NestJS' 404 `Cannot GET /x`);
- the `Version` header value the operation's parameters list (400 when missing or other);
- its query parameters: the required ones present, no undeclared one, numbers, booleans and
  enums well formed (422, class-validator's messages);
- its body: the required properties present, no undeclared property at any depth, and each
  property's type and enum (422);
- its success status and the top-level properties of its success answer (the fake refuses to
  answer a property the operation does not declare, so its shapes stay the spec's).

Where the spec is silent or contradicts itself, the choice is written next to the operation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

V_2021_07_28 = "2021-07-28"
V_2021_04_15 = "2021-04-15"

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
NULLABLE_STRING: Schema = {"type": "string", "nullable": True}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
ANY: Schema = {}


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def obj(properties: Mapping[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    return {"type": "object", "properties": dict(properties), "required": list(required)}


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    version: str
    status: int = 200
    query: Mapping[str, Schema] = field(default_factory=dict)
    required_query: tuple[str, ...] = ()
    body: Schema | None = None  # an object schema; None: the operation takes no body
    answer: tuple[str, ...] = ()  # top-level properties of the success answer; () = free-form
    form: bool = False  # application/x-www-form-urlencoded instead of JSON


# -- shared pieces ---------------------------------------------------------------------------

DND_SETTING = obj(
    {"status": enum("active", "inactive", "permanent"), "message": STRING, "code": STRING},
    ("status",),
)
DND_SETTINGS = obj({k: DND_SETTING for k in ("Call", "Email", "SMS", "WhatsApp", "GMB", "FB")})
INBOUND_DND = obj(
    {"all": obj({"status": enum("active", "inactive"), "message": STRING}, ("status",))}
)
# Every item variant of the contact bodies' `customFields` (TextField, NumericField, ...)
# declares id, key and field_value and requires `id`; field_value's type varies by variant.
CONTACT_CUSTOM_FIELD = obj({"id": STRING, "key": STRING, "field_value": ANY}, ("id",))
UPDATE_CONTACT: dict[str, Schema] = {  # UpdateContactDto
    "firstName": NULLABLE_STRING,
    "lastName": NULLABLE_STRING,
    "name": NULLABLE_STRING,
    "email": NULLABLE_STRING,
    "phone": NULLABLE_STRING,
    "address1": NULLABLE_STRING,
    "city": NULLABLE_STRING,
    "state": NULLABLE_STRING,
    "postalCode": STRING,
    "website": NULLABLE_STRING,
    "timezone": NULLABLE_STRING,
    "dnd": BOOLEAN,
    "dndSettings": DND_SETTINGS,
    "inboundDndSettings": INBOUND_DND,
    "tags": array(STRING),
    "customFields": array(CONTACT_CUSTOM_FIELD),
    "source": STRING,
    "dateOfBirth": ANY,
    "country": STRING,
    "assignedTo": STRING,
}
CREATE_CONTACT: dict[str, Schema] = {  # CreateContactDto: UpdateContactDto and these
    **UPDATE_CONTACT,
    "locationId": STRING,
    "gender": STRING,
    "companyName": NULLABLE_STRING,
}
CONTACT_ANSWER = ("contact",)
# DeleteContactsSuccessfulResponseDto, DeleteTaskSuccessfulResponseDto,
# DeleteNoteSuccessfulResponseDto, DeleteUpdateOpportunitySuccessfulResponseDto: `succeded`
# (HighLevel's spelling).
DELETED = ("succeded",)
OPPORTUNITY_STATUS = enum("open", "won", "lost", "abandoned", "all")
OPPORTUNITY_CUSTOM_FIELD = obj({"id": STRING, "key": STRING, "field_value": ANY})
MESSAGE_TYPES = (
    "TYPE_CALL",
    "TYPE_SMS",
    "TYPE_RCS",
    "TYPE_EMAIL",
    "TYPE_FACEBOOK",
    "TYPE_GMB",
    "TYPE_INSTAGRAM",
    "TYPE_WHATSAPP",
    "TYPE_ACTIVITY_APPOINTMENT",
    "TYPE_ACTIVITY_CONTACT",
    "TYPE_ACTIVITY_INVOICE",
    "TYPE_ACTIVITY_PAYMENT",
    "TYPE_ACTIVITY_OPPORTUNITY",
    "TYPE_LIVE_CHAT",
    "TYPE_INTERNAL_COMMENTS",
    "TYPE_ACTIVITY_EMPLOYEE_ACTION_LOG",
    "TYPE_TIKTOK",
    "TYPE_ACTIVITY_WHATSAPP",
    "TYPE_FORM_SUBMISSION",
)
PAYMENT_ALT = {"locationId": STRING, "altId": STRING}


OPERATIONS: tuple[Operation, ...] = (
    # -- oauth.json --------------------------------------------------------------------------
    Operation(
        "get-location-access-token",
        "POST",
        "/oauth/locationToken",
        V_2021_07_28,
        body=obj({"companyId": STRING, "locationId": STRING}, ("companyId", "locationId")),
        form=True,
        answer=(
            "access_token",
            "token_type",
            "expires_in",
            "scope",
            "locationId",
            "planId",
            "userId",
            "appId",
            "versionId",
        ),
    ),
    # -- contacts.json -----------------------------------------------------------------------
    # SearchBodyV2DTO declares no property and the 200 answer no schema; both follow the
    # operation's linked documentation ("Search Contacts"): locationId is required, the
    # answer is `{contacts, total}`.
    Operation(
        "search-contacts-advanced",
        "POST",
        "/contacts/search",
        V_2021_07_28,
        body=obj(
            {
                "locationId": STRING,
                "page": NUMBER,
                "pageLimit": NUMBER,
                "searchAfter": array(ANY),
                "query": STRING,
                "filters": array(ANY),
                "sort": array(ANY),
            },
            ("locationId",),
        ),
        answer=("contacts", "total"),
    ),
    Operation(  # deprecated by the spec in favour of search-contacts-advanced
        "get-contacts",
        "GET",
        "/contacts/",
        V_2021_07_28,
        query={
            "locationId": STRING,
            "startAfterId": STRING,
            "startAfter": NUMBER,
            "query": STRING,
            "limit": NUMBER,
        },
        required_query=("locationId",),
        answer=("contacts", "count"),
    ),
    Operation("get-contact", "GET", "/contacts/{contactId}", V_2021_07_28, answer=CONTACT_ANSWER),
    Operation(
        "create-contact",
        "POST",
        "/contacts/",
        V_2021_07_28,
        status=201,
        body=obj(CREATE_CONTACT, ("locationId",)),
        answer=CONTACT_ANSWER,
    ),
    Operation(
        "update-contact",
        "PUT",
        "/contacts/{contactId}",
        V_2021_07_28,
        body=obj(UPDATE_CONTACT),
        answer=("succeded", "contact"),
    ),
    Operation(
        "upsert-contact",
        "POST",
        "/contacts/upsert",
        V_2021_07_28,
        body=obj({**CREATE_CONTACT, "createNewIfDuplicateAllowed": BOOLEAN}, ("locationId",)),
        answer=("new", "contact", "traceId"),
    ),
    Operation(
        "add-tags",
        "POST",
        "/contacts/{contactId}/tags",
        V_2021_07_28,
        status=201,
        body=obj({"tags": array(STRING)}, ("tags",)),
        answer=("tags",),
    ),
    Operation(
        "remove-tags",
        "DELETE",
        "/contacts/{contactId}/tags",
        V_2021_07_28,
        body=obj({"tags": array(STRING)}, ("tags",)),
        answer=("tags",),
    ),
    Operation(
        "delete-contact",
        "DELETE",
        "/contacts/{contactId}",
        V_2021_07_28,
        answer=DELETED,
    ),
    Operation(
        "get-all-tasks", "GET", "/contacts/{contactId}/tasks", V_2021_07_28, answer=("tasks",)
    ),
    Operation(
        "get-task", "GET", "/contacts/{contactId}/tasks/{taskId}", V_2021_07_28, answer=("task",)
    ),
    Operation(
        "delete-task",
        "DELETE",
        "/contacts/{contactId}/tasks/{taskId}",
        V_2021_07_28,
        answer=DELETED,
    ),
    Operation(
        "create-task",
        "POST",
        "/contacts/{contactId}/tasks",
        V_2021_07_28,
        status=201,
        body=obj(
            {
                "title": STRING,
                "body": STRING,
                "dueDate": STRING,
                "completed": BOOLEAN,
                "assignedTo": STRING,
            },
            ("title", "dueDate", "completed"),
        ),
        answer=("task",),
    ),
    Operation(
        "get-all-notes", "GET", "/contacts/{contactId}/notes", V_2021_07_28, answer=("notes",)
    ),
    Operation(
        "get-note", "GET", "/contacts/{contactId}/notes/{id}", V_2021_07_28, answer=("note",)
    ),
    Operation(
        "delete-note", "DELETE", "/contacts/{contactId}/notes/{id}", V_2021_07_28, answer=DELETED
    ),
    Operation(
        "create-note",
        "POST",
        "/contacts/{contactId}/notes",
        V_2021_07_28,
        status=201,
        body=obj(
            {
                "userId": STRING,
                "body": STRING,
                "title": STRING,
                "color": STRING,
                "pinned": BOOLEAN,
            },
            ("body",),
        ),
        answer=("note",),
    ),
    # -- conversations.json ------------------------------------------------------------------
    Operation(
        "search-conversation",
        "GET",
        "/conversations/search",
        V_2021_04_15,
        query={
            "locationId": STRING,
            "contactId": STRING,
            "assignedTo": STRING,
            "followers": STRING,
            "mentions": STRING,
            "query": STRING,
            "sort": enum("asc", "desc"),
            "startAfterDate": ANY,
            "id": STRING,
            "limit": NUMBER,
            "lastMessageType": STRING,
            "lastMessageAction": enum("automated", "manual"),
            "lastMessageDirection": enum("inbound", "outbound"),
            "status": enum("all", "read", "unread", "starred", "recents"),
            "sortBy": enum(
                "last_manual_message_date",
                "last_message_date",
                "score_profile",
                "overdue_at",
                "due_at",
            ),
            "sortScoreProfile": STRING,
            "scoreProfile": STRING,
            "scoreProfileMin": NUMBER,
            "scoreProfileMax": NUMBER,
            "startDate": NUMBER,
            "endDate": NUMBER,
        },
        required_query=("locationId",),
        answer=("conversations", "total"),
    ),
    Operation(
        "get-messages",
        "GET",
        "/conversations/{conversationId}/messages",
        V_2021_04_15,
        query={"lastMessageId": STRING, "limit": NUMBER, "type": enum(*MESSAGE_TYPES)},
        answer=("lastMessageId", "nextPage", "messages"),
    ),
    # SendMessageBodyDto types `subType` as an object but documents the example "Email": the
    # fake takes any value, as long as it is there (it is required).
    Operation(
        "send-a-new-message",
        "POST",
        "/conversations/messages",
        V_2021_04_15,
        body=obj(
            {
                "type": enum(
                    "SMS", "RCS", "Email", "WhatsApp", "IG", "FB", "Custom", "Live_Chat", "TIKTOK"
                ),
                "subType": ANY,
                "contactId": STRING,
                "appointmentId": STRING,
                "attachments": array(STRING),
                "emailFrom": STRING,
                "emailCc": array(STRING),
                "emailBcc": array(STRING),
                "html": STRING,
                "message": STRING,
                "subject": STRING,
                "replyMessageId": STRING,
                "templateId": STRING,
                "threadId": STRING,
                "scheduledTimestamp": NUMBER,
                "conversationProviderId": STRING,
                "emailTo": STRING,
                "customSubtypeId": STRING,
                "emailReplyMode": enum("reply", "reply_all"),
                "fromNumber": STRING,
                "toNumber": STRING,
                "forward": ANY,
                "status": enum("delivered", "failed", "pending", "read"),
                "usesNativeSchedulingAi": BOOLEAN,
                "optimizationPeriod": enum("24h", "48h", "72h"),
            },
            ("type", "subType", "contactId", "status"),
        ),
        answer=(
            "conversationId",
            "emailMessageId",
            "messageId",
            "messageIds",
            "msg",
            "forwardData",
            "status",
        ),
    ),
    # -- opportunities.json ------------------------------------------------------------------
    Operation(
        "search-opportunity",
        "GET",
        "/opportunities/search",
        V_2021_07_28,
        query={
            "q": STRING,
            "location_id": STRING,
            "pipeline_id": STRING,
            "pipeline_stage_id": STRING,
            "contact_id": STRING,
            "status": OPPORTUNITY_STATUS,
            "assigned_to": STRING,
            "campaignId": STRING,
            "id": STRING,
            "order": STRING,
            "endDate": STRING,
            "startAfter": STRING,
            "startAfterId": STRING,
            "date": STRING,
            "country": STRING,
            "page": NUMBER,
            "limit": NUMBER,
            "getTasks": BOOLEAN,
            "getNotes": BOOLEAN,
            "getCalendarEvents": BOOLEAN,
        },
        required_query=("location_id",),
        answer=("opportunities", "meta", "aggregations"),
    ),
    Operation(
        "get-opportunity", "GET", "/opportunities/{id}", V_2021_07_28, answer=("opportunity",)
    ),
    Operation("delete-opportunity", "DELETE", "/opportunities/{id}", V_2021_07_28, answer=DELETED),
    Operation(
        "create-opportunity",
        "POST",
        "/opportunities/",
        V_2021_07_28,
        status=201,
        body=obj(
            {
                "pipelineId": STRING,
                "locationId": STRING,
                "name": STRING,
                "pipelineStageId": STRING,
                "status": OPPORTUNITY_STATUS,
                "contactId": STRING,
                "monetaryValue": NUMBER,
                "assignedTo": STRING,
                "customFields": array(OPPORTUNITY_CUSTOM_FIELD),
            },
            ("pipelineId", "locationId", "name", "status", "contactId"),
        ),
        answer=("opportunity",),
    ),
    Operation(
        "update-opportunity",
        "PUT",
        "/opportunities/{id}",
        V_2021_07_28,
        body=obj(
            {
                "pipelineId": STRING,
                "name": STRING,
                "pipelineStageId": STRING,
                "status": OPPORTUNITY_STATUS,
                "monetaryValue": NUMBER,
                "assignedTo": STRING,
                "customFields": array(OPPORTUNITY_CUSTOM_FIELD),
            }
        ),
        answer=("opportunity",),
    ),
    Operation(
        "get-pipelines",
        "GET",
        "/opportunities/pipelines",
        V_2021_07_28,
        query={"locationId": STRING},
        required_query=("locationId",),
        answer=("pipelines",),
    ),
    # -- calendars.json ----------------------------------------------------------------------
    Operation(
        "get-calendars",
        "GET",
        "/calendars/",
        V_2021_04_15,
        query={"locationId": STRING, "groupId": STRING, "showDrafted": BOOLEAN},
        required_query=("locationId",),
        answer=("calendars",),
    ),
    Operation(
        "get-calendar-events",
        "GET",
        "/calendars/events",
        V_2021_04_15,
        query={
            "locationId": STRING,
            "userId": STRING,
            "calendarId": STRING,
            "groupId": STRING,
            "startTime": STRING,
            "endTime": STRING,
        },
        required_query=("locationId", "startTime", "endTime"),
        answer=("events",),
    ),
    Operation(
        "get-appointment-notes",
        "GET",
        "/calendars/appointments/{appointmentId}/notes",
        V_2021_04_15,
        query={"limit": NUMBER, "offset": NUMBER},
        required_query=("limit", "offset"),
        answer=("notes", "hasMore"),
    ),
    Operation(  # the 200 answer's schema declares no property: one entry per date
        "get-slots",
        "GET",
        "/calendars/{calendarId}/free-slots",
        V_2021_04_15,
        query={
            "startDate": NUMBER,
            "endDate": NUMBER,
            "timezone": STRING,
            "userId": STRING,
            "userIds": STRING,
        },
        required_query=("startDate", "endDate"),
    ),
    # -- locations.json ----------------------------------------------------------------------
    Operation("get-location", "GET", "/locations/{locationId}", V_2021_07_28, answer=("location",)),
    Operation(
        "get-custom-fields",
        "GET",
        "/locations/{locationId}/customFields",
        V_2021_07_28,
        query={"model": enum("contact", "opportunity", "all")},
        answer=("customFields",),
    ),
    Operation(
        "get-location-tags",
        "GET",
        "/locations/{locationId}/tags",
        V_2021_07_28,
        answer=("tags",),
    ),
    # -- emails.json -------------------------------------------------------------------------
    # FetchBuilderSuccesfulResponseDto declares one template's fields and no list: the fake
    # answers the first match at `offset` in that shape, and 404 (declared) when none matches.
    Operation(
        "fetch-template",
        "GET",
        "/emails/builder",
        V_2021_07_28,
        query={
            "locationId": STRING,
            "limit": STRING,
            "offset": STRING,
            "search": STRING,
            "sortByDate": STRING,
            "archived": STRING,
            "builderVersion": enum("1", "2"),
            "name": STRING,
            "parentId": STRING,
            "originId": STRING,
            "templatesOnly": STRING,
        },
        required_query=("locationId",),
        answer=(
            "name",
            "updatedBy",
            "isPlainText",
            "lastUpdated",
            "dateAdded",
            "previewUrl",
            "id",
            "version",
            "templateType",
        ),
    ),
    # -- payments.json -----------------------------------------------------------------------
    Operation(
        "list-orders",
        "GET",
        "/payments/orders",
        V_2021_07_28,
        query={
            **PAYMENT_ALT,
            "status": STRING,
            "paymentStatus": enum("paid", "unpaid", "refunded", "partially_paid"),
            "paymentMode": STRING,
            "startAt": STRING,
            "endAt": STRING,
            "search": STRING,
            "contactId": STRING,
            "funnelProductIds": STRING,
            "sourceId": STRING,
            "limit": NUMBER,
            "offset": NUMBER,
        },
        required_query=("altId",),
        answer=("data", "totalCount"),
    ),
    Operation(
        "get-order-by-id",
        "GET",
        "/payments/orders/{orderId}",
        V_2021_07_28,
        query=PAYMENT_ALT,
        required_query=("altId",),
        answer=(
            "_id",
            "altId",
            "altType",
            "contactId",
            "currency",
            "amount",
            "status",
            "liveMode",
            "createdAt",
            "updatedAt",
            "fulfillmentStatus",
            "contactSnapshot",
            "amountSummary",
            "source",
            "items",
            "coupon",
            "trackingId",
            "fingerprint",
            "meta",
            "markAsTest",
            "traceId",
            "automaticTaxesCalculated",
            "taxCalculationProvider",
            "createdBy",
        ),
    ),
    Operation(
        "list-transactions",
        "GET",
        "/payments/transactions",
        V_2021_07_28,
        query={
            **PAYMENT_ALT,
            "altType": STRING,
            "paymentMode": STRING,
            "startAt": STRING,
            "endAt": STRING,
            "entitySourceType": STRING,
            "entitySourceSubType": STRING,
            "search": STRING,
            "subscriptionId": STRING,
            "entityId": STRING,
            "contactId": STRING,
            "limit": NUMBER,
            "offset": NUMBER,
        },
        required_query=("altId", "altType"),
        answer=("data", "totalCount"),
    ),
    Operation(
        "get-transaction-by-id",
        "GET",
        "/payments/transactions/{transactionId}",
        V_2021_07_28,
        query={**PAYMENT_ALT, "altType": STRING},
        required_query=("altId", "altType"),
        answer=(
            "_id",
            "altType",
            "altId",
            "contactId",
            "contactSnapshot",
            "currency",
            "amount",
            "status",
            "liveMode",
            "createdAt",
            "updatedAt",
            "entityType",
            "entityId",
            "entitySource",
            "chargeId",
            "chargeSnapshot",
            "invoiceId",
            "subscriptionId",
            "paymentProvider",
            "ipAddress",
            "meta",
            "markAsTest",
            "isParent",
            "amountRefunded",
            "receiptId",
            "qboSynced",
            "qboResponse",
            "traceId",
            "mergedFromContactId",
            "createdBy",
        ),
    ),
    # -- users.json --------------------------------------------------------------------------
    Operation(
        "get-user-by-location",
        "GET",
        "/users/",
        V_2021_07_28,
        query={"locationId": STRING},
        required_query=("locationId",),
        answer=("users",),
    ),
)

BY_ID = {operation.operation_id: operation for operation in OPERATIONS}


# -- checking a request ------------------------------------------------------------------------


def query_errors(operation: Operation, params: Mapping[str, str]) -> list[str]:
    """class-validator's messages for the query string, as HighLevel's 422 lists them."""
    errors = [f"property {name} should not exist" for name in params if name not in operation.query]
    for name in operation.required_query:
        if not params.get(name):
            errors.append(f"{name} should not be empty")
    for name, value in params.items():
        declared = operation.query.get(name)
        if declared is not None and value != "":
            errors += _scalar_errors(name, _from_query(declared, value), declared)
    return errors


def body_errors(operation: Operation, body: Any) -> list[str]:
    """The body's violations of the operation's schema; none when it takes no body."""
    if operation.body is None:
        return []
    if not isinstance(body, dict):
        body = {}
    return _object_errors(operation.body, body, "")


def answer_problems(operation: Operation, answer: Any) -> list[str]:
    """Top-level properties of an answer that the operation's success schema does not declare."""
    if not operation.answer or not isinstance(answer, dict):
        return []
    return [name for name in answer if name not in operation.answer]


def _from_query(declared: Schema, value: str) -> Any:
    """A query value as the NestJS DTO sees it after its transform (numbers, booleans)."""
    kind = declared.get("type")
    if kind == "number":
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "boolean":
        return {"true": True, "false": False}.get(value, value)
    return value


def _object_errors(schema: Schema, value: dict[str, Any], prefix: str) -> list[str]:
    properties: dict[str, Schema] = schema.get("properties", {})
    errors = [f"{prefix}property {key} should not exist" for key in value if key not in properties]
    for key in schema.get("required", []):
        if value.get(key) is None or value.get(key) == "":
            errors.append(f"{prefix}{key} should not be empty")
    for key, item in value.items():
        declared = properties.get(key)
        # null passes an optional property (class-validator's IsOptional), as HighLevel takes it
        if declared is not None and item is not None:
            errors += _value_errors(f"{prefix}{key}", item, declared)
    return errors


def _value_errors(name: str, value: Any, declared: Schema) -> list[str]:
    kind = declared.get("type")
    if kind == "object" and "properties" in declared:
        if not isinstance(value, dict):
            return [f"{name} must be an object"]
        return _object_errors(declared, value, f"{name}.")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{name} must be an array"]
        items: Schema = declared.get("items", {})
        errors: list[str] = []
        for index, item in enumerate(value):
            errors += _value_errors(f"{name}.{index}", item, items)
        return errors
    return _scalar_errors(name, value, declared)


def _scalar_errors(name: str, value: Any, declared: Schema) -> list[str]:
    kind = declared.get("type")
    if "enum" in declared and value not in declared["enum"]:
        return [f"{name} must be one of the following values: {', '.join(declared['enum'])}"]
    if kind == "string" and not isinstance(value, str):
        return [f"{name} must be a string"]
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return [f"{name} must be a number conforming to the specified constraints"]
    if kind == "boolean" and not isinstance(value, bool):
        return [f"{name} must be a boolean value"]
    return []
