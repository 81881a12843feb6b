"""One way to keep credentials out of what users and logs see."""

from __future__ import annotations

import re

MASK = "••••"  # how a secret is shown (settings, chat errors, CRM messages)
REDACTED = "[redacted]"  # how a provider's message names a key it quoted

# A key quoted with its middle starred out, as OpenAI's 401 writes it: `sk-ab***wxyz`.
_MASKED_QUOTE = re.compile(r"[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*")
# Credentials a text could quote (a provider's error, a URL, a header): API keys of the two
# providers, our API tokens, CRM private tokens, bearer values, JWTs.
_CREDENTIAL = re.compile(
    r"(sk-[A-Za-z0-9_-]{8,}|cct_[A-Za-z0-9_-]{8,}|pit-[A-Za-z0-9_-]{8,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=-]{8,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+)"
)


def redact(text: str, *secrets: str, mask: str = REDACTED) -> str:
    """`text` with every secret, any starred quote of one, and anything shaped like a
    credential replaced by `mask`.

    An API or a proxy can echo a credential whole, and OpenAI quotes the start and the end of a
    wrong key; neither may reach a user or a log (every log record goes through here too).
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, mask)
    return _CREDENTIAL.sub(mask, _MASKED_QUOTE.sub(mask, text))
