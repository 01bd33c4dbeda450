"""What every benchmark's report shares: the verdict word and the figures table's layout."""

from __future__ import annotations

from rich.table import Table


def verdict(ok: bool) -> str:
    """PASS or BELOW, coloured."""
    return "[green]PASS[/]" if ok else "[red]BELOW[/]"


def figures_table(limit_header: str) -> Table:
    """A table of figure, value, the limit it is compared with (`limit_header` names that
    column), ratio, target and verdict."""
    table = Table(show_edge=False, pad_edge=False)
    for name, justify in (("figure", "left"), ("value", "right"), (limit_header, "right"),
                          ("ratio", "right"), ("target", "left"), ("verdict", "left")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    return table
