"""Properties of the state transition, over random chains built by hypothesis:

(a) undoing a block gives back exactly its parent state (every scalar and every map entry),
    also after the undo record went through its canonical encoding, as the store keeps it;
(b) no coin is made or lost: unspent + staked == issued == genesis + rewards at every height.

Operations (transfers with random amounts and recipients, registrations, stakes, state changes,
mining) are drawn as data and run on a real chain; an operation the rules refuse is skipped, one
that fails in any other way fails the test.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from snode.core import utxo_base, utxo_set
from snode.core.encoding import decode, encode
from snode.core.errors import SnodeError
from snode.core.service_nodes import Reason, StateChangeKind, min_contribution, open_for_others
from snode.core.state import Undo, undo_block
from snode.core.transactions import Transfer, TxOut
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST

USERS = [key_from_label(x) for x in ("operator", "alice", "bob", "carol", "dave")]
SN_KEYS = [key_from_label(f"sn-{i}") for i in range(3)]
"""Three nodes at most: below regtest's 4 active nodes the authority votes every state change."""
REQUIREMENT = REGTEST.staking_requirement
POOL_MINIMUM = REGTEST.pool_operator_min
FAN_OUT = [250_000 * COIN, 150_000 * COIN, 100_000 * COIN, 60_000 * COIN, 20_000 * COIN, 5 * COIN]
"""Each user's genesis output is split into these (plus change) so a user can act many times."""


@pytest.fixture(scope="session")
def fresh_chain(chain_factory):
    """Copies of a chain on which every user holds several unlocked outputs, sn-0 waits for
    contributions, sn-1 is an active pool node whose rewards do not divide evenly, and sn-2 is
    free to register."""
    chain = chain_factory()
    for user in USERS:
        chain.submit(chain.spend(user, Transfer(), [TxOut(user.public, a) for a in FAN_OUT]))
    contributors = [key_from_label(f"contributor-{i}") for i in range(1, 5)]
    chain.register(contributors[0], SN_KEYS[0], POOL_MINIMUM, fee_ppm=30_000)
    chain.register(contributors[1], SN_KEYS[1], POOL_MINIMUM, fee_ppm=70_001)
    chain.mine()
    chain.stake(contributors[2], SN_KEYS[1].public, 66_666 * COIN + 666_666_667)
    chain.stake(contributors[3], SN_KEYS[1].public, 33_333 * COIN + 333_333_333)
    chain.mine()
    chain.state_change(SN_KEYS[1].public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    chain.mine(REGTEST.unlock_confirmations)
    assert chain.blocks[-1].transactions[0].outputs[0].owner == contributors[1].public
    # A function, not the chain: hypothesis would print every block of a failing example's chain.
    return chain.copy


USER = st.integers(0, len(USERS) - 1)
SN = st.integers(0, len(SN_KEYS) - 1)
TRANSFER = st.tuples(
    st.just("transfer"), USER, st.one_of(USER, st.just(-1)),
    st.one_of(st.integers(1, 10 * COIN), st.integers(1, 400_000 * COIN)),
)
REGISTER = st.tuples(
    st.just("register"), USER, SN,
    st.one_of(st.sampled_from([REQUIREMENT, POOL_MINIMUM, 150_000 * COIN]),
              st.integers(POOL_MINIMUM - 1, REQUIREMENT + 1)),
    st.integers(0, 110_000),
    st.lists(st.tuples(USER, st.sampled_from([10_000 * COIN, 30_000 * COIN])), max_size=2),
)
STAKE = st.tuples(
    st.just("stake"), USER, SN,
    st.one_of(st.just("remainder"), st.just("min"), st.integers(0, 120_000 * COIN)),
)
STATE_CHANGE = st.tuples(st.just("state_change"), SN, st.sampled_from(["next", "next", *StateChangeKind]))
MINE = st.tuples(st.just("mine"), st.integers(1, 3))
OPERATIONS = st.one_of(TRANSFER, REGISTER, REGISTER, STAKE, STAKE, STATE_CHANGE, STATE_CHANGE, MINE, MINE)
"""`next` is the state change that fits the node (activate, decommission or recommission)."""


class Run:
    """Runs operations on a chain, checking both properties at every new block."""

    def __init__(self, chain) -> None:
        self.chain = chain
        self.genesis_total = sum(o.amount for o in chain.blocks[0].transactions[0].outputs)
        self.accepted: Counter[str] = Counter()

    def mine(self, count: int) -> None:
        for _ in range(count):
            before = self.chain.state
            self.chain.mine()
            after, undo = self.chain.state, self.chain.undos[-1]
            assert undo_block(after, undo) == before
            assert undo_block(after, decode(encode(undo), Undo)) == before
            assert after.total_unspent() + after.total_staked() == after.issued
            assert after.issued == self.genesis_total + after.height * REGTEST.block_reward

    def apply(self, op: tuple) -> None:
        kind, *args = op
        if kind == "mine":
            self.mine(args[0])
            return
        try:
            getattr(self, f"_{kind}")(*args)
        except SnodeError:
            return
        self.accepted[kind] += 1

    def _transfer(self, sender: int, recipient: int, amount: int) -> None:
        to = key_from_label("outsider").public if recipient < 0 else USERS[recipient].public
        self.chain.transfer(USERS[sender], to, amount)

    def _register(self, operator: int, sn: int, amount: int, fee_ppm: int, reserved: list) -> None:
        others = tuple((USERS[i].public, a) for i, a in reserved)
        self.chain.register(USERS[operator], SN_KEYS[sn], amount, fee_ppm=fee_ppm, reserved=others)

    def _stake(self, staker: int, sn: int, amount: int | str) -> None:
        node = self.chain.state.service_nodes.get(SN_KEYS[sn].public)
        if node is not None and amount == "min":
            amount = min_contribution(node, USERS[staker].public)
        elif node is not None and amount == "remainder":
            amount = open_for_others(node)
        elif isinstance(amount, str):
            amount = COIN
        self.chain.stake(USERS[staker], SN_KEYS[sn].public, amount)

    def _state_change(self, sn: int, kind: StateChangeKind | str) -> None:
        node = self.chain.state.service_nodes.get(SN_KEYS[sn].public)
        if kind == "next" and node is not None:
            kind = (
                StateChangeKind.DECOMMISSION if node.active
                else StateChangeKind.ACTIVATE if node.active_since < 0
                else StateChangeKind.RECOMMISSION
            )
        elif kind == "next":
            kind = StateChangeKind.ACTIVATE
        self.chain.state_change(SN_KEYS[sn].public, kind, Reason.NONE)


def _run(chain, operations: list[tuple]) -> Run:
    run = Run(chain)
    first, made_before = chain.state, len(chain.undos)
    for op in operations:
        run.apply(op)
    run.mine(1)
    # Undoing every block made here, newest first, leads back to where the run began.
    state = chain.state
    for undo in reversed(chain.undos[made_before:]):
        state = undo_block(state, undo)
    assert state == first
    return run


# Drawing 10 to 40 composite operations can pass hypothesis's generation-time budget on a
# loaded 2-core CI machine; the run itself is a few milliseconds per example.
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=40))
def test_undo_restores_the_parent_and_coins_are_conserved(fresh_chain, operations):
    run = _run(fresh_chain(), operations)
    for kind, count in run.accepted.items():
        event(f"accepted {kind}: {min(count, 3)}+")


def test_the_operations_reach_every_part_of_the_state(fresh_chain):
    # The property is only as good as its operations: this sequence must be accepted in full,
    # so the interpreter registers, stakes, activates, pays and decommissions for real.
    plan = [
        ("register", 1, 2, POOL_MINIMUM, 50_000, [(2, 30_000 * COIN)]),
        ("transfer", 3, -1, 5 * COIN),
        ("stake", 4, 0, "min"),
        ("mine", 1),
        ("stake", 2, 2, 30_000 * COIN),
        ("stake", 3, 2, "remainder"),
        ("stake", 3, 0, "remainder"),
        ("mine", 1),
        ("state_change", 2, StateChangeKind.ACTIVATE),
        ("mine", 3),
        ("state_change", 1, "next"),
        ("mine", 3),
        ("state_change", 1, "next"),
        ("mine", 3),
    ]
    run = _run(fresh_chain(), plan)
    assert run.accepted == {"register": 1, "transfer": 1, "stake": 4, "state_change": 3}
    nodes = run.chain.state.service_nodes
    assert nodes[SN_KEYS[1].public].decommission_count == 1
    assert nodes[SN_KEYS[1].public].active and nodes[SN_KEYS[2].public].active
    assert nodes[SN_KEYS[0].public].funded and nodes[SN_KEYS[2].public].funded
    assert any(n.last_reward_height > n.registration_height for n in nodes.values())


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATIONS, min_size=10, max_size=30), fold_at=st.integers(1, 4))
def test_the_properties_hold_when_the_outputs_fold_every_few_changes(fresh_chain, operations, fold_at):
    # A 100,000-block chain folds its outputs' overlay into packed buckets every 8,192 keys
    # (core.utxo_set); here every few keys, so that blocks, undos and state comparisons all
    # meet packed outputs, tombstones over them and the overlay together.
    before = utxo_set.COMPACT_AT, utxo_base.RENUMBER_SLACK
    utxo_set.COMPACT_AT, utxo_base.RENUMBER_SLACK = fold_at, 0  # owners renumbered often too
    try:
        _run(fresh_chain(), operations)
    finally:
        utxo_set.COMPACT_AT, utxo_base.RENUMBER_SLACK = before
