"""The state root (issue #36, item 1): the incremental checksum equals a full recomputation.

Random chains from chain_ops' operations (transfers, registrations, stakes, state changes,
mining): after every block the checksum updated from the block's undo record must equal the
checksum computed from the whole state, and undoing blocks (a reorganisation) must give back
each parent's checksum, then a new branch on top must agree again. The lattice arithmetic is
checked against a plain reference of 1,024 integers, and the root of regtest's genesis is pinned.
"""

from __future__ import annotations

import hashlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snode.core import mempool as mp
from snode.core import state_root as R
from snode.core.genesis import genesis_state, regtest_genesis
from snode.core.state import undo_block
from snode.core.state_root import EMPTY, Checksum, after_block, before_block, state_checksum, with_entries
from snode.params import REGTEST
from tests.unit import chain_ops as P


def reference_lanes(table: str, key, value) -> list[int]:
    """The reference: an entry's 1,024 lanes read one by one from SHAKE256's output."""
    key_bytes = key if isinstance(key, bytes) else int(key).to_bytes(8, "big", signed=True)
    data = R.ENTRY_DOMAIN + R.TABLE_TAGS[table] + len(key_bytes).to_bytes(2, "big") + key_bytes + R.encode(value)
    out = hashlib.shake_256(data).digest(R.CHECKSUM_BYTES)
    return [int.from_bytes(out[2 * i: 2 * i + 2], "little") for i in range(R.LANES)]


def reference_checksum(added, removed=()) -> bytes:
    lanes = [0] * R.LANES
    for sign, items in ((1, added), (-1, removed)):
        for entry in items:
            lanes = [(a + sign * b) % 65_536 for a, b in zip(lanes, reference_lanes(*entry))]
    return b"".join(lane.to_bytes(2, "little") for lane in lanes)


class RootRun(P.Run):
    """chain_ops' run, also keeping the checksum incrementally and checking it."""

    def __init__(self, chain) -> None:
        super().__init__(chain)
        self.checksums = [state_checksum(chain.state)]
        self.blocks = 0

    def mine(self, count: int) -> None:
        for _ in range(count):
            self.chain.mine()
            state, undo = self.chain.state, self.chain.undos[-1]
            checksum = after_block(self.checksums[-1], state, undo)
            assert checksum == state_checksum(state), f"height {state.height}"
            assert before_block(checksum, state, undo) == self.checksums[-1]
            self.checksums.append(checksum)
            self.blocks += 1


def test_the_fast_lanes_are_the_reference_lanes(chain_factory):
    state = chain_factory().state
    some = list(R.entries(state))[:5]
    assert with_entries(EMPTY, some).to_bytes() == reference_checksum(some)
    assert with_entries(EMPTY, some[:2], some[2:]).to_bytes() == reference_checksum(some[:2], some[2:])
    assert Checksum.from_bytes(with_entries(EMPTY, some).to_bytes()) == with_entries(EMPTY, some)


def test_entries_add_in_any_order_and_removing_all_leaves_nothing(chain_factory):
    items = list(R.entries(chain_factory().state))
    assert with_entries(EMPTY, items) == with_entries(EMPTY, reversed(items))
    assert with_entries(with_entries(EMPTY, items), (), items) == EMPTY


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(P.OPERATIONS, min_size=10, max_size=40), reorg=st.integers(1, 6),
       branch=st.lists(P.OPERATIONS, min_size=1, max_size=15))
def test_the_incremental_checksum_is_the_whole_states_across_blocks_and_reorganisations(
        fresh_chain, operations, reorg, branch):
    chain = fresh_chain()
    run = RootRun(chain)
    for op in operations:
        run.apply(op)
    run.mine(1)
    depth = min(reorg, run.blocks)
    state, checksum = chain.state, run.checksums[-1]
    for undo, parent in zip(reversed(chain.undos[-depth:]), reversed(run.checksums[-depth - 1:-1])):
        checksum = before_block(checksum, state, undo)
        state = undo_block(state, undo)
        assert checksum == parent == state_checksum(state)
    chain.state, chain.pool = state, mp.Mempool()
    del chain.blocks[-depth:], chain.undos[-depth:]
    run.checksums = run.checksums[:-depth]
    for op in branch:
        run.apply(op)
    run.mine(1)


def test_the_root_of_regtest_genesis_is_pinned():
    state, _, _ = genesis_state(regtest_genesis(), REGTEST)
    checksum = state_checksum(state)
    assert hashlib.blake2b(checksum.to_bytes(), digest_size=8).hexdigest() == "3f9aaf04aef46b14"
    assert R.state_root(REGTEST.network_id, state, checksum).hex() == (
        "8eb06dbc94d0aa31f037c0b912dd64518dc8d1709765207bb27e80e7f37f3cc1")
