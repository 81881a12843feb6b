"""The built-in CRM tools' titles: what a broker reads on a tool card instead of the tool's
name. Every tool of the catalogue has one (`crm_tools()` refuses a tool without)."""

from __future__ import annotations

TITLES: dict[str, str] = {
    "calendars_get-appointment-notes": "Read appointment notes",
    "calendars_get-calendar-events": "Look up calendar events",
    "calendars_get-calendars": "List calendars",
    "calendars_get-free-slots": "Find free time slots",
    "contacts_add-tags": "Tag a contact",
    "contacts_create-contact": "Create a contact",
    "contacts_create-note": "Add a note to a contact",
    "contacts_create-task": "Add a task to a contact",
    "contacts_get-all-notes": "Read a contact's notes",
    "contacts_get-all-tasks": "Read a contact's tasks",
    "contacts_get-contact": "Look up a contact",
    "contacts_get-contacts": "Search contacts",
    "contacts_remove-tags": "Remove tags from a contact",
    "contacts_update-contact": "Update a contact",
    "contacts_upsert-contact": "Create or update a contact",
    "conversations_get-messages": "Read a conversation's messages",
    "conversations_search-conversation": "Search contact conversations",
    "conversations_send-a-new-message": "Send a message",
    "emails_fetch-template": "List e-mail templates",
    "locations_get-custom-fields": "List custom fields",
    "locations_get-location": "Look up the account",
    "locations_get-tags": "List tags",
    "opportunities_create-opportunity": "Create a deal",
    "opportunities_get-opportunity": "Look up a deal",
    "opportunities_get-pipelines": "List pipelines",
    "opportunities_search-opportunity": "Search deals",
    "opportunities_update-opportunity": "Update a deal",
    "payments_get-order-by-id": "Look up an order",
    "payments_get-transaction-by-id": "Look up a transaction",
    "payments_list-orders": "List orders",
    "payments_list-transactions": "List transactions",
}
