"""Benchmarks of the service against baselines measured in the same run (`make bench`).

Never imported by tests/: benchmarks are not part of `make test`.
"""
