"""A full disk is said, not suffered in silence (issue #33 item 9): the chain database refusing
a commit is a WARNING line naming the data dir and its free space, at most one a minute while
writes keep failing, a /readyz reason until a commit works again, and one line when it does.

The full disk is real SQLite behaviour, unprivileged: `ChainStore.limit_growth` sets the
connection's `max_page_count`, past which SQLite refuses a write exactly as on a full disk
(SQLITE_FULL, the transaction rolled back). A tmpfs or loop device would need root; an
injected ENOSPC would test our stand-in, not SQLite's answer."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from snode.node.disk_watch import DiskWatch
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.store import ChainStore
from snode.store.errors import WriteRefused
from tests.unit.conftest import new_chain


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_database_is_one_warning_a_minute_and_a_readyz_reason(tmp_path: Path, caplog: Any) -> None:
    chain = new_chain()
    blocks = chain.mine(40)
    store = ChainStore.open(tmp_path / "chain.sqlite3", genesis_block=chain.blocks[0],
                            genesis_state=chain.fork(at=0).state)
    node = Node(params=chain.params, consensus=chain.consensus, store=store, state=store.load_state(),
                identity=None, producer_key=None, verifier=InlineVerifier())
    clock = Clock()
    disk = DiskWatch(tmp_path, clock=clock, free=lambda _: 3 << 20)
    writer = ChainWriter(node, disk=disk)
    store.limit_growth(2)
    caplog.set_level(logging.WARNING, logger="snode.node.disk_watch")

    async def feed(tries: int) -> int:
        """The next block, again and again (as peers and the sync offer it), 2 s apart as on devnet."""
        refused = 0
        for _ in range(tries):
            try:
                await writer.accept_block(blocks[node.height])
            except WriteRefused as err:
                assert err.full, err.reason
                refused += 1
            clock.now += 2
        return refused

    refused = asyncio.run(feed(80))
    warnings = [r.getMessage() for r in caplog.records]
    assert refused >= 60, f"only {refused} of 80 commits refused: the cap did not bite"
    assert len(warnings) in (3, 4), f"{refused} refusals over 160 s: a line a minute, not {len(warnings)}"
    assert f"data dir {tmp_path} has 3.0 MiB free" in warnings[0] and "the disk is full" in warnings[0]
    reason = disk.shortage()
    assert reason is not None and "the chain database refuses writes" in reason
    stored = node.height
    assert stored == store.tip()[0], "memory did not move past what the disk refused"

    log_from = len(caplog.records)
    store.limit_growth(10_000)  # space freed
    assert asyncio.run(feed(1)) == 0
    assert node.height == stored + 1 and disk.shortage() is None
    assert "takes writes again, after" in caplog.records[log_from].getMessage()
    store.close()


@pytest.mark.parametrize("full, words", [(True, "the disk is full"), (False, "a write was refused")])
def test_the_reason_names_what_sqlite_said(full: bool, words: str, tmp_path: Path) -> None:
    disk = DiskWatch(tmp_path, free=lambda _: None)
    disk.refused(WriteRefused("cannot write to database x: disk I/O error", full=full))
    reason = disk.shortage()
    assert reason is not None and words in reason and "an unknown amount free" in reason
