"""The open-files limit of `serve`.

Each open chat holds two sockets (the browser's stream and the provider call in flight), so the
common default soft limit of 1,024 files would refuse connections at about 500 open chats per
process, long before memory or CPU run out. `serve` raises its soft limit to the hard one (its
workers inherit it); only the system's administrator can raise the hard limit.
"""

from __future__ import annotations

# Linux's default ceiling (fs.nr_open) when the hard limit says "unlimited".
UNLIMITED_CEILING = 1_048_576


def raise_open_files_limit() -> int | None:
    """The soft limit after raising it as far as allowed; None where there is no such limit."""
    try:
        import resource
    except ImportError:  # not a Unix system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = UNLIMITED_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):  # a ceiling below "unlimited": keep what we have
        return soft
    return wanted
