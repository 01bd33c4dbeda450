"""`python -m bench [--profile]`: run every benchmark module present and print its figures.

Each module has `run() -> dict`; a module with `report(results, console)` prints its own tables,
any other module's figures are printed as a plain list. `--profile` adds a cProfile of
apply_block to the core figures.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench import core_bench
from snode.tools.tables import make_console

OPTIONAL_MODULES: Final = ("bench.store_bench",)


def optional_module(name: str) -> ModuleType | None:
    """The benchmark module `name`, or None when it does not exist (yet)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name == name:
            return None
        raise


def flatten(figures: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, value) for every leaf of a nested dict of figures."""
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{name}.")
        else:
            yield name, value


def plain_report(title: str, figures: Mapping[str, Any], console: Console) -> None:
    """The figures of a module that has no report of its own."""
    console.print()
    console.print(f"[bold]{title}[/]")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in flatten(figures):
        table.add_row(name, f"{value:,.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def main() -> int:
    """Run the benchmarks; 0 when they ran (a figure below its target is reported, not failed)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="add a cProfile of apply_block")
    args = parser.parse_args()
    console = make_console()
    started = time.perf_counter()
    core_bench.report(core_bench.run(profile=args.profile), console)
    for name in OPTIONAL_MODULES:
        module = optional_module(name)
        if module is None:
            continue
        results = module.run()
        report = getattr(module, "report", None)
        if report is not None:
            report(results, console)
        else:
            plain_report(name.rpartition(".")[2], results, console)
    console.print()
    console.print(f"benchmarks finished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
