"""Upgrades keep the data: a data dir written by each release (tests/fixtures/datadir-*.tar.gz,
made by tests/fixtures/make_datadir.py) is opened in place by today's snoded, which reads back
the height, tip, service-node key, registration and the operator's coins the release recorded
beside it, and goes on producing blocks on it. A data dir of a newer schema than this snode's is
refused at start with one line naming both versions, and left as it was.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tarfile
from pathlib import Path
from typing import Any

import pytest

from snode.store.chain_store import DATABASE_FILE
from snode.store.schema import SCHEMA_VERSION
from tests.functional.framework import NodeSet, assert_equal, narrator, next_loopback_ip, run_snoded
from tests.functional.sn_helpers import record

log = narrator(__name__)

FIXTURES = Path(__file__).parent.parent / "fixtures"
RELEASES = sorted(p.name.removeprefix("datadir-").removesuffix(".tar.gz") for p in FIXTURES.glob("datadir-*.tar.gz"))


def unpack(release: str, data_dir: Path) -> dict[str, Any]:
    """The release's data dir unpacked at data_dir; what it recorded about it."""
    data_dir.mkdir(parents=True)
    with tarfile.open(FIXTURES / f"datadir-{release}.tar.gz") as tar:
        tar.extractall(data_dir, filter="data")  # keeps the key file's 0600
    expected: dict[str, Any] = json.loads((FIXTURES / f"datadir-{release}.json").read_text())
    return expected


def test_there_are_fixtures_and_each_is_of_a_schema_this_snode_reads() -> None:
    # Fixtures are only ever added: a schema bump keeps the older ones, which its migration opens.
    versions = {json.loads(p.read_text())["schema_version"] for p in FIXTURES.glob("datadir-*.json")}
    assert RELEASES and versions and max(versions) <= SCHEMA_VERSION, (RELEASES, versions)


@pytest.mark.parametrize("release", RELEASES)
def test_a_data_dir_of_a_release_opens_in_place_with_its_chain_key_and_registration(
    nodes: NodeSet, release: str
) -> None:
    node = nodes.add(extra_args=["--service-node"], start=False)
    expected = unpack(release, node.data_dir)
    log.info("Start today's snoded on the data dir release %s wrote", release)
    node.start()
    info = node.get_info()
    assert_equal((info["height"], node.get_height()["hash"]), (expected["height"], expected["tip"]))
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    assert_equal(pubkey, expected["service_node_pubkey"], "the node's key, read from its key file")
    sn = record(node, pubkey)
    assert_equal((sn["registration_height"], sn["funded"], sn["active"]),
                 (expected["registration_height"], True, True))
    outputs = node.get_outputs(address=expected["operator_address"])["outputs"]
    assert_equal(sum(o["amount"] for o in outputs), expected["operator_balance"], "the operator's coins")
    log.info("It goes on: a new block on top, kept over a restart")
    node.generate_blocks(blocks=1)
    assert_equal(node.stop(), 0)
    node.start()
    assert_equal(node.get_info()["height"], expected["height"] + 1)


def test_a_data_dir_of_a_newer_schema_is_refused_with_both_versions_and_left_as_it_was(tmp_path: Path) -> None:
    data_dir = tmp_path / "newer"
    unpack(RELEASES[-1], data_dir)
    db = data_dir / DATABASE_FILE
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    ip = next_loopback_ip()
    done = run_snoded(["--regtest", "--non-interactive", f"--data-dir={data_dir}", f"--rpc-admin={ip}:38091",
                       f"--p2p-bind-ip={ip}"])
    assert_equal(done.returncode, 1)
    assert_equal(done.stderr.strip().splitlines(), [
        f"snoded: --data-dir: database {db} has schema version {SCHEMA_VERSION + 1}, written by a newer snode; "
        f"this snode reads schema version {SCHEMA_VERSION} and older: run the newer release (a downgrade cannot "
        "read its data dir) or use a new data dir"])
    assert_equal(hashlib.sha256(db.read_bytes()).hexdigest(), before, "the newer file's bytes")
