"""SIGTERM during a sync (issue #24, item 3): the stop writes the chain state at the tip, and the
next start says nothing of an unclean stop.

A SIGTERM cancels the sync's task; a batch that was being committed on the store thread is
committed all the same. Before, the cancelled task never adopted it in memory, so the state the
stop wrote was a batch behind the stored blocks: "could not write the chain state (flush_state
got the state at height N, not the tip's)", twice, and the next start re-applied the blocks
after "the last stop was not clean".
"""

from __future__ import annotations

import random

import pytest

from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    strike_at_random,
    sync_blocks,
    wait_until,
)

log = narrator(__name__)
KILLS = 10
UNWRITTEN = "could not write the chain state"
UNCLEAN = "the last stop was not clean"


@pytest.mark.slow
def test_sigterm_at_random_moments_of_a_sync_leaves_the_state_written_at_the_tip(nodes):
    rng = random.Random(24)
    source = nodes.add()
    log.info("Mine 4,000 blocks on a source node")
    for _ in range(4):
        source.generate_blocks(blocks=1_000)
    syncing = nodes.add(start=False)
    mid_sync = have = 0
    for kill in range(KILLS):
        while source.get_info()["height"] - have < 6_000:
            source.generate_blocks(blocks=1_000)  # enough left that the next kill lands mid-sync
        logged = len(syncing.stderr_text())
        syncing.start()
        started = syncing.get_info()["height"]
        assert UNCLEAN not in syncing.stderr_text()[logged:], syncing.stderr_text()[logged:]
        connect_nodes(syncing, source)
        wait_until(lambda: syncing.get_info()["target_height"] > started,  # noqa: B023 (used at once)
                   timeout=60, what="the sync under way")
        # The random moment of the SIGTERM: within 0.4 s of the sync being seen under way (its
        # target proven, which may come after the first downloads) in a sync of 6,000 blocks or
        # more, so that most moments fall mid-sync wherever the test runs (2,500 no longer did:
        # 4 of 10 here, the proof of the target coming later than the old claimed height).
        strike_at_random(rng, 0, 0.4)
        info = syncing.get_info()
        # Mid-sync: short of the source's tip (which stands still meanwhile). Not judged by
        # target_height, which shows only a height a peer has proven and may read 0 between
        # downloads (docs/SECURITY.md, "a lying height").
        tip = source.get_info()["height"]
        mid_sync += info["height"] < tip
        have = info["height"]
        log.info("SIGTERM %d at height %d of %d (target %d)", kill + 1, info["height"], tip, info["target_height"])
        assert_equal(syncing.stop(), 0)
        stopped = syncing.stderr_text()[logged:]
        assert UNWRITTEN not in stopped, stopped
    log.info("%d of %d SIGTERMs came mid-sync", mid_sync, KILLS)
    assert mid_sync >= KILLS // 2
    logged = len(syncing.stderr_text())
    syncing.start()
    assert UNCLEAN not in syncing.stderr_text()[logged:]
    connect_nodes(syncing, source)
    sync_blocks([source, syncing], timeout=120)
