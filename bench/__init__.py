"""Benchmark scripts and the eval datasets, above every package: a package only so the import contracts cover it.

Each script runs as ``python bench/<script>.py`` (sibling modules are imported by name from this
folder); the micro benchmarks (``bench_*.py``) run with ``pytest bench/ --benchmark-only``.
"""
