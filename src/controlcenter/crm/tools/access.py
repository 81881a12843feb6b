"""Which built-in CRM tools read and which write (under `toolApproval: "writes"` a writing tool
waits for the user's approval): the one place this is decided. A tool that creates, updates,
sends or deletes anything in the CRM writes; `crm_tools()` refuses a tool that is in neither
list."""

from __future__ import annotations

READS: frozenset[str] = frozenset(
    {
        "calendars_get-appointment-notes",
        "calendars_get-calendar-events",
        "calendars_get-calendars",
        "calendars_get-free-slots",
        "contacts_get-all-notes",
        "contacts_get-all-tasks",
        "contacts_get-contact",
        "contacts_get-contacts",
        "conversations_get-messages",
        "conversations_search-conversation",
        "emails_fetch-template",
        "locations_get-custom-fields",
        "locations_get-location",
        "locations_get-tags",
        "opportunities_get-opportunity",
        "opportunities_get-pipelines",
        "opportunities_search-opportunity",
        "payments_get-order-by-id",
        "payments_get-transaction-by-id",
        "payments_list-orders",
        "payments_list-transactions",
    }
)
WRITES: frozenset[str] = frozenset(
    {
        "contacts_add-tags",
        "contacts_create-contact",
        "contacts_create-note",
        "contacts_create-task",
        "contacts_remove-tags",
        "contacts_update-contact",
        "contacts_upsert-contact",
        "conversations_send-a-new-message",
        "opportunities_create-opportunity",
        "opportunities_update-opportunity",
    }
)


class UnclassifiedToolError(RuntimeError):
    pass


def is_read_only(name: str) -> bool:
    if name in READS:
        return True
    if name in WRITES:
        return False
    raise UnclassifiedToolError(f"CRM tool {name} is neither a read nor a write (access.py)")
