"""The server's loop thread tells sniffio it runs asyncio (common/async_library.py)."""

from __future__ import annotations

import sniffio

from controlcenter.common.async_library import declared_asyncio
from tests.conftest import RunningServer


async def test_the_started_app_declares_asyncio_in_its_loop_thread(server: RunningServer) -> None:
    # The session's server runs in this very thread's loop.
    assert sniffio.thread_local.name == "asyncio"
    assert sniffio.current_async_library() == "asyncio"


def test_the_thread_sniffs_again_after_the_app() -> None:
    before = sniffio.thread_local.name
    try:
        sniffio.thread_local.name = "trio"  # a thread that ran another library's loop first
        with declared_asyncio():
            assert sniffio.thread_local.name == "asyncio"
        assert sniffio.thread_local.name == "trio"
    finally:
        sniffio.thread_local.name = before
