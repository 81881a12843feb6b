"""The kinds of outbox job and their payloads (SPEC 4.4 step 5)."""

from __future__ import annotations

TAG_ONBOARDING_COMPLETE = "crm.tag_onboarding_complete"  # payload: {"userId"}
TAG_HIGH_GCI = "crm.tag_high_gci"  # payload: {"userId", "gci"}
SYNC_USER = "crm.sync_user"  # payload: {"userId"}

KINDS = (TAG_ONBOARDING_COMPLETE, TAG_HIGH_GCI, SYNC_USER)
