"""Trust on the machine itself, with real `snoded` processes on loopback.

A service-node key file that other users of the machine may read is refused at start, in one
line naming the file and the `chmod 600` that fixes it (as OpenSSH refuses such a private key),
and the daemon starts once the mode is fixed.
"""

from __future__ import annotations

import stat
import subprocess

from tests.functional.framework import NodeSet, assert_equal, narrator, scaled

log = narrator(__name__)


def test_a_service_node_key_file_other_users_can_read_is_refused_at_start(nodes: NodeSet) -> None:
    log.info("Start a service node: its key file is made private (0600)")
    node = nodes.add(extra_args=["--service-node"])
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    key_file = node.data_dir / "key"
    assert_equal(stat.S_IMODE(key_file.stat().st_mode), 0o600)
    assert_equal(node.stop(), 0)
    log.info("chmod 644 the key file and start again: exit 1, one line naming the file and the fix")
    key_file.chmod(0o644)
    node.start(wait=False)
    assert node.process is not None
    try:
        code = node.process.wait(timeout=scaled(30))
    except subprocess.TimeoutExpired:
        node.process.kill()
        raise
    assert_equal(code, 1)
    assert_equal(node.stderr_text().strip().splitlines()[-1],
                 f"snoded: --data-dir: service-node key file {key_file} is open to other users of this "
                 f"machine (mode 0644): run chmod 600 {key_file}")
    assert_equal(stat.S_IMODE(key_file.stat().st_mode), 0o644, "the refusal changes nothing")
    log.info("chmod 600: the same node starts")
    key_file.chmod(0o600)
    node.start()
    assert_equal(node.get_service_node_key()["service_node_pubkey"], pubkey)
