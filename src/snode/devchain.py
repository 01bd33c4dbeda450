"""An in-process chain driven by the genesis authority: the core without networking or disk.

The walkthrough (`make demo` before the devnet exists), unit tests and benchmarks use it to make
real blocks with real transactions. Time is a field that advances by the block time; nothing here
reads the clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from snode.core import mempool as mp
from snode.core.address import encode_address
from snode.core.blocks import Block, Checkpoint, block_hash
from snode.core.crypto import SigningKey
from snode.core.genesis import Consensus, GenesisDoc, GenesisOutput, genesis_state
from snode.core.production import build_block
from snode.core.pulse import RoundQuorum, round_quorum, round_window, signer_set, validator_message
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import ChainState, Undo
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import (
    OutPoint,
    Reservation,
    Stake,
    Transaction,
    Transfer,
    TxOut,
    txid,
)
from snode.core.transition import apply_block
from snode.core.txbuilder import Spendable, build_spend, build_transfer, build_unlock_request
from snode.params import REGTEST, ForkRules, NetworkParams


def key_from_label(label: str) -> SigningKey:
    """A deterministic key for examples and tests (never for real funds)."""
    return SigningKey(hashlib.blake2b(label.encode(), digest_size=32).digest())


def sn_block(
    state: ChainState, consensus: Consensus, keys: Mapping[bytes, SigningKey], *, round: int = 0,
    signers: int | None = None, checkpoint: Checkpoint | None = None, pool: mp.Mempool | None = None,
) -> tuple[Block, RoundQuorum]:
    """The service-node block of `round` on `state`: built at the round's start by its leader
    from `pool` (none by default), signed by its first `signers` validators (all by default);
    `keys` holds the nodes' keys by public key."""
    params = consensus.params
    quorum = round_quorum(state, round, params)
    start, _ = round_window(state.timestamp, round, params)
    block, _ = build_block(state, pool or mp.Mempool(), consensus, keys[quorum.leader], timestamp=start,
                           round=round, checkpoint=checkpoint)
    message = validator_message(params.network_id, block_hash(block.header))
    chosen = quorum.validators[:len(quorum.validators) if signers is None else signers]
    bitset, signatures = signer_set(quorum.validators, {v: keys[v].sign(message) for v in chosen})
    return msgspec.structs.replace(block, validator_bitset=bitset, validator_signatures=signatures), quorum


@dataclass
class DevChain:
    """A chain, its mempool and the authority key that produces its blocks."""

    params: NetworkParams
    authority: SigningKey
    state: ChainState
    consensus: Consensus
    now: int
    pool: mp.Mempool = field(default_factory=mp.Mempool)
    blocks: list[Block] = field(default_factory=list)
    undos: list[Undo] = field(default_factory=list)
    on_block: Callable[[Block, ChainState, Undo], None] | None = None
    """Told each block applied, with the state after it and its undo (a store's `commit_block`)."""

    @classmethod
    def create(
        cls, allocations: dict[bytes, int], *, params: NetworkParams = REGTEST,
        authority: SigningKey | None = None, timestamp: int = 1_767_225_600,
    ) -> "DevChain":
        """A new chain whose genesis pays `allocations` (public key -> atomic units)."""
        authority = authority or key_from_label("devchain authority")
        doc = GenesisDoc(
            network=params.name, timestamp=timestamp, authorities=[authority.public.hex()],
            outputs=[GenesisOutput(encode_address(params.address_prefix, k), v) for k, v in allocations.items()],
        )
        state, block, consensus = genesis_state(doc, params)
        return cls(params=params, authority=authority, state=state, consensus=consensus,
                   now=timestamp, blocks=[block])

    def next_rules(self) -> ForkRules:
        """The rules of the next block: the fork its transactions are signed for."""
        return self.params.rules_at(self.state.height + 1)

    def spendable(self, owner: bytes) -> list[Spendable]:
        """Unlocked outputs of `owner` at the next height, minus those the mempool spends."""
        height = self.state.height + 1
        return [
            (OutPoint(key[:32], int.from_bytes(key[32:], "big")), u)
            for key, u in self.state.utxos.items()
            if u.owner == owner and u.unlock_height <= height and key not in self.pool.spent
        ]

    def balance(self, owner: bytes) -> tuple[int, int]:
        """(total, unlocked) atomic units of `owner`."""
        height = self.state.height + 1
        mine = [u for u in self.state.utxos.values() if u.owner == owner]
        return sum(u.amount for u in mine), sum(u.amount for u in mine if u.unlock_height <= height)

    def submit(self, tx: Transaction) -> bytes:
        """Admit tx to the mempool (raises with the reason if it is not valid); its id."""
        self.pool, entry = mp.admit(self.pool, tx, self.state, self.consensus, now=self.now)
        return entry.txid

    def mine(self, count: int = 1) -> list[Block]:
        """Produce `count` blocks with the authority key, one block time apart."""
        made = []
        for _ in range(count):
            self.now += max(self.params.target_block_time, 2)
            block, stale = build_block(
                self.state, self.pool, self.consensus, self.authority, timestamp=self.now
            )
            self.apply(block)
            made.append(block)
        return made

    def apply(self, block: Block) -> None:
        """Apply a block made elsewhere and drop its transactions from the pool."""
        self.state, undo = apply_block(self.state, block, self.consensus, now=self.now)
        self.blocks.append(block)
        self.undos.append(undo)
        if self.on_block is not None:
            self.on_block(block, self.state, undo)
        self.pool, candidates = mp.after_block(
            self.pool, mined=[txid(tx) for tx in block.transactions],
            spent=[op.key() for tx in block.transactions for op in tx.inputs],
            nodes=[key for key, _ in undo.service_nodes], now=self.now,
        )
        self.pool = mp.recheck(self.pool, candidates, self.state, self.consensus, now=self.now)

    # --- conveniences for examples ----------------------------------------------------------

    def transfer(self, key: SigningKey, to: bytes, amount: int) -> bytes:
        """Send `amount` from key's outputs to public key `to`."""
        return self.submit(build_transfer(self.spendable(key.public), key, to, amount, self.params,
                                          signed_for=self.next_rules()))

    def pay_many(self, key: SigningKey, payments: dict[bytes, int]) -> bytes:
        """One transaction from key paying each public key its amount."""
        outputs = [TxOut(k, a) for k, a in payments.items()]
        return self.submit(build_spend(self.spendable(key.public), key, outputs, Transfer(), self.params,
                                       signed_for=self.next_rules()))

    def register(
        self, operator: SigningKey, sn_key: SigningKey, amount: int, *, fee_ppm: int = 0,
        reserved: tuple[tuple[bytes, int], ...] = (),
    ) -> bytes:
        """Register sn_key with `operator` staking `amount` (and optional reservations)."""
        reservations = (Reservation(operator.public, amount),) + tuple(
            Reservation(k, a) for k, a in reserved
        )
        reg = sign_registration(
            sn_key, self.params, fee_ppm, reservations, self.now + self.params.registration_validity
        )
        return self.submit(build_spend(self.spendable(operator.public), operator, [], reg, self.params,
                                       signed_for=self.next_rules()))

    def stake(self, staker: SigningKey, sn_pubkey: bytes, amount: int) -> bytes:
        """Contribute `amount` from staker to a service node."""
        payload = Stake(sn_pubkey=sn_pubkey, amount=amount)
        return self.submit(build_spend(self.spendable(staker.public), staker, [], payload, self.params,
                                       signed_for=self.next_rules()))

    def state_change(self, sn_pubkey: bytes, kind: StateChangeKind, reason: Reason) -> bytes:
        """A state change voted by the quorum of the tip (the authority while bootstrapping)."""
        quorum = self.state.quorums[self.state.height]
        if self.authority.public not in quorum.members:
            raise ValueError("the tip's quorum is made of service nodes; the authority cannot vote")
        votes = sign_votes([self.authority], self.params.network_id, sn_pubkey, kind, reason, quorum.height)
        target = self.state.service_nodes.get(sn_pubkey) or sn_pubkey
        return self.submit(state_change_tx(votes, target, kind, reason, quorum.height))

    def register_active(self, nodes: Sequence[tuple[SigningKey, SigningKey]], *, per_block: int = 250) -> None:
        """Register each (operator, service node key) of `nodes` solo, the operator staking the
        whole requirement, `per_block` registrations a block; then activate them all in one
        block voted by the tip's quorum (the authority's while the authority produces)."""
        for start in range(0, len(nodes), per_block):
            for operator, sn_key in nodes[start:start + per_block]:
                self.register(operator, sn_key, self.params.staking_requirement)
            self.mine()
        for _, sn_key in nodes:
            self.state_change(sn_key.public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
        self.mine()

    def request_unlock(self, contributor: SigningKey, sn_pubkey: bytes) -> bytes:
        """`contributor` asks to unlock its stake on a service node."""
        return self.submit(build_unlock_request(contributor, sn_pubkey, self.params, signed_for=self.next_rules()))

    def tip_hash(self) -> bytes:
        """Hash of the last block."""
        return block_hash(self.blocks[-1].header)
