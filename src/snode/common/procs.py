"""Child processes as Linux shows them: for tests, benchmarks and tools that watch a daemon's
signature-verifying workers."""

from __future__ import annotations

from pathlib import Path


def child_pids(pid: int) -> list[int]:
    """Live child processes of pid (its signature-verifying workers, for a snoded)."""
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return children
