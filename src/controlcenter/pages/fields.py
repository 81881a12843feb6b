"""What the /setup and /admin/settings forms show: each field's control and its words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from controlcenter.admin_settings.names import SECRET_NAMES, SETTING_NAMES
from controlcenter.onboarding.models import FIELDS

Kind = Literal["text", "boolean", "list"]


@dataclass(frozen=True)
class SetupField:
    name: str
    label: str
    kind: Kind = "text"
    hint: str = ""
    item: str = ""  # what one entry of a list is called ("pain point")


SETUP_FIELDS: tuple[SetupField, ...] = (
    SetupField("brokerageName", "Brokerage name"),
    SetupField("yearsInBusiness", "Years in business", hint="For example 3 or 10+"),
    SetupField(
        "gciLast12Months", "GCI in the last 12 months", hint="Gross commission income, e.g. 100k"
    ),
    SetupField("usingOtherCrm", "Do you use another CRM today?", "boolean"),
    SetupField("currentCrmName", "Which CRM do you use?"),
    SetupField("crmPainPoints", "What gets in your way with it?", "list", item="pain point"),
    SetupField("goalsSelected", "Your goals", "list", item="goal"),
    SetupField("hasLeadSource", "Do you have a lead source?", "boolean"),
    SetupField("leadSourceName", "Which lead source?"),
    SetupField("wantsMoreLeads", "Do you want more leads?", "boolean"),
    SetupField("leadTypesDesired", "Lead types you want", "list", item="lead type"),
    SetupField("leadsPerMonthTarget", "Leads per month you aim for"),
    SetupField("channelsSelected", "Channels you use", "list", item="channel"),
    SetupField("systemsToConnect", "Systems to connect", "list", item="system"),
)

assert {f.name for f in SETUP_FIELDS} == {*FIELDS, "brokerageName"}, "every onboarding field"


@dataclass(frozen=True)
class SettingField:
    name: str
    label: str
    secret: bool
    input_type: str = "text"


def _setting(name: str, label: str, input_type: str = "text") -> SettingField:
    return SettingField(name, label, name in SECRET_NAMES, input_type)


SETTING_GROUPS: tuple[tuple[str, tuple[SettingField, ...]], ...] = (
    (
        "AI providers",
        (
            _setting("providerAApiKey", "Anthropic API key (provider_a)"),
            _setting("providerBApiKey", "OpenAI API key (provider_b)"),
        ),
    ),
    (
        "CRM (HighLevel)",
        (
            _setting("crmAgencyApiKey", "Agency API key"),
            _setting("crmAgencyId", "Agency ID"),
            _setting("crmPrivateToken", "Private integration token"),
            _setting("crmOwnerLocationId", "Operator location ID"),
            _setting("crmWebhookSecret", "Webhook secret"),
        ),
    ),
    (
        "CRM tags",
        (
            _setting("tagHighGCI", "High-GCI tag"),
            _setting("tagOnboardingComplete", "Onboarding complete tag"),
            _setting("tagDFYRequested", "Done-for-you requested tag"),
        ),
    ),
    (
        "Payments (Stripe)",
        (
            _setting("paymentSecretKey", "Secret key"),
            _setting("paymentWebhookSecret", "Webhook secret"),
        ),
    ),
    (
        "Tasks (ClickUp)",
        (_setting("tasksApiKey", "API key"), _setting("tasksListId", "List ID")),
    ),
    (
        "Done-for-you prices",
        (
            _setting("dfyPriceFullSetup", "Full setup"),
            _setting("dfyPriceSmsSetup", "SMS setup"),
            _setting("dfyPriceEmailSetup", "E-mail setup"),
        ),
    ),
    (
        "Scheduling (Calendly)",
        (
            _setting("schedulingCoachingLink", "Coaching link", "url"),
            _setting("schedulingTeamLink", "Team link", "url"),
        ),
    ),
    (
        "Notifications and tools",
        (
            _setting("notificationEmail", "Notification e-mail", "email"),
            _setting("mcpServerUrl", "MCP server URL", "url"),
        ),
    ),
)

assert sorted(f.name for _, group in SETTING_GROUPS for f in group) == sorted(SETTING_NAMES)
