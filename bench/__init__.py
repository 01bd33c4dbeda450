"""Benchmarks that measure this machine's limit in the same run and report ratios against it.

`python -m bench --list` names them (bench/registry.py); bench/README.md says how to run one,
compare two runs, and which modules are support; docs/PERFORMANCE.md has the figures.
"""
