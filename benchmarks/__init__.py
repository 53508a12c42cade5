"""Benchmarks: `python -m benchmarks.search` (also `nox -s bench`)."""
