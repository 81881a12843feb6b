"""Server-rendered pages (CONTRACT section 10): templates, vendored scripts, page routes."""

from controlcenter.web.pages.router import mount_pages

__all__ = ["mount_pages"]
