"""Random chain operations for the property tests (test_properties, test_state_root): a chain
fixture on which every part of the state can change, operations drawn as data by hypothesis, and
`Run`, which applies them and checks undo and the conservation of coins at every block."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import strategies as st

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
