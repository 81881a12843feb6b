"""Opportunities (HighLevel app `opportunities`, Version 2021-07-28): deals and pipelines."""

from __future__ import annotations

from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import Paging, by_id, crm_tool, id_arg, path, pick, schema, text

STATUS = {
    "type": "string",
    "enum": ["open", "won", "lost", "abandoned"],
    "description": "Deal status.",
}
VALUE = {"type": "number", "minimum": 0, "description": "Value."}
OPPORTUNITY = "/opportunities/{opportunityId}"
PAGING = Paging(20)


@crm_tool(
    "opportunities_search-opportunity",
    "search-opportunity",
    what="opportunity",
    description=(
        "Search deals (opportunities) in the pipelines, by text, pipeline, stage, contact or "
        "status. Returns `opportunities` (name, status, monetaryValue, pipelineStageId, "
        "contact) and `meta.total`."
    ),
    schema=schema(
        {
            "query": text("Text to look for in the deal or contact name.", 200),
            "pipelineId": id_arg("pipeline"),
            "pipelineStageId": id_arg("pipeline stage"),
            "contactId": id_arg("contact"),
            "status": {**STATUS, "enum": [*STATUS["enum"], "all"]},
            **PAGING.schema,
        }
    ),
)
async def search_opportunities(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {
        "location_id": crm.location_id,
        "q": args.get("query"),
        "pipeline_id": args.get("pipelineId"),
        "pipeline_stage_id": args.get("pipelineStageId"),
        "contact_id": args.get("contactId"),
        "status": args.get("status"),
        **PAGING.params(args),
    }
    return await crm.get("/opportunities/search", params)


@crm_tool(
    "opportunities_get-opportunity",
    "get-opportunity",
    what="opportunity",
    description=(
        "Get one deal (opportunity) by id: its name, value, status, pipeline stage and "
        "contact. Returns `opportunity`."
    ),
    schema=by_id("opportunityId", "opportunity"),
)
async def get_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(path(OPPORTUNITY, args))


@crm_tool(
    "opportunities_create-opportunity",
    "create-opportunity",
    what="opportunity",
    description=(
        "Create a deal for a contact in a pipeline (get pipeline and stage ids from "
        "opportunities_get-pipelines). Returns the new `opportunity`."
    ),
    schema=schema(
        {
            "pipelineId": id_arg("pipeline"),
            "name": text("Deal name, e.g. 'Acme - 5th Ave lease'.", 200),
            "contactId": id_arg("contact"),
            "pipelineStageId": id_arg("pipeline stage"),
            "status": STATUS,
            "monetaryValue": VALUE,
        },
        ["pipelineId", "name", "contactId"],
    ),
)
async def create_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = {
        "locationId": crm.location_id,
        "status": args.get("status", "open"),  # required by the operation
        **pick(args, "pipelineId", "name", "contactId", "pipelineStageId", "monetaryValue"),
    }
    return await crm.post("/opportunities/", body)


@crm_tool(
    "opportunities_update-opportunity",
    "update-opportunity",
    what="opportunity",
    description=(
        "Change a deal: move it to another stage, mark it won/lost, rename it or change its "
        "value. Only the fields given change. Returns the updated `opportunity`."
    ),
    schema=schema(
        {
            "opportunityId": id_arg("opportunity"),
            "name": text("Deal name.", 200),
            "pipelineId": id_arg("pipeline"),
            "pipelineStageId": id_arg("pipeline stage"),
            "status": STATUS,
            "monetaryValue": VALUE,
        },
        ["opportunityId"],
        minProperties=2,
    ),
)
async def update_opportunity(crm: CrmClient, args: dict[str, Any]) -> Any:
    body = pick(args, "name", "pipelineId", "pipelineStageId", "status", "monetaryValue")
    return await crm.put(path(OPPORTUNITY, args), body)


@crm_tool(
    "opportunities_get-pipelines",
    "get-pipelines",
    what="pipeline",
    description=(
        "List the sales pipelines and their stages (ids and names, in order). Use it to "
        "understand stage ids in deals or before moving a deal. Returns `pipelines`."
    ),
    schema=schema({}),
)
async def get_pipelines(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get("/opportunities/pipelines", {"locationId": crm.location_id})


TOOLS = (
    search_opportunities,
    get_opportunity,
    create_opportunity,
    update_opportunity,
    get_pipelines,
)
