"""The chat policy: tool approval, the monthly token quota, provider fallback and
the context budget. Stored as one row of the settings table (`chatPolicy`, JSON, encrypted
like every setting) so that a chat reads it in the same query as its keys; it is not one of
the 21 settings of `SETTING_NAMES` and `/api/v1/admin/settings` neither lists nor accepts it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controlcenter.admin_settings.names import SettingName

CHAT_POLICY = cast(SettingName, "chatPolicy")
DEFAULT_CONTEXT_TOKEN_BUDGET = 100_000
MIN_CONTEXT_TOKEN_BUDGET = 1_000
MAX_TOKENS = 10**12


class ChatPolicyInput(BaseModel):
    """PUT's body: any of the four fields; the others keep their values."""

    model_config = ConfigDict(extra="forbid", strict=True, title="ChatPolicyInput")

    toolApproval: Literal["off", "writes"] = "off"
    monthlyTokenQuota: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    fallback: bool = False
    contextTokenBudget: int = Field(
        default=DEFAULT_CONTEXT_TOKEN_BUDGET, ge=MIN_CONTEXT_TOKEN_BUDGET, le=MAX_TOKENS
    )


@dataclass(frozen=True)
class PolicyValues:
    tool_approval: Literal["off", "writes"] = "off"
    monthly_token_quota: int | None = None
    fallback: bool = False
    context_token_budget: int = DEFAULT_CONTEXT_TOKEN_BUDGET

    def json(self) -> dict[str, Any]:
        return {
            "toolApproval": self.tool_approval,
            "monthlyTokenQuota": self.monthly_token_quota,
            "fallback": self.fallback,
            "contextTokenBudget": self.context_token_budget,
        }

    def updated(self, body: dict[str, Any]) -> PolicyValues:
        """This policy with the fields of a PUT body. Raises pydantic's ValidationError."""
        return self.changed(ChatPolicyInput.model_validate(body))

    def changed(self, given: ChatPolicyInput) -> PolicyValues:
        """This policy with the fields `given` carries (those set in its body).

        `monthlyTokenQuota: null` removes the quota (an absent field leaves it)."""
        sent = given.model_fields_set
        return PolicyValues(
            tool_approval=given.toolApproval if "toolApproval" in sent else self.tool_approval,
            monthly_token_quota=(
                given.monthlyTokenQuota if "monthlyTokenQuota" in sent else self.monthly_token_quota
            ),
            fallback=given.fallback if "fallback" in sent else self.fallback,
            context_token_budget=(
                given.contextTokenBudget
                if "contextTokenBudget" in sent
                else self.context_token_budget
            ),
        )


def stored_policy(raw: str | None) -> PolicyValues:
    """The policy from its stored JSON; the defaults when unset (or unreadable)."""
    if not raw:
        return PolicyValues()
    try:
        return PolicyValues().updated(json.loads(raw))
    except (ValueError, ValidationError):
        return PolicyValues()


def policy_text(policy: PolicyValues) -> str:
    return json.dumps(policy.json(), separators=(",", ":"))


def changed_text(given: ChatPolicyInput, stored: str | None) -> str:
    """The stored policy's JSON with the fields `given` carries: the change a PUT makes, run
    on the stored value inside the writing transaction (`SettingsStore.change`)."""
    return policy_text(stored_policy(stored).changed(given))
