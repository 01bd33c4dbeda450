"""Benchmarks that measure this machine's limit in the same run and report ratios against it.

`python -m bench` (or `make bench`) runs every benchmark module present; see docs/PERFORMANCE.md.
"""
