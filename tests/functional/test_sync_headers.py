"""Headers-first sync against real regtest daemons (issue #36 item 5 and the header side of
item 3): a fresh node far behind downloads the header chain first and, with `--assume-valid`,
the blocks below that block skip their input signature checks; with `--trusted-checkpoint`, a
peer whose header chain has another block at its height is refused in one line (not banned) and
the node syncs from one whose chain passes through it; a liar that proved a huge height with a
header the authority's key signed and then sends endless fake headers costs the node no memory
(one hash kept every 50 headers) and is banned for its first broken answer; a peer of protocol 4
is never sent GetHeaders (it would ban its sender) and is synced from by blocks alone.
"""

from __future__ import annotations

import re
import time

from snode.core.blocks import Block, block_hash, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode
from snode.net import limits as L
from snode.net import protocol as P
from snode.params import REGTEST, REGTEST_AUTHORITY_SEED, REGTEST_GENESIS_TIMESTAMP
from tests.functional.framework import connect_nodes, narrator, next_loopback_ip, sync_blocks, wait_until
from tests.functional.hostile import assert_serving, ban_reasons, handshake, rss_mib
from tests.functional.p2p import FakePeer

log = narrator(__name__)

CHAIN = 2 * L.HEADERS_FIRST_MIN + 500
ASSUMED = 2 * L.HEADERS_FIRST_MIN
FAKE_ANSWERS = 25
"""Answers of MAX_HEADERS fake headers the liar sends (50,000 headers)."""
FAKE_RSS_MIB = 16
"""What they may add to the victim's RSS (kept: 1,000 hashes, 32 KB; the rest is a frame being
decoded and the allocator's slack)."""


def _mine(node, count: int) -> None:
    while count > 0:
        step = min(count, 1000)
        node.generate_blocks(blocks=step)
        count -= step


def _hash_at(node, height: int) -> str:
    return node.get_block(height=height)["hash"]


def test_a_sync_below_the_assume_valid_block_skips_input_signatures_along_the_header_chain(nodes):
    source = nodes.add()
    log.info("Mine %d blocks; the assume-valid block is block %d", CHAIN, ASSUMED)
    _mine(source, CHAIN)
    assumed = _hash_at(source, ASSUMED)
    victim = nodes.add(extra_args=[f"--assume-valid={assumed}"])
    control = nodes.add()
    for node in (victim, control):
        connect_nodes(node, source)
    sync_blocks([source, victim, control], timeout=300)
    text = victim.stderr_text()
    log.info("The victim downloaded the header chain first, through the assume-valid block")
    assert f"leads from 0 to {CHAIN}, through the assume-valid block {ASSUMED}" in text, text[-3000:]
    skipped = [int(n) for n in re.findall(
        rf"sync: (\d+) blocks below the assume-valid block {ASSUMED} skipped their input signature checks", text)]
    log.info("Blocks that skipped their input signature checks: %s (below %d)", skipped, ASSUMED)
    most = ASSUMED - 1
    assert skipped and most - ASSUMED // P.MAX_BLOCKS_PER_BATCH * L.HEADER_COMMIT_EVERY <= sum(skipped) <= most
    log.info("A node without --assume-valid (or a trusted checkpoint) synced by blocks alone: a header "
             "chain would check nothing its blocks do not, and skipped nothing")
    assert "the header chain of" not in control.stderr_text()
    assert "skipped their input signature checks" not in control.stderr_text()
    assert _hash_at(victim, CHAIN) == _hash_at(source, CHAIN)
    assert_serving(victim)


def test_a_header_chain_that_contradicts_the_trusted_checkpoint_is_refused_in_one_line(nodes):
    other, trusted = nodes.add(), nodes.add()
    log.info("Two chains from one genesis: 30 blocks on one node, 40 on another under a mock clock")
    other.generate_blocks(blocks=30)
    trusted.set_mock_time(timestamp=int(time.time()) - 1000)
    trusted.generate_blocks(blocks=40)
    checkpoint = _hash_at(trusted, 10)
    assert _hash_at(other, 10) != checkpoint
    victim = nodes.add(extra_args=[f"--trusted-checkpoint=10:{checkpoint}"])
    log.info("The victim trusts block 10 of the second chain and meets the first")
    connect_nodes(victim, other)
    line = f"not the trusted checkpoint {checkpoint} (--trusted-checkpoint); not syncing from it"
    wait_until(lambda: line in victim.stderr_text(), what="the contradicting peer refused")
    assert victim.get_info()["height"] == 0, "a block was fetched along a chain that contradicts the checkpoint"
    assert ban_reasons(victim) == {}, "an honest peer of another chain was banned"
    log.info("It meets a node of the trusted chain and syncs from it")
    connect_nodes(victim, trusted)
    wait_until(lambda: victim.get_info()["height"] == 40, timeout=60, what="the victim synced the trusted chain")
    assert _hash_at(victim, 10) == checkpoint
    assert victim.stderr_text().count(line) == 1, "the refusal was said more than once"
    assert len(victim.get_peers()["peers"]) == 2 and ban_reasons(victim) == {}
    assert_serving(victim)


def _fake_headers(key: SigningKey, parent: bytes, first: int, count: int) -> list[P.SignedHeader]:
    out = []
    for height in range(first, first + count):
        block = make_block(version=1, height=height, prev_hash=parent, timestamp=REGTEST_GENESIS_TIMESTAMP,
                           transactions=(), producer_key=key, network_id=REGTEST.network_id)
        out.append(P.signed_header(block))
        parent = block_hash(block.header)
    return out


def test_a_liar_sending_endless_fake_headers_is_bounded_then_banned(nodes):
    honest = nodes.add()
    honest.generate_blocks(blocks=50)
    log.info("The victim has an assume-valid block (the honest chain's tip), so a far-ahead peer's "
             "header chain is downloaded first")
    victim = nodes.add(extra_args=["--log-level=3", f"--assume-valid={_hash_at(honest, 50)}"])
    genesis = bytes.fromhex(victim.get_info()["genesis_hash"])
    authority = SigningKey(REGTEST_AUTHORITY_SEED)
    lie = 10**9
    tip = make_block(version=1, height=lie, prev_hash=genesis, timestamp=int(time.time()), transactions=(),
                     producer_key=authority, network_id=REGTEST.network_id)
    source = next_loopback_ip()
    liar = FakePeer(victim, source_ip=source)
    try:
        handshake(liar)
        base = rss_mib(victim)
        log.info("A liar proves height %d with a header the authority's key signed, then answers each "
                 "GetHeaders with %d fake headers (%d answers)", lie, P.MAX_HEADERS, FAKE_ANSWERS)
        liar.send(P.tip_header(tip))
        parent, first = genesis, 1
        for _ in range(FAKE_ANSWERS):
            asked = liar.receive_until(lambda m: isinstance(m, P.GetHeaders))
            assert isinstance(asked, P.GetHeaders) and asked.locator[0] == parent
            headers = _fake_headers(authority, parent, first, P.MAX_HEADERS)
            liar.send(P.Headers(headers=headers, height=lie))
            parent, first = block_hash(headers[-1].header), first + P.MAX_HEADERS
        liar.receive_until(lambda m: isinstance(m, P.GetHeaders))
        grown = rss_mib(victim) - base
        log.info("After %d fake headers the victim's RSS grew by %.1f MiB (bound %d MiB)", first - 1, grown,
                 FAKE_RSS_MIB)
        assert grown < FAKE_RSS_MIB
        assert_serving(victim)
        assert victim.get_info()["height"] == 0 and victim.get_info()["target_height"] == lie
        log.info("Its next answer does not follow on its chain: banned")
        liar.send(P.Headers(headers=_fake_headers(authority, genesis, first, 10), height=lie))
        assert liar.closed_by_node(timeout=10)
        assert "do not form a chain" in ban_reasons(victim)[source]
    finally:
        liar.close()
    log.info("The victim syncs from an honest node")
    connect_nodes(victim, honest)
    wait_until(lambda: victim.get_info()["height"] == 50, timeout=30, what="the victim synced")
    assert victim.get_info()["target_height"] == 0


def test_a_peer_of_protocol_4_is_synced_from_by_blocks_alone(nodes):
    source = nodes.add()
    _mine(source, L.HEADERS_FIRST_MIN + 100)
    height = source.get_info()["height"]
    tip = bytes.fromhex(source.get_block(height=height)["block_hex"])
    victim = nodes.add(extra_args=[f"--assume-valid={_hash_at(source, height)}"])
    log.info("A peer of protocol 4 proves height %d, enough for headers first from a peer of 5 (the victim "
             "has an assume-valid block)", height)
    old = FakePeer(victim, source_ip=next_loopback_ip())
    try:
        old.send(old.hello(version=P.HEADERS_VERSION - 1))
        assert isinstance(old.receive(), P.Hello)
        old.send(P.tip_header(decode(tip, Block)))
        asked = old.receive_until(lambda m: isinstance(m, (P.GetBlocks, P.GetHeaders)))
        assert isinstance(asked, P.GetBlocks), "a GetHeaders went to a peer of protocol 4 (it bans its sender)"
    finally:
        old.close()
    log.info("A real daemon syncs from the node as ever")
    connect_nodes(victim, source)
    sync_blocks([source, victim], timeout=120)
