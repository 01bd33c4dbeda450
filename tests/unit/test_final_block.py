"""A validator applies a service-node block once (issue #27): the signed block of a template it
checked takes the check's state and undo record when, and only when, it is provably that block
on the same parent state; only its size and its validators' signatures are checked then. The
result is the full apply's, byte for byte; a bad signer set is refused with the same reason as
without the template; anything else (another parent, another block, a sync batch) is applied in
full."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from snode.core.blocks import Block
from snode.core.encoding import encode
from snode.core.errors import BlockFromFuture, InvalidBlock
from snode.core.final_block import apply_final, check_template
from snode.core.pulse import round_quorum, validator_message
from snode.core.sigchecks import SigCheck
from snode.core.state import MAP_NAMES, ChainState
from snode.core.transition import apply_block, apply_block_encoded
from snode.devchain import key_from_label
from snode.node import batches
from snode.node.node import Node
from snode.node.templates import TEMPLATES_KEPT
from snode.node.verifier import InlineVerifier
from snode.params import COIN, DEVNET, MAX_FUTURE_BLOCK_TIME
from snode.store import DATABASE_FILE, ChainStore
from snode.store.memory import MemoryStore
from tests.unit import sn_chain as sn
from tests.unit.conftest import LabChain


@pytest.fixture
def chain() -> LabChain:
    """Four service nodes produce the next block, which carries a transfer (and a checkpoint
    when its chain waits for one)."""
    made = sn.new_sn_chain()
    made.transfer(key_from_label("op sn block 0"), key_from_label("payee").public, 7 * COIN)
    return made


def validator(chain: LabChain, path: Path | None = None) -> Node:
    """A node (in memory, or on SQLite at `path`) at `chain`'s tip."""
    genesis = chain.fork(at=0).state
    store = (ChainStore.open(path / DATABASE_FILE, genesis_block=chain.blocks[0], genesis_state=genesis)
             if path is not None else MemoryStore(chain.blocks[0], genesis))
    node = Node(params=DEVNET, consensus=chain.consensus, store=store, state=genesis,
                identity=None, producer_key=None, verifier=InlineVerifier())
    node.accept_blocks(chain.blocks[1:], chain.now)
    assert node.state == chain.state
    return node


def signed_block(chain: LabChain, round: int = 0) -> tuple[Block, Block]:
    """(template, signed block) of `round` on the tip, from the chain's pool."""
    block, _ = sn.sn_block(chain.state, chain, round=round, pool=chain.pool)
    return msgspec.structs.replace(block, validator_bitset=0, validator_signatures=()), block


def rows(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path / DATABASE_FILE)) as db:  # `with` alone leaves it open
        return list(db.iterdump())


def state_bytes(state: ChainState) -> list[bytes]:
    scalars = [encode([state.height, state.tip_hash, state.timestamp, state.issued])]
    return scalars + [encode(sorted(getattr(state, name).items())) for name in MAP_NAMES]


def test_the_signed_block_of_a_checked_template_takes_its_result(chain, tmp_path):
    (tmp_path / "reused").mkdir()
    (tmp_path / "full").mkdir()
    reusing, full = validator(chain, tmp_path / "reused"), validator(chain, tmp_path / "full")
    template, block = signed_block(chain)
    assert len(block.transactions) == 2  # the coinbase and the transfer
    now = block.header.timestamp
    reusing.check_template(template, now)
    reusing.accept_block(block, now)
    full.accept_block(block, now)
    assert (reusing.templates.reused, full.templates.reused) == (1, 0)
    assert state_bytes(reusing.state) == state_bytes(full.state)
    expected_state, expected_undo = apply_block(chain.state, block, chain.consensus)
    assert state_bytes(reusing.state) == state_bytes(expected_state)
    assert encode(reusing.store.get_undo(reusing.state.tip_hash)) == encode(expected_undo)
    reusing.close()
    full.close()
    assert rows(tmp_path / "reused") == rows(tmp_path / "full")


def test_apply_final_is_the_full_apply_with_only_the_signers_checked(chain):
    template, block = signed_block(chain)
    state = chain.state
    checked = check_template(state, template, chain.consensus, now=block.header.timestamp)
    assert checked is not None
    seen: list[list[bytes]] = []

    def verifier(checks: Sequence[SigCheck]) -> int:
        seen.append([c.public for c in checks])
        return -1
    applied = apply_final(state, block, checked, chain.consensus, verifier=verifier)
    assert applied is not None
    quorum = round_quorum(state, 0, DEVNET)
    assert seen == [list(quorum.validators)]  # the validators' signatures only, once
    full = apply_block_encoded(state, block, chain.consensus)
    assert applied.encoded == full.encoded == encode(block)
    assert applied.txids == full.txids
    assert encode(applied.undo) == encode(full.undo)
    assert state_bytes(applied.state) == state_bytes(full.state)


def _forged(block: Block) -> Block:
    wrong = key_from_label("sn block 0").sign(validator_message(DEVNET.network_id, bytes(32)))
    return msgspec.structs.replace(block, validator_signatures=(wrong, *block.validator_signatures[1:]))


SIGNER_SETS = {
    "forged": _forged,
    "missing": lambda b: msgspec.structs.replace(  # one signer: 2 of 3 are needed
        b, validator_bitset=b.validator_bitset & -b.validator_bitset,
        validator_signatures=b.validator_signatures[:1]),
    "miscounted": lambda b: msgspec.structs.replace(b, validator_signatures=b.validator_signatures[1:]),
    "outsider": lambda b: msgspec.structs.replace(
        b, validator_bitset=b.validator_bitset | 1 << 40,
        validator_signatures=(*b.validator_signatures, b.validator_signatures[0])),
    "none": lambda b: msgspec.structs.replace(b, validator_bitset=0, validator_signatures=()),
    "oversized": lambda b: msgspec.structs.replace(
        b, validator_signatures=b.validator_signatures * 12_000),
}


@pytest.mark.parametrize("bad", SIGNER_SETS)
def test_a_bad_signer_set_is_refused_as_without_the_template(chain, bad, monkeypatch):
    reusing, full = validator(chain), validator(chain)
    applied_in_full: list[int] = []

    def counted(state: ChainState, block: Block, *args: object, **kwargs: object) -> object:
        applied_in_full.append(block.header.height)
        return apply_block_encoded(state, block, *args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(batches, "apply_block_encoded", counted)
    template, block = signed_block(chain)
    assert round_quorum(chain.state, 0, DEVNET).needed == 2
    now = block.header.timestamp
    reusing.check_template(template, now)
    refused = SIGNER_SETS[bad](block)
    reasons = []
    for node in (reusing, full):
        with pytest.raises(InvalidBlock) as err:
            node.accept_block(refused, now)
        reasons.append(err.value.reason)
        assert node.state is chain.state or node.state == chain.state
        if node is reusing:
            assert applied_in_full == []  # refused by the reuse path's own checks
    assert reasons[0] == reasons[1]
    assert applied_in_full == [block.header.height]  # by the node without the template
    reusing.accept_block(block, now)  # an honest copy is accepted
    full.accept_block(block, now)
    assert reusing.state.height == chain.state.height + 1
    # A forged signature is found only once the block is staged with its template's result; the
    # template is let go then, and the honest copy is applied in full.
    assert reusing.templates.reused == 1
    assert applied_in_full == [block.header.height] * (2 + (bad == "forged"))
    assert state_bytes(reusing.state) == state_bytes(full.state)


def test_a_block_that_is_not_provably_the_template_is_applied_in_full(chain):
    template, block = signed_block(chain)
    state = chain.state
    checked = check_template(state, template, chain.consensus)
    assert checked is not None
    same_content = dataclasses.replace(state)
    assert same_content == state and same_content is not state
    _, round_one = signed_block(chain, round=1)
    other_signature = msgspec.structs.replace(block, producer_signature=bytes(64))
    other_txs = msgspec.structs.replace(block, transactions=block.transactions[:1])
    assert apply_final(same_content, block, checked, chain.consensus) is None
    for other in (round_one, other_signature, other_txs):
        assert apply_final(state, other, checked, chain.consensus) is None
    # The full path judges them as it always did.
    assert apply_block(same_content, block, chain.consensus)[0].height == state.height + 1
    with pytest.raises(InvalidBlock, match="bad producer signature|has a bad signature"):
        apply_block(state, other_signature, chain.consensus)
    with pytest.raises(InvalidBlock, match="transaction root"):
        apply_block(state, other_txs, chain.consensus)


def test_a_changed_transaction_or_a_sync_batch_takes_the_full_path_in_the_node(chain):
    node = validator(chain)
    template, block = signed_block(chain)
    now = block.header.timestamp
    node.check_template(template, now)
    other_txs = msgspec.structs.replace(block, transactions=block.transactions[:1])
    with pytest.raises(InvalidBlock, match="transaction root"):
        node.accept_block(other_txs, now)
    batch = node.stage_batch([block], now, after=node.stage_batch([], now))  # as a sync stages
    assert batch.reused == 0 and node.templates.reused == 0
    assert node.finish_batch(batch, now) == 1 and node.state.tip_hash != chain.state.tip_hash


def test_the_templates_kept_are_the_last_few_on_the_tip(chain):
    node = validator(chain)
    templates = [signed_block(chain, round=r)[0] for r in range(TEMPLATES_KEPT + 1)]
    for template in templates:
        node.check_template(template, template.header.timestamp)
    assert len(node.templates) == TEMPLATES_KEPT
    _, block = signed_block(chain, round=0)  # the first one checked was let go
    node.accept_block(block, block.header.timestamp)
    assert node.templates.reused == 0
    sn.advance(chain, block)
    next_template, _ = signed_block(chain)
    node.check_template(next_template, next_template.header.timestamp)
    assert len(node.templates) == 1  # those of the old tip are let go


def test_the_clock_rule_is_checked_again_on_the_signed_block(chain):
    """The template passed at its time; a clock that stepped back since refuses the signed block
    as from the future on both paths."""
    reusing, full = validator(chain), validator(chain)
    template, block = signed_block(chain)
    reusing.check_template(template, block.header.timestamp)
    earlier = block.header.timestamp - MAX_FUTURE_BLOCK_TIME - 1
    for node in (reusing, full):
        with pytest.raises(BlockFromFuture):
            node.accept_block(block, earlier)
    reusing.accept_block(block, block.header.timestamp)
    assert reusing.templates.reused == 1


def test_a_template_taken_is_counted_once_and_let_go(chain):
    node = validator(chain)
    template, block = signed_block(chain)
    now = block.header.timestamp
    node.check_template(template, now)
    first = node.stage_batch([block], now)
    assert first.reused == 1 and node.templates.reused == 1
    node.stage_batch([], now, extending=first)  # a batch joined to it counts only its own blocks
    assert node.templates.reused == 1
    assert len(node.templates) == 0  # neither the parent nor the template's state is held on
