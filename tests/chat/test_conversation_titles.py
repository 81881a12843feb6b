"""Renaming a conversation and searching the caller's conversations by title and text."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from controlcenter.chat.models import ConversationRow, Message
from controlcenter.db import new_id, utcnow
from tests.chat.helpers import CONVERSATIONS, ISO, conversation_title
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.dbtools import writing


async def stored_conversation(
    server: RunningServer, user: AppUser, title: str, *texts: str, age_s: int = 0
) -> str:
    """A conversation of `user` with a message per text (user, assistant, user...)."""
    when = utcnow() - timedelta(seconds=age_s)
    conversation_id = new_id()
    async with writing(server.db) as db:
        db.add(
            ConversationRow(
                id=conversation_id, user_id=user.id, title=title, created_at=when, updated_at=when
            )
        )
        await db.flush()
        for n, text in enumerate(texts):
            db.add(
                Message(
                    id=f"msg_{n}_{conversation_id}",
                    conversation_id=conversation_id,
                    role="user" if n % 2 == 0 else "assistant",
                    content=text,
                    created_at=when,
                )
            )
    return conversation_id


async def search(client: httpx.AsyncClient, user: AppUser, q: str, **params: str) -> list[str]:
    found = await client.get(CONVERSATIONS, params={"q": q, **params}, headers=user.headers)
    assert found.status_code == 200, found.text
    return [c["id"] for c in found.json()["conversations"]]


async def test_rename_trims_and_answers_the_conversation(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    conversation_id = await stored_conversation(server, user, "Who is Dana?", "Who is Dana?")
    renamed = await client.patch(
        f"{CONVERSATIONS}/{conversation_id}",
        json={"title": "  Dana Whitfield, the Okafor lease  "},
        headers=user.headers,
    )
    assert renamed.status_code == 200
    body = renamed.json()["conversation"]
    assert set(body) == {"id", "title", "createdAt", "updatedAt"}
    assert (body["id"], body["title"]) == (conversation_id, "Dana Whitfield, the Okafor lease")
    assert ISO.match(body["updatedAt"]) and body["updatedAt"] >= body["createdAt"]
    assert await conversation_title(client, user, conversation_id) == (
        "Dana Whitfield, the Okafor lease"
    )
    listed = await client.get(CONVERSATIONS, headers=user.headers)
    assert listed.json()["conversations"][0]["title"] == "Dana Whitfield, the Okafor lease"
    exact = await client.patch(
        f"{CONVERSATIONS}/{conversation_id}", json={"title": "é" * 200}, headers=user.headers
    )
    assert exact.json()["conversation"]["title"] == "é" * 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "   "}, "title"),
        ({"title": ""}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"title": 5}, "title"),
        ({"title": None}, "title"),
        ({}, "title"),
        ({"title": "ok", "pinned": True}, "pinned"),
    ],
)
async def test_a_wrong_title_is_refused(
    client: httpx.AsyncClient,
    server: RunningServer,
    users: UserFactory,
    body: dict[str, object],
    field: str,
) -> None:
    user = await users.create()
    conversation_id = await stored_conversation(server, user, "Kept", "Kept")
    refused = await client.patch(
        f"{CONVERSATIONS}/{conversation_id}", json=body, headers=user.headers
    )
    assert refused.status_code == 400
    assert refused.json()["error"] == "Validation failed"
    assert [issue["path"][0] for issue in refused.json()["details"]] == [field]
    assert await conversation_title(client, user, conversation_id) == "Kept"


async def test_only_the_owner_renames(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    owner, other = await users.create(), await users.create()
    conversation_id = await stored_conversation(server, owner, "Mine", "Mine")
    for who, target in [(other, conversation_id), (owner, "missing"), (owner, "a%00b")]:
        refused = await client.patch(
            f"{CONVERSATIONS}/{target}", json={"title": "Taken"}, headers=who.headers
        )
        assert (refused.status_code, refused.json()) == (404, {"error": "Conversation not found"})
    anonymous = await client.patch(f"{CONVERSATIONS}/{conversation_id}", json={"title": "x"})
    assert anonymous.status_code == 401
    assert await conversation_title(client, owner, conversation_id) == "Mine"


async def test_search_finds_titles_and_message_text_whatever_the_case(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user, other = await users.create(), await users.create()
    by_title = await stored_conversation(server, user, "Okafor LEASE", "hello", age_s=30)
    by_answer = await stored_conversation(
        server,
        user,
        "Renewals",
        "Which leases end soon?",
        "The Okafor lease ends in May.",
        age_s=20,
    )
    accented = await stored_conversation(
        server, user, "Société Générale", "Le bail de l'ÉCOLE Müller", age_s=10
    )
    unrelated = await stored_conversation(server, user, "Calendar", "Tours on Friday")
    await stored_conversation(server, other, "Okafor lease", "Okafor lease")

    assert await search(client, user, "okafor lease") == [by_answer, by_title]  # newest first
    assert await search(client, user, "OKAFOR") == [by_answer, by_title]
    # Beyond ASCII, on either database: titles and message text alike.
    assert await search(client, user, "SOCIÉTÉ") == [accented]
    assert await search(client, user, "école müller") == [accented]
    assert await search(client, user, "ÉCOLE MÜLLER") == [accented]
    assert await search(client, user, "friday") == [unrelated]
    assert await search(client, user, "nowhere to be found") == []
    # An empty query is the plain list.
    assert len(await search(client, user, "")) == 4


async def test_search_takes_like_wildcards_literally(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    percent = await stored_conversation(server, user, "Cap rate", "A 100% occupancy", age_s=10)
    underscore = await stored_conversation(server, user, "Ids", "field deal_stage", age_s=5)
    backslash = await stored_conversation(server, user, "Paths", "C:\\deals\\2026")
    await stored_conversation(server, user, "Plain", "1000 occupancy and dealXstage", age_s=20)
    assert await search(client, user, "100%") == [percent]
    assert await search(client, user, "%") == [percent]
    assert await search(client, user, "deal_stage") == [underscore]
    assert await search(client, user, "_") == [underscore]
    assert await search(client, user, "\\deals\\") == [backslash]


async def test_search_pages_like_the_list(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    matching = [
        await stored_conversation(server, user, f"Lease {n}", "text", age_s=100 - n)
        for n in range(5)
    ]
    await stored_conversation(server, user, "Other", "text")
    first = await client.get(
        CONVERSATIONS, params={"q": "lease", "limit": "2"}, headers=user.headers
    )
    ids = [c["id"] for c in first.json()["conversations"]]
    cursor = first.json()["nextCursor"]
    while cursor:
        page = await client.get(
            CONVERSATIONS,
            params={"q": "lease", "limit": "2", "cursor": cursor},
            headers=user.headers,
        )
        ids += [c["id"] for c in page.json()["conversations"]]
        cursor = page.json()["nextCursor"]
    assert ids == matching[::-1]


@pytest.mark.parametrize("q", ["a\x00b", "x" * 201])
async def test_a_query_that_cannot_be_searched_is_refused(
    client: httpx.AsyncClient, users: UserFactory, q: str
) -> None:
    user = await users.create()
    refused = await client.get(CONVERSATIONS, params={"q": q}, headers=user.headers)
    assert refused.status_code == 400
    assert "error" in refused.json()


async def test_a_query_of_200_characters_is_searched_and_a_longer_one_is_refused_plainly(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    longest = "é" * 200  # counted in characters, not bytes
    found = await stored_conversation(server, user, "Long", f"before {longest.upper()} after")
    assert await search(client, user, longest) == [found]
    refused = await client.get(CONVERSATIONS, params={"q": longest + "é"}, headers=user.headers)
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error": "Validation failed",
            "details": [
                {
                    "path": ["query", "q"],
                    "message": "String should have at most 200 characters",
                    "type": "string_too_long",
                }
            ],
        },
    )
    nul = await client.get(CONVERSATIONS, params={"q": "a\x00b"}, headers=user.headers)
    assert (nul.status_code, nul.json()) == (
        400,
        {"error": "Invalid text: strings must not contain NUL characters or unpaired surrogates"},
    )
