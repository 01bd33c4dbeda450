"""Sync batches through the node: staged (applied, signatures handed to the verifier pool),
then finished (stored once the signatures check out, adopted), pipelined as the sync loop does."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

from snode.core.blocks import Block
from snode.core.errors import InvalidBlock
from snode.core.state import ChainState, undo_block
from snode.devchain import key_from_label
from snode.node import verifier as verifier_module
from snode.node.batches import StaleBatch
from snode.node.node import Node, NodeLimits
from snode.params import COIN
from snode.store import DATABASE_FILE, ChainStore
from tests.unit.conftest import PEOPLE, LabChain

BLOCKS = 120


@pytest.fixture
def mined(chain: LabChain) -> tuple[LabChain, list[Block]]:
    """BLOCKS blocks after genesis, a transfer in every eighth, each by another person (so
    blocks carry 1 or 2 signatures)."""
    payers = iter(PEOPLE)
    bob = key_from_label("bob")
    for height in range(1, BLOCKS + 1):
        if height % 8 == 0:
            chain.transfer(key_from_label(next(payers)), bob.public, COIN)
        chain.mine()
    return chain, chain.blocks[1:]


def genesis_of(chain: LabChain) -> ChainState:
    state = chain.state
    for undo in reversed(chain.undos):
        state = undo_block(state, undo)
    return state


@pytest.fixture
def node(tmp_path: Path, mined: tuple[LabChain, list[Block]]) -> Iterator[Node]:
    """A node at genesis whose verifier gets its checks in small hand-offs (so a batch here
    spans several, and several workers)."""
    chain, _ = mined
    genesis_state = genesis_of(chain)
    store = ChainStore.open(tmp_path / DATABASE_FILE, genesis_block=chain.blocks[0], genesis_state=genesis_state)
    the_node = Node(params=chain.params, consensus=chain.consensus, store=store, state=store.load_state(),
                    identity=None, producer_key=None, limits=NodeLimits(verify_chunk=16),
                    verifier=verifier_module.VerifierPool(limits=verifier_module.VerifierLimits(inline_below=8)))
    yield the_node
    the_node.close()


def with_bad_producer_signature(block: Block) -> Block:
    # The block hash covers the header only, so the blocks after it still link to it.
    return msgspec.structs.replace(block, producer_signature=bytes(64))


def test_pipelined_batches_reach_the_same_tip_as_the_chain(node: Node, mined: tuple[LabChain, list[Block]]) -> None:
    chain, blocks = mined
    first = node.stage_batch(blocks[:50], chain.now)
    second = node.stage_batch(blocks[50:], chain.now, after=first)
    assert node.height == 0  # nothing adopted before it is finished
    # Only the last block of a staged batch keeps its state; the ones before it are freed.
    assert [c[1] is not None for c in first.commits] == [False] * 49 + [True]
    assert first.commits[-1][1] is first.state
    assert node.finish_batch(first, chain.now) == 50
    assert node.height == 50
    assert node.finish_batch(second, chain.now) == BLOCKS - 50
    assert node.state == chain.state
    assert node.store.tip() == (BLOCKS, chain.state.tip_hash)
    assert node.store.load_state() == chain.state
    assert isinstance(node.verifier, verifier_module.VerifierPool) and len(node.verifier.worker_pids()) >= 1


def test_a_bad_signature_keeps_the_blocks_before_it(node: Node, mined: tuple[LabChain, list[Block]]) -> None:
    chain, blocks = mined
    bad = 77
    batch = list(blocks)
    batch[bad] = with_bad_producer_signature(batch[bad])
    with pytest.raises(InvalidBlock, match=f"block {bad + 1} has a bad signature"):
        node.accept_blocks(batch, chain.now)
    assert node.height == bad
    assert node.store.tip()[0] == bad
    assert node.store.load_state() == node.state
    # The rest, fixed, still applies on top.
    assert node.accept_blocks(blocks[bad:], chain.now) == BLOCKS - bad
    assert node.state == chain.state


def test_a_batch_staged_after_a_bad_one_is_refused_as_stale(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    chain, blocks = mined
    first_blocks = list(blocks[:60])
    first_blocks[30] = with_bad_producer_signature(first_blocks[30])
    first = node.stage_batch(first_blocks, chain.now)
    second = node.stage_batch(blocks[60:], chain.now, after=first)
    with pytest.raises(InvalidBlock, match="block 31 has a bad signature"):
        node.finish_batch(first, chain.now)
    assert node.height == 30
    with pytest.raises(StaleBatch):
        node.finish_batch(second, chain.now)
    assert node.height == 30
    assert node.store.tip()[0] == 30


def test_a_download_found_to_extend_the_tip_is_stale_not_invalid_once_relayed_blocks_moved_it(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    """A sync found blocks 1-40 to follow its tip (genesis); relayed blocks 1-2 were adopted
    before it staged them. Staged on the new tip they would fail "block height 1 does not follow
    the tip at 2" and ban an honest source (seen in test_upgrade_required under load): with the
    tip it found (`on_tip`) they are stale, and asked again."""
    chain, blocks = mined
    found_on = node.state.tip_hash
    node.accept_blocks(blocks[:2], chain.now)
    with pytest.raises(StaleBatch, match="the tip moved to height 2"):
        node.stage_batch(blocks[:40], chain.now, on_tip=found_on)
    assert node.height == 2
    batch = node.stage_batch(blocks[2:40], chain.now, on_tip=node.state.tip_hash)
    assert node.finish_batch(batch, chain.now) == 38


def test_a_batch_is_stale_when_the_tip_moves_while_it_is_staged(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    chain, blocks = mined
    batch = node.stage_batch(blocks[:40], chain.now)
    node.accept_block(blocks[0], chain.now)  # as a relayed block would, meanwhile
    with pytest.raises(StaleBatch, match="not on the tip"):
        node.finish_batch(batch, chain.now)
    assert node.height == 1
    # Finishing out of order is refused the same way, and changes nothing.
    first = node.stage_batch(blocks[1:40], chain.now)
    second = node.stage_batch(blocks[40:], chain.now, after=first)
    with pytest.raises(StaleBatch):
        node.finish_batch(second, chain.now)
    assert node.finish_batch(first, chain.now) == 39
    assert node.finish_batch(second, chain.now) == BLOCKS - 40
    assert node.state == chain.state


def test_a_rule_broken_mid_batch_keeps_the_blocks_before_it(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    chain, blocks = mined
    batch = blocks[:20] + blocks[21:40]  # block 21 missing: block 22 does not follow block 20
    staged = node.stage_batch(batch, chain.now)
    assert staged.failure is not None and len(staged.commits) == 20
    with pytest.raises(InvalidBlock):
        node.finish_batch(staged, chain.now)
    assert node.height == 20
    # Nothing can be staged on a batch that broke a rule.
    assert node.stage_batch(blocks[20:], chain.now, after=staged).commits == []


def test_an_extended_batch_is_stored_in_one_transaction(
    node: Node, mined: tuple[LabChain, list[Block]], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain, blocks = mined
    first = node.stage_batch(blocks[:40], chain.now)
    joined = node.stage_batch(blocks[40:80], chain.now, extending=first)
    # The batch extended is left as it was (a failure while extending loses nothing).
    assert len(first.commits) == 40 and first.commits[-1][1] is first.state
    assert len(joined.commits) == 80 and joined.base is first.base
    assert [c[1] is not None for c in joined.commits] == [False] * 79 + [True]
    third = node.stage_batch(blocks[80:], chain.now, after=joined)
    commits: list[int] = []
    store_write = node.store.write

    def counted_write(undone, batch, **kw):
        commits.append(len(batch))
        return store_write(undone, batch, **kw)

    monkeypatch.setattr(node.store, "write", counted_write)
    assert node.finish_batch(joined, chain.now) == 80
    assert node.finish_batch(third, chain.now) == BLOCKS - 80
    assert commits == [80, BLOCKS - 80]
    assert node.state == chain.state
    assert node.store.load_state() == chain.state
    with pytest.raises(ValueError, match="not both"):
        node.stage_batch(blocks[:1], chain.now, after=first, extending=first)


@pytest.mark.parametrize("bad", [20, 60], ids=["in the first half", "in the extension"])
def test_a_bad_signature_in_a_joined_batch_keeps_the_blocks_before_it(
    node: Node, mined: tuple[LabChain, list[Block]], bad: int
) -> None:
    chain, blocks = mined
    first_hundred = list(blocks[:100])
    first_hundred[bad] = with_bad_producer_signature(first_hundred[bad])
    joined = node.stage_batch(first_hundred[50:], chain.now,
                              extending=node.stage_batch(first_hundred[:50], chain.now))
    after = node.stage_batch(blocks[100:], chain.now, after=joined)
    with pytest.raises(InvalidBlock, match=f"block {bad + 1} has a bad signature"):
        node.finish_batch(joined, chain.now)
    assert node.height == bad and node.store.load_state() == node.state
    with pytest.raises(StaleBatch):
        node.finish_batch(after, chain.now)
    assert node.accept_blocks(blocks[bad:], chain.now) == BLOCKS - bad
    assert node.state == chain.state


def test_a_rule_broken_in_the_extension_keeps_the_blocks_before_it(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    chain, blocks = mined
    first = node.stage_batch(blocks[:40], chain.now)
    joined = node.stage_batch(blocks[40:60] + blocks[61:80], chain.now, extending=first)
    assert joined.failure is not None and len(joined.commits) == 60
    # Nothing more joins a batch that broke a rule.
    assert len(node.stage_batch(blocks[60:], chain.now, extending=joined).commits) == 60
    with pytest.raises(InvalidBlock):
        node.finish_batch(joined, chain.now)
    assert node.height == 60 and node.store.load_state() == node.state
    with pytest.raises(StaleBatch):
        node.finish_batch(first, chain.now)


def test_sync_batches_defer_the_state_up_to_a_bound_and_close_writes_it(
    node: Node, mined: tuple[LabChain, list[Block]], tmp_path: Path
) -> None:
    chain, blocks = mined
    node.limits = replace(node.limits, state_flush_blocks=50)
    state_heights = []
    for start in range(0, 100, 20):
        staged = node.stage_batch(blocks[start:start + 20], chain.now)
        node.finish_batch(staged, chain.now, defer_state=True)
        state_heights.append(node.store.state_height())
    # Written once 50 blocks or more would be left unwritten.
    assert state_heights == [0, 0, 60, 60, 60]
    assert node.store.tip()[0] == 100 and node.height == 100
    node.close()
    with ChainStore.open(tmp_path / DATABASE_FILE, genesis_block=chain.blocks[0],
                         genesis_state=genesis_of(chain)) as store:
        assert store.state_height() == 100
        assert store.load_state() == node.state


def test_outputs_of_matches_a_scan_of_the_state_built_late_or_early(
    node: Node, mined: tuple[LabChain, list[Block]]
) -> None:
    chain, blocks = mined

    def scanned(owner: bytes) -> list[tuple[bytes, object]]:
        return sorted((k, e) for k, e in node.state.utxos.items() if e.owner == owner)

    owners = {e.owner for e in chain.state.utxos.values()}
    node.accept_blocks(blocks[:60], chain.now)
    # Built at the first call, from the state as it is...
    assert all(node.outputs_of(owner) == scanned(owner) for owner in owners)
    # ...and kept up to date by the blocks after it: outputs spent, made, and owners emptied.
    node.accept_blocks(blocks[60:], chain.now)
    assert all(node.outputs_of(owner) == scanned(owner) for owner in owners)
    assert node.outputs_of(bytes(32)) == []
