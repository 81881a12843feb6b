"""Server-rendered pages (docs/ui.md): templates, vendored scripts, page routes."""

from controlcenter.pages.router import mount_pages

__all__ = ["mount_pages"]
