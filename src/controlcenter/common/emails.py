"""The one form of an e-mail address that identifies an account.

Two spellings of one mailbox must name one account: `zoe\u0308@exa\u0308mple.com` (decomposed),
`zoë@xn--exmple-cua.com` (the domain's ASCII form), `ZOË@EXÄMPLE.COM` and `ｚｏë@exämple.com`
(full-width letters) are all `zoë@xn--exmple-cua.com`. The address is put in Unicode NFKC (so
compatibility forms, full-width letters, ligatures and the like, read as the letters they stand
for) and case-folded (Unicode's caseless matching, which lower-casing alone is not: `ß` and
`ss` are one), and its domain in IDNA's ASCII form (email-validator's reading of it, the
library the API validates addresses with). Every place an address finds, creates or counts an
account calls `normalise_email`.
"""

from __future__ import annotations

import unicodedata

from email_validator import SPECIAL_USE_DOMAIN_NAMES, EmailNotValidError, validate_email
from pydantic.config import JsonDict


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


ADDRESS_PATTERN = (
    "^(?![^\\u0000]*[@.](?:"
    + "|".join(_any_case(name) for name in SPECIAL_USE_DOMAIN_NAMES)
    + ")\\.?$)[^\\u0000]*$"
)
"""Beside `format: email` in the interface description: the validator also refuses a domain that
is, or ends in, a special-use name (RFC 6761: `test`, `localhost`...), and every body refuses
NUL."""
ADDRESS_SCHEMA: JsonDict = {"format": "email", "pattern": ADDRESS_PATTERN}
"""An e-mail address as the interface description states it."""


def _folded(text: str) -> str:
    # Case folding can undo the normal form (`İ` becomes `i` and a combining dot), hence NFKC
    # on both sides: Unicode's compatibility caseless match.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def normalise_email(email: str) -> str:
    """`email` in the form accounts are stored and looked up by.

    Something that is not an address (a mistyped sign-in) is only trimmed, NFKC'd and
    case-folded: it finds no account, and counts against the throttle as typed.
    """
    text = _folded(email.strip())
    if text.isascii():
        # Already its own normal form (an ASCII domain's IDNA form is itself, lower-cased),
        # and the common case: the validator's full parse is left for the rest.
        return text
    try:
        # Syntax only (no DNS); the domain comes back in both its forms.
        address = validate_email(text, check_deliverability=False)
    except EmailNotValidError:
        return text
    return f"{_folded(address.local_part)}@{address.ascii_domain}"
