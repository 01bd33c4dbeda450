"""The history check (issue #36 item 4): the replay of a store's blocks from genesis reaches the
root the snapshot's block carries; a block that is not valid on the replayed state, a block
missing and a root that differs (as a consensus bug would leave it) each end it with their
reason; the child process reads its batches and speaks its lines, and the store keeps the result."""

from __future__ import annotations

import contextlib
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from snode.core.address import encode_address
from snode.core.blocks import header_state_root
from snode.core.encoding import encode
from snode.core.genesis import GenesisDoc, GenesisOutput, genesis_state
from snode.core.transition import apply_block
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST, V2, Fork
from snode.services import history_check as H
from snode.store.chain_store import HISTORY_START_KEY, ChainStore
from tests.unit.conftest import FUNDS, PEOPLE, LabChain

PARAMS = REGTEST.with_test_forks((Fork(V2, 4),))
TOP = 12


def _doc() -> GenesisDoc:
    """DevChain.create's genesis for PEOPLE (the same authority and timestamp)."""
    return GenesisDoc(network=PARAMS.name, timestamp=1_767_225_600,
                      authorities=[key_from_label("devchain authority").public.hex()],
                      outputs=[GenesisOutput(encode_address(PARAMS.address_prefix, key_from_label(p).public), FUNDS)
                               for p in PEOPLE])


@pytest.fixture
def stored(tmp_path) -> tuple[Path, LabChain]:
    """A store holding blocks 0 to 14 of a chain with fork v2 from block 4 (transfers in it)."""
    chain = LabChain.create({key_from_label(p).public: FUNDS for p in PEOPLE}, params=PARAMS)
    for height in range(1, TOP + 3):  # a transfer in each of blocks 1 to 4, before and after the fork
        if height <= 4:
            chain.transfer(key_from_label(PEOPLE[height]), key_from_label(PEOPLE[0]).public, 5 * COIN)
        chain.mine(1)
    state, block0, consensus = genesis_state(_doc(), PARAMS)
    assert block0 == chain.blocks[0], "the test's genesis is the chain's"
    path = tmp_path / "chain.sqlite3"
    with ChainStore.open(path, genesis_block=block0, genesis_state=state) as store:
        for block in chain.blocks[1:]:
            state, undo = apply_block(state, block, consensus)
            store.commit_block(block, state, undo)
        store.set_meta(HISTORY_START_KEY, encode(TOP))
    return path, chain


def _request(misbehave: str = "") -> H.Request:
    return H.Request(PARAMS, _doc(), TOP, misbehave)


def _batches(path: Path, every: int = 5) -> list[list[bytes]]:
    """Blocks 1 to TOP of the store, `every` at a time, as the daemon feeds them."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        data = [d for (d,) in db.execute("SELECT b.data FROM main_chain m JOIN blocks b ON b.hash = m.hash"
                                         " WHERE m.height BETWEEN 1 AND ? ORDER BY m.height", (TOP,))]
    return [data[i:i + every] for i in range(0, len(data), every)]


def test_the_replay_from_genesis_reaches_the_root_the_snapshots_block_carries(stored) -> None:
    path, chain = stored
    reports: list[int] = []
    ours, carried = H.replay(_request(), _batches(path), reports.append)
    assert ours == carried == header_state_root(chain.blocks[TOP].header)
    assert reports == [5, 10, 12]


def test_a_root_that_differs_at_the_snapshot_is_returned_beside_the_carried_one(stored) -> None:
    path, _ = stored
    ours, carried = H.replay(_request(H.MISBEHAVE_DIFFERS), _batches(path), lambda _: None)
    assert ours != carried and ours[:-1] == carried[:-1]


def test_a_block_that_is_not_valid_on_the_replayed_state_ends_it_with_its_height_and_reason(stored) -> None:
    path, _ = stored
    batches = _batches(path, 1)
    batches[2] = batches[4]  # block 5 where block 3 is
    with pytest.raises(H.BlockInvalid) as caught:
        H.replay(_request(), batches, lambda _: None)
    assert caught.value.height == 3 and caught.value.reason
    with pytest.raises(H.BlockInvalid, match="block 13: is above the snapshot of height 12"):
        whole = _batches(path)
        H.replay(_request(), [*whole[:-1], whole[-1] + batches[0]], lambda _: None)


def test_blocks_that_end_below_the_snapshot_give_no_result(stored) -> None:
    path, _ = stored
    with pytest.raises(H.HistoryCut, match="the blocks ended at 10, below the snapshot of height 12"):
        H.replay(_request(), _batches(path)[:2], lambda _: None)


def _child(request: H.Request, batches: list[list[bytes]]) -> list[str]:
    feed = pickle.dumps(request) + b"".join(H.frame(batch) for batch in batches)
    done = subprocess.run([sys.executable, "-m", "snode.services.history_check"], input=feed,
                          capture_output=True, timeout=60, check=True)
    assert done.stderr == b""
    return done.stdout.decode().splitlines()


def test_the_child_reports_its_progress_then_both_roots_and_exits_when_its_stdin_ends(stored) -> None:
    path, chain = stored
    root = header_state_root(chain.blocks[TOP].header)
    assert root is not None
    lines = _child(_request(), _batches(path))
    assert lines[0].startswith("at ") and lines[-2:] == [f"at {TOP}", f"done {TOP} {root.hex()} {root.hex()}"]
    assert _child(_request(), _batches(path)[:1]) == ["at 5"], "fed short: no result, and it exits"
    bad = _child(_request(), [_batches(path, 1)[1]])
    assert len(bad) == 1 and bad[0].startswith("bad 1 "), bad


def test_the_store_keeps_a_verified_history_for_its_snapshot_height_only(stored) -> None:
    path, _ = stored
    state, block0, _ = genesis_state(_doc(), PARAMS)
    with ChainStore.open(path, genesis_block=block0, genesis_state=state) as store:
        assert not store.history_verified()
        store.store_history_verified()
        assert store.history_verified()
        store.set_meta(HISTORY_START_KEY, encode(TOP + 1))  # another snapshot's start: not the verified one
        assert not store.history_verified()
