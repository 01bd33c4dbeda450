"""Batches of blocks on their way into the node: staged in memory with their signatures being
checked, then stored, then adopted (`Node.stage_batch`, `Node.store_batch`, `Node.adopt_batch`);
and the start-up replay of stored blocks after a crash.

A sync applies up to 1,000 blocks in memory while the verifier checks their signatures in its
worker processes; the store writes the batch's rows while the last checks finish; only a batch
whose signatures all check out is committed whole. A bad signature commits the blocks before
the bad one and refuses the rest.
"""

from __future__ import annotations

import bisect
import gc
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.chain import is_better_tip
from snode.core.errors import InvalidBlock, SnodeError
from snode.core.final_block import CheckedTemplate, apply_final
from snode.core.finality import reorg_allowed
from snode.core.genesis import Consensus
from snode.core.state import ChainState, Undo, immutable_height
from snode.core.state_root import current_checksum, header_root, state_checksum, undo_summed
from snode.core.transition import SigCheck, apply_block, apply_block_encoded
from snode.node.verifier import Pending, Verifier
from snode.store import Commit, Encoded, StoreError, Undone
from snode.store.protocol import Store

log = logging.getLogger(__name__)

CHECKSUM_CHECK_ENTRIES = 20_000
"""A start-up sums the stored state again to compare it with its stored checksum when it has at
most this many entries: about 0.3 s at 15 us an entry (a larger one trusts the row, written in
the same SQLite transaction as the tables it sums, and its tip header's root)."""

VERIFY_CHUNK = 256
"""Signatures per hand-off to the verifier while a batch is staged: small enough that the
workers start early, large enough that a hand-off costs little."""


class StaleBatch(Exception):
    """A staged batch that no longer extends the tip."""


@dataclass(slots=True)
class StagedBatch:
    """Blocks applied in memory whose signatures are being checked (`Node.stage_batch`)."""

    base: ChainState
    """The state they were applied on."""
    state: ChainState
    """The state after the last of `commits`."""
    commits: list[Commit] = field(default_factory=list)
    """The applied blocks; only the last carries its state (`state`), so that the intermediate
    states are freed as soon as the next block is applied, not kept until the batch is stored."""
    checks: list[SigCheck] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    """`ends[i]`: where block i's checks end in `checks`."""
    pending: list[tuple[int, Pending]] = field(default_factory=list)
    """(offset in `checks`, the verifier's answer) per hand-off."""
    failure: SnodeError | None = None
    """The rule the block after `commits` broke, if one did."""
    reused: int = 0
    """How many of `commits` took the result of their template's check (`apply_final`)."""

    @property
    def height(self) -> int:
        return self.state.height

    def first_bad_signature(self) -> int:
        """Wait for the verifier's answers; the index in `checks` of the first bad signature,
        or -1 when all are good."""
        for start, pending in self.pending:
            found = pending.result()
            if found >= 0:
                return start + found
        return -1

    def valid_prefix(self, keep: int) -> list[Commit]:
        """The first `keep` blocks, the last of them with its state (rebuilt by undoing the
        blocks after it from the batch's final state)."""
        if keep == 0:
            return []
        state = self.state
        for commit in reversed(self.commits[keep:]):
            state = undo_summed(state, commit.undo)
        return self.commits[:keep - 1] + [self.commits[keep - 1]._replace(state=state)]


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """What `Node.store_batch` committed: blocks durable on disk, not adopted in memory yet."""

    base: ChainState
    commits: list[Commit]
    """The blocks stored, the last with its state."""
    failure: SnodeError | None
    """The rule the block after them broke (raised once they are adopted), if one did."""


def stage(
    base: ChainState, blocks: list[Block], consensus: Consensus, verifier: Verifier, now: int, *,
    after: StagedBatch | None = None, extending: StagedBatch | None = None,
    template: CheckedTemplate | None = None, assume_valid: bytes | None = None, assumed: int = 0,
    chunk: int = VERIFY_CHUNK,
) -> StagedBatch:
    """`Node.stage_batch`: apply `blocks` on `base` (the tip, or `after`'s state), or joined to
    `extending`, handing their signatures to `verifier` in chunks. `template`: a check of one
    of them as a template, whose result that block takes if it is provably the same block on
    the same parent (`apply_final`). `assume_valid`: a block hash; the blocks before it among
    `blocks` (its ancestors: each is applied on the one before) skip their input signatures;
    `assumed`: how many of `blocks`, from the first, are known to be its ancestors otherwise (the
    header chain of a sync: `services.sync_headers.HeaderChain.assumed`), skipping them too.
    `chunk`: the checks handed to the verifier at a time, at least (VERIFY_CHUNK)."""
    if extending is not None:
        if after is not None:
            raise ValueError("stage_batch takes `after` or `extending`, not both")
        old = extending
        batch = StagedBatch(
            base=old.base, state=old.state, commits=old.commits[:], checks=old.checks[:],
            ends=old.ends[:], pending=old.pending[:], failure=old.failure, reused=old.reused,
        )
        if batch.commits:
            batch.commits[-1] = batch.commits[-1]._replace(state=None)  # set again below
    else:
        batch = StagedBatch(base=base, state=base)
        if after is not None and after.failure is not None:
            batch.failure = after.failure  # nothing can follow an invalid block
    with collector_paused():
        _apply_into(batch, blocks, consensus, verifier, now, template,
                    max(assumed, assumed_valid(blocks, assume_valid)), chunk)
    return batch


def store_staged(store: Store, batch: StagedBatch, *, defer_state: bool, flush_blocks: int) -> StoredBatch:
    """`Node.store_batch`: write a staged batch's rows while its last signature checks finish,
    then commit them, or roll them back on a bad signature and commit the blocks before the bad
    one alone. `defer_state`: the store may keep the state rows in memory (`ChainStore.write`),
    while the stored state is fewer than `flush_blocks` blocks behind."""
    commits, failure = batch.commits, batch.failure
    if not commits:
        return StoredBatch(batch.base, [], failure)
    defer = defer_state and failure is None and batch.state.height - store.state_height() < flush_blocks
    with collector_paused():
        pending = store.write([], commits, defer_state=defer)
        try:
            bad = batch.first_bad_signature()
        except BaseException:
            pending.rollback()
            raise
        if bad < 0:
            pending.commit()
        else:
            pending.rollback()
            failure = InvalidBlock(f"{batch.checks[bad].what} has a bad signature")
            commits = batch.valid_prefix(bisect.bisect_right(batch.ends, bad))
            if commits:
                store.commit_blocks(commits)
    return StoredBatch(batch.base, commits, failure)


def check_trusted(blocks: Sequence[Block], trusted: tuple[int, bytes] | None) -> None:
    """None of `blocks` is at the trusted checkpoint's height with another hash (InvalidBlock)."""
    if trusted is None:
        return
    height, hash_ = trusted
    for block in blocks:
        if block.header.height == height and block_hash(block.header) != hash_:
            raise InvalidBlock(
                f"block {height} is {block_hash(block.header).hex()}, not the trusted checkpoint "
                f"{hash_.hex()} (--trusted-checkpoint)"
            )


def assumed_valid(blocks: Sequence[Block], assume_valid: bytes | None) -> int:
    """How many of `blocks` (consecutive) are ancestors of the block `assume_valid`: those before
    it, when it is one of them; 0 otherwise (nothing proves the others are its ancestors)."""
    if assume_valid is None:
        return 0
    for position, block in enumerate(blocks):
        if block_hash(block.header) == assume_valid:
            return position
    return 0


def _apply_into(
    batch: StagedBatch, blocks: list[Block], consensus: Consensus, verifier: Verifier, now: int,
    template: CheckedTemplate | None, assumed: int = 0, chunk: int = VERIFY_CHUNK,
) -> None:
    checks = batch.checks
    chunk_start = len(checks)
    first = len(batch.commits)

    def collect(block_checks: Sequence[SigCheck]) -> int:
        nonlocal chunk_start
        if assumed > len(batch.commits) - first:  # an ancestor of the assume-valid block: inputs skipped
            block_checks = [check for check in block_checks if not check.input]
        checks.extend(block_checks)
        if len(checks) - chunk_start >= chunk:
            batch.pending.append((chunk_start, verifier.submit(checks[chunk_start:])))
            chunk_start = len(checks)
        return -1

    state = batch.state
    for block in blocks if batch.failure is None else ():
        try:
            applied = (apply_final(state, block, template, consensus, verifier=collect, now=now)
                       if template is not None else None)
            batch.reused += applied is not None
            if applied is None:
                applied = apply_block_encoded(state, block, consensus, verifier=collect, now=now)
        except SnodeError as err:
            batch.failure = err
            break
        state = applied.state
        batch.commits.append(Commit(block, None, applied.undo, Encoded(applied.encoded, applied.txids)))
        batch.ends.append(len(checks))
    if len(checks) > chunk_start:
        batch.pending.append((chunk_start, verifier.submit(checks[chunk_start:])))
    batch.state = state
    if batch.commits:
        batch.commits[-1] = batch.commits[-1]._replace(state=state)


@dataclass(frozen=True, slots=True)
class Reorganization:
    """A switch of branches that the store has made durable (`Node.store_reorganize`)."""

    state: ChainState
    """The state at the new tip."""
    undone_blocks: list[Block]
    """The old branch's blocks, tip first."""
    branch: list[Block]
    fork_height: int


def reorganization(
    store: Store, state: ChainState, branch: list[Block], consensus: Consensus, verifier: Verifier,
    now: int,
) -> Reorganization | None:
    """`Node.store_reorganize`: undo the tip back to `branch`'s fork point, apply `branch`, all
    validated in memory, then write the switch in one store transaction. None (nothing written)
    when the branch does not end higher than `state`; an invalid branch raises."""
    fork_height = branch[0].header.height - 1
    if store.block_hash_at(fork_height) != branch[0].header.prev_hash:
        raise InvalidBlock("branch does not fork from this node's main chain")
    final = immutable_height(state)
    if not reorg_allowed(fork_height, final):
        raise InvalidBlock(
            f"branch forks at height {fork_height}, below the final height {final} (two "
            "checkpoints stand above it): no reorganisation may undo a final block"
        )
    if not is_better_tip(state.height, branch[-1].header.height):
        return None  # equal height: the tip seen first stays
    undone: list[tuple[Undone, Block]] = []
    while state.height > fork_height:
        undo = store.get_undo(state.tip_hash)
        block = store.get_block(state.tip_hash)
        assert block is not None
        state = undo_summed(state, undo)
        undone.append((Undone(state, undo), block))
    commits: list[Commit] = []
    for block in branch:
        state, undo = apply_block(state, block, consensus, verifier=verifier, now=now)
        commits.append(Commit(block, state, undo))
    store.reorganize([u for u, _ in undone], commits)
    return Reorganization(state, [b for _, b in undone], branch, fork_height)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector is paused while many blocks are applied or stored: it would walk
    every intermediate state (tens of thousands of young map nodes) over and over; they are
    freed by reference counting."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def replay_stored_blocks(store: Store, state: ChainState, consensus: Consensus) -> ChainState:
    """The state at the stored tip, from `state` (the store's state tables, which a crash
    during a sync can leave up to STATE_FLUSH_BLOCKS behind the stored blocks): the blocks
    after it are applied again, without their signatures (checked before they were stored),
    and the state tables brought up to date. The state's stored checksum is checked first
    (`check_stored_checksum`)."""
    check_stored_checksum(store, state, consensus)
    tip_height = store.tip()[0]
    if state.height >= tip_height:
        return state
    log.warning("the last stop was not clean: the chain state on disk is at height %d, the "
                "stored blocks reach %d; applying the %d blocks after it again",
                state.height, tip_height, tip_height - state.height)
    replayed: list[tuple[Undo, list[bytes]]] = []
    for height in range(state.height + 1, tip_height + 1):
        block = store.get_block_by_height(height)
        if block is None:
            raise StoreError(f"stored block {height} is missing; start with a new data dir")
        try:
            applied = apply_block_encoded(state, block, consensus, verifier=_checked_before)
        except SnodeError as err:
            raise StoreError(
                f"stored block {height} does not apply to the stored state ({err.reason}); "
                "start with a new data dir"
            ) from None
        state = applied.state
        replayed.append((applied.undo, applied.txids))  # not the block: its ids are all we need
    store.write_replayed_state(state, replayed)
    return state


def check_stored_checksum(store: Store, state: ChainState, consensus: Consensus) -> None:
    """The checksum stored with the state (`core.state_root`) must give the root its block's
    header carries (one hash), and, for a state of at most CHECKSUM_CHECK_ENTRIES entries, be
    the sum of its entries; StoreError otherwise (the data dir was changed outside snoded)."""
    checksum = current_checksum(state)
    if checksum is None:
        return
    block = store.get_block(state.tip_hash) if state.height else None
    carried = header_state_root(block.header) if block is not None else None
    root = header_root(consensus.params.network_id, state, checksum)
    entries = len(state.utxos) + len(state.service_nodes) + len(state.quorums) + len(state.checkpoints)
    if (carried is not None and carried != root) or (
            entries <= CHECKSUM_CHECK_ENTRIES and state_checksum(state) != checksum):
        raise StoreError(
            f"the stored state at height {state.height} does not match its stored state root "
            f"({root.hex()}): the data dir was changed outside snoded; start with a new data dir"
        )


def _checked_before(checks: Sequence[SigCheck]) -> int:
    return -1
