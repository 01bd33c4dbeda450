"""Blocks that wait for their parent, bounded in count, in bytes overall and in bytes per
source address, so that no peer (nor one address's connections together) can grow our memory
with blocks that may never connect. Sans-IO: the relay decides what is worth keeping."""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

from snode.core.blocks import Block
from snode.net import limits as L


@dataclass(frozen=True, slots=True)
class _Kept:
    block: Block
    size: int
    source: str


class OrphanPool:
    """Orphans by their parent's hash, oldest first."""

    def __init__(self) -> None:
        self._kept: OrderedDict[bytes, _Kept] = OrderedDict()
        self._per_source: Counter[str] = Counter()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def source_bytes(self, source: str) -> int:
        return self._per_source[source]

    def add(self, block: Block, size: int, source: str) -> None:
        """Keep `block` (`size` encoded bytes, from the address `source`), first dropping the
        source's own oldest orphans while it is over its share, then the oldest of all while
        the pool is over its bounds. `size` is at most MAX_BLOCK_BYTES (checked before)."""
        old = self._kept.pop(block.header.prev_hash, None)
        if old is not None:
            self._forget(old)
        while self._per_source[source] + size > L.MAX_ORPHAN_BYTES_PER_PEER:
            oldest = next(parent for parent, kept in self._kept.items() if kept.source == source)
            self._forget(self._kept.pop(oldest))
        while self._kept and (self.bytes + size > L.MAX_ORPHAN_BYTES or len(self._kept) >= L.MAX_ORPHANS):
            self._forget(self._kept.popitem(last=False)[1])
        self._kept[block.header.prev_hash] = _Kept(block, size, source)
        self._per_source[source] += size
        self.bytes += size

    def pop(self, parent: bytes) -> Block | None:
        """The kept child of `parent`, taken out of the pool."""
        kept = self._kept.pop(parent, None)
        if kept is None:
            return None
        self._forget(kept)
        return kept.block

    def _forget(self, kept: _Kept) -> None:
        self.bytes -= kept.size
        self._per_source[kept.source] -= kept.size
        if not self._per_source[kept.source]:
            del self._per_source[kept.source]
