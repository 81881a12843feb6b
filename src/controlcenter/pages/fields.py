"""What the /setup and /admin/settings forms show: each field's control and its words."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    """One input of /admin/settings: its words, what it is and where to find it (`help`), and
    the shape a usable value has (`pattern`, a JavaScript regular expression, and `shape`,
    the words of the warning beside a value that does not match). The warning only helps:
    the API keeps accepting every value its own rules allow."""

    name: str
    label: str
    help: str
    pattern: str = field(default="", kw_only=True)
    shape: str = field(default="", kw_only=True)
    input_type: str = field(default="text", kw_only=True)

    @property
    def secret(self) -> bool:
        return self.name in SECRET_NAMES


HIGHLEVEL_ID = r"^[A-Za-z0-9]{20}$"
HIGHLEVEL_ID_SHAPE = "a HighLevel id: 20 letters and digits"
# HighLevel stores tag names in lower case; a name with capitals never matches a tag.
TAG = r"^[^A-Z\s]([^A-Z]*[^A-Z\s])?$"
TAG_SHAPE = "a tag name as HighLevel keeps it: lower case, no space at either end"

SETTING_GROUPS: tuple[tuple[str, tuple[SettingField, ...]], ...] = (
    (
        "AI providers",
        (
            SettingField(
                "providerAApiKey",
                "Anthropic API key (provider_a)",
                "The key the chat calls Claude with. Anthropic Console → Settings → API keys "
                "→ Create key. Starts with sk-ant-.",
                pattern=r"^sk-ant-\S+$",
                shape="an Anthropic key (sk-ant-…)",
            ),
            SettingField(
                "providerBApiKey",
                "OpenAI API key (provider_b)",
                "The key the chat calls OpenAI models with. platform.openai.com → API keys → "
                "Create new secret key. Starts with sk-.",
                pattern=r"^sk-\S+$",
                shape="an OpenAI key (sk-…)",
            ),
        ),
    ),
    (
        "CRM (HighLevel)",
        (
            SettingField(
                "crmAgencyApiKey",
                "Agency API key",
                "The agency's token, which gets each broker's sub-account token "
                "(POST /oauth/locationToken). HighLevel agency view → Settings → Private "
                "Integrations → Create new integration, with the scopes oauth.write, "
                "oauth.readonly, locations.readonly, contacts.readonly, contacts.write, "
                "conversations.readonly, conversations/message.write, opportunities.readonly, "
                "opportunities.write, calendars.readonly, calendars/events.readonly, "
                "locations/customFields.readonly, locations/tags.readonly, "
                "payments/orders.readonly, payments/transactions.readonly. A private integration "
                "token (pit-…) or an agency OAuth access token.",
            ),
            SettingField(
                "crmAgencyId",
                "Agency ID",
                "The agency's company id. HighLevel agency view → Settings → Company → "
                "Company ID. 20 letters and digits.",
                pattern=HIGHLEVEL_ID,
                shape=HIGHLEVEL_ID_SHAPE,
            ),
            SettingField(
                "crmPrivateToken",
                "Private integration token",
                "The token of your own sub-account (the one brokers are added to as contacts "
                "when they finish their setup). In that sub-account: Settings → Private "
                "Integrations → Create new integration, with the scopes contacts.readonly, "
                "contacts.write, locations.readonly, locations/customFields.readonly, "
                "locations/tags.readonly, locations/tags.write. Starts with pit-.",
                pattern=r"^pit-\S+$",
                shape="a private integration token (pit-…)",
            ),
            SettingField(
                "crmOwnerLocationId",
                "Operator location ID",
                "Your own sub-account's id. In that sub-account: Settings → Business Profile → "
                "Location ID. 20 letters and digits.",
                pattern=HIGHLEVEL_ID,
                shape=HIGHLEVEL_ID_SHAPE,
            ),
            SettingField(
                "crmWebhookSecret",
                "Webhook secret",
                "A secret you choose for webhooks the CRM sends to this service; enter the same "
                "text in the HighLevel workflow's webhook action. At least 16 characters.",
                pattern=r"^\S{16,}$",
                shape="a secret of at least 16 characters without spaces",
            ),
        ),
    ),
    (
        "CRM tags",
        (
            SettingField(
                "tagHighGCI",
                "High-GCI tag",
                "Put on a broker's contact in your sub-account when their GCI is high. Needed by "
                "onboarding. A tag name, e.g. high-gci (HighLevel: Settings → Tags).",
                pattern=TAG,
                shape=TAG_SHAPE,
            ),
            SettingField(
                "tagOnboardingComplete",
                "Onboarding complete tag",
                "Put on a broker's contact when they save their setup. Needed by onboarding. A "
                "tag name, e.g. onboarding-complete (HighLevel: Settings → Tags).",
                pattern=TAG,
                shape=TAG_SHAPE,
            ),
            SettingField(
                "tagDFYRequested",
                "Done-for-you requested tag",
                "Put on a broker's contact when they ask for a done-for-you setup. A tag name, "
                "e.g. dfy-requested (HighLevel: Settings → Tags).",
                pattern=TAG,
                shape=TAG_SHAPE,
            ),
        ),
    ),
    (
        "Payments (Stripe)",
        (
            SettingField(
                "paymentSecretKey",
                "Secret key",
                "Stripe Dashboard → Developers → API keys → Secret key (or a restricted key). "
                "Starts with sk_live_, sk_test_, rk_live_ or rk_test_.",
                pattern=r"^[sr]k_(live|test)_\S+$",
                shape="a Stripe secret key (sk_live_… or sk_test_…)",
            ),
            SettingField(
                "paymentWebhookSecret",
                "Webhook secret",
                "Stripe Dashboard → Developers → Webhooks → this service's endpoint → Signing "
                "secret. Starts with whsec_.",
                pattern=r"^whsec_\S+$",
                shape="a Stripe signing secret (whsec_…)",
            ),
        ),
    ),
    (
        "Tasks (ClickUp)",
        (
            SettingField(
                "tasksApiKey",
                "API key",
                "ClickUp → your avatar → Settings → Apps → API Token → Generate. Starts with pk_.",
                pattern=r"^pk_\S+$",
                shape="a ClickUp personal token (pk_…)",
            ),
            SettingField(
                "tasksListId",
                "List ID",
                "The ClickUp list new tasks go to: open the list, and its id is the number "
                "after /li/ in the address (or … → Copy link). Digits only.",
                pattern=r"^[0-9]+$",
                shape="a ClickUp list id (digits)",
            ),
        ),
    ),
    (
        "Done-for-you prices",
        (
            SettingField(
                "dfyPriceFullSetup",
                "Full setup",
                "The Stripe price of the full done-for-you setup: Stripe Dashboard → Product "
                "catalogue → the product → its price's ID. Starts with price_.",
                pattern=r"^price_\S+$",
                shape="a Stripe price ID (price_…)",
            ),
            SettingField(
                "dfyPriceSmsSetup",
                "SMS setup",
                "The Stripe price of the SMS setup: Stripe Dashboard → Product catalogue → the "
                "product → its price's ID. Starts with price_.",
                pattern=r"^price_\S+$",
                shape="a Stripe price ID (price_…)",
            ),
            SettingField(
                "dfyPriceEmailSetup",
                "E-mail setup",
                "The Stripe price of the e-mail setup: Stripe Dashboard → Product catalogue → "
                "the product → its price's ID. Starts with price_.",
                pattern=r"^price_\S+$",
                shape="a Stripe price ID (price_…)",
            ),
        ),
    ),
    (
        "Scheduling (Calendly)",
        (
            SettingField(
                "schedulingCoachingLink",
                "Coaching link",
                "Where brokers book a coaching call. Calendly → the event type → Copy link, "
                "e.g. https://calendly.com/your-team/coaching.",
                pattern=r"^https://calendly\.com/\S+$",
                shape="a Calendly link (https://calendly.com/…)",
                input_type="url",
            ),
            SettingField(
                "schedulingTeamLink",
                "Team link",
                "Where brokers book a call with the team. Calendly → the event type → Copy "
                "link, e.g. https://calendly.com/your-team/intro.",
                pattern=r"^https://calendly\.com/\S+$",
                shape="a Calendly link (https://calendly.com/…)",
                input_type="url",
            ),
        ),
    ),
    (
        "Notifications and tools",
        (
            SettingField(
                "notificationEmail",
                "Notification e-mail",
                "Where the service's notices go. An e-mail address (the API refuses any other "
                "value).",
                pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
                shape="an e-mail address",
                input_type="email",
            ),
            SettingField(
                "mcpServerUrl",
                "MCP server URL",
                "An MCP server whose tools the chat may call, by its streamable HTTP address, "
                "e.g. https://mcp.example.com/mcp. Leave empty for the CRM tools only.",
                pattern=r"^https?://\S+$",
                shape="an http:// or https:// address",
                input_type="url",
            ),
        ),
    ),
)

assert sorted(f.name for _, group in SETTING_GROUPS for f in group) == sorted(SETTING_NAMES)


@dataclass(frozen=True)
class ChecklistRow:
    """One integration of /admin/checklist: its test's name, the settings it needs."""

    name: str  # as POST /api/v1/admin/integrations/{name}/test takes it
    title: str
    settings: tuple[str, ...]
    needs: str


CHECKLIST: tuple[ChecklistRow, ...] = (
    ChecklistRow("provider_a", "Anthropic", ("providerAApiKey",), "The chat's model (provider_a)"),
    ChecklistRow("provider_b", "OpenAI", ("providerBApiKey",), "The other model (provider_b)"),
    ChecklistRow(
        "crm",
        "CRM",
        ("crmPrivateToken", "crmOwnerLocationId"),
        "Your HighLevel sub-account, where onboarding puts brokers",
    ),
    ChecklistRow("mcp", "MCP", ("mcpServerUrl",), "Optional: more tools for the chat"),
)
# The tags onboarding puts on a broker's contact: without them the outbox waits.
ONBOARDING_TAGS = ("tagOnboardingComplete", "tagHighGCI")
