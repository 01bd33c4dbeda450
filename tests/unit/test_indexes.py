"""The registry index (`state.RegistryIndex`) and the fast rules that read it agree exactly with
the rules as written, which scan and sort every node.

Hypothesis drives a real chain of up to eight service nodes (enough for quorums of service nodes
instead of the authority) through registrations, activations, decommissions, recommissions,
blocks, undone blocks and states that lost their index, as a state loaded from the store has none.
At every state it passes through it checks:
(a) the index the state carries equals one built from scratch from its registry;
(b) the reward winner found in the queue is the winner of the full scan (`next_reward_winner`),
    at the next height and at later ones, across the grace period of recently activated nodes;
(c) the quorum, leaders and validators drawn from the index equal those drawn from the nodes,
    and the quorum each block recorded is the one its registry calls for;
(d) undoing a block gives back a state equal to its parent, with the parent's index;
(e) the nodes a block removes, found at the front of the exit schedule, are those a scan of
    every node finds due (unlock requests, unfilled pools), and deregistrations fit the credit.
The shuffle itself is checked against the copy-and-swap Fisher-Yates it replaces.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from snode.core import mempool as mp
from snode.core.credit import credit_at
from snode.core.crypto import hash32
from snode.core.errors import SnodeError
from snode.core.quorums import (
    _shuffled,
    block_leader,
    block_leader_from_queue,
    block_validators,
    block_validators_from_active,
    obligations_quorum,
    obligations_quorum_from_active,
)
from snode.core.service_nodes import (
    Reason,
    StateChangeKind,
    next_reward_winner,
    reward_winner_from_queue,
)
from snode.core.stake_exit import nodes_leaving
from snode.core.state import (
    ChainState,
    build_index,
    current_index,
    registry_index,
    undo_block,
    with_index,
)
from snode.core.state_change import sign_votes, state_change_tx
from snode.devchain import DevChain, key_from_label
from snode.params import COIN, REGTEST

SN_KEYS = [key_from_label(f"index sn {i}") for i in range(8)]
OPERATORS = [key_from_label(f"index operator {i}") for i in range(len(SN_KEYS))]
OUTSIDER = key_from_label("index outsider").public
"""A key that is never a service node: a leader the validators need not leave out."""


def reference_shuffle(keys: list[bytes], seed: bytes, count: int) -> tuple[bytes, ...]:
    """The quorum shuffle as first written: sort a copy, swap in place, take the head."""
    pool = sorted(keys)
    count = min(count, len(pool))
    for i in range(count):
        draw = int.from_bytes(hash32(seed + i.to_bytes(4, "big"))[:8], "big")
        j = i + draw % (len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return tuple(pool[:count])


@given(
    keys=st.lists(st.binary(min_size=32, max_size=32), unique=True, max_size=40),
    seed=st.binary(max_size=40),
    count=st.integers(0, 45),
)
def test_the_shuffle_draws_what_the_copy_and_swap_shuffle_draws(keys, seed, count):
    assert _shuffled(sorted(keys), seed, count) == reference_shuffle(keys, seed, count)


def test_the_shuffle_of_thousands_of_keys_draws_what_the_copy_and_swap_shuffle_draws():
    keys = [hash32(i.to_bytes(4, "big")) for i in range(2_000)]
    for round in range(20):
        seed = hash32(b"seed" + bytes([round]))
        assert _shuffled(sorted(keys), seed, 10 + round) == reference_shuffle(keys, seed, 10 + round)


def check_state(state: ChainState, chain: DevChain) -> None:
    """Properties (a) to (c) on one state."""
    params, authorities = chain.params, chain.consensus.authorities
    nodes = list(state.service_nodes.values())
    built = build_index(state.service_nodes)
    if state.index is not None:
        assert current_index(state) is state.index
        assert state.index == built
    index = registry_index(state)
    assert index == built
    for height in (state.height + 1, state.height + 30, state.height + 60):
        due = sorted((sn.leaves_at, sn.pubkey) for sn in nodes if sn.leaves_at and sn.leaves_at <= height)
        assert [(sn.leaves_at, sn.pubkey) for sn in nodes_leaving(state, height)] == due
    for height in range(state.height + 1, state.height + params.payable_grace + 3):
        fast = reward_winner_from_queue(index.reward_queue, state.service_nodes, height, params)
        assert fast == next_reward_winner(nodes, height, params)
        for round in (0, 1, 2, 7, 31):  # 7 and 31 wrap around small queues
            leader = block_leader_from_queue(
                index.reward_queue, state.service_nodes, height, round, params
            )
            assert leader == block_leader(nodes, height, round, params)
            for left_out in {leader or OUTSIDER, OUTSIDER}:
                assert block_validators_from_active(
                    index.active_keys, state.tip_hash, round, left_out, params
                ) == block_validators(nodes, state.tip_hash, round, left_out, params)
    assert obligations_quorum_from_active(
        index.active_keys, state.tip_hash, state.height, authorities, params
    ) == obligations_quorum(nodes, state.tip_hash, state.height, authorities, params)
    if state.height > 0:
        # The quorum the tip block recorded, drawn by the rule as written with the old shuffle.
        active = [sn.pubkey for sn in nodes if sn.active]
        recorded = state.quorums[state.height]
        if len(active) < params.min_active_sns:
            assert recorded.members == authorities
        else:
            size = params.quorum_size(len(active))
            assert recorded.members == reference_shuffle(active, state.tip_hash + b"obligations", size)


class Run:
    """Runs operations on a chain and checks every state it passes through."""

    def __init__(self, chain: DevChain) -> None:
        self.chain = chain
        self.first_height = chain.state.height
        self.accepted: Counter[str] = Counter()
        self.keys = {k.public: k for k in [*SN_KEYS, chain.authority]}

    def apply(self, op: tuple) -> None:
        kind, *args = op
        try:
            getattr(self, f"_{kind}")(*args)
        except SnodeError:
            return
        self.accepted[kind] += 1

    def _mine(self, count: int) -> None:
        for _ in range(count):
            parent = self.chain.state
            self.chain.mine()
            check_state(self.chain.state, self.chain)
            restored = undo_block(self.chain.state, self.chain.undos[-1])
            assert restored == parent
            assert restored.index == build_index(parent.service_nodes)

    def _undo(self, count: int) -> None:
        for _ in range(min(count, self.chain.state.height - self.first_height)):
            self.chain.state = undo_block(self.chain.state, self.chain.undos.pop())
            self.chain.blocks.pop()
            check_state(self.chain.state, self.chain)
        self.chain.pool = mp.Mempool()

    def _forget_index(self) -> None:
        # What the store loads: the maps and scalars, no index.
        s = self.chain.state
        self.chain.state = ChainState(
            height=s.height, tip_hash=s.tip_hash, timestamp=s.timestamp, issued=s.issued,
            utxos=s.utxos, service_nodes=s.service_nodes, quorums=s.quorums,
        )
        assert self.chain.state == s and self.chain.state.index is None
        check_state(self.chain.state, self.chain)

    def _register(self, sn: int) -> None:
        self.chain.register(OPERATORS[sn], SN_KEYS[sn], REGTEST.staking_requirement)

    def _register_pool(self, sn: int) -> None:
        """An open pool: it expires unless filled within the pool window."""
        self.chain.register(OPERATORS[sn], SN_KEYS[sn], REGTEST.pool_operator_min)

    def _unlock(self, sn: int) -> None:
        self.chain.request_unlock(OPERATORS[sn], SN_KEYS[sn].public)

    def _state_change(self, sn: int) -> None:
        """The state change that fits the node, voted by the tip's quorum."""
        pubkey = SN_KEYS[sn].public
        node = self.chain.state.service_nodes.get(pubkey)
        height = self.chain.state.height + 1
        credit = credit_at(node, height, REGTEST) if node is not None else 0
        kind = (
            StateChangeKind.ACTIVATE if node is None or node.active_since < 0
            else StateChangeKind.DECOMMISSION if node.active and credit >= REGTEST.credit_min
            else StateChangeKind.DEREGISTER if node.active or credit == 0
            else StateChangeKind.RECOMMISSION
        )
        reason = Reason.MISSED_UPTIME_PROOFS if kind is StateChangeKind.DEREGISTER else Reason.NONE
        quorum = self.chain.state.quorums[self.chain.state.height]
        voters = [self.keys[member] for member in quorum.members[:quorum.needed]]
        votes = sign_votes(voters, REGTEST.network_id, pubkey, kind, reason, quorum.height)
        self.chain.submit(state_change_tx(votes, node or pubkey, kind, reason, quorum.height))


@pytest.fixture(scope="session")
def index_chain():
    """Copies of a chain on which nodes 0 to 5 are registered, 0 to 2 are active (one short of
    quorums of service nodes) and the operators of 6 and 7 can pay for theirs."""
    chain = DevChain.create({k.public: 300_000 * COIN for k in OPERATORS})
    for operator, sn_key in list(zip(OPERATORS, SN_KEYS))[:6]:
        chain.register(operator, sn_key, REGTEST.staking_requirement)
    chain.mine()
    for sn_key in SN_KEYS[:3]:
        chain.state_change(sn_key.public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    chain.mine()
    return lambda: replace(chain, blocks=list(chain.blocks), undos=list(chain.undos))


SN = st.integers(0, len(SN_KEYS) - 1)
OPERATIONS = st.one_of(
    st.tuples(st.just("register"), SN),
    st.tuples(st.just("register_pool"), SN),
    st.tuples(st.just("unlock"), SN),
    st.tuples(st.just("mine"), st.integers(25, 60)),
    st.tuples(st.just("state_change"), SN),
    st.tuples(st.just("state_change"), SN),
    st.tuples(st.just("mine"), st.integers(1, 3)),
    st.tuples(st.just("mine"), st.integers(1, 3)),
    st.tuples(st.just("undo"), st.integers(1, 3)),
    st.tuples(st.just("forget_index")),
)


def _run(chain: DevChain, operations: list[tuple]) -> Run:
    run = Run(chain)
    for op in operations:
        run.apply(op)
    run.apply(("mine", 1))
    return run


@pytest.mark.slow
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # examples: the profile (tests/conftest.py)
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=40))
def test_the_index_and_its_fast_rules_agree_with_the_full_scan(index_chain, operations):
    run = _run(index_chain(), operations)
    active = sum(sn.active for sn in run.chain.state.service_nodes.values())
    event(f"active at the end: {min(active, REGTEST.min_active_sns + 1)}+")
    for kind, count in run.accepted.items():
        event(f"accepted {kind}: {min(count, 3)}+")


def test_the_operations_reach_service_node_quorums_and_every_state_change(index_chain):
    # The property is only as good as its operations: this plan must be accepted in full, so
    # the run activates enough nodes for quorums of service nodes, which then vote decommissions
    # and recommissions while some nodes wait out their grace period at the head of the queue.
    plan = [
        ("register", 6), ("state_change", 3), ("mine", 1),
        ("state_change", 4), ("mine", 2), ("undo", 1), ("forget_index",),
        ("state_change", 6), ("mine", 1), ("state_change", 0), ("mine", 1),
        ("state_change", 0), ("mine", 3), ("undo", 2), ("mine", 3),
    ]
    run = _run(index_chain(), plan)
    assert run.accepted == {
        "register": 1, "state_change": 5, "mine": 7, "undo": 2, "forget_index": 1,
    }
    state = run.chain.state
    assert sum(sn.active for sn in state.service_nodes.values()) == 6
    assert run.chain.authority.public not in state.quorums[state.height].members
    assert state.service_nodes[SN_KEYS[0].public].decommission_count == 1


def test_a_state_whose_registry_was_swapped_does_not_read_the_index_it_carried(index_chain):
    # dataclasses.replace keeps the index of the old registry; it must not be taken for the new.
    state = index_chain().state
    assert state.index is not None
    first = SN_KEYS[0].public
    swapped = replace(state, service_nodes=state.service_nodes.set(
        first, msgspec.structs.replace(state.service_nodes[first], active=False)
    ))
    assert swapped.index is state.index and current_index(swapped) is None
    assert first not in registry_index(swapped).active_keys
    assert registry_index(swapped) == build_index(swapped.service_nodes)
    assert current_index(with_index(swapped)) == build_index(swapped.service_nodes)


def test_the_operations_reach_every_exit(index_chain):
    # An unlock, an unfilled pool and a deregistration, each leaving the registry under the
    # checks of every block (and undone and done again).
    plan = [
        ("unlock", 0), ("register_pool", 6), ("state_change", 1), ("mine", 1),
        ("mine", 60), ("undo", 3), ("mine", 3), ("state_change", 1), ("mine", 1),
    ]
    run = _run(index_chain(), plan)
    assert run.accepted == {
        "unlock": 1, "register_pool": 1, "state_change": 2, "mine": 5, "undo": 1,
    }
    registry = run.chain.state.service_nodes
    assert {SN_KEYS[i].public for i in (0, 1, 6)}.isdisjoint(registry)
    assert SN_KEYS[2].public in registry
