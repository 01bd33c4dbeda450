"""The block tree: which tip is best, and the path from one tip to another.

Fork choice: the valid chain with the greatest height wins; at equal height the tip seen first
stays. Switching tips undoes blocks back to the fork point and applies the other branch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


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
