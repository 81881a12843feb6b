"""Calendars (HighLevel app `calendars`, Version 2021-04-15): calendars, events, free slots."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import (
    DATE_TIME,
    DAY,
    Paging,
    crm_tool,
    day,
    id_arg,
    moment,
    ms,
    now,
    path,
    pick,
    require_one,
    schema,
    text,
)
from controlcenter.tools.base import ToolError

NOTES_PAGING = Paging(20, offset=True)  # both are required by the operation


@crm_tool(
    "calendars_get-calendars",
    "get-calendars",
    what="calendar",
    description=(
        "List the calendars (e.g. property tours, consultations). Returns `calendars` with "
        "their ids, needed by the other calendar tools."
    ),
    schema=schema({}),
)
async def get_calendars(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get("/calendars/", {"locationId": crm.location_id})


@crm_tool(
    "calendars_get-calendar-events",
    "get-calendar-events",
    what="calendar",
    description=(
        "List appointments of a calendar or of a user (give `calendarId` or `userId`) between "
        "two times; by default the next 7 days. Returns `events` (id, title, startTime, "
        "endTime, contactId, appointmentStatus)."
    ),
    schema=schema(
        {
            "calendarId": id_arg("calendar"),
            "userId": id_arg("user"),
            "startTime": DATE_TIME,
            "endTime": DATE_TIME,
        }
    ),
)
async def get_calendar_events(crm: CrmClient, args: dict[str, Any]) -> Any:
    require_one(
        args,
        "calendarId",
        "userId",
        why="Give a calendarId (see calendars_get-calendars) or a userId.",
    )
    start = moment(args["startTime"], "startTime") if "startTime" in args else now()
    end = moment(args["endTime"], "endTime") if "endTime" in args else start + timedelta(days=7)
    if end < start:
        raise ToolError("endTime must be after startTime.")
    params = {
        "locationId": crm.location_id,
        "startTime": ms(start),
        "endTime": ms(end),
        **pick(args, "calendarId", "userId"),
    }
    return await crm.get("/calendars/events", params)


@crm_tool(
    "calendars_get-appointment-notes",
    "get-appointment-notes",
    what="appointment",
    description=(
        "Read the notes of one appointment (event id from calendars_get-calendar-events). "
        "Returns `notes` and `hasMore`."
    ),
    schema=schema(
        {"appointmentId": id_arg("appointment"), **NOTES_PAGING.schema},
        ["appointmentId"],
    ),
)
async def get_appointment_notes(crm: CrmClient, args: dict[str, Any]) -> Any:
    where = path("/calendars/appointments/{appointmentId}/notes", args)
    return await crm.get(where, NOTES_PAGING.params(args))


@crm_tool(
    "calendars_get-free-slots",
    "get-slots",
    what="calendar",
    description=(
        "Find open booking times of a calendar between two dates (at most 31 days). Returns "
        "one entry per date (YYYY-MM-DD) with its `slots` (start times)."
    ),
    schema=schema(
        {
            "calendarId": id_arg("calendar"),
            "startDate": DAY,
            "endDate": DAY,
            "timezone": text("IANA time zone for the answer, e.g. America/Chicago.", 64),
        },
        ["calendarId", "startDate", "endDate"],
    ),
)
async def get_free_slots(crm: CrmClient, args: dict[str, Any]) -> Any:
    first, last = day(args["startDate"], "startDate"), day(args["endDate"], "endDate")
    if last < first:
        raise ToolError("endDate must not be before startDate.")
    if (last - first).days > 30:
        raise ToolError("The range can cover at most 31 days; ask for a shorter range.")
    start = datetime.combine(first, time.min, UTC)
    end = datetime.combine(last, time.max, UTC)
    params = {"startDate": ms(start), "endDate": ms(end), **pick(args, "timezone")}
    return await crm.get(path("/calendars/{calendarId}/free-slots", args), params)


TOOLS = (get_calendars, get_calendar_events, get_appointment_notes, get_free_slots)
