"""The header chain of headers-first sync (issue #36 item 5 and the header side of item 3),
without sockets: what a header must be to be taken, what is kept of it (one hash every
HEADER_COMMIT_EVERY, the chain bounded), the trusted checkpoint and the tip a peer proved as
anchors, and which blocks it shows to be ancestors of the assume-valid block."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import msgspec
import pytest

from snode.core.blocks import Block, block_hash, make_block
from snode.core.encoding import decode, encode
from snode.core.errors import SnodeError
from snode.core.genesis import genesis_block, regtest_genesis
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import REGTEST
from snode.services.sync import _tip_to_hold
from snode.services.sync_headers import Contradicts, HeaderChain, Misled, blocks_named, download
from tests.unit.forged_chain import forged_chain as _forged_chain
from tests.unit.forged_chain import node_on as _node

KEY = key_from_label("headers")
START = 1_767_225_600


def _blocks(count: int, parent: bytes = bytes(32), first: int = 1, salt: int = 0) -> list[Block]:
    """`count` empty consecutive blocks after `parent` (a chain of headers, no state behind it)."""
    out = []
    for height in range(first, first + count):
        block = make_block(version=1, height=height, prev_hash=parent, timestamp=START + height + salt,
                           transactions=(), producer_key=KEY, network_id=REGTEST.network_id)
        out.append(block)
        parent = block_hash(block.header)
    return out


def _signed(blocks: list[Block]) -> list[P.SignedHeader]:
    return [P.signed_header(b) for b in blocks]


def _chain(**kw) -> HeaderChain:
    return HeaderChain(0, bytes(32), START, REGTEST, **kw)


NOW = START + 10**6


def test_a_chain_keeps_one_hash_every_few_heights_and_nothing_else():
    blocks = _blocks(1_000)
    chain = _chain(every=50)
    for at in range(0, 1_000, 200):
        assert chain.extend(_signed(blocks[at:at + 200]), NOW) == ""
    assert (chain.tip_height, chain.tip_hash) == (1_000, block_hash(blocks[-1].header))
    assert len(chain.kept) == 20 * 32, "one 32-byte hash every 50 headers"
    assert chain.kept_at(500) == block_hash(blocks[499].header) and chain.kept_at(501) is None
    assert chain.names(1_000, block_hash(blocks[-1].header)) and chain.names(500, bytes(32)) is False


def test_headers_that_break_a_stateless_rule_are_refused_with_a_reason():
    blocks = _blocks(10)
    assert "do not form a chain" in _chain().extend(_signed(blocks[1:]), NOW)
    assert "do not form a chain" in _chain().extend(_signed([blocks[0], blocks[2]]), NOW)
    early_block = make_block(version=1, height=2, prev_hash=block_hash(blocks[0].header), timestamp=START - 5,
                             transactions=(), producer_key=KEY, network_id=REGTEST.network_id)
    assert "timestamped before its parent" in _chain().extend(_signed([blocks[0], early_block]), NOW)
    forged = P.SignedHeader(blocks[1].header, bytes(64))
    assert "bad producer signature" in _chain().extend([P.signed_header(blocks[0]), forged], NOW)
    assert "more than 5 headers longer" in _chain(cap=5).extend(_signed(blocks), NOW)


def test_a_header_of_the_wrong_version_for_its_fork_is_refused():
    v2 = make_block(version=2, height=1, prev_hash=bytes(32), timestamp=START + 1, transactions=(),
                    producer_key=KEY, network_id=REGTEST.network_id, state_root=bytes(32))
    if REGTEST.rules_at(1).block_version == 2:
        v2 = _blocks(1)[0]
    assert "blocks of its height are version" in _chain().extend([P.signed_header(v2)], NOW)


def test_a_header_from_the_future_ends_the_chain_there():
    blocks = _blocks(5)
    chain = _chain()
    assert chain.extend(_signed(blocks), START + 3 - 200) == ""
    assert chain.ended and chain.tip_height == 0


def test_the_trusted_checkpoint_and_the_proven_tip_are_anchors():
    blocks = _blocks(10)
    other = _blocks(10, salt=1)
    chain = _chain(checkpoint=(5, block_hash(blocks[4].header)))
    assert not chain.passed_checkpoint
    assert chain.extend(_signed(blocks), NOW) == "" and chain.passed_checkpoint
    with pytest.raises(Contradicts, match="at height 5, not the trusted checkpoint"):
        _chain(checkpoint=(5, block_hash(blocks[4].header))).extend(_signed(other), NOW)
    with pytest.raises(Misled, match="without the tip header 7"):
        _chain(proven=(7, block_hash(blocks[6].header))).extend(_signed(other), NOW)


def test_only_blocks_linked_to_a_kept_hash_below_the_assume_valid_block_are_assumed():
    blocks = _blocks(300)
    chain = _chain(every=50, assume_valid=block_hash(blocks[249].header))
    assert chain.extend(_signed(blocks), NOW) == "" and chain.assumed_height == 250
    assert chain.ancestors(blocks[0:120]) == 100, "up to the kept height 100"
    assert chain.ancestors(blocks[100:300]) == 149, "up to the block before the assume-valid one"
    assert chain.ancestors(blocks[250:300]) == 0, "above it nothing"
    assert chain.ancestors(blocks[10:40]) == 0, "no kept height in the download"
    assert chain.ancestors(_blocks(120, salt=1)) == 0, "another chain's blocks"
    assert _chain(every=50).assumed(blocks) == 0


def test_a_batch_proven_by_the_header_chain_skips_input_signatures_and_nothing_else(chain_factory):
    genesis, chain = _forged_chain(chain_factory)
    blocks = chain.blocks[1:]
    headers = HeaderChain(0, block_hash(chain.blocks[0].header), chain.blocks[0].header.timestamp, chain.params,
                          assume_valid=block_hash(blocks[-1].header), every=1)
    assert headers.extend(_signed(blocks), chain.now + 10**6) == ""
    node = _node(chain, genesis, None)
    with pytest.raises(SnodeError, match="input 0 has a bad signature"):
        node.accept_blocks(blocks[:2], chain.now)
    node = _node(chain, genesis, None)
    node.assumed_ancestors = headers.assumed
    assert node.accept_blocks(blocks[:2], chain.now) == 2, "the forged input is below the assume-valid block"


def test_the_header_messages_are_bounded():
    blocks = _blocks(3)
    message = P.Headers(headers=_signed(blocks), height=3)
    assert P.parse(encode(message)) == message
    asked = P.GetHeaders([bytes(32)], P.MAX_HEADERS)
    assert P.parse(encode(asked)) == asked
    with pytest.raises(P.ProtocolViolation):
        P.parse(encode(P.GetHeaders([bytes(32)], P.MAX_HEADERS + 1)))
    frame = P.frame(message)
    assert P.frame_limit(frame[4:6]) == (P.MAX_HEADERS_BYTES + P.MAX_CONTROL_FRAME, "Headers")
    assert decode(encode(message.headers[0]), P.SignedHeader) == message.headers[0]
    assert (P.GetHeaders.__struct_config__.tag, P.Headers.__struct_config__.tag) == (26, 27)


class _Serving:
    """A peer's GetBlocks side as `blocks_named` uses it: its main chain, served after a hash."""

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks
        self.asked: list[bytes] = []

    def ask_blocks(self, locator: list[bytes], max_count: int) -> list[bytes]:
        self.asked.append(locator[0])
        at = next(i for i, b in enumerate(self.blocks) if block_hash(b.header) == locator[0]) + 1
        return [encode(b) for b in self.blocks[at:at + max_count]]

    async def answer(self, raws: list[bytes]) -> P.Blocks:
        return P.Blocks(blocks=raws, height=self.blocks[-1].header.height)


def test_the_blocks_a_header_chain_names_are_fetched_and_checked_back_to_it():
    genesis = _blocks(1)[0]
    blocks = _blocks(700, parent=block_hash(genesis.header), first=2)
    chain = HeaderChain(1, block_hash(genesis.header), genesis.header.timestamp, REGTEST, every=50)
    assert chain.extend(_signed(blocks), NOW) == ""
    consensus = SimpleNamespace(params=REGTEST)  # what the bodies' check reads: the network id
    got = asyncio.run(blocks_named(_Serving([genesis, *blocks]), chain, 51, 601, consensus))  # type: ignore[arg-type]
    assert [b.header.height for b in got] == list(range(51, 601))
    other = [genesis, *blocks[:200], *_blocks(500, parent=block_hash(blocks[199].header), first=202, salt=1)]
    with pytest.raises(P.ProtocolViolation, match="not the block 250 its header chain names"):
        asyncio.run(blocks_named(_Serving(other), chain, 51, 601, consensus))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keeps no hash at 51"):
        asyncio.run(blocks_named(_Serving(other), chain, 52, 601, consensus))  # type: ignore[arg-type]


def test_a_named_block_whose_body_is_not_its_headers_bans_its_sender():
    """A block's hash is its header's: the same header with another producer signature, or with
    transactions its root does not hold, is the named block's hash and must still be refused
    (stored, it would be served to peers and stop the history check)."""
    genesis = _blocks(1)[0]
    blocks = _blocks(100, parent=block_hash(genesis.header), first=2)
    chain = HeaderChain(1, block_hash(genesis.header), genesis.header.timestamp, REGTEST, every=50)
    assert chain.extend(_signed(blocks), NOW) == ""
    consensus = SimpleNamespace(params=REGTEST)
    unsigned = list(blocks)
    unsigned[38] = msgspec.structs.replace(blocks[38], producer_signature=bytes(64))
    with pytest.raises(P.ProtocolViolation, match="sent block 40 with a body that is not its header's: "
                                                  "block 40 has a bad producer signature"):
        asyncio.run(blocks_named(_Serving([genesis, *unsigned]), chain, 2, 101, consensus))  # type: ignore[arg-type]
    stuffed = list(blocks)
    foreign = genesis_block(regtest_genesis(), REGTEST).transactions
    stuffed[60] = msgspec.structs.replace(blocks[60], transactions=foreign)
    with pytest.raises(P.ProtocolViolation, match="sent block 62 with a body .* transaction root does not match"):
        asyncio.run(blocks_named(_Serving([genesis, *stuffed]), chain, 2, 101, consensus))  # type: ignore[arg-type]


def test_a_peer_is_asked_for_headers_up_to_the_tip_header_it_sent_checked_or_not():
    blocks = _blocks(3)
    peer = SimpleNamespace(tip_header=P.tip_header(blocks[2]), proven=1, proven_tip=(1, block_hash(blocks[0].header)))
    hold = cast(Callable[[object], tuple[int, bytes]], _tip_to_hold)
    assert hold(peer) == (3, block_hash(blocks[2].header)), "an unchecked tip header above what it proved"
    peer.tip_header = None
    assert hold(peer) == (1, block_hash(blocks[0].header))
    peer.proven = 2  # proven by blocks it delivered, not by a tip header
    assert hold(peer) == (2, b"")


class _Answering:
    """A peer's GetHeaders side as `download` uses it: the main chain it has at each ask (a list
    per ask, so that its chain can change between two), served after the first locator hash on it."""

    def __init__(self, chains: list[list[Block]]) -> None:
        self.chains = chains
        self.asked: list[list[bytes]] = []

    def ask_headers(self, locator: list[bytes], max_count: int) -> tuple[list[bytes], int]:
        self.asked.append(list(locator))
        return locator, max_count

    async def answer_headers(self, request: tuple[list[bytes], int]) -> P.Headers:
        locator, max_count = request
        blocks = self.chains[min(len(self.asked), len(self.chains)) - 1]
        hashes = [block_hash(b.header) for b in blocks]
        at = next(hashes.index(h) for h in locator if h in hashes) + 1
        return P.Headers(_signed(blocks[at:at + max_count]), blocks[-1].header.height)


class _Writer:
    """The ChainWriter's face `download` uses: calls run at once on a node at genesis."""

    def __init__(self, genesis: Block) -> None:
        self.genesis = genesis
        gh = block_hash(genesis.header)
        self.node = SimpleNamespace(locator=lambda: [gh], main_chain_hash=lambda h: gh if h == 0 else None,
                                    block_at=lambda h: genesis if h == 0 else None, height=0,
                                    state=SimpleNamespace(tip_hash=gh, timestamp=genesis.header.timestamp))

    async def call(self, fn, *args):
        return fn(*args)


def test_a_peer_whose_chain_moves_off_the_downloaded_tip_is_misled_not_banned():
    """A follow-up GetHeaders names the downloaded tip first and then our locator, so a peer
    that reorganised meanwhile answers after a block we share; such an answer is a changed
    chain (Misled: scored and backed off), never a ban for headers that do not form a chain."""
    genesis = _blocks(1)[0]
    g = block_hash(genesis.header)
    first = [genesis, *_blocks(P.MAX_HEADERS + 10, parent=g, first=1)]
    moved = [genesis, *_blocks(P.MAX_HEADERS + 20, parent=g, first=1, salt=7)]  # another chain from block 1
    peer = _Answering([first, moved])
    make = lambda height, hash_, time: HeaderChain(height, hash_, time, REGTEST)  # noqa: E731
    with pytest.raises(Misled, match="moved off"):
        asyncio.run(download(peer, _Writer(genesis), 10**6, make, lambda: NOW))  # type: ignore[arg-type]
    assert peer.asked[1][0] == block_hash(first[P.MAX_HEADERS].header) and peer.asked[1][1:] == [g]
