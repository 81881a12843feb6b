"""Where sign-in returns to: a path of this site, or the chat.

The one rule: the login route puts the target it computes here into the page (`data-next`),
and the page's script follows that value and nothing else.
"""

from __future__ import annotations

DEFAULT = "/chat"


def _kept_by_browsers(character: str) -> bool:
    """A browser reads the character where it stands: not a tab, line break or other control
    (dropped or trimmed by the URL parser), not other white space, not `\\` (read as `/`)."""
    return character.isprintable() and not character.isspace() and character != "\\"


def safe_next(target: str | None) -> str:
    """`target` when every browser reads it as a path of this site, else `/chat`.

    A browser removes tabs and line breaks anywhere in a URL and reads `\\` as `/`, so
    `/<tab>/evil.example` and `/\\evil.example` are `//evil.example`: another host. What is
    kept is one `/` and then no second `/`, made only of characters a browser reads as they
    stand: a path on this site (with its query), whatever the browser.
    """
    if not target or not all(_kept_by_browsers(character) for character in target):
        return DEFAULT
    if not target.startswith("/") or target.startswith("//"):
        return DEFAULT
    return target
