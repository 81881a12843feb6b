"""Who is calling: the user row, and the session used."""

from __future__ import annotations

from dataclasses import dataclass

from controlcenter.auth.models import ADMIN, SUPER_ADMIN, UserRecord


@dataclass(frozen=True)
class Principal:
    """Who is calling: the user row as it was last read, and the session used (None for an
    API token)."""

    user: UserRecord
    session_id: str | None

    @property
    def is_super_admin(self) -> bool:
        return self.user.role == SUPER_ADMIN

    @property
    def is_admin(self) -> bool:
        """An administrator or a super administrator."""
        return self.user.role in (ADMIN, SUPER_ADMIN)
