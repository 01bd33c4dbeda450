"""Fork choice and block locators.

Fork choice: the valid chain with the greatest height wins; at equal height the tip seen first
stays. Switching tips undoes blocks back to the fork point and applies the other branch
(`node.batches.reorganization`, from a branch that a peer sends, which names its fork point).
"""

from __future__ import annotations

from typing import Final


def is_better_tip(current_height: int, candidate_height: int) -> bool:
    """True when a chain ending at candidate_height should replace the current one."""
    return candidate_height > current_height


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
