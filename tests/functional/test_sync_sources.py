"""A sync downloads from more than one peer (issue #33, item 2): a fresh node beside three
source nodes of one chain takes its downloads from more than one of them (its log's summary
line counts each source's blocks), and a source that holds a request (what a peer that answers
one block just before each timeout does until it answers) costs the sync SYNC_HEDGE_S, not the
timeout: the request is asked of another source too, the slow one left and backed off.

GetBlocks is locator-based, so the ranges are chained (each asked once the one before it came)
and spread over the sources two downloads each in turn (`services.sync_ranges`).
"""

from __future__ import annotations

import re
import time

from snode.core.blocks import Block
from snode.core.encoding import decode
from snode.net import limits as L
from snode.net import protocol as P
from tests.functional.framework import connect_nodes, narrator, next_loopback_ip, sync_blocks, wait_until
from tests.functional.hostile import assert_serving, handshake
from tests.functional.p2p import FakePeer

log = narrator(__name__)

CHAIN = 3 * 2 * P.MAX_BLOCKS_PER_BATCH
"""Six downloads: two from each of three sources in turn."""
SUMMARY = re.compile(r"sync: (\d+) blocks from (\d+) peers \(([^)]*)\)")


def _sources_used(node) -> dict[str, int]:
    """Blocks per source over the node's sync summary lines."""
    used: dict[str, int] = {}
    for match in SUMMARY.finditer(node.stderr_text()):
        for part in match.group(3).split(", "):
            name, count = part.rsplit(" ", 1)
            used[name] = used.get(name, 0) + int(count)
    return used


def _raw_block(node, height: int) -> bytes:
    return bytes.fromhex(node.get_block(height=height)["block_hex"])


def _tip_block(node, height: int) -> Block:
    return decode(_raw_block(node, height), Block)


def _timed_sync(node, sources, height: int) -> float:
    started = time.monotonic()
    for source in sources:
        connect_nodes(node, source)
    wait_until(lambda: node.get_info()["height"] == height, timeout=300, what=f"{node.name} synced")
    return time.monotonic() - started


def test_a_fresh_node_downloads_from_several_sources(nodes):
    a = nodes.add()
    log.info("Mine %d blocks on a source node", CHAIN)
    for _ in range(CHAIN // 1000):
        a.generate_blocks(blocks=1000)
    log.info("Two more source nodes sync it from the first alone (the one-source figure)")
    b, c = nodes.add(), nodes.add()
    one = _timed_sync(b, [a], CHAIN)
    log.info("One source: %d blocks in %.1f s (%s)", CHAIN, one, _sources_used(b))
    connect_nodes(c, a)
    sync_blocks([a, c], timeout=300)
    log.info("A fresh node syncs beside all three")
    fresh = nodes.add()
    three = _timed_sync(fresh, [a, b, c], CHAIN)
    used = _sources_used(fresh)
    log.info("Three sources: %d blocks in %.1f s (one source: %.1f s), per source %s", CHAIN, three, one, used)
    assert sum(used.values()) == CHAIN, used
    assert len([n for n in used.values() if n > 0]) > 1, f"all blocks came from one source: {used}"
    sync_blocks([a, fresh])
    assert_serving(fresh)


def test_a_source_that_holds_its_request_costs_the_hedge_not_the_timeout(nodes):
    a = nodes.add()
    a.generate_blocks(blocks=2 * P.MAX_BLOCKS_PER_BATCH)
    b = nodes.add()
    connect_nodes(b, a)
    sync_blocks([a, b], timeout=300)
    height = a.get_info()["height"]
    victim = nodes.add(extra_args=["--log-level=3"])
    source = next_loopback_ip()
    log.info("A staller proves height %d with the real tip header, then holds every request", height)
    staller = FakePeer(victim, source_ip=source)
    try:
        handshake(staller)
        staller.send(P.tip_header(_tip_block(a, height)))
        staller.receive_until(lambda m: isinstance(m, P.GetBlocks))
        log.info("Two honest sources connect while the staller holds the victim's first request")
        started = time.monotonic()
        connect_nodes(victim, a)
        connect_nodes(victim, b)
        bound = L.SYNC_HEDGE_S + 15  # under L.REQUEST_TIMEOUT: before, the sync waited it out (30.8 s here)
        wait_until(lambda: victim.get_info()["height"] == height, timeout=bound, what="the victim synced")
        took = time.monotonic() - started
        log.info("Synced %d blocks in %.1f s beside the staller (hedge %.0f s, timeout %d s)", height, took,
                 L.SYNC_HEDGE_S, L.REQUEST_TIMEOUT)
        text = victim.stderr_text()
        assert f"sync: peer {source}:" in text and "answered a sync request slower than" in text, \
            "the staller was not left for a faster source"
        assert "syncing from others, not from its address for 30 s" in text
        log.info("Its late answer (one valid block) is dropped as owed; the victim serves on")
        staller.send(P.Blocks([_raw_block(a, 1)], height))
        assert_serving(victim)
        used = _sources_used(victim)
        assert f"{source}" not in " ".join(used), f"the staller's blocks were used: {used}"
    finally:
        staller.close()
