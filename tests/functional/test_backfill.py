"""Backfill below a snapshot with real daemons (issue #36 items 4, 6, 7): a node started from
the snapshot at its trusted point fills in the blocks from genesis to it once at the tip, serves
them, stays ready meanwhile, loses nothing to kill -9, and bans a peer that serves a block off
the header chain."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from snode.core.blocks import header_state_root
from snode.core.encoding import decode
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    snode_cli,
    sync_blocks,
    wait_until,
)
from tests.functional.hostile import ban_reasons
from tests.functional.snapshot_nodes import V2_AT
from tests.functional.snapshot_nodes import header as _header
from tests.functional.snapshot_nodes import servers as _servers
from tests.functional.snapshot_nodes import trusted as _trusted
from tests.functional.snapshot_nodes import unmet as _unmet
from tests.functional.snapshot_nodes import written as _written

log = narrator(__name__)


def _percent(node) -> int:
    """The backfill's share (0 until the snapshot is loaded)."""
    info = node.get_info()
    return info["history_percent"] if info["history_start"] > 1 else 0


def _backfilled(node) -> int:
    """The backfilled height a stopped node's store holds (ChainStore.backfilled)."""
    # closed before the node restarts: an open connection to a WAL database holds a lock on it
    with contextlib.closing(sqlite3.connect(f"file:{node.data_dir / 'chain.sqlite3'}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT value FROM node_meta WHERE key = 'backfilled'").fetchone()
    return decode(row[0], int) if row is not None else 0


def _checking(node) -> list[int]:
    """The node's history-check processes."""
    found = []
    for pid in node.child_pids():
        with contextlib.suppress(OSError):
            if b"snode.services.history_check" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


def test_a_node_from_a_snapshot_backfills_the_history_and_serves_it(nodes):
    (server,) = _servers(nodes, [{}])
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(server, 10)])
    connect_nodes(fresh, server)
    log.info("At the tip, the new node downloads blocks 1 to 9 below its snapshot of height 10")
    wait_until(lambda: _percent(fresh) == 100, timeout=60, what="the history complete")
    info = fresh.get_info()
    assert_equal((info["history_start"], info["history_backfilled"]), (10, 9), "the history's start and backfill")
    for height in (1, 5, 9):
        assert_equal(fresh.get_block(height=height)["block_hex"], server.get_block(height=height)["block_hex"],
                     f"block {height}")
    # get_info shows the last batch stored a moment before the backfill's task wakes to say so
    wait_until(lambda: "backfill: done" in fresh.stderr_text(), timeout=10, what="the backfill's last line")
    log.info("Then it replays them from genesis in a child process and reaches the snapshot's state root")
    wait_until(lambda: fresh.get_info()["history_verified"], timeout=60, what="the history verified")
    assert_equal(fresh.get_info()["history_checked"], 10, "the history check's height")
    assert "history: verified" in snode_cli(fresh, "status").stdout
    assert "history check: done" in fresh.log_tail(400)
    wait_until(lambda: _checking(fresh) == [], timeout=30, what="the history check's process gone")
    log.info("Restarted, it keeps its verified history and replays nothing again")
    fresh.stop()
    fresh.start()
    assert fresh.get_info()["history_verified"], "kept across a restart"
    connect_nodes(fresh, server)
    wait_until(lambda: "history: verified" in snode_cli(fresh, "status").stdout, timeout=30)
    assert_equal(fresh.stderr_text().count("history check: replaying"), 1, "replays of the history in both runs")
    log.info("A node syncing from genesis syncs from it alone")
    late = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}"])
    connect_nodes(late, fresh)
    sync_blocks([fresh, late])
    assert_equal(late.get_block(height=5)["block_hex"], server.get_block(height=5)["block_hex"], "block 5")


def test_kill_9_during_the_backfill_loses_nothing_and_it_goes_on_from_the_stored_height(nodes):
    log.info("A server whose GetBlocks answers come 3 s late, and a chain of 162 blocks (snapshot at 160)")
    (slow,) = _servers(nodes, [{"SNODE_TEST_MISBEHAVE": "slow-old-blocks"}])
    slow.generate_blocks(blocks=150)
    wait_until(lambda: 160 in _written(slow.data_dir), timeout=60)
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(slow, 160)])
    connect_nodes(fresh, slow)
    wait_until(lambda: 0 < _percent(fresh) < 100, timeout=60, what="the backfill under way")
    log.info("While it fills: ready, and the status line and snode-cli status show the share")
    assert_equal(_unmet(fresh), [], "/readyz while the history fills")
    info = fresh.get_info()
    assert f"history: {info['history_percent']} %" in info["status_line"], info["status_line"]
    assert "history: " in snode_cli(fresh, "status").stdout
    fresh.kill()
    stored = _backfilled(fresh)  # what the store holds: batches went on landing until the kill
    assert 0 < stored < 159, f"killed with blocks 1 to {stored} stored: the backfill was to be under way"
    log.info("Killed with blocks 1 to %d stored; restarted, it goes on from there", stored)
    fresh.start()
    connect_nodes(fresh, slow)
    wait_until(lambda: _percent(fresh) == 100, timeout=60, what="the history complete")
    assert f"backfill: downloading blocks {stored + 1} to 159" in fresh.log_tail(400)
    sync_blocks([slow, fresh])
    fresh.stop()
    with contextlib.closing(sqlite3.connect(f"file:{fresh.data_dir / 'chain.sqlite3'}?mode=ro", uri=True)) as db:
        heights = [h for (h,) in db.execute("SELECT height FROM main_chain ORDER BY height")]
        blocks = db.execute("SELECT COUNT(*), COUNT(DISTINCT height) FROM blocks").fetchone()
    assert_equal(heights, list(range(slow.get_info()["height"] + 1)), "one main-chain block at every height")
    assert_equal(blocks[0], blocks[1], "no height stored twice")


def test_a_peer_serving_a_block_off_the_header_chain_is_banned_and_the_backfill_goes_on(nodes):
    honest, liar = _servers(nodes, [{}, {"SNODE_TEST_MISBEHAVE": "alter-old-block"}])
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(honest, 10)])
    honest.stop()  # else the new node hears of it from the liar and may fill its history from it first
    log.info("The new node meets the liar first: block 2 it serves is not the one the header chain names")
    fresh.add_peer(address=f"{liar.ip}:{liar.p2p_port}")
    wait_until(lambda: liar.ip in ban_reasons(fresh), timeout=60)
    assert "backfill: sent block" in ban_reasons(fresh)[liar.ip], ban_reasons(fresh)
    log.info("It goes on from the honest one")
    honest.start()
    connect_nodes(fresh, honest)
    wait_until(lambda: _percent(fresh) == 100, timeout=60, what="the history complete")
    assert_equal(fresh.get_block(height=2)["block_hex"], honest.get_block(height=2)["block_hex"], "block 2")


def test_a_history_whose_replay_misses_the_snapshots_root_stops_the_node_naming_both_roots(nodes):
    (server,) = _servers(nodes, [{}])
    carried = header_state_root(_header(server, 10))
    assert carried is not None
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(server, 10)], start=False)
    log.info("A node whose history check computes another root at the snapshot (as a consensus bug would)")
    fresh.start(env={"SNODE_TEST_MISBEHAVE": "history-check-differs"})
    connect_nodes(fresh, server)
    wait_until(lambda: not fresh.running, timeout=90, what="the node stopped by its history check")
    assert_equal(fresh.process.returncode, 1, "the exit status")
    last = fresh.stderr_text().splitlines()[-1]
    assert last.startswith("snoded: history check: the replay from genesis"), fresh.log_tail(60)
    ours = carried[:-1] + bytes([carried[-1] ^ 1])
    assert f"computes state root {ours.hex()} at the snapshot of height 10, not {carried.hex()}" in last, last
