"""What every benchmark's report shares: the verdict word and the figures table's layout."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import JustifyMethod
from rich.table import Table


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn()` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def verdict(ok: bool) -> str:
    """PASS or BELOW, coloured."""
    return "[green]PASS[/]" if ok else "[red]BELOW[/]"


def figures_table(limit_header: str) -> Table:
    """A table of figure, value, the limit it is compared with (`limit_header` names that
    column), ratio, target and verdict."""
    table = Table(show_edge=False, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("figure", "left"), ("value", "right"), (limit_header, "right"), ("ratio", "right"), ("target", "left"),
        ("verdict", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)
    return table
