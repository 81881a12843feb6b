"""Concurrent chat streams against the fake provider (filled when the chat lands)."""

from __future__ import annotations

from bench.deploy import Deployment
from bench.results import Row


def run(deployment: Deployment, *, quick: bool) -> list[Row]:
    return [Row(deployment.db_kind, "chat", "n/a", note="not measured yet")]
