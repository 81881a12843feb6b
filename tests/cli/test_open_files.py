"""`serve` raises its open-files limit to the hard one: each open chat holds two sockets."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from controlcenter.cli.open_files import UNLIMITED_CEILING, raise_open_files_limit


@pytest.fixture
def low_soft_limit() -> Iterator[int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_limit_is_raised_to_the_hard_one(low_soft_limit: int) -> None:
    hard = low_soft_limit
    wanted = UNLIMITED_CEILING if hard == resource.RLIM_INFINITY else hard
    assert raise_open_files_limit() == wanted
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (wanted, hard)


def test_a_limit_already_at_the_hard_one_is_left_alone() -> None:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (before[1], before[1]))
    try:
        raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (before[1], before[1])
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
