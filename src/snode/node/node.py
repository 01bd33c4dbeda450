"""The node: the one owner of the current chain state, the mempool and the proofs it has seen.

Every change of tip goes through three steps: apply in memory on a new state object (the old
one stays valid), make it durable in the store, and only then swap the state in and tell the
event hub. A crash or an exception never leaves memory ahead of disk. The steps are separate
methods (`stage_batch`, `store_batch`, `adopt_batch`; `store_reorganize`, `adopt_reorganize`)
so that a daemon can run the first two on its store thread and the last on its event loop
(`node.writer.ChainWriter`); `accept_blocks`, `finish_batch` and `reorganize` run all of them
on the caller's thread, for tests and for the simulation.

The node is built from what it is given: a store (`store.protocol.Store`: SQLite, or in
memory), a signature verifier (`Verifier`: worker processes, or inline), an event hub and a
clock. It opens nothing itself, so many nodes can share one process. Only the node writes its
fields; other layers read them or call its methods, most through the narrow view they need
(`node.views`: mypy holds them to it).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from snode.common.clock import Clock, SystemClock
from snode.common.events import EventHub
from snode.core import mempool as mp
from snode.core.block_head import block_head
from snode.core.blocks import Block, Checkpoint, Header, block_hash
from snode.core.chain import locator_heights
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.errors import SnodeError
from snode.core.genesis import Consensus
from snode.core.production import build_block
from snode.core.proofs import (
    InvalidProof,
    ProofRefusal,
    Semver,
    UptimeProof,
    parse_proof_version,
    parse_semver,
    semver_text,
)
from snode.core.pulse import Mode, production_mode
from snode.core.standing import Departure, credit_warning, departure_in
from snode.core.state import ChainState, Undo, UtxoEntry, immutable_height
from snode.core.state_root import Checksum, caught_up, current_checksum, keep_in
from snode.core.transactions import Registration, Transaction, txid
from snode.core.transition import check_block_stateless
from snode.node import saved, status
from snode.node.batches import (
    VERIFY_CHUNK,
    Reorganization,
    StagedBatch,
    StaleBatch,
    StoredBatch,
    check_trusted,
    reorganization,
    stage,
    store_staged,
)
from snode.node.events import BlocksAdopted, ChainReorganized, ProofAccepted, SyncProgress, TransactionAdmitted
from snode.node.own_proof import Identity, OwnProof
from snode.node.owners import OwnerIndex
from snode.node.participation import LIVE_SECONDS, ParticipationBook
from snode.node.proofs import check_against
from snode.node.templates import CheckedTemplates
from snode.node.upgrade import CannotValidateYet, UpgradeWatch
from snode.node.verifier import InlineVerifier, Verifier
from snode.params import NetworkParams
from snode.store import DatabaseDamaged, StoreError
from snode.store.protocol import Store

log = logging.getLogger(__name__)

E = TypeVar("E")

STATE_FLUSH_BLOCKS = 3_000
"""A syncing node writes the state tables at most this many blocks apart (ChainStore's `defer_state`); after
a crash it applies up to that many stored blocks again at start-up (about 0.3 ms each with their reads, no
signatures). 5,000 synced 100,000 blocks about 2 % faster, but a start-up after a crash at 99,000 blocks
took 2.7 s with 4,000 to apply, too close to the 3 s restart target."""


@dataclass(frozen=True, slots=True)
class NodeLimits:
    """The bounds of the node's own work, as one record (tests pass small ones)."""

    state_flush_blocks: int = STATE_FLUSH_BLOCKS
    verify_chunk: int = VERIFY_CHUNK
    """Signature checks handed to the verifier at a time, at least (`batches.stage`)."""


class Node:
    """Chain state, mempool and this daemon's service-node identity, over an injected store."""

    assumed_ancestors: Callable[[Sequence[Block]], int] | None = None
    """While a sync holds a header chain that reached the assume-valid block: how many of a
    batch's blocks, from the first, are that block's ancestors (they skip input signatures)."""
    history_start: int = 1
    """The lowest height above genesis whose block this node holds: 1, or the height of the
    snapshot it started from (`services.snapshot_sync`; the blocks below are not downloaded)."""
    backfilled: int = 0
    """The height up to which this node holds every block from genesis below `history_start`
    (`services.backfill`; 0: none yet). Heights above it and below `history_start` are not here."""
    history_checked: int = 0
    """The height up to which the history check has replayed the blocks from genesis (its run
    under way; `services.history_check`); `history_start` once verified."""
    history_verified: bool = False
    """Whether the replay of the history below `history_start` reached its snapshot's state root."""
    snapshot_download: Any = None
    """The progress of the snapshot download under way (`services.snapshot_sync.Progress`:
    `words()`, `record()`, `done`), or None: no download."""

    def __init__(
        self, *, params: NetworkParams, consensus: Consensus, store: Store,
        state: ChainState, identity: Identity | None, producer_key: SigningKey | None,
        hub: EventHub | None = None, clock: Clock | None = None, verifier: Verifier | None = None,
        pool_limits: mp.PoolLimits | None = None, upgrade: UpgradeWatch | None = None,
        limits: NodeLimits | None = None,
    ) -> None:
        self.params, self.limits = params, limits if limits is not None else NodeLimits()
        self.upgrade = upgrade if upgrade is not None else UpgradeWatch(params)
        """What this node learnt of forks it does not know, and the blocks kept for them."""
        self.consensus = consensus
        self.store = store
        """The store; other layers reach it only through the node's methods."""
        self._state = state
        self.identity = identity
        self.producer_key = producer_key
        self.keys = tuple(k for k in (identity.key if identity else None, producer_key) if k is not None)
        """This daemon's signing keys: its service-node key and its authority key, those it holds."""
        self.hub = hub if hub is not None else EventHub()
        """Where the node publishes what happened (`node.events`)."""
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.verifier: Verifier = verifier if verifier is not None else InlineVerifier()
        restored = saved.restore(store, state, consensus, self.verifier, self.now(),
                                 pool_limits if pool_limits is not None else mp.DEFAULT_LIMITS)
        self.pool = restored.pool
        self._rechecks: dict[bytes, None] = {}
        """Pool ids a change of tip may have made invalid, to check again (`recheck_pool`)."""
        self.defer_rechecks = False
        """Whether a change of tip leaves its pool rechecks to `recheck_pool` calls (a daemon's
        writer makes them a few at a time between the event loop's other work) instead of
        making them all at once."""
        self._accepted = 0  # transactions admitted since the last block, for its log line
        self.proofs = restored.proofs
        """This node's view of every SN's uptime proofs; only the node writes it (`record_proof`)."""
        self.saved = saved.SavedState(restored)
        """What of the proof book and the mempool is saved as it is now (kept across restarts)."""
        self.own_proof = OwnProof(params, identity, self.keys, book=self.proofs, hub=self.hub,
                                  tip=lambda: self._state, record=self.record_proof)
        """This daemon's own proofs: signing and sending them, and the network's word on them."""
        self.participation = ParticipationBook(params)
        """This node's view of every SN's block-production duties; only the node writes it."""
        self._target_height = self._revision = 0
        self._seen: tuple[mp.Mempool | None, int, bytes, int, Departure | None] = (None, -1, b"", 0, None)
        """What `revision` last saw (the mempool held, so compared by identity: `revision`)."""
        self.sn_versions: dict[bytes, str] = {}
        """The `version` of each service node's last accepted proof (readiness for a fork)."""
        self.outdated: dict[bytes, int] = {}
        """Registered nodes whose proofs this node refuses as outdated: the last such proof's time."""
        self.own_proof.upgrade_to = self.upgrade.upgrade_to
        self._owners = OwnerIndex()
        self.templates = CheckedTemplates()  # checked by this validator, for their signed blocks
        self.assume_valid: bytes | None = None
        """The block whose ancestors' input signatures a staged batch may skip (`--assume-valid`)."""
        self.trusted_checkpoint: tuple[int, bytes] | None = None
        """(height, block hash) the chain must pass through (`--trusted-checkpoint`): a block at
        that height with another hash is refused, in a sync as in a reorganisation."""
        self.departure: Departure | None = None
        """How this service node's key last left the registry, from the block that removed it
        (seen as it was adopted, or found looking back: `departure_before`); None while the key
        is registered or no removal of it is known."""

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
        """Best height a peer has proven while syncing (`services.sync_peers`: never one a peer
        only announced); 0 when synced, from the moment the tip reaches it."""
        return self._target_height if self._target_height > self._state.height else 0

    @property
    def production_mode(self) -> Mode:
        """Who produces the next block (`core.pulse`)."""
        return production_mode(self._state, self.params)

    @property
    def immutable_height(self) -> int:
        """The highest final height (no reorganisation may undo a block at or below it)."""
        return immutable_height(self._state)

    @property
    def revision(self) -> int:
        """Counts the changes an RPC answer can show (`rpc.answers` keeps each until it moves).
        Derived from the values those answers read (the tip, the mempool, the sync target, this
        key's departure, and the versions of the proof book, our own proof's verdicts, the
        participation book and the upgrade watch): no writer has to remember to count."""
        # One pass, in the order things change most: each version only grows, so their sum is
        # the same only while none of them moved.
        state, seen = self._state, self._seen
        versions = self.proofs.version + self.own_proof.version + self.participation.version + self.upgrade.revision
        if (seen[0] is not self.pool or seen[1] != versions or seen[2] != state.tip_hash
                or seen[3] != self._target_height or seen[4] is not self.departure):
            self._seen = (self.pool, versions, state.tip_hash, self._target_height, self.departure)
            self._revision += 1
        return self._revision

    def now(self) -> int:
        """The daemon's clock, in whole seconds (a regtest node's may be mocked)."""
        return int(self.clock.time())

    @property
    def proof_refusal(self) -> str:
        """Why a peer last refused this node's own proof ('' if none has; get_info's
        `last_uptime_proof_rejection`), kept after a later proof is accepted."""
        return self.own_proof.refusal

    @property
    def refused_reason(self) -> str:
        """Why peers refuse this node's proofs now, in our words ('' while they do not)."""
        return self.own_proof.refused_reason if self.identity is not None else ""

    @property
    def own_snoded(self) -> Semver:
        """The snoded version this node's proofs say (its own, or `--test-sn-version`'s)."""
        own = self.own_proof
        return own.advertised or parse_semver(own.version_text()) or (0, 0, 0)

    def block_at(self, height: int) -> Block | None:
        """The main-chain block at `height`, None above the tip."""
        return self.store.get_block_by_height(height) if 0 <= height <= self.height else None

    def holds(self, height: int) -> bool:
        """Whether the main-chain block at `height` (at most the tip) is stored here: at or
        below `backfilled`, or at or above `history_start`."""
        return height <= self.backfilled or height >= self.history_start

    @property
    def history_percent(self) -> int:
        """The share of the blocks below `history_start` this node holds (100: all, or none missing)."""
        below = self.history_start - 1
        return 100 if below <= 0 or self.backfilled >= below else self.backfilled * 100 // below

    @property
    def history_check_percent(self) -> int:
        """The share of the blocks below `history_start` the history check has replayed (100:
        verified, or a node from genesis)."""
        top = self.history_start
        if top <= 1 or self.history_verified:
            return 100
        return min(self.history_checked, top) * 100 // top

    def store_history_verified(self) -> None:
        """On the store thread: keep that the history is verified (`ChainStore.store_history_verified`)."""
        self.store.store_history_verified()  # type: ignore[attr-defined]  # the SQLite store's alone
        self.history_verified, self.history_checked = True, self.history_start

    def store_backfill(self, blocks: list[Block]) -> int:
        """On the store thread: store backfilled blocks (`ChainStore.store_backfill`) and take
        the new backfilled height."""
        self.backfilled = self.store.store_backfill(blocks)  # type: ignore[attr-defined]  # the SQLite store's alone
        return self.backfilled

    @property
    def undo_start(self) -> int:
        """The lowest height whose block has an undo record: 1, or the height after the snapshot
        this node started from (`history_start`: its block has none, the blocks below are not
        here). The history walks stop there and say the history is incomplete."""
        return self.history_start + 1 if self.history_start > 1 else 1

    def block_and_undo(self, height: int) -> tuple[Block, Undo] | None:
        """The main-chain block at `height` (above genesis) and its undo record (which names
        its round's validators), None above the tip or below `undo_start`."""
        hash_ = self.main_chain_hash(height)
        if hash_ is None or height < self.undo_start:
            return None
        block = self.store.get_block(hash_)
        assert block is not None, "every main-chain block is stored"
        return block, self.store.get_undo(hash_)

    def keep_checksum(self, checksum: Checksum) -> None:
        """Keep `checksum`, the tip state's, with it (`node.checksum_primer`: summed off the
        loop before fork v2); the store writes it with the next block. The tip stays the same
        object (a batch may be staged or stored on it: `state_root.keep_in`), and a batch staged
        before it came gets it at its adoption (`_adopt`)."""
        keep_in(self._state, checksum)

    def undo_of(self, hash_: bytes) -> Undo:
        """The undo record of a stored block (`services.snapshots.state_at`); StoreError for none."""
        return self.store.get_undo(hash_)

    def block_bytes_at(self, height: int) -> bytes | None:
        """The canonical bytes of the main-chain block at `height` (a snapshot's, for peers), or None."""
        return self.store.get_block_bytes(height)

    def store_snapshot(self, block: Block, state: ChainState,
                       rows: Callable[[], Iterable[tuple[str, Any, bytes]]] | None = None) -> None:
        """Store a checked snapshot's state with its block as the tip (`ChainStore.adopt_snapshot`,
        on the store thread, `rows` its chunks' rows); `adopt_snapshot` then makes it current."""
        self.store.adopt_snapshot(block, state, rows)  # type: ignore[attr-defined]  # the SQLite store's alone

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
        return self._owners.outputs_of(self._state, owner)

    def locator(self) -> list[bytes]:
        """Hashes of main-chain blocks, dense near the tip, for GetBlocks."""
        hashes = [self.store.block_hash_at(h) for h in locator_heights(self.height)]
        return [h for h in hashes if h is not None]

    def blocks_after(self, locator: list[bytes], max_count: int, max_bytes: int) -> list[bytes] | None:
        """Canonical bytes of main-chain blocks after the first locator hash on the main chain
        (after genesis when none is); None when they start below `history_start` (a node that
        started from a snapshot does not hold them, not backfilled yet: it cannot serve that range);
        a range that starts in the backfilled blocks ends at the first one not stored."""
        start = self._start_after(locator)
        if not self.holds(start):
            return None
        return self.block_bytes_from(start, min(start + max_count, self.height + 1), max_bytes)

    def block_bytes_from(self, start: int, end: int, max_bytes: int) -> list[bytes]:
        """The encoded main-chain blocks from `start` to below `end`, at most `max_bytes`
        together (the first one whatever its size), up to the first one not stored."""
        out: list[bytes] = []
        size = 0
        for height in range(start, end):
            data = self.store.get_block_bytes(height)
            if data is None or (out and size + len(data) > max_bytes):
                break
            out.append(data)
            size += len(data)
        return out

    def _start_after(self, locator: list[bytes]) -> int:
        """The height after the first locator hash on the main chain (1 when none is)."""
        for h in locator:
            height = self.store.main_chain_height(h)
            if height is not None:
                return height + 1
        return 1

    def headers_after(self, locator: list[bytes], max_count: int,
                      max_bytes: int) -> tuple[list[tuple[Header, bytes]], int] | None:
        """On the store thread: (header, producer signature) of the main-chain blocks after the
        first locator hash on the main chain (GetHeaders), at most `max_count` and about
        `max_bytes` (a header and its signature: its encoding and 66 bytes), with the bytes read
        for them (whole blocks: what the answer costs the peer's upload budget); None when they
        start at a height not held (as `blocks_after`)."""
        start = self._start_after(locator)
        if not self.holds(start):
            return None
        out: list[tuple[Header, bytes]] = []
        size = read = 0
        for height in range(start, min(start + max_count, self.height + 1)):
            data = self.store.get_block_bytes(height)
            if data is None:
                break
            header, signature, length = block_head(data)
            size += length + 66
            if out and size > max_bytes:
                break
            read += len(data)
            out.append((header, signature))
        return out, read

    def sn_state_word(self) -> str:
        """The status line's `SN:` state (`node.status.sn_state_word`)."""
        return status.sn_state_word(self)

    def registration_pending(self) -> bool:
        """A registration of this service node's key waits in the mempool."""
        if self.identity is None:
            return False
        ids = self.pool.by_node.get(self.identity.key.public, ())
        return any(isinstance(self.pool.entries[i].tx.payload, Registration) for i in ids if i in self.pool.entries)

    def credit_warning(self) -> str:
        """`standing.credit_warning` of this service node at the tip; empty when it is none or
        not registered."""
        node = self.state.service_nodes.get(self.identity.key.public) if self.identity is not None else None
        return credit_warning(node, self.height, self.params) if node is not None else ""

    def departure_before(self, high: int, count: int) -> tuple[bool, Departure | None]:
        """On the store thread: look back from main-chain height `high` over at most `count`
        blocks for the last one that names this service node's key. (True, its removal, or None
        when that block removes nothing) once one does; (False, None) when none of them does.
        The highest block naming a key that is not registered is the one that removed it: a
        removed node leads no block and no transaction names it."""
        assert self.identity is not None
        key = self.identity.key.public
        for height in range(high, max(high - count, 0), -1):
            data = self.store.get_block_bytes(height)
            if data is not None and key in data:
                block = self.store.get_block_by_height(height)
                assert block is not None
                return True, departure_in(block, key, self.params)
        return False, None

    def note_departure(self, departure: Departure) -> None:
        """The removal `departure_before` found, unless the key is registered (again) or a
        removal adopted since is known."""
        if self.identity is not None and self.departure is None \
                and self.identity.key.public not in self._state.service_nodes:
            self.departure = departure

    def _departure_after(self, state: ChainState, blocks: list[Block]) -> None:
        """Keep `departure` true when `state` replaces the tip by `blocks`."""
        if self.identity is None:
            return
        key = self.identity.key.public
        if key in state.service_nodes:
            self.departure = None
            return
        # Registered and removed within one batch too (a sync): any removal the blocks carry.
        found = next((d for b in reversed(blocks) if (d := departure_in(b, key, self.params)) is not None), None)
        if found is not None:
            self.departure = found

    def status_line(self, now: int) -> str:
        """The operator's status line (`node.status.status_line`)."""
        return status.status_line(self, now)

    # --- transactions and proofs --------------------------------------------------------------

    def publish(self, event: object) -> None:
        """Tell the node's subscribers what happened (the layers on the node publish theirs
        here too: `net.events`)."""
        self.hub.publish(event)

    def subscribe(self, kind: type[E], handler: Callable[[E], None], *, topics: tuple[type, ...] = ()) -> None:
        """Call `handler` for every event of type `kind` published on this node's hub (with
        `topics`, only those whose topic field holds one of them: `EventHub.subscribe`)."""
        self.hub.subscribe(kind, handler, topics=topics)

    def hub_counts(self) -> tuple[int, int]:
        """(events published, subscriber calls) on this node's hub so far (`/metrics`)."""
        return self.hub.published, self.hub.deliveries

    def send_proof(self, now: int, *, alone: bool = False) -> UptimeProof:
        """Sign this service node's next uptime proof and hand it to the network (`OwnProof.send`)."""
        return self.own_proof.send(now, alone=alone)


    def submit_transaction(self, tx: Transaction, now: int, *, source: object = None) -> bytes:
        """Admit a transaction to the mempool (P2P relays it on TransactionAdmitted);
        SnodeError says why not. `source` is the peer it came from, if any."""
        before = len(self.pool)
        self.pool, entry = mp.admit(self.pool, tx, self.state, self.consensus, now=now, verifier=self.verifier)
        self._accepted += 1
        left = before + 1 - len(self.pool)
        # One line per transaction only at DEBUG: anyone can send thousands; each block's line counts them.
        log.debug("mempool: accepted %s (%d bytes, fee %d)%s", entry.txid.hex(), entry.size, entry.fee,
                  f"; {left} left the pool (lower fee rates evicted, or expired)" if left > 0 else "")
        self.hub.publish(TransactionAdmitted(tx, entry.txid, source))
        return entry.txid

    def accept_proof(self, proof: UptimeProof, now: int, *, source: object | None = None,
                     relayed: bool = False, signature_checked: bool = False) -> None:
        """Record a peer's uptime proof this node accepts (`source`: the peer it came from);
        InvalidProof says why not. `signature_checked`: its signature was verified already (in
        a batch); every other rule is checked here, against the proofs recorded so far."""
        self.check_proof(proof, now, signature=not signature_checked, signed=signature_checked)
        self.record_proof(proof.pubkey, proof.timestamp, (proof.public_ip, proof.quorumnet_port), now=now)
        self._note_version(proof)
        self.hub.publish(ProofAccepted(proof, source, relayed))

    def record_proof(self, pubkey: bytes, timestamp: int, endpoint: tuple[str, int], *,
                     now: int | None = None) -> None:
        """The one writer of the proof book (`ProofBook.record`): a proof of `pubkey` the network
        accepted (a peer's, checked by `accept_proof`; our own, as `OwnProof` hands it; the
        simulation's, as its judges hand them)."""
        self.proofs.record(pubkey, timestamp, endpoint, now=now)

    def check_proof(self, proof: UptimeProof, now: int, *, signature: bool = True, signed: bool = False) -> None:
        """Whether this node would accept a peer's `proof` now, on the tip and after the proofs
        recorded so far (`signature` False: all but its signature); InvalidProof says why not.
        A refusal as outdated marks its node (`note_outdated`) only where the signature is known
        good: checked here (before the version rule), or already (`signed`): anyone can make up
        an unsigned proof of another's key."""
        try:
            check_against(proof, self.params, self._state, now, self.proofs.history(proof.pubkey), signature=signature)
        except InvalidProof as err:
            if err.code is ProofRefusal.OUTDATED and (signature or signed):
                self.note_outdated(proof)
            raise
        self.proofs.check_endpoint(proof, now)

    def note_outdated(self, proof: UptimeProof) -> None:
        """`proof`, signed by its key, was refused as outdated: its node runs a snoded this fork
        no longer takes (`is_outdated`)."""
        if proof.pubkey in self._state.service_nodes:
            self.outdated[proof.pubkey] = max(self.outdated.get(proof.pubkey, 0), proof.timestamp)

    def _note_version(self, proof: UptimeProof) -> None:
        """What an accepted proof says of its node's snoded (readiness, `outdated`), and of a
        fork this node may not know (`node.upgrade`)."""
        registry = self._state.service_nodes
        if len(self.sn_versions) > len(registry) + 256:  # bounded by the registry: the gone ones go
            self.sn_versions = {k: v for k, v in self.sn_versions.items() if k in registry}
            self.outdated = {k: v for k, v in self.outdated.items() if k in registry}
        self.sn_versions[proof.pubkey] = proof.version
        self.outdated.pop(proof.pubkey, None)
        parsed = parse_proof_version(proof.version)
        if parsed is not None and self.upgrade.is_news(parsed.fork_height, self.height):
            active = sum(1 for sn in self._state.service_nodes.values() if sn.active)
            self.upgrade.learn_from_proof(parsed.fork, parsed.fork_height, self.height,
                                          version=semver_text(parsed.snoded), source=proof.pubkey.hex()[:16],
                                          needed=active // 3)

    def is_outdated(self, pubkey: bytes) -> bool:
        """Whether this node refuses `pubkey`'s proofs as outdated, newer than its last accepted
        one (`core.obligations.judge`: decommissioned `outdated_software`)."""
        return self.outdated.get(pubkey, 0) > self.proofs.last_accepted(pubkey)

    def note_sync_target(self, best_peer_height: int) -> None:
        """The best height a peer has proven (the sync service's call); the target is 0 once
        the node has it."""
        self._target_height = target = best_peer_height if best_peer_height > self.height else 0
        self.hub.publish(SyncProgress(self.height, target))

    # --- blocks: the three steps --------------------------------------------------------------

    def stage_batch(
        self, blocks: list[Block], now: int, *, after: StagedBatch | None = None,
        extending: StagedBatch | None = None, on_tip: bytes | None = None,
    ) -> StagedBatch:
        """Step 1: apply consecutive blocks in memory, on the tip or on the blocks of `after`
        (a batch staged before and not finished yet), and hand their signatures to the verifier,
        which checks them while the caller goes on. Nothing is stored or adopted. Sync stages
        batch N+1 before it finishes batch N, so that the verifier works on N+1 while N is
        written to the store.

        `extending`: a staged, unfinished batch whose blocks come first in the batch returned,
        so that they are all stored in one transaction (sync stores two downloads at a time: a
        commit's cost is mostly the pages it rewrites, however many blocks it holds). That
        batch itself is left as it was; finish the one returned instead.

        Stops at the first block that breaks a rule other than a signature; storing then
        commits the blocks before it and the error is raised when they are adopted.

        `on_tip`: the tip hash the caller found these blocks to extend (a sync's download);
        StaleBatch, not an invalid block, when the tip has moved since (relayed blocks adopted
        meanwhile): the source did nothing wrong.
        """
        check_trusted(blocks, self.trusted_checkpoint)
        base = after.state if after is not None else self._state
        if on_tip is not None and after is None and extending is None and base.tip_hash != on_tip:
            raise StaleBatch(f"the tip moved to height {base.height} since these blocks were found to extend it")
        blocks = self._validatable(blocks, base)
        template = self.templates.of(blocks) if after is None and extending is None else None
        batch = stage(base, blocks, self.consensus, self.verifier, now, after=after, extending=extending,
                      template=template, assume_valid=self.assume_valid, chunk=self.limits.verify_chunk,
                      assumed=self.assumed_ancestors(blocks) if self.assumed_ancestors is not None else 0)
        self.templates.taken(batch.reused - (extending.reused if extending is not None else 0))
        return batch

    def _validatable(self, blocks: list[Block], base: ChainState) -> list[Block]:
        """The first of `blocks` this node may validate; those of a fork it does not know are
        kept as "cannot validate yet" (`node.upgrade`), and CannotValidateYet is raised when
        none is left."""
        fine, kept = self.upgrade.sort(blocks, base.height, lambda block: self._could_produce(block, base))
        if kept:
            added = self.upgrade.park([(b.header.height, block_hash(b.header), encode(b)) for b in kept])
            reason = self.upgrade.refusal(kept[0].header.height)
            if added:
                log.warning("%s (%d blocks kept)", reason, len(self.upgrade.pending()))
            if not fine:
                raise CannotValidateYet(reason)
        return fine

    def _could_produce(self, block: Block, base: ChainState) -> bool:
        """Whether `block` is signed by a key that may make blocks (an authority, a registered
        service node), its signature and transaction root checked."""
        producer = block.header.producer
        if producer not in self.consensus.authorities and producer not in base.service_nodes:
            return False
        try:
            check_block_stateless(block, self.consensus)
        except SnodeError:
            return False
        return True

    def store_batch(self, batch: StagedBatch, *, defer_state: bool = False) -> StoredBatch:
        """Step 2: make a staged batch durable once its signatures check out: its rows are
        written while the last checks finish, then committed, or rolled back on a bad
        signature (the blocks before the bad one are then committed alone). Memory is not
        touched. StaleBatch when the batch's parent is no longer the tip.

        `defer_state`: a sync batch with more to come; the store may keep its state rows in
        memory (`ChainStore.write`), up to `limits.state_flush_blocks` (STATE_FLUSH_BLOCKS) blocks.
        """
        if batch.base is not self._state:
            raise StaleBatch(f"batch staged on height {batch.base.height} is not on the tip ({self.height})")
        return store_staged(self.store, batch, defer_state=defer_state, flush_blocks=self.limits.state_flush_blocks)

    def adopt_batch(self, stored: StoredBatch, now: int) -> int:
        """Step 3: make the stored blocks current, then raise the error that stopped the batch
        if one did. Returns how many blocks were adopted."""
        if stored.commits:
            if stored.base is not self._state:
                raise RuntimeError("a stored batch must be adopted before anything else changes the tip")
            final = stored.commits[-1].state
            assert final is not None, "the store refuses a batch whose last block has no state"
            self._adopt(final, [c.undo for c in stored.commits], [c.block for c in stored.commits], now,
                        mined=[tx_id for c in stored.commits if c.encoded for tx_id in c.encoded.txids])
        if stored.failure is not None:
            raise stored.failure
        return len(stored.commits)

    def finish_batch(self, batch: StagedBatch, now: int, *, defer_state: bool = False) -> int:
        """Store and adopt a staged batch (steps 2 and 3)."""
        return self.adopt_batch(self.store_batch(batch, defer_state=defer_state), now)

    def accept_blocks(self, blocks: list[Block], now: int) -> int:
        """Apply, store and adopt consecutive blocks on the tip in one store transaction. On an
        invalid block the valid ones before it are still committed and adopted, then the error
        is raised. Returns how many were adopted."""
        return self.finish_batch(self.stage_batch(blocks, now), now)

    def accept_block(self, block: Block, now: int) -> None:
        """Validate, store, then adopt a block on the tip; InvalidBlock says why not."""
        self.accept_blocks([block], now)

    def authority_key(self) -> SigningKey:
        """This daemon's block-producing (authority) key; RuntimeError if it holds none."""
        if self.producer_key is None:
            raise RuntimeError("this daemon holds no block-producing key")
        return self.producer_key

    def leader_key(self) -> SigningKey:
        """This service node's key, which signs its blocks as a round's leader."""
        if self.identity is None:
            raise RuntimeError("this daemon is not a service node")
        return self.identity.key

    def build_block(self, now: int) -> Block:
        """The next block on the tip, signed with this daemon's authority key, from the
        mempool (not applied: `accept_block` it). A daemon builds it on its store thread
        instead (`ChainWriter.template`)."""
        block, stale = build_block(self.state, self.pool, self.consensus, self.authority_key(), timestamp=now)
        self.drop_stale(stale, self._state)
        return block

    def build_round_block(self, round: int, timestamp: int, checkpoint: Checkpoint | None = None) -> Block:
        """This service node's block for `round` of the next height, from the mempool, signed
        with its key as the round's leader (its validators' signatures are added later)."""
        block, stale = build_block(self.state, self.pool, self.consensus, self.leader_key(),
                                   timestamp=timestamp, round=round, checkpoint=checkpoint)
        self.drop_stale(stale, self._state)
        return block

    def drop_stale(self, stale: list[bytes], built_on: ChainState) -> None:
        """Drop the pool ids a block template found no longer valid on `built_on`, if that is
        still the tip (on a newer one they may be valid)."""
        if stale and built_on is self._state:
            self.pool = mp.remove(self.pool, stale)

    def check_template(self, block: Block, now: int) -> None:
        """A validator's check of a round leader's block: every rule of a next block but the
        validators' signatures it cannot carry yet; SnodeError says what is wrong. The result is
        kept for the signed block, not applied again if it comes on this tip (`node.templates`)."""
        if self.upgrade.stops_at(block.header.height):
            raise CannotValidateYet(self.upgrade.refusal(block.header.height))
        self.templates.check(self._state, block, self.consensus, self.verifier, now)

    def adopt_snapshot(self, block: Block, state: ChainState, now: int) -> None:
        """Make `state`, loaded from a snapshot and stored with `block` as the tip
        (`ChainStore.adopt_snapshot`), current; the history starts at its height."""
        self._owners = OwnerIndex()
        self.history_start = state.height
        self._adopt(state, [], [block], now)

    def _adopt(self, state: ChainState, undos: list[Undo], blocks: list[Block], now: int, *,
               mined: list[bytes] | None = None) -> None:
        """Make `state` current after the store committed it (`undos`: the records of `blocks`,
        applied on the current state; `mined`: their transaction ids, when known)."""
        self._owners.adopted(state, undos)
        if len(blocks) == 1 and abs(now - blocks[0].header.timestamp) <= LIVE_SECONDS:
            self.participation.record_block(self._state, blocks[0])
        self.participation.keep_active(state, [k for u in undos for k, _ in u.service_nodes] if undos else None)
        activation = self.params.rules_at(state.height + 1) != self.params.rules_at(self._state.height + 1)
        self._departure_after(state, blocks)
        kept = current_checksum(self._state)
        if kept is not None and current_checksum(state) is None:  # staged before the tip's checksum came
            keep_in(state, caught_up(kept, self._state, state, undos))
        self._state = state
        self.upgrade.forget_pending(state.height)
        if not mined:
            mined = [txid(tx) for block in blocks for tx in block.transactions]
        self._pool_after(blocks, undos, mined, now)
        if activation:
            self._readmit_pool(state, now)
        last = blocks[-1]
        log.info("block %d %s: %d transaction%s%s; mempool %d (%d accepted since the last block)",
                 last.header.height, state.tip_hash.hex()[:16],
                 len(last.transactions), "" if len(last.transactions) == 1 else "s",
                 f" (+{len(blocks) - 1} before it)" if len(blocks) > 1 else "", len(self.pool), self._accepted)
        self._accepted = 0
        self.hub.publish(BlocksAdopted(tuple(blocks), state.height, state.tip_hash))

    def _pool_after(self, blocks: list[Block], undos: list[Undo], mined: list[bytes], now: int) -> None:
        """The mempool after `blocks` became the tip: what they mined or double-spent leaves at once
        (`mempool.after_block`); what names a node they changed is queued for a recheck."""
        spent = [op.key() for block in blocks for tx in block.transactions for op in tx.inputs]
        nodes = [key for undo in undos for key, _ in undo.service_nodes]
        self.pool, candidates = mp.after_block(self.pool, mined=mined, spent=spent, nodes=nodes, now=now)
        self._queue_rechecks(candidates)

    def _queue_rechecks(self, tx_ids: list[bytes]) -> None:
        self._rechecks.update(dict.fromkeys(tx_ids))
        if not self.defer_rechecks:
            self.recheck_pool()

    def recheck_pool(self, limit: int | None = None) -> int:
        """Check up to `limit` (None: all) of the queued pool transactions on the tip, dropping
        those that no longer apply; how many are still queued."""
        queue = self._rechecks
        batch = list(queue) if limit is None or limit >= len(queue) else list(itertools.islice(queue, limit))
        for tx_id in batch:
            del queue[tx_id]
        if batch:
            self.pool = mp.recheck(self.pool, batch, self._state, self.consensus, now=self.now())
        return len(queue)

    def _readmit_pool(self, state: ChainState, now: int) -> None:
        """The next block is on another fork: the pool is admitted again under its rules, and
        what they refuse leaves with one line per kind of transaction."""
        rules = self.params.rules_at(state.height + 1)
        fork = self.params.fork_of(rules)
        self.pool, refused = mp.readmit(self.pool, state, self.consensus, now=now, verifier=self.verifier)
        for kind, reasons in refused.items():
            log.warning("fork %s from height %d: %d %s transaction%s left the mempool (%s)", rules.name,
                        fork.height if fork is not None else state.height + 1, len(reasons), kind.value,
                        "" if len(reasons) == 1 else "s", reasons[0])

    # --- reorganisations ----------------------------------------------------------------------

    def store_reorganize(self, branch: list[Block], now: int) -> Reorganization | None:
        """Steps 1 and 2 of a switch to `branch` (consecutive blocks whose first parent is on
        the main chain): if it ends higher than the tip, validate the whole switch in memory,
        then write it in one store transaction. None (nothing written) when it does not end
        higher; an invalid branch raises and changes nothing."""
        check_trusted(branch, self.trusted_checkpoint)
        return reorganization(self.store, self._state, branch, self.consensus, self.verifier, now)

    def adopt_reorganize(self, reorg: Reorganization, now: int) -> None:
        """Step 3 of a switch of branches: the new tip becomes current, and the mempool gets
        back what the old branch held and is still valid."""
        log.warning("reorganized: undid %d blocks back to height %d, applied %d; new tip %d %s",
                    len(reorg.undone_blocks), reorg.fork_height, len(reorg.branch),
                    reorg.state.height, reorg.state.tip_hash.hex()[:16])
        self._owners.forget()
        self.hub.publish(ChainReorganized(reorg.fork_height, len(reorg.undone_blocks), len(reorg.branch)))
        deferred, self.defer_rechecks = self.defer_rechecks, True
        try:
            self._adopt(reorg.state, [], reorg.branch, now)
        finally:
            self.defer_rechecks = deferred
        # The undone blocks may have made what anything pooled spends or names: all of it is
        # checked again; their own transactions come back first (Bitcoin Core does the same).
        held = list(self.pool.entries)
        self._readmit([tx for b in reversed(reorg.undone_blocks) for tx in b.transactions[1:]], now)
        self._queue_rechecks(held)

    def reorganize(self, branch: list[Block], now: int) -> bool:
        """Switch to `branch` if it ends higher than the tip; whether the tip changed."""
        reorg = self.store_reorganize(branch, now)
        if reorg is not None:
            self.adopt_reorganize(reorg, now)
        return reorg is not None

    def _readmit(self, txs: list[Transaction], now: int) -> None:
        """Give the mempool back what a reorg undid, where still valid."""
        for tx in txs:
            try:
                self.pool, _ = mp.admit(self.pool, tx, self.state, self.consensus, now=now, verifier=self.verifier)
            except SnodeError:
                continue

    # --- closing ------------------------------------------------------------------------------

    def save_peers(self, addresses: Sequence[str]) -> None:
        """On the store thread: replace the saved peer addresses."""
        self.store.save_peers(addresses)

    def proofs_to_save(self) -> dict[str, bytes]:
        """The proof book as the store keeps it, if it changed since the last save (`node.saved`);
        on the event loop. Hand it to `write_saved` on the store thread."""
        return self.saved.changed(self.proofs)

    def write_saved(self, items: dict[str, bytes]) -> None:
        """On the store thread: store what `proofs_to_save` took."""
        saved.write(self.store, items)

    def saved_not_written(self) -> None:
        """What `proofs_to_save` took was not written: it is taken again next time."""
        self.saved.not_written()


    def flush_state(self) -> None:
        """Write the state the store deferred during a sync (`store_batch(defer_state=...)`); a refused
        write is logged (the stored blocks are applied again at the next start), damage raised."""
        try:
            self.store.flush_state(self.state)
        except DatabaseDamaged:
            raise
        except (StoreError, ValueError) as err:
            log.warning("could not write the chain state (%s); the next start rebuilds it from the blocks", err)

    def close(self, *, write: bool = True) -> None:
        """Write the deferred state, the proof book and the mempool (not if `write` is False: the
        database is damaged); release verifier and store."""
        self.verifier.close()
        try:
            if write:
                self.flush_state()
                saved.write(self.store, self.saved.changed(self.proofs, self.pool))
        except (StoreError, ValueError) as err:
            log.warning("could not save the uptime proofs and the mempool (%s)", err)
        finally:
            self.store.close()
