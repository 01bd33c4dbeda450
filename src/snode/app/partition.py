"""A fault test's network partition, on devnet and regtest only: on SIGUSR1 the daemon reads
`<data-dir>/deny_ips` (an IP a line; no file: none) and cuts itself off from those addresses on
P2P and quorumnet (tests/functional/test_network_faults.py). A file it cannot use leaves the
partition as it was, with one warning naming the file.

On the same signal, a `<data-dir>/quorumnet_closed` file (any content) closes the quorumnet
listener to new connections while those it accepted before live on (`net.listen_filter`, Linux);
without the file it takes them again (tests/functional/test_reachability_held.py)."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from snode.common.files import LARGE_FILE_BYTES, read_bounded

if TYPE_CHECKING:  # quorumnet needs pyzmq, imported only by a service node
    from snode.net.peers import PeerManager
    from snode.net.quorumnet import QuorumNet

log = logging.getLogger("snoded")  # the daemon's own lines, beside app/daemon.py's

DENY_FILE = "deny_ips"
"""In the data dir: the addresses a devnet or regtest daemon cuts itself off from on SIGUSR1."""
CLOSED_FILE = "quorumnet_closed"
"""In the data dir: while it exists, a devnet or regtest daemon's quorumnet listener takes no new
connection (read on SIGUSR1)."""


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def read_denied(path: Path) -> frozenset[str] | None:
    """The addresses `path` lists (none when there is no such file); None, after a warning,
    when it cannot be read or holds a line that is not an IP address."""
    try:
        text = read_bounded(path, LARGE_FILE_BYTES).decode()
        ips = frozenset(line.strip() for line in text.splitlines() if line.strip())
    except FileNotFoundError:
        ips = frozenset()
    except (OSError, UnicodeDecodeError) as err:
        log.warning("%s: cannot read it (%s); the partition is unchanged", path, err)
        return None
    bad = sorted(ip for ip in ips if not _is_ip(ip))
    if bad:
        log.warning("%s: %s is not an IP address; the partition is unchanged", path, bad[0])
        return None
    return ips


def reload_denied(data_dir: Path, peers: PeerManager, quorumnet: QuorumNet | None) -> None:
    """Cut the daemon off from the addresses `<data_dir>/deny_ips` lists now (the SIGUSR1
    handler's work), on P2P and on quorumnet where it runs one."""
    if quorumnet is not None:
        closed = (data_dir / CLOSED_FILE).exists()
        if quorumnet.close_listener(closed):
            log.warning("partition: the quorumnet listener %s", "takes no new connection" if closed
                        else "takes new connections")
    ips = read_denied(data_dir / DENY_FILE)
    if ips is None:
        return
    log.warning("partition: cut off from %s", ", ".join(sorted(ips)) if ips else "no address")
    peers.deny(ips)
    if quorumnet is not None:
        quorumnet.deny(ips)
