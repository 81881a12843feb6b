"""Metrics across `serve`'s worker processes (`observability/metrics.py`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, a fresh directory where each keeps its metrics, so that any of
    them answers /metrics for all; set before they start (they inherit it), removed after.
    An operator's own PROMETHEUS_MULTIPROC_DIR is used as it is."""
    if workers <= 1 or os.environ.get(MULTIPROC_ENV):
        yield
        return
    directory = tempfile.mkdtemp(prefix="controlcenter-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield
    finally:
        del os.environ[MULTIPROC_ENV]
        shutil.rmtree(directory, ignore_errors=True)
