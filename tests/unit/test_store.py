"""The durable store: what is committed comes back after a restart, and what it must refuse it
refuses without touching the file.

A real chain (transfers, a registration, a stake, quorum state changes) is made with the core,
its blocks are committed to a store, and the store is closed and reopened: the loaded state must
equal the in-memory one, and every block, transaction and undo record must come back.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest

from snode.core.blocks import Block, block_hash
from snode.core.encoding import encode
from snode.core.errors import DecodeError
from snode.core.mempool import Mempool
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import ChainState, undo_block
from snode.core.transactions import txid
from snode.core.utxo_set import DEFAULT_UTXO_LIMITS, UtxoLimits
from snode.devchain import DevChain, key_from_label
from snode.params import COIN
from snode.store import DATABASE_FILE, ChainStore, Commit, StoreError, Undone
from snode.store.schema import SCHEMA_VERSION


class History(NamedTuple):
    """A chain as the store receives it: genesis, then (block, state after it, undo) per block."""

    genesis_block: Block
    genesis_state: ChainState
    commits: list[Commit]
    chain: DevChain
    """The chain at the tip, for making forks."""

    @property
    def final_state(self) -> ChainState:
        """The state at the tip."""
        return state_of(self.commits[-1])


def state_of(commit: Commit) -> ChainState:
    """The state after a commit's block (every commit this file makes carries its state)."""
    assert commit.state is not None
    return commit.state


def commit_one(store: ChainStore, commit: Commit) -> None:
    store.commit_block(commit.block, state_of(commit), commit.undo)


def _mine(chain: DevChain, commits: list[Commit], count: int = 1) -> None:
    for _ in range(count):
        chain.mine()
        commits.append(Commit(chain.blocks[-1], chain.state, chain.undos[-1]))


@pytest.fixture
def history(chain: DevChain) -> History:
    """About 30 blocks: transfers to new wallets, a registration that a stake completes, its
    activation and decommission, and transfers between the new wallets."""
    genesis_block, genesis_state = chain.blocks[0], chain.state
    commits: list[Commit] = []
    operator, staker = key_from_label("operator"), key_from_label("alice")
    wallets = [key_from_label(f"store wallet {i}") for i in range(4)]
    sn_key = key_from_label("store test service node")

    chain.pay_many(key_from_label("bob"), {w.public: 50 * COIN for w in wallets})
    _mine(chain, commits)
    chain.register(operator, sn_key, 100_000 * COIN, fee_ppm=50_000)
    _mine(chain, commits)
    chain.stake(staker, sn_key.public, 100_000 * COIN)
    _mine(chain, commits)
    chain.state_change(sn_key.public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    _mine(chain, commits, 8)
    for i, wallet in enumerate(wallets):
        chain.transfer(wallet, wallets[(i + 1) % len(wallets)].public, (i + 1) * COIN)
        _mine(chain, commits)
    chain.state_change(sn_key.public, StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)
    _mine(chain, commits, 15)
    return History(genesis_block, genesis_state, commits, chain)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where the store's database goes."""
    return tmp_path / DATABASE_FILE


def open_store(db: Path, history: History, utxo_limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> ChainStore:
    """The store at `db` for the history's genesis (its loaded outputs folding at `utxo_limits`)."""
    return ChainStore.open(
        db, genesis_block=history.genesis_block, genesis_state=history.genesis_state, utxo_limits=utxo_limits
    )


def committed_store(db: Path, history: History, utxo_limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> ChainStore:
    """A store holding every block of the history, committed one by one, reopened."""
    with open_store(db, history) as store:
        for commit in history.commits:
            commit_one(store, commit)
    return open_store(db, history, utxo_limits)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_new_store_holds_genesis(db: Path, history: History) -> None:
    with open_store(db, history) as store:
        assert store.tip() == (0, block_hash(history.genesis_block.header))
        assert store.load_state() == history.genesis_state
        assert store.get_block_by_height(0) == history.genesis_block


def test_reopening_loads_the_state_at_the_tip(db: Path, history: History) -> None:
    final = history.final_state
    assert final.service_nodes and final.quorums, "the history must exercise every state map"
    with committed_store(db, history) as store:
        assert store.tip() == (final.height, final.tip_hash)
        assert store.load_state() == final


def test_blocks_transactions_and_undo_records_come_back(db: Path, history: History) -> None:
    with committed_store(db, history) as store:
        for block, _, undo, _ in history.commits:
            height, this_hash = block.header.height, block_hash(block.header)
            assert store.block_hash_at(height) == this_hash
            assert store.get_block_by_height(height) == block
            assert store.get_block(this_hash) == block
            assert store.get_block_bytes(height) == encode(block)
            assert store.get_undo(this_hash) == undo
            for tx in block.transactions:
                assert store.get_transaction(txid(tx)) == (height, tx)
        above = history.final_state.height + 1
        assert store.get_block_by_height(above) is None
        assert store.get_block_bytes(above) is None
        assert store.block_hash_at(above) is None
        assert store.get_block(bytes(32)) is None
        assert store.get_transaction(bytes(32)) is None


def test_a_batch_commit_stores_what_single_commits_store(db: Path, history: History) -> None:
    with open_store(db, history) as store:
        for start in range(0, len(history.commits), 7):
            store.commit_blocks(history.commits[start:start + 7])
    with open_store(db, history) as store:
        assert store.load_state() == history.final_state
        for block, _, undo, _ in history.commits:
            assert store.get_block_by_height(block.header.height) == block
            assert store.get_undo(block_hash(block.header)) == undo


def test_undo_tip_restores_the_parent_state_and_keeps_the_block(db: Path, history: History) -> None:
    undone = history.commits[-3:]
    with committed_store(db, history) as store:
        state = history.final_state
        for _ in undone:
            undo = store.get_undo(state.tip_hash)
            state = undo_block(state, undo)
            store.undo_tip(state, undo)
    parent = history.commits[-4][1]
    assert state == parent
    with open_store(db, history) as store:
        assert store.tip() == (parent.height, parent.tip_hash)
        assert store.load_state() == parent
        for block, _, _, _ in undone:
            assert store.get_block_by_height(block.header.height) is None
            assert store.get_block(block_hash(block.header)) == block
            assert store.get_transaction(txid(block.transactions[0])) is None
        store.commit_blocks(undone)
    with open_store(db, history) as store:
        assert store.load_state() == history.final_state


def fork(history: History, depth: int, length: int) -> list[Commit]:
    """`length` blocks branching off the history `depth` blocks below its tip (their
    timestamps differ by a second from the main chain's, so their hashes differ)."""
    fork_point = state_of(history.commits[-depth - 1])
    chain = replace(
        history.chain, state=fork_point, pool=Mempool(), now=fork_point.timestamp + 1,
        blocks=[], undos=[],
    )
    branch: list[Commit] = []
    _mine(chain, branch, length)
    return branch


def undo_records(history: History, depth: int) -> list[Undone]:
    """(parent state, undo record) of the top `depth` blocks, tip first."""
    top = len(history.commits) - 1
    return [
        Undone(state_of(history.commits[i - 1]), history.commits[i].undo) for i in range(top, top - depth, -1)
    ]


def test_a_reorganization_switches_branches(db: Path, history: History) -> None:
    branch = fork(history, depth=3, length=4)
    with committed_store(db, history) as store:
        store.reorganize(undo_records(history, 3), branch)
    new_tip = state_of(branch[-1])
    with open_store(db, history) as store:
        assert store.tip() == (new_tip.height, new_tip.tip_hash)
        assert store.load_state() == new_tip
        for block, _, _, _ in branch:
            height = block.header.height
            assert store.get_block_by_height(height) == block
            coinbase = block.transactions[0]
            assert store.get_transaction(txid(coinbase)) == (height, coinbase)


def test_a_reorganization_that_breaks_the_chain_writes_nothing(db: Path, history: History) -> None:
    branch = fork(history, depth=3, length=4)
    with committed_store(db, history) as store:
        with pytest.raises(ValueError, match="does not extend the stored tip"):
            store.reorganize(undo_records(history, 3), branch[:1] + branch[2:])
        with pytest.raises(ValueError, match="undo record is for height"):
            store.reorganize(undo_records(history, 3)[1:], branch)
        with pytest.raises(ValueError, match="not the state of block"):
            store.reorganize([Undone(history.final_state, history.commits[-1].undo)], [])
    with open_store(db, history) as store:
        final = history.final_state
        assert store.tip() == (final.height, final.tip_hash)
        assert store.load_state() == final


def test_a_block_that_does_not_extend_the_tip_is_refused(db: Path, history: History) -> None:
    with open_store(db, history) as store:
        with pytest.raises(ValueError, match="does not extend the stored tip"):
            commit_one(store, history.commits[1])
        commit_one(store, history.commits[0])
        with pytest.raises(ValueError, match="does not extend the stored tip"):
            commit_one(store, history.commits[0])
        assert store.tip()[0] == 1
    with open_store(db, history) as store:
        assert store.load_state() == history.commits[0][1]


def test_genesis_cannot_be_undone(db: Path, history: History) -> None:
    with open_store(db, history) as store:
        undo = history.commits[0][2]
        with pytest.raises(ValueError, match="genesis block cannot be undone"):
            store.undo_tip(history.genesis_state, undo)


@pytest.mark.parametrize("fold_at", [1, 8_192])
def test_a_state_packed_on_load_reads_as_it_was_stored_and_a_bad_row_is_named(
    db: Path, history: History, fold_at: int
) -> None:
    # A restart packs the stored outputs when there are COMPACT_AT of them or more (a large
    # chain's), else keeps them in the overlay: both must load the same state, and a row that
    # is not an output is one DecodeError naming the record, not a crash halfway.
    limits = UtxoLimits(compact_at=fold_at)
    final = history.final_state
    with committed_store(db, history, limits) as store:
        loaded = store.load_state()
    assert loaded == final and dict(loaded.utxos.items()) == dict(final.utxos.items())
    assert (len(loaded.utxos._overlay) == 0) == (fold_at == 1)
    other = sqlite3.connect(db)
    other.execute("UPDATE utxos SET value = ? WHERE key = (SELECT MIN(key) FROM utxos)", (b"\x93\x01",))
    other.commit()
    other.close()
    with open_store(db, history, limits) as store, pytest.raises(DecodeError, match="not a valid UtxoEntry"):
        store.load_state()
    if fold_at != 1:
        return  # below the fold a text key is carried as it is, as before (nothing spends it)
    other = sqlite3.connect(db)
    other.execute("DELETE FROM utxos WHERE value = ?", (b"\x93\x01",))
    key, value = other.execute("SELECT key, value FROM utxos LIMIT 1").fetchone()
    other.execute("INSERT INTO utxos (key, value) VALUES (?, ?)", ("k" * 34, value))  # text, not bytes
    other.commit()
    other.close()
    with open_store(db, history, limits) as store, pytest.raises(DecodeError, match="not a valid UtxoEntry"):
        store.load_state()


@pytest.mark.parametrize("table", ["utxos", "service_nodes"])
def test_a_store_whose_load_failed_frees_its_file_at_close_while_the_error_lives_on(
    db: Path, history: History, table: str
) -> None:
    # The failed read's cursor is in the traceback's frames: left open, it kept its statement
    # past close() (Python >= 3.12), and the EXCLUSIVE lock with it ('database is locked').
    committed_store(db, history).close()
    other = sqlite3.connect(db)
    assert other.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= 1
    other.execute(f"UPDATE {table} SET value = ? WHERE key = (SELECT MIN(key) FROM {table})", (b"\x93\x01",))
    other.commit()
    other.close()
    with open_store(db, history, UtxoLimits(compact_at=1)) as store:
        with pytest.raises(DecodeError) as failed:
            store.load_state()
    assert failed.value.__traceback__ is not None
    other = sqlite3.connect(db, timeout=0)
    try:
        other.execute("BEGIN EXCLUSIVE")
        other.rollback()
    finally:
        other.close()


@pytest.mark.parametrize("version", [3, SCHEMA_VERSION + 1])
def test_an_unknown_schema_version_is_refused_and_the_file_left_untouched(
    db: Path, history: History, version: int
) -> None:
    # An older version that no migration reads, or a newer snode's file: one line naming both
    # versions; a newer file is never written by the older code (a downgrade).
    open_store(db, history).close()
    other = sqlite3.connect(db)
    other.execute(f"PRAGMA user_version = {version}")
    other.close()
    before = file_digest(db)
    with pytest.raises(StoreError) as refused:
        open_store(db, history)
    assert str(refused.value) == ((
        f"database schema version 3 is not supported by this snode (expects {SCHEMA_VERSION}): use a matching "
        "snode release or a new data dir"
    ) if version == 3 else (
        f"database {db} has schema version {version}, written by a newer snode; this snode reads schema "
        f"version {SCHEMA_VERSION} and older: run the newer release (a downgrade cannot read its data dir) "
        "or use a new data dir"
    ))
    assert file_digest(db) == before


def test_a_data_dir_of_another_genesis_is_refused(db: Path, history: History) -> None:
    open_store(db, history).close()
    before = file_digest(db)
    other = DevChain.create({key_from_label("someone else").public: 1_000 * COIN})
    with pytest.raises(StoreError, match="data dir belongs to a different network/genesis"):
        ChainStore.open(db, genesis_block=other.blocks[0], genesis_state=other.state)
    assert file_digest(db) == before


@pytest.mark.parametrize(("edit", "said"), [
    ("DROP TABLE txs", "its table txs is gone"),
    ("DROP TABLE txs; DROP TABLE utxos", "its tables txs, utxos are gone"),
    ("DELETE FROM main_chain WHERE height = 0", "its genesis block's row is gone"),
    ("DELETE FROM meta", "the state's tip record is gone"),
    ("DELETE FROM blocks WHERE hash = (SELECT hash FROM main_chain ORDER BY height DESC LIMIT 1)",
     "the tip block [0-9a-f]{16} at height 0 is gone"),
])
def test_a_database_edited_by_hand_is_damaged_in_one_line(db: Path, history: History, edit: str, said: str) -> None:
    """Each of these once raised out of the daemon's start (a traceback), or left it running with
    a chain it could not serve ("disk full" for a dropped table, 78 GiB free)."""
    open_store(db, history).close()
    with sqlite3.connect(db) as conn:
        conn.executescript(edit)
    conn.close()
    with pytest.raises(StoreError, match=f"database .* is damaged \\({said}\\)"):
        open_store(db, history)


def test_a_directory_in_the_database_s_place_is_said_to_be_one(db: Path, history: History) -> None:
    db.mkdir()
    with pytest.raises(StoreError, match="is a directory, not a database: move it away"):
        open_store(db, history)


def test_an_empty_database_file_starts_a_new_chain_and_says_so(db: Path, history: History, caplog) -> None:
    db.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="snode.store.schema"):
        open_store(db, history).close()
    assert "is empty: a new chain starts from genesis in it" in caplog.text


def test_a_file_that_is_not_an_snode_database_is_refused(db: Path, history: History) -> None:
    db.write_bytes(b"these are not the bytes of an SQLite database" * 100)
    with pytest.raises(StoreError, match="is not an snode database"):
        open_store(db, history)
    db.unlink()
    foreign = sqlite3.connect(db)
    foreign.execute("CREATE TABLE songs (title TEXT)")
    foreign.close()
    before = file_digest(db)
    with pytest.raises(StoreError, match="is not an snode database"):
        open_store(db, history)
    assert file_digest(db) == before


def test_a_store_in_use_is_refused(db: Path, history: History) -> None:
    with open_store(db, history):
        with pytest.raises(StoreError, match="in use by another process"):
            open_store(db, history)


def test_peers_and_node_records_survive_a_restart(db: Path, history: History) -> None:
    with open_store(db, history) as store:
        assert store.load_peers() == []
        assert store.get_meta("sn key registered") is None
        store.save_peers(["127.0.0.2:38090", "127.0.0.1:38090"])
        store.save_peers(["127.0.0.3:38090", "127.0.0.2:38090"])
        store.set_meta("sn key registered", b"\x01")
    with open_store(db, history) as store:
        assert store.load_peers() == ["127.0.0.3:38090", "127.0.0.2:38090"]
        assert store.get_meta("sn key registered") == b"\x01"


def test_a_write_rolled_back_leaves_nothing_and_a_committed_one_stays(db: Path, history: History) -> None:
    """The two steps of a write: the rows go into an open transaction; the caller (the node,
    once a batch's signatures are checked) commits it or rolls it back."""
    with open_store(db, history) as store:
        store.commit_blocks(history.commits[:5])
        pending = store.write([], history.commits[5:])
        pending.rollback()
        assert store.tip() == (5, state_of(history.commits[4]).tip_hash)
        assert store.load_state() == history.commits[4].state
        with pytest.raises(ValueError, match="already"):
            pending.commit()
        store.write([], history.commits[5:]).commit()
        assert store.tip()[0] == len(history.commits)
    with open_store(db, history) as store:
        assert store.load_state() == history.final_state


def test_only_the_last_block_of_a_batch_needs_its_state(db: Path, history: History) -> None:
    without = [c._replace(state=None) for c in history.commits]
    with open_store(db, history) as store:
        with pytest.raises(ValueError, match="no state"):
            store.commit_blocks(without)
        assert store.tip()[0] == 0
        store.commit_blocks(without[:-1] + [history.commits[-1]])
        assert store.load_state() == history.final_state


# --- deferred state (a syncing node's dbcache) ---------------------------------------------

def test_deferred_state_is_written_by_the_next_full_commit(db: Path, history: History) -> None:
    commits = history.commits
    with open_store(db, history) as store:
        store.commit_blocks(commits[:10], defer_state=True)
        store.commit_blocks(commits[10:20], defer_state=True)
        assert store.tip() == (20, state_of(commits[19]).tip_hash)
        assert store.state_height() == 0
        with pytest.raises(ValueError, match="deferred"):
            store.load_state()
        # The index answers for deferred blocks too.
        coinbase = commits[14][0].transactions[0]
        assert store.get_transaction(txid(coinbase)) == (15, coinbase)
        store.commit_blocks(commits[20:])
        assert store.state_height() == len(commits)
        assert store.load_state() == history.final_state
    with open_store(db, history) as store:
        assert store.load_state() == history.final_state
        for block, _, _, _ in commits:
            for tx in block.transactions:
                assert store.get_transaction(txid(tx)) == (block.header.height, tx)


def test_flush_state_writes_what_was_deferred(db: Path, history: History) -> None:
    commits = history.commits
    with open_store(db, history) as store:
        store.commit_blocks(commits[:12], defer_state=True)
        with pytest.raises(ValueError, match="not the tip"):
            store.flush_state(state_of(commits[5]))
        store.flush_state(state_of(commits[11]))
        assert store.state_height() == 12
        assert store.load_state() == commits[11][1]
        store.flush_state(state_of(commits[11]))  # nothing deferred: nothing to do


def test_a_crash_with_deferred_state_is_caught_up_by_replaying_the_blocks(db: Path, history: History) -> None:
    from snode.node.batches import replay_stored_blocks

    commits = history.commits
    with open_store(db, history) as store:
        store.commit_blocks(commits[:8])
        store.commit_blocks(commits[8:20], defer_state=True)
        store.commit_blocks(commits[20:], defer_state=True)
        # closed without flush_state: as a SIGKILL would leave it
    with open_store(db, history) as store:
        assert store.tip()[0] == len(commits) and store.state_height() == 8
        stored = store.load_state()
        assert stored == commits[7][1]
        state = replay_stored_blocks(store, stored, history.chain.consensus)
        assert state == history.final_state
        assert store.state_height() == len(commits)
        assert store.load_state() == history.final_state
        coinbase = commits[25][0].transactions[0]
        assert store.get_transaction(txid(coinbase)) == (26, coinbase)
        # Nothing to replay the next time.
        assert replay_stored_blocks(store, store.load_state(), history.chain.consensus) == history.final_state


def test_a_reorganization_over_deferred_state_writes_it_all(db: Path, history: History) -> None:
    branch = fork(history, depth=3, length=4)
    commits = history.commits
    with open_store(db, history) as store:
        store.commit_blocks(commits[:10])
        store.commit_blocks(commits[10:], defer_state=True)
        store.reorganize(undo_records(history, 3), branch, defer_state=True)  # undoing: never deferred
        assert store.state_height() == state_of(branch[-1]).height
        assert store.load_state() == branch[-1][1]
        for block, _, _, _ in branch:
            for tx in block.transactions:
                assert store.get_transaction(txid(tx)) == (block.header.height, tx)
    with open_store(db, history) as store:
        assert store.load_state() == branch[-1][1]


@pytest.mark.parametrize("old_version", [1, 2])
def test_a_database_of_an_older_block_format_is_refused_untouched(
    db: Path, history: History, old_version: int
) -> None:
    """Version 3 blocks carry validator signatures and checkpoints: a version 1 or 2 file holds
    blocks of the old format, from a network that no longer exists."""
    with committed_store(db, history):
        pass
    old = sqlite3.connect(db)
    old.execute(f"PRAGMA user_version = {old_version}")
    old.commit()
    old.close()
    before = file_digest(db)
    with pytest.raises(StoreError, match=f"schema version {old_version} is not supported"):
        open_store(db, history)
    assert file_digest(db) == before
