"""The session user's own CRM client for the assistant's tools.

A broker's sub-account (location) is linked with `controlcenter users set-crm`; the service
acts in it with the agency credential (`crmAgencyApiKey`, company `crmAgencyId`), exchanged
for a location token the way HighLevel intends. The location comes from the user record,
never from the model, so one broker cannot reach another's data.
"""

from __future__ import annotations

from collections.abc import Mapping

from controlcenter.admin_settings.names import AGENCY_API_KEY, AGENCY_ID
from controlcenter.admin_settings.usable import check_credential
from controlcenter.auth.models import UserRecord
from controlcenter.common.logs import get_logger
from controlcenter.crm.client import AgencyLocationToken, CrmClient
from controlcenter.crm.transport import CrmTransport

log = get_logger(__name__)

AGENCY_SETTINGS = (AGENCY_API_KEY, AGENCY_ID)


def linked_location(user: UserRecord) -> str | None:
    """The CRM location the user is linked to; None when none is (blank counts as none)."""
    return (user.crm_location_id or "").strip() or None


async def broker_client(
    settings: Mapping[str, str], transport: CrmTransport, user: UserRecord
) -> CrmClient | None:
    """The client scoped to the user's linked location; None when it cannot be built.

    `settings` holds (at least) the agency settings, as the caller read them.

    Raises UnusableSettingError when the agency key cannot be sent in a header (not printable
    ASCII): settings are stored as given and refused where they are used
    (docs/onboarding-settings.md, "Unusable values").
    """
    location_id = linked_location(user)
    if location_id is None:
        return None
    values = settings
    agency_key = values.get(AGENCY_API_KEY, "").strip()
    company_id = values.get(AGENCY_ID, "").strip()
    if not agency_key or not company_id:
        log.warning(
            "crm agency settings missing",
            user_id=user.id,
            missing=[name for name in AGENCY_SETTINGS if not values.get(name, "").strip()],
        )
        return None
    check_credential(AGENCY_API_KEY, agency_key)  # a clear chat error, not a codec trace
    token = AgencyLocationToken(transport, agency_key, company_id, location_id)
    return CrmClient(transport, token=token, location_id=location_id)
