"""Service-node blocks through the block rules (issue #12): a real devnet chain hands production to
four service nodes; their blocks, made by the round's leader and signed by its validators, are
accepted; forged, missing, outsider signatures, a wrong leader or a wrong round are refused with
a reason; the authority may produce only as the backstop; checkpoints carried by later blocks
make blocks final, and a node refuses to reorganise below the final height.
"""

from __future__ import annotations

import msgspec
import pytest

from snode.core.blocks import Checkpoint, block_hash
from snode.core.errors import InvalidBlock
from snode.core.finality import assemble_checkpoint, checkpoint_message
from snode.core.mempool import Mempool
from snode.core.participation import miss_count
from snode.core.production import build_block
from snode.core.pulse import backstop_time, round_quorum, round_window
from snode.core.state import (
    ChainState,
    Quorum,
    immutable_height,
    last_checkpoint,
)
from snode.core.transition import apply_block
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.params import DEVNET
from snode.store import DATABASE_FILE, ChainStore
from snode.store.memory import MemoryStore
from tests.unit.conftest import LabChain
from tests.unit.sn_chain import KEYS, advance, new_sn_chain, sn_block


@pytest.fixture
def sn_chain() -> LabChain:
    return new_sn_chain()


def test_a_block_of_the_round_leader_with_its_validators_signatures_is_accepted(sn_chain):
    block, quorum = sn_block(sn_chain.state, sn_chain)
    state, undo = apply_block(sn_chain.state, block, sn_chain.consensus, now=block.header.timestamp)
    assert state.height == sn_chain.state.height + 1
    assert undo.round_validators == quorum.validators
    # The fees and the leader's block: exactly what the coinbase rule wants (no fees here).
    assert block.header.producer == quorum.leader


def test_exactly_the_needed_signatures_make_a_block_and_one_fewer_does_not(sn_chain):
    state = sn_chain.state
    quorum = round_quorum(state, 0, DEVNET)
    enough, _ = sn_block(state, sn_chain, signers=quorum.needed)
    apply_block(state, enough, sn_chain.consensus)
    short, _ = sn_block(state, sn_chain, signers=quorum.needed - 1)
    with pytest.raises(InvalidBlock, match=f"{quorum.needed - 1} signatures; {quorum.needed} are needed"):
        apply_block(state, short, sn_chain.consensus)


def test_forged_outsider_and_miscounted_signatures_are_refused(sn_chain):
    state = sn_chain.state
    block, quorum = sn_block(state, sn_chain)
    forged = msgspec.structs.replace(
        block, validator_signatures=(bytes(64),) + block.validator_signatures[1:])
    with pytest.raises(InvalidBlock, match=f"validator {quorum.validators[0].hex()[:16]} has a bad signature"):
        apply_block(state, forged, sn_chain.consensus)
    outsider = msgspec.structs.replace(
        block, validator_bitset=block.validator_bitset | 1 << len(quorum.validators),
        validator_signatures=block.validator_signatures + (bytes(64),))
    with pytest.raises(InvalidBlock, match="outside the quorum"):
        apply_block(state, outsider, sn_chain.consensus)
    miscounted = msgspec.structs.replace(block, validator_signatures=block.validator_signatures[:-1])
    with pytest.raises(InvalidBlock, match="carries"):
        apply_block(state, miscounted, sn_chain.consensus)


def test_a_block_from_another_node_or_outside_its_round_is_refused(sn_chain):
    state = sn_chain.state
    block, quorum = sn_block(state, sn_chain)
    impostor = next(k for k in KEYS.values() if k.public != quorum.leader)
    stolen, _ = build_block(state, Mempool(), sn_chain.consensus, impostor,
                            timestamp=block.header.timestamp, round=0)
    with pytest.raises(InvalidBlock, match="is not the leader of round 0"):
        apply_block(state, stolen, sn_chain.consensus)
    _, end = round_window(state.timestamp, 0, DEVNET)
    late, _ = build_block(state, Mempool(), sn_chain.consensus, KEYS[quorum.leader], timestamp=end, round=0)
    with pytest.raises(InvalidBlock, match="outside its round's window"):
        apply_block(state, late, sn_chain.consensus)


def test_round_one_has_another_leader_whose_block_is_accepted(sn_chain):
    state = sn_chain.state
    block, quorum = sn_block(state, sn_chain, round=1)
    assert quorum.leader != round_quorum(state, 0, DEVNET).leader
    assert apply_block(state, block, sn_chain.consensus)[0].height == state.height + 1


def test_a_template_is_checked_without_signatures_and_carries_none(sn_chain):
    state = sn_chain.state
    block, _ = sn_block(state, sn_chain, signers=0)
    unsigned = msgspec.structs.replace(block, validator_bitset=0, validator_signatures=())
    apply_block(state, unsigned, sn_chain.consensus, template=True)
    with pytest.raises(InvalidBlock, match="signatures"):
        apply_block(state, unsigned, sn_chain.consensus)
    signed, _ = sn_block(state, sn_chain)
    with pytest.raises(InvalidBlock, match="already carries validator signatures"):
        apply_block(state, signed, sn_chain.consensus, template=True)


def test_the_authority_produces_only_as_the_backstop(sn_chain):
    state = sn_chain.state
    early = sn_chain.block_with([], timestamp=round_window(state.timestamp, 3, DEVNET)[0])
    with pytest.raises(InvalidBlock, match="before the backstop"):
        apply_block(state, early, sn_chain.consensus)
    backstop = sn_chain.block_with([], timestamp=backstop_time(state.timestamp, DEVNET))
    assert apply_block(state, backstop, sn_chain.consensus)[0].height == state.height + 1


def _checkpoint(state: ChainState, height: int) -> Checkpoint:
    slot = state.checkpoints[height]
    message = checkpoint_message(DEVNET.network_id, height, slot.block_hash)
    votes = {m: KEYS[m].sign(message) for m in slot.members}
    made = assemble_checkpoint(Quorum(height=height, members=slot.members, needed=slot.needed),
                               slot.block_hash, votes)
    assert made is not None
    return made


def _produce(chain: LabChain, count: int) -> None:
    """SN blocks, each carrying the checkpoint its chain waits for (if one is complete)."""
    for _ in range(count):
        state = chain.state
        pending = sorted(h for h, s in state.checkpoints.items() if not s.carried and h > last_checkpoint(state))
        carried = _checkpoint(state, pending[0]) if pending else None
        block, _ = sn_block(state, chain, checkpoint=carried)
        advance(chain, block)


def test_checkpoints_carried_by_later_blocks_make_blocks_final(sn_chain):
    start = sn_chain.state.height
    _produce(sn_chain, 14)
    state = sn_chain.state
    carried = sorted(h for h, s in state.checkpoints.items() if s.carried)
    assert len(carried) == 2 and all(h % DEVNET.checkpoint_interval == 0 and h > start for h in carried)
    assert immutable_height(state) == carried[0]
    # A checkpoint of a height the chain no longer waits for is refused.
    stale = _checkpoint_from_history(sn_chain, carried[0])
    block, _ = sn_block(state, sn_chain, checkpoint=stale)
    with pytest.raises(InvalidBlock, match="already carries one"):
        apply_block(state, block, sn_chain.consensus)


def _checkpoint_from_history(chain: LabChain, height: int) -> Checkpoint:
    for block in chain.blocks:
        if block.header.checkpoint is not None and block.header.checkpoint.height == height:
            return block.header.checkpoint
    raise AssertionError(f"no block carries the checkpoint of {height}")


def test_a_node_refuses_to_reorganise_below_the_final_height(sn_chain):
    genesis_state = sn_chain.fork(at=0).state
    node = Node(params=DEVNET, consensus=sn_chain.consensus,
                store=MemoryStore(sn_chain.blocks[0], genesis_state), state=genesis_state,
                identity=None, producer_key=None, verifier=InlineVerifier())
    fork = sn_chain.copy()
    _produce(sn_chain, 14)
    final = immutable_height(sn_chain.state)
    assert final > fork.state.height
    node.accept_blocks(sn_chain.blocks[1:], sn_chain.now)
    # A longer branch that forks before the final height: refused, nothing changes.
    _produce(fork, 20)
    branch = fork.blocks[len(fork.blocks) - 20:]
    assert branch[-1].header.height > node.height
    with pytest.raises(InvalidBlock, match="below the final height"):
        node.reorganize(branch, fork.now)
    assert node.state == sn_chain.state


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "sqlite"])
def test_a_final_block_keeps_its_whole_undo_record(sn_chain, tmp_path, on_disk):
    # Final is not for ever: a reorganisation above the immutable height may undo the block that
    # carried its checkpoint and lower it again, and the web view reads a final block's record
    # (the registry before it) for a node's rewards.
    genesis_state = sn_chain.fork(at=0).state
    store = (ChainStore.open(tmp_path / DATABASE_FILE, genesis_block=sn_chain.blocks[0],
                             genesis_state=genesis_state)
             if on_disk else MemoryStore(sn_chain.blocks[0], genesis_state))
    node = Node(params=DEVNET, consensus=sn_chain.consensus, store=store, state=genesis_state,
                identity=None, producer_key=None, verifier=InlineVerifier())
    _produce(sn_chain, 14)
    final = immutable_height(sn_chain.state)
    assert 0 < final < sn_chain.state.height
    full = {}
    state = genesis_state
    for block in sn_chain.blocks[1:]:
        state, full[block.header.height] = apply_block(state, block, sn_chain.consensus)
    node.accept_blocks(sn_chain.blocks[1:], sn_chain.now)  # one write, which makes `final` final
    for block in sn_chain.blocks[1:]:
        assert store.get_undo(block_hash(block.header)) == full[block.header.height]
    node.close()


def test_a_node_records_who_missed_its_duties_from_the_blocks_it_adopts(sn_chain):
    genesis_state = sn_chain.fork(at=0).state
    node = Node(params=DEVNET, consensus=sn_chain.consensus,
                store=MemoryStore(sn_chain.blocks[0], genesis_state), state=genesis_state,
                identity=None, producer_key=None, verifier=InlineVerifier())
    node.accept_blocks(sn_chain.blocks[1:], sn_chain.now)
    state = sn_chain.state
    silent = round_quorum(state, 0, DEVNET).leader
    block, quorum = sn_block(state, sn_chain, round=1, signers=round_quorum(state, 1, DEVNET).needed)
    node.accept_block(block, block.header.timestamp)  # adopted live: its duties are judged
    # Round 0's leader missed its round (and may have signed round 1 as a validator).
    assert miss_count(node.participation.of(silent)) == 1
    assert miss_count(node.participation.of(quorum.leader)) == 0
    unsigned = [v for i, v in enumerate(quorum.validators) if not block.validator_bitset >> i & 1]
    assert unsigned and all(miss_count(node.participation.of(v)) >= 1 for v in unsigned)
