"""The state root (issue #36, item 1): the incremental checksum equals a full recomputation.

Random chains from chain_ops' operations (transfers, registrations, stakes, state changes,
mining): after every block the checksum updated from the block's undo record must equal the
checksum computed from the whole state, and undoing blocks (a reorganisation) must give back
each parent's checksum, then a new branch on top must agree again. The lattice arithmetic is
checked against a plain reference of 1,024 integers, and the root of regtest's genesis is pinned.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from snode.core import mempool as mp
from snode.core import state_root as R
from snode.core.blocks import Block, BlockHeaderV2, header_fields, header_state_root, make_header, sign_block
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, InvalidBlock
from snode.core.genesis import genesis_state, regtest_genesis
from snode.core.state import ChainState, undo_block
from snode.core.state_root import (
    EMPTY,
    Checksum,
    after_block,
    before_block,
    current_checksum,
    header_root,
    own_entries,
    state_checksum,
    undo_summed,
    with_checksum,
    with_entries,
)
from snode.node.batches import check_stored_checksum, replay_stored_blocks
from snode.params import REGTEST, V2, Fork
from snode.store import StoreError
from snode.store.chain_store import ChainStore
from snode.store.state_tables import read_checksum
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


# --- fork v2: the root in every header ---------------------------------------------------------

def v2_from_next(chain):
    """`chain` with fork v2 scheduled at its next height: its blocks carry state roots."""
    params = chain.params.with_test_forks((Fork(V2, chain.state.height + 1),))
    chain.params, chain.consensus = params, dataclasses.replace(chain.consensus, params=params)
    return chain


def check_root(chain) -> None:
    """The tip carries its checksum, equal to the whole state's, whose root its header carries."""
    state = chain.state
    checksum = current_checksum(state)
    assert checksum is not None, f"height {state.height} carries no checksum"
    assert checksum == state_checksum(state), f"height {state.height}"
    assert header_state_root(chain.blocks[-1].header) == header_root(REGTEST.network_id, state, checksum)


class V2Run(P.Run):
    def mine(self, count: int) -> None:
        super().mine(count)
        check_root(self.chain)
        self.blocks = getattr(self, "blocks", 0) + count


def reorganise(chain, depth: int) -> None:
    """Undo the top `depth` blocks (keeping the checksum, as a node's reorganisation does)."""
    state = chain.state
    for undo in reversed(chain.undos[-depth:]):
        state = undo_summed(state, undo)
        assert current_checksum(state) == state_checksum(state), f"undone to {state.height}"
    chain.state, chain.pool, chain.now = state, mp.Mempool(), state.timestamp + 1
    del chain.blocks[-depth:], chain.undos[-depth:]


@pytest.mark.slow
@settings(max_examples=16, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(segments=st.lists(st.tuples(st.lists(P.OPERATIONS, min_size=30, max_size=60), st.integers(0, 6)),
                         min_size=8, max_size=10))
def test_a_v2_chain_keeps_its_root_incrementally_over_thousands_of_blocks_and_reorganisations(
        fresh_chain, segments):
    """Every block of a v2 chain: the checksum the state carries (updated from each block's undo
    record, and taken back by each reorganisation) is the whole state's, and the header carries
    its root (which apply_block checked). The 16 examples make about 2,500 blocks in all (24 s)."""
    chain = v2_from_next(fresh_chain())
    run = V2Run(chain)
    for operations, depth in segments:
        for op in operations:
            run.apply(op)
        run.mine(1)
        depth = min(depth, len(chain.blocks) - 1 - chain.params.forks[-1].height)
        if depth > 0:
            reorganise(chain, depth)
    assert run.blocks >= 8


def test_the_first_v2_block_sums_its_parent_once_and_a_v1_block_keeps_no_checksum(chain_factory):
    chain = chain_factory()
    chain.mine(2)
    assert chain.state.summed is None and header_state_root(chain.blocks[-1].header) is None
    v2_from_next(chain).mine(3)
    assert [b.header.version for b in chain.blocks[-4:]] == [1, 2, 2, 2]
    check_root(chain)


def test_a_block_whose_root_differs_is_refused_in_one_line_with_both_roots(chain_factory):
    chain = v2_from_next(chain_factory())
    block = chain.block_with([])
    good = header_state_root(block.header)
    assert good is not None
    bad = sign_block(BlockHeaderV2(**header_fields(block.header), state_root=bytes(32)), block.transactions,
                     chain.authority, chain.params.network_id)
    with pytest.raises(InvalidBlock) as refused:
        chain.apply(bad)
    assert refused.value.reason == (
        f"block {block.header.height} has state root {'00' * 32}; this node computes {good.hex()} for the "
        "state after it")
    chain.apply(block)
    check_root(chain)


def test_own_entries_are_what_the_block_hash_chose_and_the_next_root_covers_them(chain_factory):
    """A header cannot commit to what its own hash draws (the obligations quorum and the
    checkpoint slot of its height); the next header's root does."""
    chain = v2_from_next(chain_factory())
    chain.mine(1)
    state = chain.state
    assert [(t, k) for t, k, _ in own_entries(state)] == [("quorums", state.height)]
    chain.mine(1)
    covered = dict(((t, k), v) for t, k, v in R.entries(chain.state))
    assert covered[("quorums", state.height)] == state.quorums[state.height]


def test_the_root_covers_every_field_of_the_chain_state():
    """What consensus reads is ChainState: its four maps are summed, its scalars hashed with
    them; the tip hash is the header's parent link, and the index is the registry's, derived.
    A new field must join one of these (and this list) or the root misses it."""
    names = {f.name for f in dataclasses.fields(ChainState)}
    assert names == {*R.MAP_NAMES, "height", "timestamp", "issued", "tip_hash", "index", "summed"}


def test_a_checksum_kept_for_other_maps_is_not_read(chain_factory):
    state = chain_factory().state
    summed = with_checksum(state, state_checksum(state))
    assert current_checksum(summed) is not None
    swapped = dataclasses.replace(summed, quorums=summed.quorums.delete(0))
    assert current_checksum(swapped) is None


# --- the header of each version ------------------------------------------------------------------

def _fields():
    return dict(height=5, prev_hash=bytes(32), timestamp=7, tx_root=bytes(32), producer=bytes(32), round=0)


def test_a_v1_header_is_version_1s_array_and_a_v2_header_adds_its_root_last():
    v1 = make_header(1, **_fields())
    v2 = make_header(2, **_fields(), state_root=b"\x01" * 32)
    assert encode(v1)[:2] == b"\x98\x01" and encode(v2)[:2] == b"\x99\x02"
    assert encode(v2) == b"\x99\x02" + encode(v1)[2:] + encode(b"\x01" * 32)
    assert (v1.version, v2.version) == (1, 2)
    for header in (v1, v2):
        block = Block(header, (), bytes(64))
        assert decode(encode(block), Block) == block


def test_a_header_with_a_root_it_should_not_have_or_without_one_it_should_does_not_decode():
    v1 = encode(make_header(1, **_fields()))
    v2_without = b"\x98\x02" + v1[2:]
    v1_with = b"\x99\x01" + v1[2:] + encode(bytes(32))
    v3 = b"\x98\x03" + v1[2:]
    for data in (v2_without, v1_with, v3):
        with pytest.raises(DecodeError):
            decode(b"\x93" + data + encode(()) + encode(bytes(64)), Block)
    with pytest.raises(ValueError, match="no state root"):
        make_header(1, **_fields(), state_root=bytes(32))
    with pytest.raises(ValueError, match="carries a state root"):
        make_header(2, **_fields())
    with pytest.raises(ValueError, match="no block version 3"):
        make_header(3, **_fields())


# --- the checksum on disk ------------------------------------------------------------------------

def _stored_chain(chain_factory, tmp_path, blocks: int = 3):
    chain = v2_from_next(chain_factory())
    store = ChainStore.open(tmp_path / "chain.sqlite3", genesis_block=chain.blocks[0], genesis_state=chain.state)
    for _ in range(blocks):
        chain.mine(1)
        store.commit_block(chain.blocks[-1], chain.state, chain.undos[-1])
    store.close()
    return chain


def test_the_stored_state_keeps_its_checksum_and_a_restart_checks_it(chain_factory, tmp_path):
    chain = _stored_chain(chain_factory, tmp_path)
    with ChainStore.open(tmp_path / "chain.sqlite3", genesis_block=chain.blocks[0],
                         genesis_state=genesis_of(chain)) as store:
        state = replay_stored_blocks(store, store.load_state(), chain.consensus)
        assert current_checksum(state) == state_checksum(chain.state)
        assert state == chain.state


def test_a_state_table_edited_outside_snoded_is_refused_at_start(chain_factory, tmp_path):
    chain = _stored_chain(chain_factory, tmp_path)
    conn = sqlite3.connect(tmp_path / "chain.sqlite3")
    conn.execute("DELETE FROM utxos WHERE key = (SELECT min(key) FROM utxos)")
    conn.commit()
    conn.close()
    with ChainStore.open(tmp_path / "chain.sqlite3", genesis_block=chain.blocks[0],
                         genesis_state=genesis_of(chain)) as store:
        with pytest.raises(StoreError, match=f"the stored state at height {chain.state.height} does not match its "
                           "stored state root .*: the data dir was changed outside snoded; start with a new data dir"):
            check_stored_checksum(store, store.load_state(), chain.consensus)


def test_a_checksum_row_of_another_tip_is_not_read(chain_factory, tmp_path):
    chain = _stored_chain(chain_factory, tmp_path)
    conn = sqlite3.connect(tmp_path / "chain.sqlite3")
    assert read_checksum(conn, chain.state.tip_hash) == state_checksum(chain.state)
    assert read_checksum(conn, chain.blocks[-2].header.prev_hash) is None
    conn.close()


def genesis_of(chain):
    state = chain.state
    for undo in reversed(chain.undos):
        state = undo_block(state, undo)
    return state
