"""E-mails (HighLevel app `emails`, Version 2021-07-28): e-mail templates."""

from __future__ import annotations

from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.errors import CrmNotFound
from controlcenter.crm.tools.common import Paging, crm_tool, schema, text

PAGING = Paging(10, offset=True)


@crm_tool(
    "emails_fetch-template",
    "fetch-template",
    what="e-mail template",
    description=(
        "List the e-mail templates, optionally searching by name. Returns `templates`, each "
        "with id, name, templateType, isPlainText, previewUrl, dateAdded and lastUpdated."
    ),
    schema=schema(
        {
            "search": text("Text in the template name.", 200),
            **PAGING.schema,
        }
    ),
)
async def fetch_templates(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {
        "locationId": crm.location_id,
        "search": args.get("search"),
        **PAGING.params(args),
    }
    try:
        answer = await crm.get("/emails/builder", params)
    except CrmNotFound:  # the operation's documented answer when nothing matches
        answer = None
    return {"templates": templates_of(answer)}


def templates_of(answer: Any) -> list[Any]:
    """FetchBuilderSuccesfulResponseDto describes one template's fields (id, name, ...) and
    no list around them; a list of templates (bare, or under `builders`) is read as well, so
    the model gets one shape whatever the answer's wrapper."""
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("builders"), list):
        return list(answer["builders"])
    if isinstance(answer, dict) and answer.get("id"):
        return [answer]
    return []


TOOLS = (fetch_templates,)
