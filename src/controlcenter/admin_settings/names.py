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
    """The form a setting's value is shown in: secrets masked (`mask_secret`)."""
    return mask_secret(value) if name in SECRET_NAMES else value


def mask_secret(value: str) -> str:
    """The form a secret is shown in: at most its last 4 characters, and only when it is long
    enough (12 characters) that they give nothing away; unset ("") stays "". Every secret the
    service shows, a setting's or an MCP server's, is masked by this one rule."""
    if value == "":
        return value
    return MASK + value[-4:] if len(value) >= 12 else MASK


def is_masked_form(name: str, value: str) -> bool:
    """Whether `value` is what GET shows for a secret setting (`is_mask`)."""
    return name in SECRET_NAMES and is_mask(value)


def is_mask(value: str) -> bool:
    """Whether `value` has the form `mask_secret` shows (`••••` or `••••` + 4 characters).

    Such a value is never stored: it is what an administrator sends back from a GET, and no
    credential looks like it, so the body of a GET can be sent back safely. Any mask-shaped
    value counts, not only the current one, so a GET that raced another administrator's change
    cannot wipe the new secret either.
    """
    return value.startswith(MASK) and len(value) in (len(MASK), len(MASK) + 4)
