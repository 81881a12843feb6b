"""What each built-in CRM write changes, how it is said in words, and how it is undone.

A `Write` per tool of the catalogue that writes: the path of the object's state to read just
before an update, or of the contact a record is made for (`before_path`); the summary of what
changed; whether an undo is possible; and the undo itself: the object's current state is read
first and must still hold what the write left (`ChangedSinceError` otherwise), then the inverse
call is made. Tools without a known
inverse (a sent message, any MCP tool) are `NO_INVERSE`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlcenter.crm.client import CrmClient, segment
from controlcenter.crm.errors import CrmNotFound


class ChangedSinceError(Exception):
    """The object no longer holds what the write left (or is gone)."""


@dataclass(frozen=True)
class Done:
    """What a write left, as the ledger stored it."""

    arguments: Mapping[str, Any]
    before: Mapping[str, Any] | None  # the object read just before the write
    result: Any  # the tool's result; None while unknown


# -- words -----------------------------------------------------------------------------------

CONTACT_LABELS = {
    "firstName": "First name",
    "lastName": "Last name",
    "name": "Name",
    "email": "E-mail",
    "phone": "Phone",
    "address1": "Address",
    "city": "City",
    "state": "State",
    "postalCode": "Postal code",
    "country": "Country",
    "website": "Website",
    "source": "Source",
    "tags": "Tags",
}
DEAL_LABELS = {
    "name": "Name",
    "pipelineId": "Pipeline",
    "pipelineStageId": "Stage",
    "status": "Status",
    "monetaryValue": "Value",
}
# UpdateContactDto's fields that are not nullable: an empty value is sent back as "".
NOT_NULLABLE = frozenset({"postalCode", "source", "country"})
EMPTY = "(empty)"
SHORT = 80


def shown(value: Any) -> str:
    if value is None or value == "" or value == []:
        return EMPTY
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def clipped(text: Any) -> str:
    words = " ".join(str(text or "").split())
    return words if len(words) <= SHORT else words[: SHORT - 1] + "…"


def contact_name(contact: Mapping[str, Any] | None, fallback: str) -> str:
    if not contact:
        return fallback
    name = contact.get("name") or " ".join(
        str(p) for p in (contact.get("firstName"), contact.get("lastName")) if p
    )
    return str(name or contact.get("email") or contact.get("phone") or fallback)


def changes(
    labels: Mapping[str, str], fields: Sequence[str], old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[str]:
    return [f"{labels[f]}: {shown(old.get(f))} → {shown(new.get(f))}" for f in fields]


def same(field: str, a: Any, b: Any) -> bool:
    """Whether two values of a field are the same as the CRM keeps them."""
    if field == "tags":
        return sorted(str(t) for t in a or []) == sorted(str(t) for t in b or [])
    if a in (None, "") and b in (None, ""):
        return True
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if field == "email" and isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return bool(a == b)


def _held(fields: Sequence[str], current: Mapping[str, Any], left: Mapping[str, Any]) -> None:
    if any(not same(f, current.get(f), left.get(f)) for f in fields):
        raise ChangedSinceError


async def _read(crm: CrmClient, path: str, key: str) -> dict[str, Any]:
    """The object at `path` as it is now; a gone object has changed since."""
    try:
        answer = await crm.get(path)
    except CrmNotFound as exc:
        raise ChangedSinceError from exc
    found = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(found, dict):
        raise ChangedSinceError
    return found


def _made(result: Any, key: str) -> dict[str, Any] | None:
    """The object a create answered, when it has an id."""
    made = result.get(key) if isinstance(result, dict) else None
    return made if isinstance(made, dict) and isinstance(made.get("id"), str) else None


# -- the kinds of write ----------------------------------------------------------------------


class NoInverseError(Exception):
    """An undo was asked of a write that has no inverse (callers check `undoable` first)."""


class Write:
    """A write without a known inverse."""

    def before_path(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """The path to read just before the write and the answer's key; None: nothing."""
        return None

    def summary(self, title: str, done: Done) -> str:
        words = ", ".join(f"{k}: {clipped(shown(v))}" for k, v in done.arguments.items())
        return f"{title}: {words}" if words else title

    def undoable(self, done: Done) -> bool:
        return False

    async def undo(self, crm: CrmClient, done: Done) -> str:
        """Check, then reverse the write; the undo's summary. Called only when `undoable`:
        a write without an inverse has nothing to reverse."""
        raise NoInverseError(done)


NO_INVERSE = Write()


class SendMessage(Write):
    def summary(self, title: str, done: Done) -> str:
        kind = done.arguments.get("type", "message")
        text = done.arguments.get("message") or done.arguments.get("subject") or ""
        return f"{kind} sent to contact {done.arguments.get('contactId')}: {clipped(text)}"


class CreateContact(Write):
    """A contact created (also by an upsert that found none): undone by deleting it."""

    def summary(self, title: str, done: Done) -> str:
        made = _made(done.result, "contact")
        if done.result is not None and isinstance(done.result, dict) and not self._created(done):
            return f"Updated contact {contact_name(made, '?')} (matched by e-mail or phone)"
        who = contact_name(made or dict(done.arguments), "?")
        reach = done.arguments.get("email") or done.arguments.get("phone")
        return f"Created contact {who}" + (f" ({reach})" if reach else "")

    @staticmethod
    def _created(done: Done) -> bool:
        return not isinstance(done.result, dict) or done.result.get("new", True) is not False

    def undoable(self, done: Done) -> bool:
        return self._created(done) and _made(done.result, "contact") is not None

    async def undo(self, crm: CrmClient, done: Done) -> str:
        made = _made(done.result, "contact")
        assert made is not None
        path = f"/contacts/{segment(made['id'])}"
        current = await _read(crm, path, "contact")
        _held([f for f in done.arguments if f in CONTACT_LABELS], current, made)
        await crm.delete(path)
        return f"Deleted contact {contact_name(current, made['id'])}"


class FieldUpdate(Write, ABC):
    """Fields of an object changed: undone by setting them back to the values read before.
    A subclass names the object's argument, collection, fields and how it is called."""

    id_argument: str
    collection: str
    key: str
    labels: Mapping[str, str]
    noun: str  # the summary's start: "Contact Ada Lovelace: ..."
    of: str  # before the name when one field changed: "Phone of Ada Lovelace", "Stage of deal X"

    @abstractmethod
    def _name(self, done: Done) -> str:
        """How the summary names the object."""

    @abstractmethod
    def _back(self, fields: Sequence[str], before: Mapping[str, Any]) -> dict[str, Any]:
        """The body that sets `fields` back to their values `before` the write."""

    def _path(self, arguments: Mapping[str, Any]) -> str:
        return f"/{self.collection}/{segment(str(arguments[self.id_argument]))}"

    def before_path(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        return self._path(arguments), self.key

    def _fields(self, done: Done) -> list[str]:
        return [f for f in done.arguments if f in self.labels]

    def summary(self, title: str, done: Done) -> str:
        name = self._name(done)
        fields = self._fields(done)
        if done.before is None:
            parts = [f"{self.labels[f]} → {shown(done.arguments[f])}" for f in fields]
            return f"{self.noun} {name}: " + "; ".join(parts)
        lines = changes(self.labels, fields, done.before, done.arguments)
        if len(lines) == 1:
            return f"{self.labels[fields[0]]} of {self.of}{name}: " + lines[0].split(": ", 1)[1]
        return f"{self.noun} {name}: " + "; ".join(lines)

    def undoable(self, done: Done) -> bool:
        return done.before is not None

    async def undo(self, crm: CrmClient, done: Done) -> str:
        assert done.before is not None
        path = self._path(done.arguments)
        current = await _read(crm, path, self.key)
        fields = self._fields(done)
        _held(fields, current, done.arguments)
        back = self._back(fields, done.before)
        await crm.put(path, back)
        args = {self.id_argument: done.arguments[self.id_argument], **back}
        return self.summary("", Done(args, current, None))


class UpdateContact(FieldUpdate):
    """Fields of a contact changed."""

    id_argument = "contactId"
    collection = "contacts"
    key = "contact"
    labels = CONTACT_LABELS
    noun = "Contact"
    of = ""

    def _name(self, done: Done) -> str:
        return contact_name(done.before, str(done.arguments["contactId"]))

    def _back(self, fields: Sequence[str], before: Mapping[str, Any]) -> dict[str, Any]:
        return {f: _sendable(f, before.get(f)) for f in fields}


def _sendable(field: str, value: Any) -> Any:
    if field == "tags":
        return list(value or [])
    if value is None and field in NOT_NULLABLE:
        return ""
    return value


class Tags(Write):
    """Tags added (`adds`) or removed: undone by the opposite call for the tags that changed."""

    def __init__(self, *, adds: bool) -> None:
        self.adds = adds

    def before_path(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        return f"/contacts/{segment(str(arguments['contactId']))}", "contact"

    def _changed(self, done: Done) -> list[str]:
        had = set((done.before or {}).get("tags") or [])
        asked = [str(t).strip() for t in done.arguments.get("tags") or []]
        return [t for t in asked if (t not in had) == self.adds]

    def summary(self, title: str, done: Done) -> str:
        who = contact_name(done.before, str(done.arguments["contactId"]))
        verb = "added" if self.adds else "removed"
        if done.before is None:
            return f"Tags of {who}: {verb} {shown(done.arguments.get('tags'))}"
        changed = self._changed(done)
        if not changed:
            return f"Tags of {who}: nothing {verb} ({shown(done.arguments.get('tags'))})"
        return f"Tags of {who}: {verb} {shown(changed)}"

    def undoable(self, done: Done) -> bool:
        return done.before is not None and bool(self._changed(done))

    async def undo(self, crm: CrmClient, done: Done) -> str:
        path = f"/contacts/{segment(str(done.arguments['contactId']))}"
        current = await _read(crm, path, "contact")
        tags = set(current.get("tags") or [])
        changed = self._changed(done)
        if any((t in tags) != self.adds for t in changed):
            raise ChangedSinceError
        if self.adds:
            await crm.delete(path + "/tags", {"tags": changed})
        else:
            await crm.post(path + "/tags", {"tags": changed}, idempotent=True)
        verb = "removed" if self.adds else "added"
        return f"Tags of {contact_name(current, '?')}: {verb} {shown(changed)}"


@dataclass(frozen=True)
class Created(Write):
    """A record created under a path (a contact's task or note, a deal): undone by deleting it,
    when it still holds what the create left in `compared`."""

    key: str  # the answer's key: `task`, `note`, `opportunity`
    where: str  # the record's path, from the arguments and the new record's `id`
    compared: tuple[str, ...]
    what: str

    def _path(self, done: Done) -> str | None:
        made = _made(done.result, self.key)
        if made is None:
            return None
        names = {k: segment(str(v)) for k, v in done.arguments.items() if isinstance(v, str)}
        return self.where.format(**names, id=segment(made["id"]))

    def before_path(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """The contact the record is made for, read for its name."""
        contact = arguments.get("contactId")
        return (f"/contacts/{segment(str(contact))}", "contact") if contact else None

    def summary(self, title: str, done: Done) -> str:
        made = _made(done.result, self.key) or {}
        label = made.get("title") or made.get("name") or made.get("body")
        label = label or done.arguments.get("title") or done.arguments.get("name")
        label = label or done.arguments.get("body")
        contact = done.arguments.get("contactId")
        about = f" for {contact_name(done.before, f'contact {contact}')}" if contact else ""
        return f"{self.what} created{about}" + (f": {clipped(label)}" if label else "")

    def undoable(self, done: Done) -> bool:
        return self._path(done) is not None

    async def undo(self, crm: CrmClient, done: Done) -> str:
        path = self._path(done)
        made = _made(done.result, self.key)
        assert path is not None and made is not None
        current = await _read(crm, path, self.key)
        _held([f for f in self.compared if f in made], current, made)
        await crm.delete(path)
        label = current.get("title") or current.get("name") or current.get("body")
        return f"{self.what} deleted: {clipped(label)}"


class UpdateDeal(FieldUpdate):
    """A deal changed (moved to another stage, renamed, won or lost)."""

    id_argument = "opportunityId"
    collection = "opportunities"
    key = "opportunity"
    labels = DEAL_LABELS
    noun = "Deal"
    of = "deal "

    def _name(self, done: Done) -> str:
        return str((done.before or {}).get("name") or done.arguments["opportunityId"])

    def _back(self, fields: Sequence[str], before: Mapping[str, Any]) -> dict[str, Any]:
        return {f: before.get(f) for f in fields if before.get(f) is not None}


WRITES: dict[str, Write] = {
    "contacts_create-contact": CreateContact(),
    "contacts_upsert-contact": CreateContact(),
    "contacts_update-contact": UpdateContact(),
    "contacts_add-tags": Tags(adds=True),
    "contacts_remove-tags": Tags(adds=False),
    "contacts_create-task": Created(
        "task",
        "/contacts/{contactId}/tasks/{id}",
        ("title", "body", "dueDate", "completed"),
        "Task",
    ),
    "contacts_create-note": Created("note", "/contacts/{contactId}/notes/{id}", ("body",), "Note"),
    "opportunities_create-opportunity": Created(
        "opportunity",
        "/opportunities/{id}",
        ("name", "status", "pipelineStageId", "monetaryValue"),
        "Deal",
    ),
    "opportunities_update-opportunity": UpdateDeal(),
    "conversations_send-a-new-message": SendMessage(),
}


def write_of(tool: str) -> Write:
    """The built-in tool's write; `NO_INVERSE` for any other (MCP tools)."""
    return WRITES.get(tool, NO_INVERSE)


# What a write's arguments or answer may lack when a tool of another source bears a built-in
# tool's name (a test's, or a source added later): such a call is then said in plain words.
_ODD = (KeyError, TypeError, AttributeError, ValueError)


def summary_of(tool: str, title: str, done: Done) -> str:
    try:
        return write_of(tool).summary(title, done)
    except _ODD:
        return NO_INVERSE.summary(title, done)


def undoable_of(tool: str, done: Done) -> bool:
    try:
        return write_of(tool).undoable(done)
    except _ODD:
        return False
