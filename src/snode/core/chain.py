"""The block tree: which tip is best, and the path from one tip to another.

Fork choice: the valid chain with the greatest height wins; at equal height the tip seen first
stays. Switching tips undoes blocks back to the fork point and applies the other branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple


class IndexEntry(NamedTuple):
    """What the tree keeps per known block."""

    parent: bytes
    height: int


class ReorgPath(NamedTuple):
    """How to go from one tip to another."""

    undo: list[bytes]
    """Blocks to undo, tip first."""
    apply: list[bytes]
    """Blocks to apply, lowest first."""
    fork_point: bytes


def is_better_tip(current_height: int, candidate_height: int) -> bool:
    """True when a chain ending at candidate_height should replace the current one."""
    return candidate_height > current_height


def reorg_path(index: Mapping[bytes, IndexEntry], tip: bytes, target: bytes) -> ReorgPath:
    """The undo/apply path from `tip` to `target`; KeyError if either is not in the index."""
    a, b = tip, target
    undo: list[bytes] = []
    apply: list[bytes] = []
    while index[a].height > index[b].height:
        undo.append(a)
        a = index[a].parent
    while index[b].height > index[a].height:
        apply.append(b)
        b = index[b].parent
    while a != b:
        undo.append(a)
        apply.append(b)
        a, b = index[a].parent, index[b].parent
    apply.reverse()
    return ReorgPath(undo=undo, apply=apply, fork_point=a)


MAX_LOCATOR: Final = 64
"""Hashes in a block locator (a GetBlocks request carries at most this many)."""


def locator_heights(height: int) -> list[int]:
    """Heights for a block locator: the last 10 one by one, then exponentially back, then 0."""
    heights: list[int] = []
    step = 1
    h = height
    while h > 0 and len(heights) < MAX_LOCATOR - 1:
        heights.append(h)
        if len(heights) >= 10:
            step *= 2
        h -= step
    heights.append(0)
    return heights
