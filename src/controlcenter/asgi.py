"""The ASGI app that `controlcenter serve` runs (importable by any ASGI server)."""

from controlcenter.app import create_app
from controlcenter.config import Config

app = create_app(Config(), run_worker=True)
