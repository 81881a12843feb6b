"""One way to keep credentials out of what users and logs see."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import quote

MASK = "••••"  # how a secret is shown (settings, chat errors, CRM messages)
REDACTED = "[redacted]"  # how a provider's message names a key it quoted

# A key quoted with its middle starred out, as OpenAI's 401 writes it: `sk-ab***wxyz`.
_MASKED_QUOTE = re.compile(r"[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*")
# Credentials a text could quote (a provider's error, a URL, a header): API keys of the two
# providers, our API tokens, CRM private tokens, bearer values, JWTs.
_CREDENTIAL = re.compile(
    r"(sk-[A-Za-z0-9_-]{8,}|cct_[A-Za-z0-9_-]{8,}|pit-[A-Za-z0-9_-]{8,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=-]{8,}|(?<=Basic )[A-Za-z0-9+/=]{8,}"
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


REMOTE_TEXT_CHARS = 300  # what is kept of a remote system's text: enough to say why it refused
_WHOLE_WORD_BELOW = 8  # characters: a shorter secret is removed only where it stands alone


def remote_text(text: str, secrets: Iterable[str], *, limit: int = REMOTE_TEXT_CHARS) -> str:
    """Text taken from a remote answer (an error's message, a refusal's body), as it may be
    shown or logged: every one of `secrets` removed in each form an echo carries it (as sent,
    percent-encoded, JSON-escaped), with anything shaped like a credential (`redact`), then cut
    to `limit` characters.

    A remote system may echo what it was sent, and an operator can point a server's address
    at any host: no stored credential may come back through its answer. The cut comes after
    the removal, so a secret is never left half shown.
    """
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms.update((secret, quote(secret, safe=""), json.dumps(secret)[1:-1]))
    # Longest first: a secret that contains another is removed whole.
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= _WHOLE_WORD_BELOW:
            text = text.replace(form, MASK)
        else:
            # A short value (a header's `1`) is removed where it stands alone, not from every
            # word that contains it (`HTTP 401`).
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])", MASK, text)
    cleaned = redact(text, mask=MASK)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def basic_credentials(user: str, password: str) -> str:
    """The value of an HTTP Basic `Authorization` header for the pair, each part percent-encoded
    as OAuth's client authentication sends it, for `remote_text` to find an echo of it."""
    pair = f"{quote(user, safe='')}:{quote(password, safe='')}"
    return base64.b64encode(pair.encode()).decode()
