"""The collector's settings for a started server (common/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controlcenter.common import collector
from tests.conftest import RunningServer


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)


def test_settle_freezes_what_exists_and_collects_the_young_less_often(restored: None) -> None:
    made_before = [object() for _ in range(10)]
    _, middle, old = gc.get_threshold()

    collector.settle()

    assert gc.get_freeze_count() > len(made_before)
    assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, middle, old)
    # A cycle made afterwards is still collected.
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


async def test_the_started_app_has_settled(server: RunningServer) -> None:
    assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 0
