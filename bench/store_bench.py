"""Store commits against the physical limit: a bare SQLite commit of the same size and durability.

Measures in one run:
- the limit: bare SQLite transactions per second with the store's pragmas (WAL, synchronous=FULL,
  exclusive locking), each one INSERT of a blob the size of an average block plus as many small
  rows as a block changes state rows;
- `ChainStore.commit_block` per second on real blocks made by DevChain (five transfers each:
  about 1.5 KB and 23 changed state rows), and its ratio to the limit (target >= 0.5);
- restart: `ChainStore.open` plus `load_state` on a state the size of a 100,000-block chain
  (400,000 unspent outputs, 2,000 service nodes); DESIGN.md section 10 wants it under 3 s.

The two commit figures take turns commit by commit (ROUNDS rounds, each on fresh databases) and
come from the median time of one commit, so a neighbour's load on the disk hits both alike.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from bench.report import verdict
from snode.core.blocks import Block
from snode.core.encoding import encode
from snode.core.state import ChainState, Contribution, ServiceNode, Undo, UtxoEntry
from snode.devchain import DevChain, key_from_label
from snode.params import COIN
from snode.store import DATABASE_FILE, ChainStore
from snode.store.schema import PRAGMAS

BLOCKS: Final = 300
"""Blocks committed per round."""
ROUNDS: Final = 3
PAYERS_PER_BLOCK: Final = 5
WALLETS: Final = PAYERS_PER_BLOCK * 12
"""Each wallet pays every 12 blocks, after its change (locked for 10) is spendable."""
TARGET_RATIO: Final = 0.5
RESTART_UTXOS: Final = 400_000
"""A 100,000-block chain whose coinbases pay about four contributors a block."""
RESTART_SERVICE_NODES: Final = 2_000
RESTART_TARGET_S: Final = 3.0

Genesis = tuple[Block, ChainState]
Step = tuple[Block, ChainState, Undo]
"""A block, the state after it and its undo record."""


def log(text: str) -> None:
    """Progress on stderr, so that stdout holds the figures."""
    print(f"store_bench: {text}", file=sys.stderr, flush=True)


# --- the blocks ---------------------------------------------------------------------------

def make_chain(blocks: int = BLOCKS) -> tuple[Genesis, list[Step]]:
    """A chain's genesis and `blocks` commits of five two-output transfers each."""
    wallets = [key_from_label(f"store bench wallet {i}") for i in range(WALLETS)]
    chain = DevChain.create({w.public: 1_000_000 * COIN for w in wallets})
    genesis = (chain.blocks[0], chain.state)
    commits: list[Step] = []
    for _ in range(blocks):
        first = PAYERS_PER_BLOCK * (chain.state.height % 12)
        for i in range(first, first + PAYERS_PER_BLOCK):
            payees = {wallets[(i + n) % WALLETS].public: n * COIN for n in (1, 2)}
            chain.pay_many(wallets[i], payees)
        chain.mine()
        commits.append((chain.blocks[-1], chain.state, chain.undos[-1]))
    return genesis, commits


def changed_rows(undo: Undo) -> int:
    """State rows one block rewrites."""
    return len(undo.utxos) + len(undo.service_nodes) + len(undo.quorums)


# --- the two commit rates -----------------------------------------------------------------

def open_store(db: Path, genesis: Genesis) -> ChainStore:
    """The store at `db` for this genesis."""
    return ChainStore.open(db, genesis_block=genesis[0], genesis_state=genesis[1])


def bare_database(path: Path) -> sqlite3.Connection:
    """A bare database with the store's pragmas: a blob table and a table of small rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    conn.execute("CREATE TABLE rows (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
    return conn


def bare_commit(conn: sqlite3.Connection, blob: bytes, rows: list[tuple[bytes, bytes]]) -> None:
    """One transaction of one blob and some small rows: what SQLite itself allows for the bytes
    and the durability of a block."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO blobs (data) VALUES (?)", (blob,))
    conn.executemany("INSERT INTO rows (key, value) VALUES (?, ?)", rows)
    conn.execute("COMMIT")


def commit_rates(genesis: Genesis, commits: Sequence[Step]) -> dict[str, float]:
    """Store and bare commits per second, from the median time of one commit of each.

    The two take turns commit by commit, in the same folder, so a neighbour's load on the disk
    slows them alike; ROUNDS rounds, each on fresh databases.
    """
    blob = os.urandom(round(statistics.mean(len(encode(block)) for block, _, _ in commits)))
    rows = round(statistics.mean(changed_rows(undo) for _, _, undo in commits))
    store_s: list[float] = []
    bare_s: list[float] = []
    for round_ in range(ROUNDS):
        log(f"commit round {round_ + 1} of {ROUNDS}")
        batches = [[(os.urandom(34), os.urandom(50)) for _ in range(rows)] for _ in commits]
        with tempfile.TemporaryDirectory(prefix="store-bench-") as folder:
            store = open_store(Path(folder) / DATABASE_FILE, genesis)
            bare = bare_database(Path(folder) / "bare.sqlite3")
            try:
                for (block, state, undo), batch in zip(commits, batches):
                    started = time.perf_counter()
                    store.commit_block(block, state, undo)
                    middle = time.perf_counter()
                    bare_commit(bare, blob, batch)
                    store_s.append(middle - started)
                    bare_s.append(time.perf_counter() - middle)
            finally:
                store.close()
                bare.close()
    store_rate = 1 / statistics.median(store_s)
    bare_rate = 1 / statistics.median(bare_s)
    return {
        "block_bytes": len(blob),
        "changed_rows": rows,
        "store_commits_per_s": store_rate,
        "bare_commits_per_s": bare_rate,
        "ratio": store_rate / bare_rate,
    }


# --- restart ------------------------------------------------------------------------------

def large_state(state: ChainState, undo: Undo, outputs: int = RESTART_UTXOS) -> tuple[ChainState, Undo]:
    """`state` plus `outputs` outputs and RESTART_SERVICE_NODES nodes, and an undo record
    that lists them as new, so one commit writes them all (the store writes what undo lists)."""
    utxos = {os.urandom(34): UtxoEntry(os.urandom(32), 5 * COIN, 10) for _ in range(outputs)}
    nodes = {}
    for _ in range(RESTART_SERVICE_NODES):
        pubkey = os.urandom(32)
        contributors = tuple(Contribution(os.urandom(32), 50_000 * COIN, 0) for _ in range(4))
        nodes[pubkey] = ServiceNode(
            pubkey=pubkey, fee_ppm=50_000, registration_height=1,
            staking_requirement=200_000 * COIN, contributors=contributors, funded_height=1,
            active=True, active_since=1, decommission_count=0, last_reward_height=1,
            last_state_change_height=1, last_state_change_reason=1, last_decommission_reason=0,
        )
    big = replace(
        state, utxos=state.utxos.update(utxos), service_nodes=state.service_nodes.update(nodes)
    )
    return big, with_created_keys(undo, utxos, nodes)


def with_created_keys(undo: Undo, utxos: dict[bytes, Any], nodes: dict[bytes, Any]) -> Undo:
    """`undo` with the keys of `utxos` and `nodes` added as created by the block."""
    return Undo(
        height=undo.height, prev_tip_hash=undo.prev_tip_hash, prev_timestamp=undo.prev_timestamp,
        prev_issued=undo.prev_issued, quorums=undo.quorums,
        utxos=undo.utxos + tuple((key, None) for key in utxos),
        service_nodes=undo.service_nodes + tuple((key, None) for key in nodes),
    )


def restart_seconds(genesis: Genesis, first: Step, outputs: int = RESTART_UTXOS) -> dict[str, float]:
    """Seconds to open a store holding a 100,000-block-sized state (`outputs` unspent outputs)
    and load that state."""
    block, state, undo = first
    big, big_undo = large_state(state, undo, outputs)
    with tempfile.TemporaryDirectory(prefix="store-bench-") as folder:
        db = Path(folder) / DATABASE_FILE
        with open_store(db, genesis) as store:
            store.commit_block(block, big, big_undo)
        started = time.perf_counter()
        with open_store(db, genesis) as store:
            loaded = store.load_state()
        seconds = time.perf_counter() - started
    if loaded != big:
        raise AssertionError("the reloaded large state differs from the committed one")
    return {
        "utxos": len(loaded.utxos),
        "service_nodes": len(loaded.service_nodes),
        "open_and_load_s": seconds,
    }


def run(blocks: int = BLOCKS, restart_outputs: int = RESTART_UTXOS) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`); a shorter chain and a smaller
    restart state for a quick look (the smoke test)."""
    log(f"making {blocks} blocks with DevChain")
    genesis, commits = make_chain(blocks)
    results: dict[str, Any] = {"blocks": blocks, **commit_rates(genesis, commits)}
    log("measuring a restart on a large state")
    results["restart"] = restart_seconds(genesis, commits[0], restart_outputs)
    return results


def report(results: dict[str, Any], console: Console) -> None:
    """Print the figures of `run`, each with its target and verdict."""
    ratio = results["ratio"]
    restart = results["restart"]
    seconds = restart["open_and_load_s"]
    console.print()
    console.print("[bold]store: commits against a bare SQLite commit (WAL, synchronous=FULL)[/]")
    console.print(
        f"blocks: {results['blocks']} real blocks, {results['block_bytes']:,} bytes and "
        f"{results['changed_rows']} changed state rows on average"
    )
    console.print(
        f"limit: {results['bare_commits_per_s']:,.0f} bare commits/s (one blob + rows each)"
    )
    console.print(f"store: {results['store_commits_per_s']:,.0f} commit_block/s")
    console.print(
        f"ratio store/bare: {ratio:.2f} (target >= {TARGET_RATIO}) "
        + verdict(ratio >= TARGET_RATIO)
    )
    console.print(
        f"restart: open + load_state of {restart['utxos']:,} outputs and "
        f"{restart['service_nodes']:,} service nodes in {seconds:.2f} s "
        f"(target < {RESTART_TARGET_S:.0f} s) "
        + verdict(seconds < RESTART_TARGET_S)
    )


if __name__ == "__main__":
    report(run(), Console())
