"""The address book survives a restart and a damaged file does not stop a start (issue #33),
against real daemons: node0 dials node1, so node1 is in node0's book; node0 stops and writes
`peers.dat`; restarted, it reads the entry back. Truncated, the file is one WARNING line and a
fresh book, and the daemon runs."""

from __future__ import annotations

from snode.net.address_file import FILE_NAME
from tests.functional.framework import connect_nodes, narrator

log = narrator(__name__)


def _books(node) -> list[str]:
    return [line for line in node.stderr_text().splitlines() if "address book: " in line]


def test_the_address_book_survives_a_restart_and_a_damaged_file_is_a_fresh_book(nodes):
    node0, node1 = nodes.add(), nodes.add()
    log.info("node0 dials node1; stopped, node0 writes its address book")
    connect_nodes(node0, node1)
    node0.stop()
    path = node0.data_dir / FILE_NAME
    assert path.exists() and oct(path.stat().st_mode & 0o777) == "0o600"
    log.info("Restarted, node0 reads it back")
    node0.start()
    assert "address book: 1 entries from" in _books(node0)[-1], _books(node0)
    node0.stop()
    log.info("Truncated: one WARNING line, a fresh book, and the daemon runs")
    path.write_bytes(path.read_bytes()[:-7])
    node0.start()
    warnings = [line for line in node0.stderr_text().splitlines() if "starting with a fresh one" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0] and "truncated or damaged" in warnings[0], warnings
    assert "address book: 0 entries from" in _books(node0)[-1]
    assert node0.get_info()["height"] == 0
