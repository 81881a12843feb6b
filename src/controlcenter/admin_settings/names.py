"""The 21 settings of SPEC 2.6 and which of them are secrets (CONTRACT section 6)."""

from __future__ import annotations

SETTING_NAMES: tuple[str, ...] = (
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
)

SECRET_NAMES: frozenset[str] = frozenset(
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

MASK = "••••"


def mask(name: str, value: str) -> str:
    """The form a value is shown in: secrets reveal at most their last 4 characters."""
    if name not in SECRET_NAMES or value == "":
        return value
    return MASK + value[-4:] if len(value) >= 12 else MASK
