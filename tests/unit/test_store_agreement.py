"""The in-memory store behaves as the SQLite store does, and nodes built on it share a process.

A property test drives two nodes, one on a `ChainStore` (SQLite file) and one on a
`MemoryStore`, through the same random sequence of steps (blocks applied one by one or in
deferred sync batches, reorganisations to a longer fork, clean restarts and crashes that lose
deferred state) and checks after every step that the nodes and their stores agree on
everything a caller can read.

Then 100 nodes with in-memory stores and inline verifiers run in this one process and take the
same blocks: what the 10,000-node simulation builds on.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snode.core.blocks import Block, block_hash
from snode.core.transactions import txid
from snode.devchain import key_from_label
from snode.node.batches import replay_stored_blocks
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.params import COIN
from snode.store import DATABASE_FILE, ChainStore
from snode.store.memory import MemoryStore
from snode.store.protocol import Store
from tests.unit.conftest import PEOPLE, LabChain, new_chain

FORK_AT = 8


def _two_branches() -> tuple[LabChain, list[Block], list[Block]]:
    """A main branch of 24 blocks and a fork of it at FORK_AT of 30, both with transfers (so
    outputs are made and spent, and a transaction can be in both branches)."""
    chain = new_chain()
    bob = key_from_label("bob")
    for i in range(24):
        if i % 3 == 0:
            chain.transfer(key_from_label(PEOPLE[i % len(PEOPLE)]), bob.public, COIN + i)
        chain.mine()
    fork = chain.fork(at=FORK_AT)
    for i in range(30):
        if i % 4 == 1:
            fork.transfer(key_from_label(PEOPLE[(i + 9) % len(PEOPLE)]), bob.public, 2 * COIN + i)
        fork.mine()
    return chain, chain.blocks[1:], fork.blocks[FORK_AT + 1:]


CHAIN, MAIN, FORK = _two_branches()
GENESIS_BLOCK = CHAIN.blocks[0]
GENESIS_STATE = CHAIN.fork(at=0).state
ALL_TXIDS = sorted({txid(tx) for b in MAIN + FORK for tx in b.transactions})
ALL_HASHES = [block_hash(b.header) for b in MAIN + FORK]


def _node(store: Store) -> Node:
    state = replay_stored_blocks(store, store.load_state(), CHAIN.consensus)
    return Node(params=CHAIN.params, consensus=CHAIN.consensus, store=store, state=state,
                identity=None, producer_key=None, verifier=InlineVerifier())


def kill(node: Node) -> None:
    """A kill -9 of a node on SQLite: the connection closes and nothing is flushed."""
    assert isinstance(node.store, ChainStore)
    node.store._conn.close()


class Pair:
    """The same node twice: on SQLite and in memory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / DATABASE_FILE
        self.sqlite = _node(ChainStore.open(self.path, genesis_block=GENESIS_BLOCK, genesis_state=GENESIS_STATE))
        self.memory_store = MemoryStore(GENESIS_BLOCK, GENESIS_STATE)
        self.memory = _node(self.memory_store)
        self.on_fork = False

    def both(self) -> tuple[Node, Node]:
        return self.sqlite, self.memory

    def branch(self) -> list[Block]:
        return MAIN[:FORK_AT] + FORK if self.on_fork else MAIN

    def extend(self, count: int, deferred: bool) -> None:
        blocks = self.branch()[self.sqlite.height:self.sqlite.height + count]
        if not blocks:
            return
        for node in self.both():
            node.finish_batch(node.stage_batch(blocks, CHAIN.now), CHAIN.now, defer_state=deferred)

    def switch(self, extra: int) -> None:
        """Reorganise to the other branch, `extra` blocks past our height (if it has them)."""
        other = MAIN if self.on_fork else MAIN[:FORK_AT] + FORK
        height = self.sqlite.height
        if height <= FORK_AT or len(other) < height + extra:
            return
        branch = other[FORK_AT:height + extra]
        results = [node.reorganize(branch, CHAIN.now) for node in self.both()]
        assert results == [True, True]
        self.on_fork = not self.on_fork

    def restart(self, crash: bool) -> None:
        if crash:
            # A kill -9: nothing is flushed; what the store deferred is lost.
            kill(self.sqlite)
            memory_store = self.memory_store.reopen()
        else:
            self.sqlite.close()
            self.memory.close()
            memory_store = self.memory_store.reopen()
        self.sqlite = _node(ChainStore.open(self.path, genesis_block=GENESIS_BLOCK, genesis_state=GENESIS_STATE))
        self.memory_store = memory_store
        self.memory = _node(memory_store)

    def check(self) -> None:
        a, b = self.sqlite, self.memory
        assert a.state == b.state
        assert a.height == b.height
        sa, sb = a.store, b.store
        assert sa.tip() == sb.tip() == (a.height, a.state.tip_hash)
        assert sa.state_height() == sb.state_height()
        for height in range(a.height + 2):
            assert sa.block_hash_at(height) == sb.block_hash_at(height)
            assert sa.get_block_bytes(height) == sb.get_block_bytes(height)
        for hash_ in ALL_HASHES:
            assert sa.main_chain_height(hash_) == sb.main_chain_height(hash_)
            assert sa.get_block(hash_) == sb.get_block(hash_)
        for tx_id in ALL_TXIDS:
            assert sa.get_transaction(tx_id) == sb.get_transaction(tx_id)
        for height in range(1, a.height + 1):
            tip = sa.block_hash_at(height)
            assert tip is not None
            assert sa.get_undo(tip) == sb.get_undo(tip)

    def close(self) -> None:
        self.sqlite.close()
        self.memory.close()


STEPS = st.one_of(
    st.tuples(st.just("extend"), st.integers(1, 9), st.booleans()),
    st.tuples(st.just("switch"), st.integers(1, 6), st.just(False)),
    st.tuples(st.just("restart"), st.just(0), st.booleans()),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=1, max_size=12))
def test_the_memory_store_agrees_with_sqlite(steps: list[tuple[str, int, bool]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        pair = Pair(Path(directory))
        try:
            for kind, number, flag in steps:
                if kind == "extend":
                    pair.extend(number, deferred=flag)
                elif kind == "switch":
                    pair.switch(number)
                else:
                    pair.restart(crash=flag)
                pair.check()
        finally:
            pair.close()


def test_a_hundred_nodes_in_one_process_take_the_same_blocks() -> None:
    nodes = [
        Node(params=CHAIN.params, consensus=CHAIN.consensus,
             store=MemoryStore(GENESIS_BLOCK, GENESIS_STATE), state=GENESIS_STATE,
             identity=None, producer_key=None, verifier=InlineVerifier())
        for _ in range(100)
    ]
    for block in MAIN:
        for node in nodes:
            node.accept_block(block, CHAIN.now)
    assert {node.state.tip_hash for node in nodes} == {CHAIN.state.tip_hash}
    assert all(node.state == CHAIN.state for node in nodes)
    # Each has its own store, mempool and hub: one node's reorganisation leaves the others be.
    nodes[0].reorganize(MAIN[:FORK_AT] + FORK, CHAIN.now)
    assert nodes[0].height == len(MAIN[:FORK_AT] + FORK)
    assert all(node.height == len(MAIN) for node in nodes[1:])


def _exit_chain() -> LabChain:
    """A chain through every exit: an unlock, an unfilled pool's expiry and a deregistration."""
    from snode.core.service_nodes import Reason, StateChangeKind
    from tests.unit.conftest import POOL_MINIMUM

    chain = new_chain()
    solo = chain.new_node(operator="operator", sn_label="exit solo")
    down = chain.new_node(operator="alice", sn_label="exit down")
    chain.new_node(operator="bob", sn_label="exit pool", amount=POOL_MINIMUM)
    chain.change_state(solo, StateChangeKind.ACTIVATE)
    chain.change_state(down, StateChangeKind.ACTIVATE)
    chain.request_unlock(key_from_label("operator"), solo)
    chain.change_state(down, StateChangeKind.DECOMMISSION)
    chain.mine(chain.params.credit_initial)
    chain.state_change(down, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    chain.mine(2)
    assert len(chain.state.service_nodes) == 0, "every exit happened"
    return chain


def test_both_stores_keep_every_exit_across_restarts_and_a_crash() -> None:
    chain = _exit_chain()
    blocks = chain.blocks[1:]
    genesis_block, genesis_state = chain.blocks[0], chain.fork(at=0).state
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / DATABASE_FILE
        memory_store = MemoryStore(genesis_block, genesis_state)

        def nodes() -> tuple[Node, Node]:
            made = []
            for store in (ChainStore.open(path, genesis_block=genesis_block, genesis_state=genesis_state),
                          memory_store):
                state = replay_stored_blocks(store, store.load_state(), chain.consensus)
                made.append(Node(params=chain.params, consensus=chain.consensus, store=store, state=state,
                                 identity=None, producer_key=None, verifier=InlineVerifier()))
            return made[0], made[1]

        sqlite, memory = nodes()
        for start in range(0, len(blocks), 20):
            for node in (sqlite, memory):
                node.finish_batch(node.stage_batch(blocks[start:start + 20], chain.now), chain.now,
                                  defer_state=start % 40 == 20)
            if start % 40 == 20:  # a crash after a deferred batch, a clean stop after the others
                kill(sqlite)
            else:
                sqlite.close()
                memory.close()
            memory_store = memory_store.reopen()
            sqlite, memory = nodes()
            assert sqlite.state == memory.state
        assert sqlite.state == memory.state == chain.state
        sqlite.close()
        memory.close()
