"""The templates a validator checked, kept for the signed blocks that follow them.

A validator checks a round leader's block in full before it signs (`Node.check_template`); the
signed block comes back minutes later at most, on the same tip, and takes the check's result
instead of being applied again (`core.final_block.apply_final`, which decides whether it is
provably the same block on the same parent). Used from the store thread only.
"""

from __future__ import annotations

from snode.core.blocks import Block, block_hash
from snode.core.final_block import CheckedTemplate, check_template
from snode.core.genesis import Consensus
from snode.core.sigchecks import BatchVerifier
from snode.core.state import ChainState

TEMPLATES_KEPT = 4
"""Templates kept: a height's rounds on the tip, each a different leader's block."""


class CheckedTemplates:
    """The last TEMPLATES_KEPT templates checked on the tip, by block hash."""

    def __init__(self) -> None:
        self._kept: dict[bytes, CheckedTemplate] = {}
        self.reused = 0
        """Blocks staged with their template's checked result instead of applied again."""

    def __len__(self) -> int:
        return len(self._kept)

    def check(self, state: ChainState, block: Block, consensus: Consensus, verifier: BatchVerifier,
              now: int) -> None:
        """`core.final_block.check_template` on `state` (the tip), its result kept; the
        templates of an older tip are let go."""
        checked = check_template(state, block, consensus, verifier=verifier, now=now)
        if checked is None:
            return
        kept = {h: c for h, c in self._kept.items() if c.parent is state}
        kept[checked.encoded.hash] = checked
        self._kept = dict(list(kept.items())[-TEMPLATES_KEPT:])

    def of(self, blocks: list[Block]) -> CheckedTemplate | None:
        """The template checked of a batch's block, for a batch of one block (a sync's batches
        are applied in full)."""
        if len(blocks) != 1 or not self._kept:
            return None
        return self._kept.get(block_hash(blocks[0].header))

    def taken(self, count: int) -> None:
        """`count` staged blocks took their template's result: the templates are let go (their
        states and encodings are held no longer than their block; an honest copy that follows a
        forged one is applied in full)."""
        if count:
            self.reused += count
            self._kept = {}
