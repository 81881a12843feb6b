"""The 21 administrator settings and which of them are secrets (masked by GET)."""

from __future__ import annotations

from typing import Literal, get_args

from controlcenter.common.secrets import MASK

# The one spelling of each name: mypy checks every use against this list.
SettingName = Literal[
    "crmAgencyApiKey",
    "crmAgencyId",
    "crmPrivateToken",
    "crmOwnerLocationId",
    "crmWebhookSecret",
    "tagHighGCI",
    "tagOnboardingComplete",
    "tagDFYRequested",
    "paymentSecretKey",
    "paymentWebhookSecret",
    "tasksApiKey",
    "tasksListId",
    "dfyPriceFullSetup",
    "dfyPriceSmsSetup",
    "dfyPriceEmailSetup",
    "schedulingCoachingLink",
    "schedulingTeamLink",
    "notificationEmail",
    "providerAApiKey",
    "providerBApiKey",
    "mcpServerUrl",
]

SETTING_NAMES: tuple[SettingName, ...] = get_args(SettingName)

# The names other modules use, typed so that a misspelling is a type error.
AGENCY_API_KEY: SettingName = "crmAgencyApiKey"
AGENCY_ID: SettingName = "crmAgencyId"
PRIVATE_TOKEN: SettingName = "crmPrivateToken"  # noqa: S105 - a name, not a secret
OWNER_LOCATION_ID: SettingName = "crmOwnerLocationId"
TAG_HIGH_GCI: SettingName = "tagHighGCI"
TAG_ONBOARDING_COMPLETE: SettingName = "tagOnboardingComplete"
PROVIDER_A_API_KEY: SettingName = "providerAApiKey"
PROVIDER_B_API_KEY: SettingName = "providerBApiKey"
MCP_SERVER_URL: SettingName = "mcpServerUrl"
NOTIFICATION_EMAIL: SettingName = "notificationEmail"

SECRET_NAMES: frozenset[SettingName] = frozenset(
    {
        "crmAgencyApiKey",
        "crmPrivateToken",
        "crmWebhookSecret",
        "paymentSecretKey",
        "paymentWebhookSecret",
        "tasksApiKey",
        "providerAApiKey",
        "providerBApiKey",
    }
)


def mask(name: str, value: str) -> str:
    """The form a value is shown in: secrets reveal at most their last 4 characters."""
    if name not in SECRET_NAMES or value == "":
        return value
    return MASK + value[-4:] if len(value) >= 12 else MASK


def is_masked_form(name: str, value: str) -> bool:
    """Whether `value` is what GET shows for a secret (`••••` or `••••` + 4 characters).

    Such a value is never stored: it is what an administrator PUTs back from a GET, and no
    credential looks like it, so the body of a GET can be PUT back safely. Any mask-shaped
    value counts, not only the current one, so a GET that raced another administrator's change
    cannot wipe the new key either.
    """
    if name not in SECRET_NAMES or not value.startswith(MASK):
        return False
    return len(value) in (len(MASK), len(MASK) + 4)
