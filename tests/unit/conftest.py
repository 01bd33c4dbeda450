"""Fixtures of the core's unit tests: a real in-process chain with funded, well-known people.

`LabChain` is `snode.devchain.DevChain` plus what tests need on top: transactions built but not
yet submitted, hand-made blocks (to reach the block rules the mempool would stop first) and
shortcuts through a service node's life. Every block is made and checked by the real core.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import msgspec
import pytest

from snode.common.clock import MockableClock
from snode.core.blocks import Block, make_block
from snode.core.crypto import SigningKey
from snode.core.mempool import Mempool
from snode.core.production import with_state_root
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import NO_HEIGHT, ChainState, Contribution, ServiceNode, undo_block
from snode.core.transactions import (
    OutPoint,
    Payload,
    Registration,
    Reservation,
    Stake,
    Transaction,
    Transfer,
    TxOut,
    signing_hash,
)
from snode.core.transition import make_coinbase
from snode.core.txbuilder import Spendable, build_spend, payload_spend
from snode.devchain import DevChain, key_from_label
from snode.net import protocol as P
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.peers import PeerManager
from snode.node.node import Identity, Node
from snode.node.verifier import InlineVerifier
from snode.params import COIN
from snode.store.memory import MemoryStore
from tests.unit.chain_ops import fresh_chain  # noqa: F401 (the property tests' chain, a fixture)

FUNDS = 1_000_000 * COIN
"""What genesis gives each well-known person."""

PEOPLE = (
    "operator", "alice", "bob", "carol", "dave",
    *(f"contributor-{i}" for i in range(1, 12)),
)
"""Labels of the people genesis funds; `key_from_label(label)` is each one's key."""

REQUIREMENT = 200_000 * COIN
POOL_MINIMUM = 100_000 * COIN


def fee_of(state: ChainState, tx: Transaction) -> int:
    """The fee tx pays on `state`, by plain arithmetic (no rule checked)."""
    inputs = sum(state.utxos[op.key()].amount for op in tx.inputs if op.key() in state.utxos)
    return inputs - sum(o.amount for o in tx.outputs) - payload_spend(tx.payload)


class LabChain(DevChain):
    """A DevChain with test conveniences; every block still goes through `apply_block`."""

    @classmethod
    def create(cls, allocations: dict[bytes, int], **options: Any) -> LabChain:
        """`DevChain.create`, typed as the LabChain it makes (the base's annotation says DevChain)."""
        chain = super().create(allocations, **options)
        assert isinstance(chain, LabChain)
        return chain

    def __repr__(self) -> str:
        # The dataclass repr would print every block: unreadable in a failure report.
        return f"LabChain(height={self.state.height}, pool={len(self.pool)})"

    def node(self, sn_pubkey: bytes) -> ServiceNode:
        """The registry record of a service node at the tip."""
        return self.state.service_nodes[sn_pubkey]

    def unspent(self, owner: bytes) -> list[Spendable]:
        """Unlocked outputs of `owner` at the next height, including those the pool spends."""
        height = self.state.height + 1
        return [
            (OutPoint(key[:32], int.from_bytes(key[32:], "big")), u)
            for key, u in self.state.utxos.items()
            if u.owner == owner and u.unlock_height <= height
        ]

    def spend(
        self, key: SigningKey, payload: Payload, outputs: Sequence[TxOut] = (),
        *, from_pool_spent: bool = False,
    ) -> Transaction:
        """A signed transaction of `key` carrying payload (not submitted)."""
        coins = self.unspent(key.public) if from_pool_spent else self.spendable(key.public)
        return build_spend(coins, key, list(outputs), payload, self.params, signed_for=self.next_rules())

    def registration(
        self, sn_key: SigningKey, reservations: Sequence[tuple[SigningKey | bytes, int]], *,
        fee_ppm: int = 0, expiry: int | None = None,
    ) -> Registration:
        """A registration payload signed by sn_key; reservations are (key or pubkey, amount)."""
        pairs = tuple(
            Reservation(who.public if isinstance(who, SigningKey) else who, amount)
            for who, amount in reservations
        )
        if expiry is None:
            expiry = self.now + self.params.registration_validity
        return sign_registration(sn_key, self.params, fee_ppm, pairs, expiry)

    def signed(
        self, inputs: Sequence[OutPoint], outputs: Sequence[TxOut], payload: Payload,
        signers: Sequence[SigningKey],
    ) -> Transaction:
        """A transaction with exactly these inputs and outputs, input i signed by signers[i]
        over the owner and amount the tip holds for it (an output it does not hold: 0 coins of
        the signer, for tests of the rules that refuse such an input first)."""
        rules = self.next_rules()
        unsigned = Transaction(rules.tx_version, tuple(inputs), tuple(outputs), payload, ())
        held = [self.state.utxos.get(op.key()) for op in inputs]
        spent = [TxOut(u.owner, u.amount) if u is not None else TxOut(k.public, 0) for u, k in zip(held, signers)]
        message = signing_hash(unsigned, spent, self.params.network_id, rules.branch_id)
        return msgspec.structs.replace(
            unsigned, signatures=tuple(key.sign(message) for key in signers)
        )

    def stake_tx(self, staker: SigningKey, sn_pubkey: bytes, amount: int) -> Transaction:
        """A signed stake (not submitted)."""
        return self.spend(staker, Stake(sn_pubkey=sn_pubkey, amount=amount))

    def transfer_tx(self, key: SigningKey, to: bytes, amount: int, **kw: bool) -> Transaction:
        """A signed transfer (not submitted)."""
        return self.spend(key, Transfer(), [TxOut(to, amount)], **kw)

    def block_with(
        self, transactions: Sequence[Transaction], *, timestamp: int | None = None,
        producer: SigningKey | None = None,
    ) -> Block:
        """A block on the tip with these transactions and the coinbase they call for."""
        producer = producer or self.authority
        fees = sum(fee_of(self.state, tx) for tx in transactions)
        coinbase = make_coinbase(self.state, producer.public, fees, self.consensus)
        rules = self.next_rules()
        block = make_block(
            version=rules.block_version, height=self.state.height + 1, prev_hash=self.state.tip_hash,
            timestamp=self.now + 2 if timestamp is None else timestamp,
            transactions=(coinbase, *transactions), producer_key=producer,
            network_id=self.params.network_id, state_root=bytes(32) if rules.state_root else None,
        )
        return with_state_root(self.state, block, self.consensus, producer)

    def mine_with(self, transactions: Sequence[Transaction], *, timestamp: int | None = None) -> Block:
        """Apply a hand-made block with these transactions (raises what apply_block raises)."""
        block = self.block_with(transactions, timestamp=timestamp)
        self.apply(block)
        self.now = block.header.timestamp
        return block

    def mine_to(self, height: int) -> None:
        """Mine empty-pool or pending blocks until the tip is at `height`."""
        assert height >= self.state.height, f"tip is already at {self.state.height}"
        self.mine(height - self.state.height)

    # --- a service node's life -------------------------------------------------------------

    def new_node(
        self, operator: str = "operator", sn_label: str = "sn-1", amount: int = REQUIREMENT, *,
        fee_ppm: int = 0, reserved: Sequence[tuple[SigningKey, int]] = (),
    ) -> bytes:
        """Register sn_label's key, `operator` staking `amount` (solo by default), and mine the
        registration; the node's public key."""
        sn_key = key_from_label(sn_label)
        self.register(
            key_from_label(operator), sn_key, amount, fee_ppm=fee_ppm,
            reserved=tuple((key.public, a) for key, a in reserved),
        )
        self.mine()
        return sn_key.public

    def change_state(self, sn_pubkey: bytes, kind: StateChangeKind) -> int:
        """Vote a state change with the authority quorum and mine it; the block's height."""
        reason = {
            StateChangeKind.ACTIVATE: Reason.FIRST_UPTIME_PROOF,
            StateChangeKind.DECOMMISSION: Reason.MISSED_UPTIME_PROOFS,
            StateChangeKind.RECOMMISSION: Reason.UPTIME_PROOFS_RESUMED,
        }[kind]
        self.state_change(sn_pubkey, kind, reason)
        self.mine()
        return self.state.height

    def copy(self) -> "LabChain":
        """An independent chain at the same tip (states and pools are immutable)."""
        return replace(self, blocks=list(self.blocks), undos=list(self.undos))

    def fork(self, at: int) -> "LabChain":
        """An independent chain that shares this one's blocks up to height `at` and whose next
        blocks are a second later than this one's (so their hashes differ)."""
        state = self.state
        for undo in reversed(self.undos[at:]):
            state = undo_block(state, undo)
        return replace(self, state=state, pool=Mempool(), now=state.timestamp + 1,
                       blocks=self.blocks[:at + 1], undos=self.undos[:at])


def credit_record(*, active: bool, credit: int, since: int, funded: bool = True, activated: bool = True) -> ServiceNode:
    """A funded solo (or, `funded` False, pool) node record with the given credit, changed at `since`."""
    amount = REQUIREMENT if funded else POOL_MINIMUM
    return ServiceNode(
        pubkey=bytes(32), fee_ppm=0, registration_height=1, staking_requirement=REQUIREMENT,
        contributors=(Contribution(bytes(32), amount, amount),), funded_height=1 if funded else NO_HEIGHT,
        active=active, active_since=1 if activated else NO_HEIGHT, decommission_count=0,
        last_reward_height=1, last_state_change_height=since, last_state_change_reason=0,
        last_decommission_reason=0, credit=credit, credit_height=since,
    )


def new_chain() -> LabChain:
    """A chain whose genesis gives each of PEOPLE `FUNDS` in one output."""
    return LabChain.create({key_from_label(p).public: FUNDS for p in PEOPLE})


def service_node_daemon(sn_label: str, public_ip: str = "203.0.113.5") -> Node:
    """An in-memory node run by the service node `sn_label`, registered and active on a new chain
    (as a daemon started with --service-node sees itself)."""
    chain = new_chain()
    pubkey = chain.new_node(operator="operator", sn_label=sn_label)
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    identity = Identity(key_from_label(sn_label), public_ip, 9230, 9232)
    return Node(params=chain.params, consensus=chain.consensus,
                store=MemoryStore(chain.blocks[0], chain.fork(at=0).state), state=chain.state,
                identity=identity, producer_key=None, verifier=InlineVerifier())


def node_on(chain: LabChain) -> Node:
    """An in-memory node that has every block of `chain`, its clock at the chain's time (the
    mempool's clock: entries are as old as the chain's time says)."""
    genesis_state = chain.fork(at=0).state
    clock = MockableClock()
    clock.set_mock(chain.now)
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis_state),
                state=genesis_state, identity=None, producer_key=None, verifier=InlineVerifier(), clock=clock)
    node.accept_blocks(chain.blocks[1:], chain.now)
    return node


@pytest.fixture
def chain() -> LabChain:
    """A fresh chain at genesis with the well-known people funded."""
    return new_chain()


@pytest.fixture(scope="session")
def chain_factory():
    """`new_chain` for tests that need many chains (hypothesis examples)."""
    return new_chain


SN_KEY = bytes(range(32))
"""The public key of `sn_record`'s node."""


def sn_record(*, active: bool = True, funded: bool = True, active_since: int = 10, reason: int = 0,
              changed: int = 10, credit: int = 600) -> ServiceNode:
    """A registry record of one node (key SN_KEY, one contributor), for the rules over a record."""
    amount = 200_000 * COIN if funded else 100_000 * COIN
    return ServiceNode(
        pubkey=SN_KEY, fee_ppm=0, registration_height=1, staking_requirement=200_000 * COIN,
        contributors=(Contribution(SN_KEY, amount, amount),), funded_height=1 if funded else -1,
        active=active, active_since=active_since, decommission_count=0 if active else 1,
        last_reward_height=1, last_state_change_height=changed, last_state_change_reason=reason,
        last_decommission_reason=reason, credit=credit, credit_height=changed,
    )


def peer_manager(nonce: int = 7, *, limits: PeerLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> tuple[PeerManager, P.Hello]:
    """A peer manager on a fresh chain's node (nothing listening yet: `start` it on a socket),
    and the Hello a peer of that chain sends it (with `nonce`); its bounds and clock as given."""
    chain = new_chain()
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier(), clock=MockableClock())
    hello = P.Hello(network_id=chain.params.network_id, genesis_hash=chain.consensus.genesis_hash,
                    version=P.PROTOCOL_VERSION, agent="test/1", height=0, top_hash=chain.consensus.genesis_hash,
                    listen_port=0, nonce=nonce)
    return PeerManager(node, bind_ip="127.0.0.1", listen_port=0, priority=[], limits=limits, clock=clock), hello


async def wait_async(predicate: Callable[[], bool], *, what: str, timeout: float = 20.0) -> None:
    """Let the event loop run (tasks, worker threads) until `predicate` holds; AssertionError
    naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.01)  # the poll interval of this condition wait


def free_port(ip: str) -> int:
    """A TCP port free on `ip` now (this run's own loopback address: nobody else binds there)."""
    with socket.socket() as probe:
        probe.bind((ip, 0))
        return int(probe.getsockname()[1])
