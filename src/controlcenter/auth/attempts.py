"""The sign-in attempts that count against the throttle (`auth.throttle`)."""

from __future__ import annotations

from sqlalchemy import Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from controlcenter.db import Base


class SignInAttempt(Base):
    """One password attempt, counted against one of its keys (a row each: the e-mail from its
    source, the e-mail, the source). Kept only for the window; `key` is a hash, so no e-mail
    or address is stored."""

    __tablename__ = "sign_in_attempts"
    __table_args__ = (Index("ix_sign_in_attempts_key_at", "key", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(64))
    at: Mapped[float] = mapped_column(Float, index=True)  # epoch seconds: compared as numbers
