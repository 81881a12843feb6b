"""The encryption of every secret the service stores: Fernet (AES-128-CBC + HMAC-SHA256) with
the key `SETTINGS_ENCRYPTION_KEY`. The settings and the MCP servers' credentials use this one
cipher.

Decrypted values are kept per ciphertext: settings are read before every chat. Fernet makes a
new token on every encryption, so a changed value is never answered from the memo.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken

# Past this many ciphertexts the memo starts over (never wrong, only slower once).
_PLAIN_KEPT = 256


class SettingsDecryptError(Exception):
    """A stored value cannot be decrypted: the encryption key changed or the row is damaged.
    Its message is what the value belongs to (a setting's name), never the value."""


class Cipher:
    def __init__(self, key: str) -> None:
        self._fernet = Fernet(key.encode())
        self._plain: dict[str, str] = {}  # ciphertext -> its value, for this key

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, owner: str, token: str) -> str:
        """The value of `token`; raises SettingsDecryptError naming `owner` when it cannot."""
        found = self._plain.get(token)
        if found is not None:
            return found
        try:
            value = self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise SettingsDecryptError(owner) from exc
        if len(self._plain) >= _PLAIN_KEPT:
            self._plain.clear()
        self._plain[token] = value
        return value
