"""Where one service-node daemon's CPU goes per block (`python -m bench --profile blocks`).

The daemon runs with SNODE_PROFILE (src/snode/app/profiling.py: cProfile on every thread, on
each thread's CPU clock, so the machine's load does not skew it) from its start to a clean stop
just after the measured blocks. Each part below is the CPU time inside its entry points
(inclusive: "signatures" is also inside "template check" and "apply"), divided by the blocks the
daemon applied; start-up is one part of its own.
"""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Final

from rich.console import Console

PARTS: Final = (
    # (part, entry points: (a path the function's file ends with, its name))
    ("signatures (Ed25519 verify)", (("nacl/bindings/crypto_sign.py", "crypto_sign_open"),)),
)


def split(prof: Path, blocks: int) -> list[tuple[str, float]]:
    """(part, CPU ms per block): the total first, then each part."""
    stats = pstats.Stats(str(prof))
    table = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values())
    rows = [("total (all threads)", total)]
    for part, entries in PARTS:
        rows.append((part, sum(row[3] for (path, _, name), row in table.items()
                               if any(path.endswith(p) and name == n for p, n in entries))))
    return [(part, 1000 * seconds / blocks) for part, seconds in rows]


def report(rows: list[tuple[str, float]], console: Console) -> None:
    console.print("node2's CPU per block (cProfile, CPU clock), inclusive parts:")
    for part, ms in rows:
        console.print(f"  {part:<40} {ms:7.2f} ms")
