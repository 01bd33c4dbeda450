"""kill -9 at any moment loses no committed block and never corrupts the store (DESIGN section 10).

A child process (`store_crash_child.py`) mines blocks into a store and prints each height it has
committed. The parent kills it with SIGKILL at a random moment, 20 times, and after each kill
reopens the store and checks that: it opens; its tip is at least the last height the child
reported; the blocks below the previous tip are unchanged; and the loaded state equals a replay
of the stored blocks from genesis with the core. The next child continues from the stored tip.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snode.core.genesis import Consensus
from snode.core.state import ChainState
from snode.core.transition import apply_block
from snode.store import DATABASE_FILE, ChainStore
from tests.unit.store_crash_child import new_chain

KILLS = 20
TIME_LIMIT = 60.0
"""Seconds for the whole test; each child is given what is left."""
CHILD = Path(__file__).with_name("store_crash_child.py")


class HeightReader:
    """The heights a child prints, one a line, read from its stdout without ever blocking past
    a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self._fd = proc.stdout.fileno()
        self._deadline = deadline
        self._partial = b""
        self.heights: list[int] = []

    def wait_for(self, count: int) -> None:
        """Read until the child has reported `count` heights."""
        while len(self.heights) < count:
            if not self._read():
                raise AssertionError(
                    f"the child exited with code {self._proc.wait()} after reporting "
                    f"{len(self.heights)} of {count} commits"
                )

    def drain(self) -> None:
        """Read what a dead child left in the pipe."""
        while self._read():
            pass

    def follow_for(self, seconds: float) -> None:
        """Keep reading the child's reports for `seconds`: the random kill moment."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready and not self._read():
                return

    def _read(self) -> bool:
        """Read once; False at the end of the stream."""
        remaining = self._deadline - time.monotonic()
        assert remaining > 0, "the crash test ran out of time"
        ready, _, _ = select.select([self._fd], [], [], remaining)
        assert ready, "the crash test ran out of time waiting for the child"
        chunk = os.read(self._fd, 4096)
        # A line without its newline may be cut by the kill: only whole lines count as reports.
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        self.heights.extend(int(line) for line in lines)
        return bool(chunk)


def run_and_kill(db: Path, rng: random.Random, deadline: float) -> int:
    """Start a child, SIGKILL it at a random moment; the last height it reported (-1: none).

    The moment is after a random number of reported commits (0 to 6) plus a random delay: a
    short one lands inside the production or the commit of the next block; with no commit
    awaited, a longer one lands anywhere in start-up, including the store's creation.
    """
    commits = rng.randint(0, 6)
    delay = rng.uniform(0, 0.5) if commits == 0 else rng.uniform(0, 0.01)
    proc = subprocess.Popen([sys.executable, str(CHILD), str(db)], stdout=subprocess.PIPE)
    try:
        reader = HeightReader(proc, deadline)
        reader.wait_for(commits)
        reader.follow_for(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
        assert proc.returncode == -signal.SIGKILL, f"the child stopped itself ({proc.returncode})"
        reader.drain()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    return max(reader.heights, default=-1)


def replay(store: ChainStore, state: ChainState, consensus: Consensus) -> ChainState:
    """Apply the stored blocks above `state`, which must still be the stored block at its
    height; the state at the stored tip. Each stored undo record must be the replay's."""
    assert store.block_hash_at(state.height) == state.tip_hash, "a committed block changed"
    tip_height, _ = store.tip()
    for height in range(state.height + 1, tip_height + 1):
        block = store.get_block_by_height(height)
        assert block is not None
        state, undo = apply_block(state, block, consensus)
        assert store.get_undo(state.tip_hash) == undo
    return state


@pytest.mark.timeout(TIME_LIMIT * 2)
def test_the_store_survives_kill_9_at_random_moments(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    deadline = time.monotonic() + TIME_LIMIT
    chain = new_chain()
    genesis_block, replayed = chain.blocks[0], chain.state
    db = tmp_path / DATABASE_FILE
    for kill in range(KILLS):
        reported = run_and_kill(db, rng, deadline)
        with ChainStore.open(db, genesis_block=genesis_block, genesis_state=chain.state) as store:
            tip_height, _ = store.tip()
            assert tip_height >= reported, f"kill {kill}: committed block {reported} was lost"
            replayed = replay(store, replayed, chain.consensus)
            assert store.load_state() == replayed, f"kill {kill}: state differs from a replay"
    assert replayed.height > KILLS, "the chain should grow across the kills"
    assert replayed.service_nodes, "the chain should exercise every state map"
