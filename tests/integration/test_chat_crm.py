"""A chat in which the model works the broker's own CRM through the built-in tools."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.chat.helpers import Llm, stream_chat, types
from tests.conftest import UserFactory
from tests.fakes.crm import FakeCrm
from tests.fakes.llm import Reply, ToolUse
from tests.integration.conftest import Agency, results


def tool_lines(llm: Llm, request: dict[str, Any]) -> list[str]:
    return [text for _, text in llm.turns(request) if text.startswith("Tool ")]


async def test_the_model_reads_the_brokers_contacts_through_two_tools(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    location = agency.location()
    dana = fake_crm.add_contact(
        location,
        firstName="Dana",
        lastName="Whitfield",
        email="dana@northpier.example",
        companyName="North Pier Logistics",
        tags=["tenant-rep"],
    )
    fake_crm.add_contact(location, firstName="Omar", email="omar@reyescap.example")
    broker = await agency.broker(users, llm, location)
    llm.fake.script(
        Reply(text="Searching.", tool_uses=[ToolUse("contacts_get-contacts", {"query": "dana"})]),
        Reply(tool_uses=[ToolUse("contacts_get-contact", {"contactId": dana["id"]})]),
        Reply(text=" Dana Whitfield works at North Pier Logistics."),
    )
    _, events = await stream_chat(client, broker, {"message": "Who is Dana?", "provider": llm.name})

    assert types(events) == [
        "message_start",
        "content_delta",
        "tool_call_start",
        "tool_result",
        "tool_call_start",
        "tool_result",
        "content_delta",
        "message_complete",
    ]
    offered = llm.offered_tools(llm.fake.requests[0])
    assert {"contacts_get-contacts", "contacts_get-contact"} <= set(offered)
    assert len(offered) == 31
    listing, record = results(events)
    assert listing["success"] is True and record["success"] is True
    assert [c["id"] for c in listing["result"]["contacts"]] == [dana["id"]]
    assert listing["result"]["total"] == 1
    assert record["result"]["contact"]["companyName"] == "North Pier Logistics"
    assert record["result"]["contact"]["tags"] == ["tenant-rep"]

    # The model read exactly what the CRM answered, one tool result line per call.
    second, third = llm.fake.requests[1], llm.fake.requests[2]
    first_id, second_id = (e["toolCall"]["id"] for e in events if e["type"] == "tool_call_start")
    line = f"Tool {first_id} result: {json.dumps(listing['result'], ensure_ascii=False)}"
    assert tool_lines(llm, second) == [line]
    record_line = f"Tool {second_id} result: {json.dumps(record['result'], ensure_ascii=False)}"
    assert tool_lines(llm, third) == [line, record_line]
    final = events[-1]["message"]
    assert final["content"] == "Searching. Dana Whitfield works at North Pier Logistics."
    assert final["toolResults"] == [listing, record]

    # Both calls went to the broker's location with a location token from the agency key.
    [search] = fake_crm.calls_to("POST", "/contacts/search")
    assert search.body["locationId"] == location and search.body["query"] == "dana"
    [get] = fake_crm.calls_to("GET", f"/contacts/{dana['id']}")
    assert (search.token_kind, get.token_kind) == ("location", "location")
    assert search.location_id == get.location_id == location


async def test_two_tools_in_one_reply_both_answer_with_crm_data(
    client: httpx.AsyncClient, llm: Llm, users: UserFactory, agency: Agency, fake_crm: FakeCrm
) -> None:
    location = agency.location()
    omar = fake_crm.add_contact(location, firstName="Omar", email="omar@reyescap.example")
    pipeline = fake_crm.add_pipeline(location, "Leasing", ["New lead", "Touring"])
    deal = fake_crm.add_opportunity(
        pipeline["id"], omar["id"], "Reyes Capital - 5th Ave", monetaryValue=2400000
    )
    fake_crm.add_note(omar["id"], "Wants the rent roll before Friday.")
    broker = await agency.broker(users, llm, location)
    llm.fake.script(
        Reply(
            tool_uses=[
                ToolUse("opportunities_search-opportunity", {"contactId": omar["id"]}, id="t1"),
                ToolUse("contacts_get-all-notes", {"contactId": omar["id"]}, id="t2"),
            ]
        ),
        Reply(text="Omar's deal is worth $2.4M; he wants the rent roll."),
    )
    _, events = await stream_chat(client, broker, {"message": "Omar?", "provider": llm.name})

    deals, notes = results(events)
    assert deals["toolCallId"] == "t1" and notes["toolCallId"] == "t2"
    assert [o["id"] for o in deals["result"]["opportunities"]] == [deal["id"]]
    assert deals["result"]["opportunities"][0]["monetaryValue"] == 2400000
    assert [n["body"] for n in notes["result"]["notes"]] == ["Wants the rent roll before Friday."]
    assert tool_lines(llm, llm.fake.requests[1]) == [
        f"Tool t1 result: {json.dumps(deals['result'], ensure_ascii=False)}",
        f"Tool t2 result: {json.dumps(notes['result'], ensure_ascii=False)}",
    ]
    assert types(events)[-1] == "message_complete"
