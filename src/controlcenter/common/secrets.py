"""One way to keep credentials out of what users and logs see."""

from __future__ import annotations

import re

MASK = "••••"  # how a secret is shown (settings, chat errors, CRM messages)
REDACTED = "[redacted]"  # how a provider's message names a key it quoted

# A key quoted with its middle starred out, as OpenAI's 401 writes it: `sk-ab***wxyz`.
_MASKED_QUOTE = re.compile(r"[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*")


def redact(text: str, *secrets: str, mask: str = REDACTED) -> str:
    """`text` with every secret, and any starred quote of one, replaced by `mask`.

    An API or a proxy can echo a credential whole, and OpenAI quotes the start and the end of a
    wrong key; neither may reach a user or a log.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, mask)
    return _MASKED_QUOTE.sub(mask, text)
