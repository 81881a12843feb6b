"""The security headers every page and page asset carries (docs/security.md)."""

from __future__ import annotations

from starlette.responses import Response

# No inline script, no other host: the scripts are the vendored files and the pages' own.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

PAGE_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

# Assets may be cached; they change with the service's version (see VENDORED.md for names).
ASSET_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def with_page_headers(response: Response) -> Response:
    response.headers.update(PAGE_HEADERS)
    return response
