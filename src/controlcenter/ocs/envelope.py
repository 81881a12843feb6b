"""The OCS envelope as Nextcloud renders it (V2 responses), in JSON and in XML.

Nextcloud builds its XML with PHP's XMLWriter (`setIndent(true)`, one space a level,
`<?xml version="1.0"?>` prolog); list items are named `element`, an empty value is a
self-closing element. Reproducing that byte for byte lets Nextcloud clients parse it as usual.
"""

from __future__ import annotations

import json
from typing import Any, Literal
from xml.sax.saxutils import escape

Format = Literal["json", "xml"]

JSON_MEDIA_TYPE = "application/json; charset=utf-8"
XML_MEDIA_TYPE = "application/xml; charset=utf-8"

NOT_LOGGED_IN = "Current user is not logged in"
NOT_FOUND = (
    "Invalid query, please check the syntax. API specifications are here: "
    "http://www.freedesktop.org/wiki/Specifications/open-collaboration-services.\n"
)


def envelope(statuscode: int, message: str, data: Any) -> dict[str, Any]:
    """`{ocs: {meta, data}}`; status is "ok" exactly for 2xx, as in Nextcloud's V2Response."""
    ok = 200 <= statuscode < 300
    meta = {"status": "ok" if ok else "failure", "statuscode": statuscode, "message": message}
    return {"ocs": {"meta": meta, "data": data}}


def render(document: dict[str, Any], fmt: Format) -> bytes:
    if fmt == "json":
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    lines = ['<?xml version="1.0"?>']
    _xml(document, 0, lines)
    return ("\n".join(lines) + "\n").encode()


def media_type(fmt: Format) -> str:
    return JSON_MEDIA_TYPE if fmt == "json" else XML_MEDIA_TYPE


def choose_format(query_format: str | None, accept: str | None) -> Format:
    """`?format=` wins; else the first JSON or XML type named in Accept; JSON by default.

    Nextcloud looks at the Accept types in the order given and ignores their q-values; an
    unknown `format` value falls back to the default instead of failing.
    """
    if query_format is not None:
        lowered = query_format.strip().lower()
        if lowered == "json" or lowered == "xml":
            return lowered  # type: ignore[return-value]  # narrowed by the comparison above
    if accept:
        for part in accept.split(","):
            media = part.split(";", 1)[0].strip().lower()
            if media == "application/json":
                return "json"
            if media in ("application/xml", "text/xml"):
                return "xml"
    return "json"


def _xml(value: Any, depth: int, lines: list[str]) -> None:
    indent = " " * depth
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        name = "element" if isinstance(key, int) else str(key)
        if isinstance(item, dict | list | tuple):
            if not item:
                lines.append(f"{indent}<{name}/>")
                continue
            lines.append(f"{indent}<{name}>")
            _xml(item, depth + 1, lines)
            lines.append(f"{indent}</{name}>")
        elif item is None:
            lines.append(f"{indent}<{name}/>")
        else:
            lines.append(f"{indent}<{name}>{escape(_text(item))}</{name}>")


def _text(value: Any) -> str:
    # PHP's (string) cast: true is "1", false is "".
    if isinstance(value, bool):
        return "1" if value else ""
    return str(value)
