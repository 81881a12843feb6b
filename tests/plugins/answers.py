"""No database driver's error text ever reaches a client: the session's server is wrapped in
an `AnswerWatch` (tests/answer_watch.py), and a test during which it sent an error body or an
`error` event carrying a driver's or SQL's words fails."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.answer_watch import AnswerWatch


@pytest.fixture(scope="session")
def answer_watch() -> AnswerWatch:
    """The watch the session's server is wrapped in."""
    return AnswerWatch()


@pytest.fixture(autouse=True)
def _no_driver_text_in_answers(answer_watch: AnswerWatch) -> Iterator[None]:
    answer_watch.found.clear()
    yield
    found, answer_watch.found = answer_watch.found, []
    assert found == [], "driver or SQL text reached a client"
