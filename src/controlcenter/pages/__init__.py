"""Server-rendered pages (CONTRACT section 10): templates, vendored scripts, page routes."""

from controlcenter.pages.router import mount_pages

__all__ = ["mount_pages"]
