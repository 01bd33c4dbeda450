"""kill -9 during a sync (issue #27, item 5): a syncing node keeps its chain state in memory and
writes it at most STATE_FLUSH_BLOCKS blocks apart (`ChainStore`'s deferred state), while the
blocks themselves are committed 1,000 at a time. After a SIGKILL at any moment the node restarts
consistent: no block it reported lost, its tip one of the source's blocks, and it applies again at
most one flush's blocks (fewer than STATE_FLUSH_BLOCKS, without their signatures) before it
serves; what it had received but not committed (the staged batch of two downloads, the one
being staged and the one in flight) it downloads again.
"""

from __future__ import annotations

import os
import random
import re
import signal

import pytest

from snode.node.node import STATE_FLUSH_BLOCKS
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    process_gone,
    strike_at_random,
    sync_blocks,
    wait_until,
)

log = narrator(__name__)
KILLS = 4
REPLAYED = re.compile(r"applying the (\d+) blocks after it again")


@pytest.mark.slow
def test_kill_9_mid_sync_loses_no_block_and_reapplies_at_most_one_flush(nodes):
    rng = random.Random(27)
    source = nodes.add()
    syncing = nodes.add(start=False)
    log.info("Mine 6,000 blocks on a source node")
    for _ in range(6):
        source.generate_blocks(blocks=1_000)
    replays: list[int] = []
    have = 0
    for kill in range(KILLS):
        while source.get_info()["height"] - have < 5_000:
            source.generate_blocks(blocks=1_000)  # enough left that the kill lands mid-sync
        logged = len(syncing.stderr_text())
        syncing.start()
        restarted = syncing.get_info()["height"]
        assert restarted >= have, f"the restart lost blocks: height {restarted}, {have} before the kill"
        assert_equal(syncing.get_block(height=restarted)["hash"], source.get_block(height=restarted)["hash"])
        replays += [int(n) for n in REPLAYED.findall(syncing.stderr_text()[logged:])]
        connect_nodes(syncing, source)
        # A kill after one to three 1,000-block commits (the state 1,000 or 2,000 blocks behind,
        # or just written), at a random moment of the sync after them.
        commits = rng.randint(1, 3)
        until = restarted + 1_000 * commits
        wait_until(lambda: syncing.get_info()["height"] >= until,  # noqa: B023 (used at once)
                   timeout=60, what=f"{commits} batches committed")
        strike_at_random(rng, 0, 0.5)
        have = syncing.get_info()["height"]  # adopted, so committed: the restart must have it
        workers = syncing.child_pids()
        log.info("kill -9 %d at height %d of %d", kill + 1, have, source.get_info()["height"])
        syncing.kill()
        for pid in workers:  # its workers end with their pipes; any left is stopped by its pid
            if not process_gone(pid):
                try:
                    wait_until(lambda: process_gone(pid), timeout=10, what="a worker gone")  # noqa: B023
                except AssertionError:
                    os.kill(pid, signal.SIGKILL)
    logged = len(syncing.stderr_text())
    syncing.start()
    assert syncing.get_info()["height"] >= have
    replays += [int(n) for n in REPLAYED.findall(syncing.stderr_text()[logged:])]
    log.info("blocks applied again at each restart: %s", replays)
    assert replays, "no kill left the state behind the blocks: the test proved nothing"
    assert max(replays) < STATE_FLUSH_BLOCKS, replays
    connect_nodes(syncing, source)
    sync_blocks([source, syncing], timeout=120)
