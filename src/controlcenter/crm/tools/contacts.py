"""Contacts (HighLevel app `contacts`, Version 2021-07-28): people, their tags, tasks and notes."""

from __future__ import annotations

from typing import Any

from controlcenter.common.times import iso
from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import (
    DATE_TIME,
    Paging,
    by_id,
    crm_tool,
    id_arg,
    moment,
    path,
    pick,
    require_one,
    schema,
    text,
)

TAGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 100},
    "minItems": 1,
    "maxItems": 50,
    "uniqueItems": True,
    "description": "Tag names.",
}
# What UpdateContactDto declares of a contact; CreateContactDto and UpsertContactDto also take
# `companyName`, which an update does not.
UPDATABLE: dict[str, Any] = {
    "firstName": text("First name.", 100),
    "lastName": text("Last name.", 100),
    "name": text("Full name, when first and last name are not separate.", 200),
    "email": {"type": "string", "format": "email", "maxLength": 320, "description": "E-mail."},
    "phone": text("Phone number in E.164 form, e.g. +15551234567.", 30),
    "address1": text("Street address.", 300),
    "city": text("City.", 100),
    "state": text("State or region.", 100),
    "postalCode": text("Postal code.", 20),
    "country": text("Two-letter country code, e.g. US.", 2),
    "website": text("Website address.", 300),
    "source": text("Where the contact came from, e.g. 'referral'.", 100),
}
CREATABLE: dict[str, Any] = {**UPDATABLE, "companyName": text("Company (business) name.", 200)}
CONTACT_ID = {"contactId": id_arg("contact")}
NEEDS_EMAIL_OR_PHONE = "A contact needs an e-mail or a phone: give `email` or `phone`."


CONTACT = "/contacts/{contactId}"
PAGING = Paging(20)


def new_contact(crm: CrmClient, args: dict[str, Any]) -> dict[str, Any]:
    """The body of a create or an upsert (CreateContactDto, UpsertContactDto: the same
    fields), once it has what finds the contact again: an e-mail or a phone."""
    require_one(args, "email", "phone", why=NEEDS_EMAIL_OR_PHONE)
    return {**pick(args, *CREATABLE, "tags"), "locationId": crm.location_id}


@crm_tool(
    "contacts_get-contacts",
    "search-contacts-advanced",  # POST /contacts/search; GET /contacts/ is deprecated
    what="contact",
    description=(
        "Search the broker's CRM contacts by name, e-mail, phone or company. Use it to find "
        "a person before acting on them, or to list recent contacts. Returns `contacts` "
        "(id, firstName, lastName, email, phone, companyName, tags, ...) and `total`."
    ),
    schema=schema(
        {
            "query": text("Text to look for in name, e-mail, phone or company.", 200),
            **PAGING.schema,
        }
    ),
)
async def get_contacts(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {"locationId": crm.location_id, "page": 1, "pageLimit": PAGING.limit(args)}
    body.update(pick(args, "query"))
    return await crm.post("/contacts/search", body, idempotent=True)


@crm_tool(
    "contacts_get-contact",
    "get-contact",
    what="contact",
    description=(
        "Get one contact's full record by id (all fields, tags, custom fields). Use it when "
        "you have a contactId, e.g. from contacts_get-contacts. Returns `contact`."
    ),
    schema=by_id("contactId", "contact"),
)
async def get_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(path(CONTACT, args))


@crm_tool(
    "contacts_create-contact",
    "create-contact",
    what="contact",
    description=(
        "Create a new contact. Needs an e-mail or a phone. Fails when a contact with the same "
        "e-mail or phone exists (the error names it): then update that one instead, or use "
        "contacts_upsert-contact. Returns the new `contact`."
    ),
    schema=schema({**CREATABLE, "tags": TAGS}),
)
async def create_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post("/contacts/", new_contact(crm, args))


@crm_tool(
    "contacts_update-contact",
    "update-contact",
    what="contact",
    description=(
        "Change fields of an existing contact. Only the fields given change. To add or "
        "remove single tags use contacts_add-tags / contacts_remove-tags (a `tags` list here "
        "replaces all tags). The company name cannot be changed here: use "
        "contacts_upsert-contact with the contact's e-mail and `companyName`. Returns the "
        "updated `contact`."
    ),
    schema=schema({**CONTACT_ID, **UPDATABLE, "tags": TAGS}, ["contactId"], minProperties=2),
)
async def update_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.put(path(CONTACT, args), pick(args, *UPDATABLE, "tags"))


@crm_tool(
    "contacts_upsert-contact",
    "upsert-contact",
    what="contact",
    description=(
        "Create a contact, or update the existing one with the same e-mail (or phone). Needs "
        "an e-mail or a phone. Use it when unsure whether the person is already in the CRM. "
        "Returns `contact` and `new` (true when it was created)."
    ),
    schema=schema({**CREATABLE, "tags": TAGS}),
)
async def upsert_contact(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post("/contacts/upsert", new_contact(crm, args), idempotent=True)


@crm_tool(
    "contacts_add-tags",
    "add-tags",
    what="contact",
    description=(
        "Add tags to a contact, keeping the tags it already has. Returns the contact's `tags`."
    ),
    schema=schema({**CONTACT_ID, "tags": TAGS}, ["contactId", "tags"]),
)
async def add_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post(path(CONTACT + "/tags", args), {"tags": args["tags"]}, idempotent=True)


@crm_tool(
    "contacts_remove-tags",
    "remove-tags",
    what="contact",
    description=(
        "Remove tags from a contact; other tags stay. Returns the contact's remaining `tags`."
    ),
    schema=schema({**CONTACT_ID, "tags": TAGS}, ["contactId", "tags"]),
)
async def remove_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.delete(path(CONTACT + "/tags", args), {"tags": args["tags"]})


@crm_tool(
    "contacts_get-all-tasks",
    "get-all-tasks",
    what="contact",
    description=(
        "List the tasks (to-dos, follow-ups) of one contact, with due dates and whether they "
        "are completed. Returns `tasks` (id, title, body, dueDate, completed)."
    ),
    schema=by_id("contactId", "contact"),
)
async def get_tasks(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(path(CONTACT + "/tasks", args))


@crm_tool(
    "contacts_create-task",
    "create-task",
    what="contact",
    description=(
        "Create a follow-up task on a contact, due at a given time. Returns the new `task`."
    ),
    schema=schema(
        {
            **CONTACT_ID,
            "title": text("What to do, in a few words.", 200),
            "body": text("Details.", 5000),
            "dueDate": DATE_TIME,
            "completed": {"type": "boolean", "description": "Already done (default false)."},
        },
        ["contactId", "title", "dueDate"],
    ),
)
async def create_task(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {
        "title": args["title"],
        "dueDate": iso(moment(args["dueDate"], "dueDate"), "auto"),
        "completed": args.get("completed", False),  # required by the operation
        **pick(args, "body"),
    }
    return await crm.post(path(CONTACT + "/tasks", args), body)


@crm_tool(
    "contacts_get-all-notes",
    "get-all-notes",
    what="contact",
    description=(
        "List the notes written on a contact (call summaries, requirements, history). "
        "Returns `notes` (id, body, dateAdded)."
    ),
    schema=by_id("contactId", "contact"),
)
async def get_notes(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(path(CONTACT + "/notes", args))


@crm_tool(
    "contacts_create-note",
    "create-note",
    what="contact",
    description=(
        "Add a note to a contact, e.g. a summary of a call or the space they need. Returns "
        "the new `note`."
    ),
    schema=schema({**CONTACT_ID, "body": text("The note's text.", 10000)}, ["contactId", "body"]),
)
async def create_note(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.post(path(CONTACT + "/notes", args), {"body": args["body"]})


TOOLS = (
    get_contacts,
    get_contact,
    create_contact,
    update_contact,
    upsert_contact,
    add_tags,
    remove_tags,
    get_tasks,
    create_task,
    get_notes,
    create_note,
)
