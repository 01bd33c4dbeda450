"""docs/SECURITY.md names the tests that drive each surface past its budgets: every
`file.py::test_name` it names is a real test of that file (a renamed test fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_the_security_document_names_exists() -> None:
    text = (ROOT / "docs" / "SECURITY.md").read_text()
    named = set(re.findall(r"([\w/]*test_\w+\.py)::(test_\w+)", text))
    assert len(named) >= 20, named
    missing = []
    for file, test in sorted(named):
        name = Path(file).name
        found = [p for p in (ROOT / "tests").rglob(name)]
        if not any(re.search(rf"^(async )?def {test}\(", p.read_text(), re.M) for p in found):
            missing.append(f"{file}::{test}")
    assert missing == [], missing


def _p2p_rows() -> list[str]:
    text = (ROOT / "docs" / "SECURITY.md").read_text()
    section = text.split("## Bounds on one P2P peer", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what | bound")]


def _named_alone(cell: str) -> list[str]:
    """The constants a row's last cell names with no module: those before any `module.NAME`
    (a module named once holds the names after it in its cell)."""
    names = []
    for name in re.findall(r"`([\w.]+)`", cell):
        if "." in name:
            break
        if re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
            names.append(name)
    return names


def _renderings(value: float) -> list[str]:
    """How the table writes a bound's value: 4,096; 8 MiB; 64 KiB; 5 s."""
    if isinstance(value, float):
        return [f"{value:g} s", f"{value:,.0f}"]
    shown = [f"{value:,}"]
    if value >= 1024 and value % 1024 == 0:
        shown.append(f"{value // 1024} KiB")
    if value >= 1 << 20 and value % (1 << 20) == 0:
        shown.append(f"{value >> 20} MiB")
    return shown


def test_the_p2p_bounds_table_names_each_peer_limit_with_its_value() -> None:
    """Every constant the P2P table names alone is one of net/limits.py, and every bound of
    `PeerLimits` and `SyncLimits` is in the table, in a row that shows its value."""
    from dataclasses import fields

    from snode.net import limits as L

    rows = _p2p_rows()
    bare = {name for row in rows for name in _named_alone(row.rstrip(" |").rsplit("|", 1)[1])}
    assert bare and [name for name in sorted(bare) if not hasattr(L, name)] == []
    wrong = []
    bounds = [(record, field.name) for record in (L.DEFAULT_LIMITS, L.DEFAULT_SYNC_LIMITS)
              for field in fields(record)]
    for record, name in bounds:
        constant, value = name.upper(), getattr(record, name)
        assert getattr(L, constant) == value, f"{type(record).__name__}.{name} is not {constant}'s value"
        naming = [row for row in rows if f"`{constant}`" in row]
        if not any(re.search(rf"(?<![\d.])(?<!\d,){re.escape(shown)}(?!\d|,\d)", row)
                   for row in naming for shown in _renderings(value)):
            wrong.append(f"{constant} = {value}: {'no row shows it' if naming else 'not in the table'}")
    assert wrong == [], wrong
