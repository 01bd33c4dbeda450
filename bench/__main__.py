"""`python -m bench [--profile] [--perf] [NAME ...]`: run the benchmarks and print their figures.

Every module has `run(...) -> dict` and `report(results, console)`; each measures its own limit
in the same run and prints ratios against it with the target and PASS or BELOW. Names select
modules (core, store, rpc, sync, proof, intake, blocks, scale, devnet, hostile, mempool); none means all.
`--profile` adds the modules' own cProfile output where they have one; `--perf` (Python 3.13 or
newer, Linux perf) adds `perf`'s split of a daemon's CPU where one has it (blocks: node3's).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
from typing import Any, Final

from bench import perf_split
from snode.tools.tables import make_console

MODULES: Final = ("core", "store", "rpc", "sync", "proof", "intake", "blocks", "scale", "devnet", "hostile",
                   "mempool")


def main() -> int:
    """Run the benchmarks; 0 when they ran (a figure below its target is reported, not failed)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="add cProfile output where a benchmark has it")
    parser.add_argument("--perf", action="store_true",
                        help="add perf's split of a daemon's CPU where a benchmark has it (Python 3.13+)")
    parser.add_argument("--perf-seconds", type=perf_split.positive_seconds, default=perf_split.SECONDS, metavar="S",
                        help=f"how long --perf records [{perf_split.SECONDS:g}]")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run: {', '.join(MODULES)} (default: all)")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in MODULES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(MODULES)}")
    refused = perf_split.preflight() if args.perf else None
    if refused:
        print(f"{parser.prog}: {refused}", file=sys.stderr)
        return 2
    console = make_console()
    started = time.perf_counter()
    for name in args.names or MODULES:
        module = importlib.import_module(f"bench.{name}_bench")
        takes = inspect.signature(module.run).parameters
        options: dict[str, Any] = {}
        if "profile" in takes:
            options["profile"] = args.profile
        if "perf_seconds" in takes:
            options["perf_seconds"] = args.perf_seconds if args.perf else None
        results = module.run(**options)
        module.report(results, console)
        console.print()
    console.print(f"benchmarks finished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
