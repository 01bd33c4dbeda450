"""A data dir damaged between two starts, or under a running daemon: one line, never a traceback.

The chain database is damaged as a failing disk would: whole pages of one table overwritten in
place, found with SQLite's `dbstat` (page numbers per table) after a clean stop, so the damage is
the same on every run and lands in the table the daemon must read. A start-up refused is one
stderr line naming the database file and what to do, exit 1, the file not written; a running
daemon that meets the damage stops with that line. A service node whose key file has gone while
its data dir remembers the node's public key (`key.pub`) refuses to start as a new node.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

from snode.devchain import key_from_label
from snode.params import COIN
from tests.functional.framework import (
    JSONRPCException,
    NodeSet,
    TestNode,
    assert_equal,
    narrator,
    scaled,
    wait_until,
)
from tests.functional.sn_helpers import SOLO, fund_and_unlock, register

log = narrator(__name__)

DAMAGE = b"\x5a" * 4096
"""What a damaged page holds: no valid SQLite page starts with 0x5a, so SQLite says
'database disk image is malformed' for it on every run."""
RECOVER = ("restore the data dir from a backup, or start with a new data dir (copy the key file "
           "`key` into it, if there is one) and let it sync")


def _damaged_line(db: Path, *, at_start: bool) -> str:
    prefix = "snoded: --data-dir: " if at_start else "snoded: "
    return f"{prefix}database {db} is damaged (database disk image is malformed); {RECOVER}"


def _pages(db: Path, table: str, *, leaves: bool = False) -> list[int]:
    """The page numbers of `table` (its leaf pages only, with `leaves`) in a stopped daemon's
    database, read through a read-only connection."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        kind = " AND pagetype = 'leaf'" if leaves else ""
        rows = conn.execute(f"SELECT pageno FROM dbstat WHERE name = ?{kind} ORDER BY pageno", (table,))
        return [page for (page,) in rows]
    finally:
        conn.close()


def _damage(db: Path, pages: list[int]) -> None:
    page_size = len(DAMAGE)
    with open(db, "r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(DAMAGE)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused_start(node: TestNode) -> tuple[int, str]:
    """Start `node` expecting it to refuse: (exit code, what it wrote to stderr this time)."""
    seen = len(node.stderr_text())
    node.start(wait=False)
    assert node.process is not None
    code = node.process.wait(scaled(30))
    return code, node.stderr_text()[seen:]


def _stopped_with_a_chain(node: TestNode, blocks: int) -> Path:
    node.generate_blocks(blocks=blocks)
    assert_equal(node.stop(), 0)
    db = node.data_dir / "chain.sqlite3"
    assert not (node.data_dir / "chain.sqlite3-wal").exists(), "a clean stop leaves every page in the file"
    return db


def test_a_damaged_outputs_table_or_any_table_read_at_start_up_is_one_line(nodes: NodeSet, tmp_path: Path) -> None:
    node = nodes.add()
    log.info("Mine 400 blocks so that the outputs table spans many pages, and stop cleanly")
    db = _stopped_with_a_chain(node, 400)
    leaves = _pages(db, "utxos", leaves=True)
    assert len(leaves) >= 4, f"the outputs table must span pages for the damage to be inside it: {leaves}"
    pristine = tmp_path / "pristine.sqlite3"
    shutil.copyfile(db, pristine)

    log.info("Overwrite the last half of the outputs table's %d leaf pages: refused in one line", len(leaves))
    _damage(db, leaves[len(leaves) // 2:])
    before = _digest(db)
    code, stderr = _refused_start(node)
    assert_equal(code, 1, stderr)
    assert_equal(stderr.strip().splitlines(), [_damaged_line(db, at_start=True)])
    assert_equal(_digest(db), before, "a refused start leaves the database as it was")

    for table in ("service_nodes", "quorums", "checkpoints", "meta", "main_chain", "node_meta", "peers"):
        log.info("The %s table damaged instead: refused in the same line", table)
        shutil.copyfile(pristine, db)
        _damage(db, _pages(db, table))
        code, stderr = _refused_start(node)
        assert_equal(code, 1, f"{table}: {stderr}")
        assert_equal(stderr.strip().splitlines(), [_damaged_line(db, at_start=True)], table)

    log.info("The undamaged copy put back: the daemon starts at height 400")
    shutil.copyfile(pristine, db)
    node.start()
    assert_equal(node.get_info()["height"], 400)


def test_a_running_daemon_that_meets_damage_stops_with_one_clear_error(nodes: NodeSet) -> None:
    node = nodes.add()
    log.info("Mine 400 blocks, stop, and find the block table's pages (not read again until asked)")
    db = _stopped_with_a_chain(node, 400)
    leaves = _pages(db, "blocks", leaves=True)
    assert len(leaves) >= 4, leaves
    node.start()
    seen = len(node.stderr_text())

    log.info("Overwrite them under the running daemon, then ask for an old block")
    _damage(db, leaves)
    try:
        node.get_block(height=1)
    except JSONRPCException as err:
        assert_equal(err.message, _damaged_line(db, at_start=False).removeprefix("snoded: "))
    else:
        raise AssertionError("get_block answered from a damaged page")

    log.info("The daemon stops by itself: exit 1, the reason last on stderr, no traceback")
    process = node.process
    assert process is not None
    wait_until(lambda: process.poll() is not None, timeout=20, what="the daemon to stop")
    assert_equal(process.returncode, 1)
    stderr = node.stderr_text()[seen:]
    assert_equal(stderr.strip().splitlines()[-1], _damaged_line(db, at_start=False))
    assert "the chain database cannot be used any more: database" in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_a_missing_service_node_key_is_refused_until_its_record_is_removed(nodes: NodeSet) -> None:
    log.info("Register a service node's key on the chain, and stop it")
    node = nodes.add(extra_args=["--service-node"])
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    key_file, pub_file = node.data_dir / "key", node.data_dir / "key.pub"
    assert_equal(pub_file.read_text(), pubkey + "\n")
    op = key_from_label("operator who loses the key")
    fund_and_unlock(node, {op.public: SOLO + COIN})
    register(node, node, op, SOLO)
    height = node.generate_blocks(blocks=1)["height"]
    assert_equal(node.stop(), 0)

    log.info("Remove the key file and start again: refused in one line, no new key made")
    key = key_file.read_bytes()
    key_file.unlink()
    code, stderr = _refused_start(node)
    assert_equal(code, 1, stderr)
    assert_equal(stderr.strip().splitlines(), [
        f"snoded: --data-dir: the service-node key file {key_file} is missing, but this data dir ran "
        f"service node {pubkey} ({pub_file}), registered on the chain at height {height} (without its "
        "key it sends no uptime proofs and will be decommissioned, then deregistered); put the key "
        f"file back from your backup, or remove {pub_file} to start as a new service node"])
    assert not key_file.exists()
    assert_equal(pub_file.read_text(), pubkey + "\n")

    log.info("Put the key back: the same node starts")
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    node.start()
    assert_equal(node.get_service_node_key()["service_node_pubkey"], pubkey)
    assert_equal(node.stop(), 0)

    log.info("Remove both files: it starts as a new service node, and remembers the new key")
    key_file.unlink()
    pub_file.unlink()
    node.start()
    new = node.get_service_node_key()["service_node_pubkey"]
    assert new != pubkey
    assert_equal(pub_file.read_text(), new + "\n")
    assert key_file.exists()


def _refused_by_the_check(node: TestNode, db: Path) -> str:
    """Start `node` expecting quick_check to refuse its database in one line; that line."""
    code, stderr = _refused_start(node)
    assert_equal(code, 1, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(
        f"snoded: --data-dir: database {db} is damaged (quick_check after an unclean stop: "), lines
    assert lines[0].endswith(f"); {RECOVER}"), lines
    return lines[0]


def test_a_start_after_an_unclean_stop_checks_the_database_and_refuses_damage_in_one_line(nodes: NodeSet) -> None:
    """Issue #38, item 5: with pages of chain.sqlite3 overwritten, the daemon started, served,
    and stopped at the first read of a bad page, again at every restart (`Restart=on-failure`)."""
    node = nodes.add()
    log.info("Mine 400 blocks, stop cleanly, start and kill -9: an unclean stop of a sound database")
    db = _stopped_with_a_chain(node, 400)
    leaves = _pages(db, "blocks", leaves=True)
    node.start()
    node.kill()
    log.info("Started after it, the sound database passes the check and the daemon serves")
    node.start()
    assert_equal(node.get_info()["height"], 400)
    assert "the last stop was unclean: quick_check of" in (node.data_dir / "snoded.log").read_text()
    assert_equal(node.stop(), 0)
    node.start()
    node.kill()
    log.info("Killed again, and the block table's pages damaged: refused in one line, not served")
    _damage(db, leaves)
    before = _digest(db)
    _refused_by_the_check(node, db)
    assert_equal(_digest(db), before, "a refused start leaves the database as it was")


def test_a_daemon_stopped_by_damage_is_refused_at_its_next_start_not_served_again(nodes: NodeSet) -> None:
    node = nodes.add()
    db = _stopped_with_a_chain(node, 400)
    leaves = _pages(db, "blocks", leaves=True)
    node.start()
    log.info("The block table damaged under the running daemon: a read of it stops the daemon")
    _damage(db, leaves)
    try:
        node.get_block(height=1)
    except JSONRPCException:
        pass
    process = node.process
    assert process is not None
    wait_until(lambda: process.poll() is not None, timeout=20, what="the daemon to stop")
    assert_equal(process.returncode, 1)
    log.info("As a service manager restarts it: refused by the check in one line, every time")
    for _ in range(2):
        _refused_by_the_check(node, db)
