"""Onboarding POST latency while the CRM is slow (filled when onboarding lands)."""

from __future__ import annotations

from bench.deploy import Deployment, Options
from bench.results import Row


def run(deployment: Deployment, options: Options) -> list[Row]:
    return [Row(deployment.db_kind, "onboarding", "n/a", note="not measured yet")]
