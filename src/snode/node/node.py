"""The node: the one owner of the current chain state, the mempool and the store.

Every change of tip goes through `accept_block`: validate on a new state object, commit to the
store, and only then swap the state in, so a crash or an exception never leaves memory ahead of
disk.
"""

from __future__ import annotations

import gc
import logging
import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from snode import __version__
from snode.common.clock import Clock, SystemClock
from snode.common.events import EventHub
from snode.core import mempool as mp
from snode.core.blocks import Block
from snode.core.chain import is_better_tip, locator_heights
from snode.core.crypto import SigningKey
from snode.core.genesis import Consensus
from snode.core.production import build_block
from snode.core.proofs import UptimeProof, check_proof, make_proof
from snode.core.service_nodes import Status, status
from snode.core.errors import InvalidBlock, SnodeError
from snode.core.state import ChainState, Undo, UtxoEntry, undo_block
from snode.core.transactions import Transaction, txid
from snode.core.transition import SigCheck, apply_block, apply_block_encoded
from snode.core.units import format_age
from snode.node.events import (
    BlocksAdopted, ChainReorganized, OwnProofRefused, ProofAccepted, SyncProgress, TransactionAdmitted,
)
from snode.node.proofs import ProofBook
from snode.node.verifier import Pending, VerifierPool
from snode.params import NetworkParams
from snode.store import ChainStore, StoreError
from snode.store.chain_store import Commit

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Identity:
    """How this daemon presents itself as a service node."""

    key: SigningKey
    public_ip: str
    p2p_port: int
    quorumnet_port: int


STATE_FLUSH_BLOCKS = 3_000
"""A syncing node writes the state tables at most this many blocks apart (ChainStore's
`defer_state`); after a crash it applies up to that many stored blocks again at start-up
(about 0.3 ms each with their reads, no signatures). 5,000 synced 100,000 blocks about 2 %
faster, but a start-up after a crash at 99,000 blocks took 2.7 s with 4,000 to apply,
too close to the 3 s restart target."""
VERIFY_CHUNK = 256
"""Signatures per hand-off to the verifier while a batch is staged: small enough that the
workers start early, large enough that a hand-off costs little."""


class StaleBatch(Exception):
    """A staged batch that no longer extends the tip."""


class _BadSignature(Exception):
    """Raised inside the store transaction to roll it back."""


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

    @property
    def state(self) -> ChainState:
        """The chain state at the tip: an immutable snapshot, swapped whole after each commit."""
        return self._state

    @property
    def height(self) -> int:
        return self.state.height

    @property
    def target_height(self) -> int:
        """Best height announced by peers while syncing; 0 when synced."""
        return self._target_height

    def now(self) -> int:
        """The daemon's clock, in whole seconds (a regtest node's may be mocked)."""
        return int(self.clock.time())

    def block_at(self, height: int) -> Block | None:
        """The main-chain block at `height`, None above the tip."""
        return self.store.get_block_by_height(height) if 0 <= height <= self.height else None

    def block_by_hash(self, hash_: bytes) -> Block | None:
        """Any stored block by its hash (main chain or undone by a reorg), or None."""
        return self.store.get_block(hash_)

    def main_chain_hash(self, height: int) -> bytes | None:
        """Hash of the main-chain block at `height`, None above the tip."""
        return self.store.block_hash_at(height) if height <= self.height else None

    def transaction(self, tx_id: bytes) -> tuple[int, Transaction] | None:
        """(height, transaction) of a main-chain transaction, or None."""
        return self.store.get_transaction(tx_id)


def _with_state(commit: Commit, state: ChainState | None) -> Commit:
    return (commit[0], state, *commit[2:])  # type: ignore[return-value]


def _valid_prefix(batch: StagedBatch, keep: int) -> list[Commit]:
    """The first `keep` blocks of a staged batch, the last of them with its state (rebuilt by
    undoing the blocks after it from the batch's final state)."""
    if keep == 0:
        return []
    state = batch.state
    for commit in reversed(batch.commits[keep:]):
        state = undo_block(state, commit[2])
    return batch.commits[:keep - 1] + [_with_state(batch.commits[keep - 1], state)]


class Node:
    """Chain state, mempool, store and this daemon's service-node identity."""

    def __init__(
        self, *, params: NetworkParams, consensus: Consensus, store: ChainStore,
        state: ChainState, identity: Identity | None, producer_key: SigningKey | None,
        hub: EventHub | None = None, clock: Clock | None = None,
    ) -> None:
        self.params = params
        self.consensus = consensus
        self.store = store
        self._state = state
        self.identity = identity
        self.producer_key = producer_key
        self.hub = hub if hub is not None else EventHub()
        """Where the node publishes what happened (`node.events`)."""
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.pool = mp.Mempool()
        self.verifier = VerifierPool()
        self._target_height = 0
        self.proofs = ProofBook()
        """This node's view of every SN's uptime proofs; only the node writes it."""
        self._by_owner: dict[bytes, set[bytes]] | None = None
        """Output keys by owner, for `outputs_of`: built at its first call and kept up to date
        from then on. A node that serves no wallet never builds it (about 70 bytes per
        unspent output: 27 MiB of 390,000)."""

    # --- reading ------------------------------------------------------------------------------

    @property
    def state(self) -> ChainState:
        """The chain state at the tip: an immutable snapshot, swapped whole after each commit."""
        return self._state

    @property
    def height(self) -> int:
        return self._state.height

    @property
    def target_height(self) -> int:
        """Best height announced by peers while syncing; 0 when synced."""
        return self._target_height

    def now(self) -> int:
        """The daemon's clock, in whole seconds (a regtest node's may be mocked)."""
        return int(self.clock.time())

    def block_at(self, height: int) -> Block | None:
        """The main-chain block at `height`, None above the tip."""
        return self.store.get_block_by_height(height) if 0 <= height <= self.height else None

    def block_by_hash(self, hash_: bytes) -> Block | None:
        """Any stored block by its hash (main chain or undone by a reorg), or None."""
        return self.store.get_block(hash_)

    def main_chain_hash(self, height: int) -> bytes | None:
        """Hash of the main-chain block at `height`, None above the tip."""
        return self.store.block_hash_at(height) if height <= self.height else None

    def transaction(self, tx_id: bytes) -> tuple[int, Transaction] | None:
        """(height, transaction) of a main-chain transaction, or None."""
        return self.store.get_transaction(tx_id)

    def outputs_of(self, owner: bytes) -> list[tuple[bytes, UtxoEntry]]:
        """Unspent outputs of a public key at the tip, by output key."""
        utxos = self.state.utxos
        if self._by_owner is None:
            by_owner: dict[bytes, set[bytes]] = defaultdict(set)
            for key, entry in utxos.items():
                by_owner[entry.owner].add(key)
            self._by_owner = dict(by_owner)
        return sorted((k, utxos[k]) for k in self._by_owner.get(owner, ()))

    def sn_state_word(self) -> str:
        """The status line's `SN:` word."""
        if self.identity is None:
            return "no"
        node = self.state.service_nodes.get(self.identity.key.public)
        if node is None:
            return "not registered"
        return {Status.ACTIVE: "active", Status.DECOMM: "decomm.", Status.AWAIT: "awaiting contr."}[status(node)]

    def status_line(self, now: int) -> str:
        """`v<version>; Height: <n>, SN: <state>[, proof: <age>]`."""
        line = f"v{__version__}; Height: {self.height}, SN: {self.sn_state_word()}"
        if self.identity is not None and self.identity.key.public in self.state.service_nodes:
            last = self.proofs.last_accepted(self.identity.key.public)
            line += f", proof: {format_age(now - last) if last else 'never'}"
        return line

    # --- changing -----------------------------------------------------------------------------

    def submit_transaction(self, tx: Transaction, now: int, *, source: object = None) -> bytes:
        """Admit a transaction to the mempool and tell the listeners (P2P relays it);
        SnodeError says why not. `source` is the peer it came from, if any."""
        self.pool, entry = mp.admit(
            self.pool, tx, self.state, self.consensus, now=now, verifier=self.verifier
        )
        log.info("mempool: accepted %s (%d bytes, fee %d)", entry.txid.hex(), entry.size, entry.fee)
        self.hub.publish(TransactionAdmitted(tx, entry.txid, source))
        return entry.txid

    def accept_block(self, block: Block, now: int) -> None:
        """Validate, store, then adopt a block on the tip; InvalidBlock says why not."""
        self.accept_blocks([block], now)

    def accept_blocks(self, blocks: list[Block], now: int) -> int:
        """Apply consecutive blocks on the tip and commit them in one store transaction.

        On an invalid block the valid ones before it are still committed and adopted, then the
        error is raised. Returns how many were adopted.
        """
        return self.finish_batch(self.stage_batch(blocks, now), now)

    def stage_batch(
        self, blocks: list[Block], now: int, *, after: StagedBatch | None = None,
        extending: StagedBatch | None = None,
    ) -> StagedBatch:
        """Apply consecutive blocks in memory, on the tip or on the blocks of `after` (a batch
        staged before and not finished yet), and hand their signatures to the verifier, which
        checks them while the caller goes on. Nothing is stored or adopted: `finish_batch` does
        that. Sync stages batch N+1 before it finishes batch N, so that the verifier works on
        N+1 while N is written to the store.

        `extending`: a staged, unfinished batch whose blocks come first in the batch returned,
        so that `finish_batch` stores them all in one transaction (sync stores two downloads at
        a time: a commit's cost is mostly the pages it rewrites, however many blocks it holds).
        That batch itself is left as it was; finish the one returned instead.

        Stops at the first block that breaks a rule other than a signature; `finish_batch`
        then commits the blocks before it and raises the error.
        """
        if extending is not None:
            if after is not None:
                raise ValueError("stage_batch takes `after` or `extending`, not both")
            old = extending
            batch = StagedBatch(
                base=old.base, state=old.state, commits=old.commits[:], checks=old.checks[:],
                ends=old.ends[:], pending=old.pending[:], failure=old.failure,
            )
            if batch.commits:
                batch.commits[-1] = _with_state(batch.commits[-1], None)  # set again below
        else:
            base = after.state if after is not None else self.state
            batch = StagedBatch(base=base, state=base)
            if after is not None and after.failure is not None:
                batch.failure = after.failure  # nothing can follow an invalid block
        # The cycle collector is paused while blocks are applied: it would walk every
        # intermediate state (tens of thousands of young map nodes) over and over; they are
        # freed by reference counting.
        collecting = gc.isenabled()
        gc.disable()
        try:
            checks = batch.checks
            chunk_start = len(checks)

            def collect(block_checks: Sequence[SigCheck]) -> int:
                nonlocal chunk_start
                checks.extend(block_checks)
                if len(checks) - chunk_start >= VERIFY_CHUNK:
                    batch.pending.append((chunk_start, self.verifier.submit(checks[chunk_start:])))
                    chunk_start = len(checks)
                return -1

            state = batch.state
            for block in blocks if batch.failure is None else ():
                try:
                    applied = apply_block_encoded(state, block, self.consensus, verifier=collect, now=now)
                except SnodeError as err:
                    batch.failure = err
                    break
                state = applied.state
                batch.commits.append((block, None, applied.undo, (applied.encoded, applied.txids)))
                batch.ends.append(len(checks))
            if len(checks) > chunk_start:
                batch.pending.append((chunk_start, self.verifier.submit(checks[chunk_start:])))
            batch.state = state
            if batch.commits:
                batch.commits[-1] = _with_state(batch.commits[-1], state)
            return batch
        finally:
            if collecting:
                gc.enable()

    def finish_batch(self, batch: StagedBatch, now: int, *, defer_state: bool = False) -> int:
        """Store and adopt a staged batch once its signatures check out (waiting for them
        while its rows are written, before the store commits). On a bad signature the blocks
        before it are committed and adopted and InvalidBlock is raised; an apply error that
        staging met is raised the same way. Returns how many blocks were adopted.

        A batch whose parent state is not the tip is refused with StaleBatch and nothing
        changes: the tip moved while it was staged, or the batch it was staged after was not
        finished (or not whole).

        `defer_state`: a sync batch with more to come; the store may keep its state rows in
        memory (`ChainStore.commit_blocks`), up to STATE_FLUSH_BLOCKS blocks.
        """
        if batch.base is not self.state:
            raise StaleBatch(f"batch staged on height {batch.base.height} is not on the tip ({self.height})")
        commits = batch.commits
        bad = -1

        def wait_for_signatures() -> None:
            nonlocal bad
            for start, pending in batch.pending:
                found = pending.result()
                if found >= 0:
                    bad = start + found
                    raise _BadSignature

        failure = batch.failure
        defer = (defer_state and failure is None
                 and batch.state.height - self.store.state_height() < STATE_FLUSH_BLOCKS)
        collecting = gc.isenabled()
        gc.disable()
        try:
            if commits:
                try:
                    self.store.commit_blocks(commits, before_commit=wait_for_signatures, defer_state=defer)
                except _BadSignature:
                    failure = InvalidBlock(f"{batch.checks[bad].what} has a bad signature")
                    commits = _valid_prefix(batch, bisect.bisect_right(batch.ends, bad))
                    if commits:
                        self.store.commit_blocks(commits)
            if commits:
                final = commits[-1][1]
                if final is None:  # the store refuses such a batch before it commits
                    raise RuntimeError("a staged batch's last block has no state")
                self._adopt(final, [c[2] for c in commits], [c[0] for c in commits], now,
                            mined=[tx_id for c in commits for tx_id in c[3][1]])  # type: ignore[misc]
        finally:
            if collecting:
                gc.enable()
        if failure is not None:
            raise failure
        return len(commits)

    def _adopt(
        self, state: ChainState, undos: list[Undo], blocks: list[Block], now: int, *,
        mined: list[bytes] | None = None,
    ) -> None:
        """Make `state` current after the store committed it (`undos`: the records of `blocks`,
        applied on the current state; `mined`: their transaction ids, when known)."""
        by_owner, utxos = self._by_owner, state.utxos
        if by_owner is not None:
            # Each output key once per batch: its owner before the first block and after the last.
            before: dict[bytes, UtxoEntry | None] = {}
            for undo in undos:
                for key, old in undo.utxos:
                    before.setdefault(key, old)
            for key, old in before.items():
                if old is not None:
                    keys = by_owner[old.owner]
                    keys.discard(key)
                    if not keys:
                        del by_owner[old.owner]
                new = utxos.get(key)
                if new is not None:
                    by_owner.setdefault(new.owner, set()).add(key)
        self._state = state
        if mined is None:
            mined = [txid(tx) for block in blocks for tx in block.transactions]
        self.pool = mp.revalidate(mp.remove(self.pool, mined), state, self.consensus, now=now)
        last = blocks[-1]
        log.info("block %d %s: %d transaction%s%s", last.header.height, state.tip_hash.hex()[:16],
                 len(last.transactions), "" if len(last.transactions) == 1 else "s",
                 f" (+{len(blocks) - 1} before it)" if len(blocks) > 1 else "")
        self.hub.publish(BlocksAdopted(tuple(blocks), state.height, state.tip_hash))

    def reorganize(self, branch: list[Block], now: int) -> bool:
        """Switch to `branch` (consecutive blocks whose first parent is on the main chain) if it
        ends higher than the tip. The whole switch is validated in memory before anything is
        written, so an invalid branch changes nothing. Returns whether the tip changed.
        """
        fork_height = branch[0].header.height - 1
        if self.store.block_hash_at(fork_height) != branch[0].header.prev_hash:
            raise InvalidBlock("branch does not fork from this node's main chain")
        if not is_better_tip(self.height, branch[-1].header.height):
            return False  # equal height: the tip seen first stays
        state = self.state
        undone: list[tuple[ChainState, Undo, Block]] = []
        while state.height > fork_height:
            undo = self.store.get_undo(state.tip_hash)
            block = self.store.get_block(state.tip_hash)
            assert block is not None
            state = undo_block(state, undo)
            undone.append((state, undo, block))
        commits: list[Commit] = []
        for block in branch:
            state, undo = apply_block(state, block, self.consensus, verifier=self.verifier, now=now)
            commits.append((block, state, undo))
        self.store.reorganize([(parent, undo) for parent, undo, _ in undone], commits)
        log.warning("reorganized: undid %d blocks back to height %d, applied %d; new tip %d %s",
                    len(undone), fork_height, len(branch), state.height, state.tip_hash.hex()[:16])
        self._by_owner = None  # built again at the next outputs_of
        old_pool = self.pool
        self.pool = mp.Mempool()
        self.hub.publish(ChainReorganized(fork_height, len(undone), len(branch)))
        self._adopt(state, [], [c[0] for c in commits], now)
        self._readmit([tx for _, _, b in reversed(undone) for tx in b.transactions[1:]], old_pool, now)
        return True

    def _readmit(self, txs: list[Transaction], old_pool: mp.Mempool, now: int) -> None:
        """Give the mempool back what a reorg undid and what it held, where still valid."""
        pooled = sorted(old_pool.entries.values(), key=lambda e: e.arrival)
        for tx in txs + [e.tx for e in pooled]:
            try:
                self.pool, _ = mp.admit(self.pool, tx, self.state, self.consensus, now=now, verifier=self.verifier)
            except SnodeError:
                continue

    def locator(self) -> list[bytes]:
        """Hashes of main-chain blocks, dense near the tip, for GetBlocks."""
        hashes = [self.store.block_hash_at(h) for h in locator_heights(self.height)]
        return [h for h in hashes if h is not None]

    def blocks_after(self, locator: list[bytes], max_count: int, max_bytes: int) -> list[bytes]:
        """Canonical bytes of main-chain blocks after the first locator hash on the main chain
        (after genesis when none is)."""
        start = 1
        for h in locator:
            height = self.store.main_chain_height(h)
            if height is not None:
                start = height + 1
                break
        out: list[bytes] = []
        size = 0
        for height in range(start, min(start + max_count, self.height + 1)):
            data = self.store.get_block_bytes(height)
            if data is None or (out and size + len(data) > max_bytes):
                break
            out.append(data)
            size += len(data)
        return out

    def produce_block(self, now: int) -> Block:
        """Make, store and adopt the next block with this daemon's authority key."""
        if self.producer_key is None:
            raise RuntimeError("this daemon holds no block-producing key")
        block, stale = build_block(self.state, self.pool, self.consensus, self.producer_key, timestamp=now)
        if stale:
            self.pool = mp.remove(self.pool, stale)
        self.accept_block(block, now)
        return block

    def make_own_proof(self, now: int) -> UptimeProof:
        """Sign a fresh uptime proof with this daemon's service-node key."""
        assert self.identity is not None
        ident = self.identity
        return make_proof(
            ident.key, self.params, timestamp=now, public_ip=ident.public_ip,
            p2p_port=ident.p2p_port, quorumnet_port=ident.quorumnet_port, version=__version__,
        )

    def accept_proof(self, proof: UptimeProof, now: int, *, source: object | None = None,
                     relayed: bool = False) -> None:
        """Record an uptime proof this node accepts (`source`: the peer it came from, None for
        our own); InvalidProof says why not."""
        check_proof(
            proof, self.params, registered=proof.pubkey in self.state.service_nodes, now=now,
            last_accepted=self.proofs.last_accepted(proof.pubkey),
        )
        self.proofs.record(proof.pubkey, proof.timestamp, (proof.public_ip, proof.quorumnet_port))
        self.hub.publish(ProofAccepted(proof, source, relayed))

    def note_own_proof_refused(self, by: str, reason: str) -> None:
        """A peer refused this node's own uptime proof (it told us why)."""
        self.proofs.own_refusal = f"uptime proof rejected by {by}: {reason}"
        log.warning("%s", self.proofs.own_refusal)
        self.hub.publish(OwnProofRefused(by, reason))

    def note_sync_target(self, best_peer_height: int) -> None:
        """The best height a peer announces (the sync service's call); the target is 0 once
        the node has it."""
        target = best_peer_height if best_peer_height > self.height else 0
        self._target_height = target
        self.hub.publish(SyncProgress(self.height, target))

    def flush_state(self) -> None:
        """Write the state the store deferred during a sync (`finish_batch(defer_state=...)`).
        A failure is logged, not raised: the stored blocks are applied again at the next
        start-up."""
        try:
            self.store.flush_state(self.state)
        except (StoreError, ValueError) as err:
            log.warning("could not write the chain state (%s); it is rebuilt from the stored "
                        "blocks at the next start", err)

    def close(self) -> None:
        """Write the state the store deferred, release the workers and the store."""
        self.verifier.close()
        try:
            self.flush_state()
        finally:
            self.store.close()


def replay_stored_blocks(store: ChainStore, state: ChainState, consensus: Consensus) -> ChainState:
    """The state at the stored tip, from `state` (the store's state tables, which a crash
    during a sync can leave up to STATE_FLUSH_BLOCKS behind the stored blocks): the blocks
    after it are applied again, without their signatures (checked before they were stored),
    and the state tables brought up to date."""
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


def _checked_before(checks: Sequence[SigCheck]) -> int:
    return -1
