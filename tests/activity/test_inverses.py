"""The ledger's words and rules that need no CRM."""

from __future__ import annotations

from controlcenter.activity.inverses import Done, same, shown, summary_of, undoable_of


def test_a_tool_of_another_source_bearing_a_builtin_name_is_said_plainly() -> None:
    odd = Done({"q": "x"}, None, {"unexpected": True})
    assert summary_of("contacts_update-contact", "Fix", odd) == "Fix: q: x"
    assert summary_of("contacts_create-note", "Note", odd) == "Note created"
    assert undoable_of("contacts_create-note", odd) is False
    assert undoable_of("contacts_update-contact", odd) is False


def test_values_as_the_summary_shows_them_and_as_the_crm_keeps_them() -> None:
    assert [shown(v) for v in (None, "", [], ["a", "b"], 2.0, 2.5)] == [
        "(empty)",
        "(empty)",
        "(empty)",
        "a, b",
        "2",
        "2.5",
    ]
    assert same("email", "Ada@Example.com", "ada@example.com")
    assert same("tags", ["b", "a"], ["a", "b"]) and not same("tags", ["a"], ["a", "b"])
    assert same("city", None, "") and not same("phone", "555-0100", "555-0199")
    assert same("monetaryValue", 100, 100.0)
