"""The node: the one owner of the current chain state, the mempool and the store.

Every change of tip goes through `accept_block`: validate on a new state object, commit to the
store, and only then swap the state in, so a crash or an exception never leaves memory ahead of
disk.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

from snode import __version__
from snode.core import mempool as mp
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.genesis import Consensus
from snode.core.production import build_block
from snode.core.proofs import UptimeProof, check_proof, make_proof
from snode.core.service_nodes import Status, status
from snode.core.state import ChainState, UtxoEntry
from snode.core.transactions import Transaction, txid
from snode.core.transition import apply_block
from snode.node.verifier import ThreadedVerifier
from snode.params import NetworkParams
from snode.store import ChainStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Identity:
    """How this daemon presents itself as a service node."""

    key: SigningKey
    public_ip: str
    p2p_port: int
    quorumnet_port: int


def format_age(seconds: int) -> str:
    """`1m05s`, `42s`, `3h07m`: the status line's proof age."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Node:
    """Chain state, mempool, store and this daemon's service-node identity."""

    def __init__(
        self, *, params: NetworkParams, consensus: Consensus, store: ChainStore,
        state: ChainState, identity: Identity | None, producer_key: SigningKey | None,
    ) -> None:
        self.params = params
        self.consensus = consensus
        self.store = store
        self.state = state
        self.identity = identity
        self.producer_key = producer_key
        self.pool = mp.Mempool()
        self.verifier = ThreadedVerifier()
        self.target_height = 0
        """Best height announced by peers while syncing; 0 when synced."""
        self.last_proofs: dict[bytes, int] = {}
        """Timestamp of the last accepted uptime proof per service node (this node's view)."""
        self.proofs_version = 0
        """Counts accepted proofs, so answers that show proof times know when to refresh."""
        self.last_proof_rejection = ""
        self._by_owner: dict[bytes, set[bytes]] = defaultdict(set)
        for key, entry in state.utxos.items():
            self._by_owner[entry.owner].add(key)

    # --- reading ------------------------------------------------------------------------------

    @property
    def height(self) -> int:
        return self.state.height

    def outputs_of(self, owner: bytes) -> list[tuple[bytes, UtxoEntry]]:
        """Unspent outputs of a public key at the tip, by output key."""
        utxos = self.state.utxos
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
            last = self.last_proofs.get(self.identity.key.public, 0)
            line += f", proof: {format_age(now - last) if last else 'never'}"
        return line

    # --- changing -----------------------------------------------------------------------------

    def submit_transaction(self, tx: Transaction, now: int) -> bytes:
        """Admit a transaction to the mempool; SnodeError says why not."""
        self.pool, entry = mp.admit(
            self.pool, tx, self.state, self.consensus, now=now, verifier=self.verifier
        )
        log.info("mempool: accepted %s (%d bytes, fee %d)", entry.txid.hex(), entry.size, entry.fee)
        return entry.txid

    def accept_block(self, block: Block, now: int) -> None:
        """Validate, store, then adopt a block on the tip; InvalidBlock says why not."""
        new_state, undo = apply_block(
            self.state, block, self.consensus, verifier=self.verifier, now=now
        )
        self.store.commit_block(block, new_state, undo)
        for key, old in undo.utxos:
            if old is not None:
                self._by_owner[old.owner].discard(key)
            new = new_state.utxos.get(key)
            if new is not None:
                self._by_owner[new.owner].add(key)
        self.state = new_state
        mined = [txid(tx) for tx in block.transactions]
        self.pool = mp.revalidate(mp.remove(self.pool, mined), new_state, self.consensus, now=now)
        log.info(
            "block %d %s: %d transactions", new_state.height, new_state.tip_hash.hex()[:16],
            len(block.transactions),
        )

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

    def accept_proof(self, proof: UptimeProof, now: int) -> None:
        """Record an uptime proof this node accepts; InvalidProof says why not."""
        check_proof(
            proof, self.params, registered=proof.pubkey in self.state.service_nodes, now=now,
            last_accepted=self.last_proofs.get(proof.pubkey, 0),
        )
        self.last_proofs[proof.pubkey] = proof.timestamp
        self.proofs_version += 1

    def close(self) -> None:
        """Release threads and the store."""
        self.verifier.close()
        self.store.close()
