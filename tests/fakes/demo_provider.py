"""The demo's model: answers like Claude through the Anthropic Messages API, from keywords.

It plugs into the strict Anthropic fake (`FakeAnthropic.responder`), so every request the
service sends in the demo is checked as the real API would check it. From the user's question
it picks topics by keyword ("contacts", "tasks", "calendar", "pipeline", "conversations"),
calls the CRM tools the service offers for them (several in one turn when several topics are
asked about, and a second round where a first result is needed, e.g. a calendar's id), then
writes a Markdown answer from what the tools returned. It is stateless: each request's history
says how far the turn has got. Every prompt the chat page suggests, and every one of its own
help text, gets a fitting call and answer; between them the answers show a list (contacts,
calendar), a table (pipeline, tasks) and a code block (the contacts as CSV, with the page's
`Copy code`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakes.llm import Reply, ToolUse

REPLY_DELAY_S = 0.35  # long enough to see the answer arrive step by step in the demo

TOPICS: dict[str, tuple[str, ...]] = {
    "tasks": ("task", "to-do", "todo", "follow-up", "follow up", "due"),
    "contacts": ("contact", "client", "customer", "people", "lead"),
    "calendar": ("calendar", "appointment", "tour", "schedule", "meeting", "agenda"),
    "pipeline": ("pipeline", "deal", "opportunit", "forecast"),
    "conversations": ("conversation", "inbox", "messages", "replied", "reply"),
}


@dataclass
class Round:
    """One assistant turn's tool calls and, once sent back, their outcomes by call id."""

    uses: list[dict[str, Any]]
    outcomes: dict[str, tuple[bool, Any]] = field(default_factory=dict)

    def outcome(self, name: str) -> tuple[bool, Any] | None:
        for use in self.uses:
            if use["name"] == name and use["id"] in self.outcomes:
                return self.outcomes[use["id"]]
        return None


Step = Callable[[list[Round], set[str]], list[ToolUse]]


def demo_responder(body: dict[str, Any]) -> Reply:
    """The next answer for this request: more tool calls, or the written answer."""
    offered = {str(tool.get("name")) for tool in body.get("tools") or []}
    question, rounds = read_turn(body.get("messages") or [])
    topics = [t for t, words in TOPICS.items() if any(w in question.lower() for w in words)]
    if "tasks" in topics and "contacts" in topics:
        topics.remove("contacts")  # "tasks of my contacts": the tasks read the contacts first
    if not topics:
        return Reply(text=HELP, delay_s=REPLY_DELAY_S)
    plans = [PLANS[topic] for topic in topics]
    depth = len(rounds)
    uses = [use for plan in plans if depth < len(plan) for use in plan[depth](rounds, offered)]
    if uses:
        intro = f"Let me look that up in your CRM ({', '.join(topics)})." if depth == 0 else ""
        return Reply(text=intro, tool_uses=uses, delay_s=REPLY_DELAY_S)
    sections = [WRITERS[topic](rounds, offered) for topic in topics]
    return Reply(text="\n\n".join(sections), delay_s=REPLY_DELAY_S)


def read_turn(messages: list[dict[str, Any]]) -> tuple[str, list[Round]]:
    """The user's latest question and the tool rounds that followed it."""
    question = ""
    rounds: list[Round] = []
    for message in messages:
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if uses:
                rounds.append(Round(uses))
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if not results:
            question = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            rounds = []
        elif rounds:
            for block in results:
                rounds[-1].outcomes[str(block.get("tool_use_id"))] = _outcome(block)
    return question, rounds


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _outcome(block: dict[str, Any]) -> tuple[bool, Any]:
    """`Tool <id> result: <JSON>` or `Tool <id> error: <text>` (the service's line)."""
    text = " ".join(str(b.get("text", "")) for b in _blocks(block.get("content")))
    _, found, value = text.partition(" result: ")
    if found:
        try:
            return True, json.loads(value)
        except ValueError:
            return True, value
    _, _, error = text.partition(" error: ")
    return False, error or text


# Each tool the demo uses: its catalogue name, and a fragment that finds it if it is renamed.
CONTACTS = ("contacts_get-contacts", "get-contacts")
CALENDARS = ("calendars_get-calendars", "get-calendars")
EVENTS = ("calendars_get-calendar-events", "get-calendar-events")
DEALS = ("opportunities_search-opportunity", "search-opportunit")
CONVERSATIONS = ("conversations_search-conversation", "search-conversation")
TASKS = ("contacts_get-all-tasks", "get-all-tasks")
TASK_CONTACTS = 5  # the contacts whose tasks one answer reads


def _tool(offered: set[str], spec: tuple[str, str]) -> str:
    """The offered tool of that name, else one whose name has the fragment."""
    preferred, fragment = spec
    if preferred in offered:
        return preferred
    return next((name for name in sorted(offered) if fragment in name), preferred)


# -- what each topic calls --------------------------------------------------------------------


def _contacts(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    return [ToolUse(_tool(offered, CONTACTS), {"limit": 10})]


def _tasks(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    """Each listed contact's tasks (the first round's contact search gave their ids)."""
    contacts = _contact_list(rounds, offered)
    name = _tool(offered, TASKS)
    return [ToolUse(name, {"contactId": c["id"]}) for c in contacts[:TASK_CONTACTS] if "id" in c]


def _contact_list(rounds: list[Round], offered: set[str]) -> list[dict[str, Any]]:
    found = rounds[0].outcome(_tool(offered, CONTACTS)) if rounds else None
    value = found[1] if found and found[0] else {}
    return list(value.get("contacts", [])) if isinstance(value, dict) else []


def _calendars(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    return [ToolUse(_tool(offered, CALENDARS), {})]


def _events(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    found = rounds[0].outcome(_tool(offered, CALENDARS))
    calendars = found[1].get("calendars", []) if found and found[0] else []
    now = datetime.now(UTC).replace(microsecond=0)
    window = {
        "startTime": now.isoformat().replace("+00:00", "Z"),
        "endTime": (now + timedelta(days=14)).isoformat().replace("+00:00", "Z"),
    }
    name = _tool(offered, EVENTS)
    return [ToolUse(name, {"calendarId": c["id"], **window}) for c in calendars[:3]]


def _deals(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    name = _tool(offered, DEALS)
    return [ToolUse(name, {"limit": 20})]


def _conversations(rounds: list[Round], offered: set[str]) -> list[ToolUse]:
    name = _tool(offered, CONVERSATIONS)
    return [ToolUse(name, {"limit": 10})]


PLANS: dict[str, list[Step]] = {
    "contacts": [_contacts],
    "tasks": [_contacts, _tasks],
    "calendar": [_calendars, _events],
    "pipeline": [_deals],
    "conversations": [_conversations],
}


# -- what each topic writes -------------------------------------------------------------------


def _records(
    rounds: list[Round], offered: set[str], specs: tuple[tuple[str, str], ...], key: str
) -> list[dict[str, Any]] | str:
    """The `key` records the named tools returned, or the sentence saying one failed."""
    names = {_tool(offered, spec) for spec in specs}
    outcomes = [
        r.outcomes[u["id"]]
        for r in rounds
        for u in r.uses
        if u["name"] in names and u["id"] in r.outcomes
    ]
    errors = [str(value) for ok, value in outcomes if not ok]
    if errors:
        return f"I could not read your {key}: {errors[0]}"
    return [item for ok, v in outcomes if ok and isinstance(v, dict) for item in v.get(key, [])]


def _write_contacts(rounds: list[Round], offered: set[str]) -> str:
    contacts = _records(rounds, offered, (CONTACTS,), "contacts")
    if isinstance(contacts, str):
        return contacts
    if not contacts:
        return "**Contacts:** none in your CRM yet."
    lines = [f"**Your contacts** ({len(contacts)}):", ""]
    csv = ["name,company,email"]
    for c in contacts:
        name = _name(c)
        extra = " · ".join(str(p) for p in (c.get("companyName"), c.get("email")) if p)
        tags = ", ".join(f"`{t}`" for t in c.get("tags") or [])
        lines.append(
            f"- **{name or 'Unnamed'}**"
            + (f", {extra}" if extra else "")
            + (f" ({tags})" if tags else "")
        )
        csv.append(",".join(_csv(v) for v in (name, c.get("companyName"), c.get("email"))))
    lines += ["", "The same as CSV, for a spreadsheet:", "", "```csv", *csv, "```"]
    return "\n".join(lines)


def _name(contact: dict[str, Any]) -> str:
    return str(
        contact.get("contactName")
        or " ".join(p for p in (contact.get("firstName"), contact.get("lastName")) if p)
    )


def _csv(value: Any) -> str:
    text = str(value or "")
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


def _write_tasks(rounds: list[Round], offered: set[str]) -> str:
    tasks = _records(rounds, offered, (TASKS,), "tasks")
    if isinstance(tasks, str):
        return tasks
    names = {c.get("id"): _name(c) for c in _contact_list(rounds, offered)}
    due = [t for t in tasks if not t.get("completed")]
    if not due:
        return "**Tasks:** nothing due for your contacts."
    lines = [f"**Tasks due** ({len(due)}):", "", "| Due | Task | Contact |", "|---|---|---|"]
    for task in sorted(due, key=lambda t: str(t.get("dueDate"))):
        who = names.get(task.get("contactId")) or "A contact"
        lines.append(f"| {_when(str(task.get('dueDate', '')))} | {task.get('title')} | {who} |")
    return "\n".join(lines)


def _write_calendar(rounds: list[Round], offered: set[str]) -> str:
    events = _records(rounds, offered, (CALENDARS, EVENTS), "events")
    if isinstance(events, str):
        return events
    if not events:
        return "**Calendar:** nothing booked in the next two weeks."
    lines = ["**Coming up in the next two weeks:**", ""]
    for event in sorted(events, key=lambda e: str(e.get("startTime"))):
        when = _when(str(event.get("startTime", "")))
        lines.append(f"- {when}: {event.get('title') or 'Appointment'}")
    return "\n".join(lines)


def _when(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return moment.strftime("%a %d %b, %H:%M UTC")


def _write_pipeline(rounds: list[Round], offered: set[str]) -> str:
    deals = _records(rounds, offered, (DEALS,), "opportunities")
    if isinstance(deals, str):
        return deals
    if not deals:
        return "**Pipeline:** no open deals."
    total = sum(float(d.get("monetaryValue") or 0) for d in deals if d.get("status") == "open")
    lines = ["**Your pipeline:**", "", "| Deal | Value | Status |", "|---|---:|---|"]
    for deal in deals:
        value = float(deal.get("monetaryValue") or 0)
        lines.append(f"| {deal.get('name', 'Deal')} | ${value:,.0f} | {deal.get('status', '')} |")
    lines += ["", f"Open deals are worth **${total:,.0f}** in all."]
    return "\n".join(lines)


def _write_conversations(rounds: list[Round], offered: set[str]) -> str:
    found = _records(rounds, offered, (CONVERSATIONS,), "conversations")
    if isinstance(found, str):
        return found
    if not found:
        return "**Conversations:** your inbox is empty."
    lines = ["**Recent conversations:**", ""]
    for c in found:
        who = c.get("fullName") or c.get("contactName") or c.get("contactId", "A contact")
        lines.append(f"- **{who}**: {c.get('lastMessageBody') or '(no messages)'}")
    return "\n".join(lines)


WRITERS: dict[str, Callable[[list[Round], set[str]], str]] = {
    "tasks": _write_tasks,
    "contacts": _write_contacts,
    "calendar": _write_calendar,
    "pipeline": _write_pipeline,
    "conversations": _write_conversations,
}

HELP = (
    "Hi! I'm the **demo assistant**: I answer from keywords and work with the demo CRM's "
    "sample data. Try one of these:\n\n"
    "- *Show me my contacts*\n"
    "- *Which tasks are due for my contacts?*\n"
    "- *What's on my calendar?*\n"
    "- *How is my pipeline?*\n"
    "- *Any new conversations?*\n\n"
    "You can ask about several at once, e.g. *my contacts and my calendar*."
)
