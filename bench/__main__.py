"""`python -m bench [--list] [--smoke] [--json FILE] [--profile] [--perf] [NAME ...]`: run the
benchmarks and print their figures; `python -m bench compare A.json B.json` compares two runs.

The benchmarks are listed in bench/registry.py (`--list` prints it). Every module has
`run(...) -> dict` and `report(results, console)`; each measures its own limit in the same run
and prints ratios against it with the target and PASS or BELOW. Names select benchmarks; none
means all but the tools. `--smoke` runs each at its smoke size (seconds: the test suite's check
that it still runs end to end; its figures mean nothing). `--json FILE` writes every figure of
the run with the machine, the date and the commit (bench/results.py).
`--profile` adds the modules' own cProfile output where they have one; `--perf` (Python 3.13 or
newer, Linux perf) adds `perf`'s split of a daemon's CPU where one has it (blocks: node3's).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
from pathlib import Path
from typing import Any

from bench import perf_split, results
from bench.registry import BENCHMARKS, BY_NAME, DEFAULT
from snode.common import compiled
from snode.tools.tables import make_console


def list_benchmarks() -> None:
    """The registry, one benchmark a line."""
    for b in BENCHMARKS:
        kind = "tool" if b.tool else "bench"
        smoke = "smoke " + ", ".join(f"{k}={v}" for k, v in b.smoke.items()) if b.smoke is not None else "no smoke"
        print(f"{b.name:15} {kind:5} ~{b.minutes:g} min  {'daemons' if b.daemons else 'in-process':10} "
              f"{b.measures} ({b.module}; {smoke})")


def main() -> int:
    """Run the benchmarks; 0 when they ran (a figure below its target is reported, not failed)."""
    if sys.argv[1:2] == ["compare"]:
        return results.compare_main(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="add cProfile output where a benchmark has it")
    parser.add_argument("--perf", action="store_true",
                        help="add perf's split of a daemon's CPU where a benchmark has it (Python 3.13+)")
    parser.add_argument("--perf-seconds", type=perf_split.positive_seconds, default=perf_split.SECONDS, metavar="S",
                        help=f"how long --perf records [{perf_split.SECONDS:g}]")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--smoke", action="store_true",
                        help="run each at its smoke size (seconds; no figure means much)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run: {', '.join(BY_NAME)} (default: all but the tools)")
    args = parser.parse_args()
    if args.list:
        list_benchmarks()
        return 0
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.names or DEFAULT]
    refused = next((f"{b.name} is a tool: run it with python -m {b.module}" for b in chosen if b.tool), None) \
        or next((f"{b.name} has no smoke size yet" for b in chosen if args.smoke and b.smoke is None), None)
    if refused:
        parser.error(refused)
    refused = perf_split.preflight() if args.perf else None
    if refused:
        print(f"{parser.prog}: {refused}", file=sys.stderr)
        return 2
    console = make_console()
    console.print(compiled.describe())  # what ran: the sources, or `make compiled`'s modules (daemons inherit it)
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    for bench in chosen:
        module = importlib.import_module(bench.module)
        takes = inspect.signature(module.run).parameters
        options: dict[str, Any] = dict(bench.smoke or {}) if args.smoke else {}
        if "profile" in takes:
            options["profile"] = args.profile
        if "perf_seconds" in takes:
            options["perf_seconds"] = args.perf_seconds if args.perf else None
        figures[bench.name] = module.run(**options)
        module.report(figures[bench.name], console)
        console.print()
    console.print(f"benchmarks finished in {time.perf_counter() - started:.0f} s")
    if args.json is not None:
        results.write(args.json, figures, smoke=args.smoke)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
