"""A full disk is said (issue #33 item 9), against a real daemon: started with
`SNODE_DB_GROWTH_PAGES` (regtest and devnet tests only), its chain database may grow by a few
pages, past which SQLite refuses each commit exactly as on a full disk (SQLITE_FULL, the
transaction rolled back). Unprivileged, so it runs in CI where a tmpfs or loop device cannot be
mounted; the refusal is SQLite's own, not an injected error of ours.

Blocks are generated until a commit is refused: the daemon writes one WARNING line naming the
data dir and its free space (not one per refused block), `/readyz` names it, `get_info` still
answers at the stored height. Restarted without the cap (space freed), it stores blocks again
and `/readyz` no longer names it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from snode.api.client import RpcFailure
from tests.functional.framework import narrator, scaled, wait_until

log = narrator(__name__)

REFUSES = "the chain database refuses writes (the disk is full; data dir"


def _unmet(node) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://{node.ip}:{node.rpc_port}/readyz", timeout=scaled(5)) as answer:
            return json.loads(answer.read())["unmet"]
    except urllib.error.HTTPError as err:
        return json.loads(err.read())["unmet"]


def test_a_full_disk_is_one_warning_and_a_readyz_reason_until_space_is_freed(nodes):
    node = nodes.add(start=False)
    log.info("A regtest daemon whose database may grow by 40 pages")
    node.start(env={"SNODE_DB_GROWTH_PAGES": "40"})
    refusals = 0

    def refused() -> bool:
        nonlocal refusals
        try:
            node.generate_blocks(blocks=1)
        except RpcFailure:
            refusals += 1
        return refusals >= 5

    wait_until(refused, timeout=120, what="five refused commits", interval=0)
    stored = node.get_info()["height"]
    log.info("Stored up to height %d; %d commits refused: one WARNING line, /readyz names it", stored, refusals)
    lines = [line for line in node.stderr_text().splitlines() if REFUSES in line]
    assert len(lines) == 1, lines
    assert "WARNING" in lines[0] and str(node.data_dir) in lines[0] and " free)" in lines[0], lines[0]
    assert any("the chain database refuses writes" in reason for reason in _unmet(node))

    log.info("Space freed (restarted without the cap): blocks are stored again, /readyz clear of it")
    node.stop()
    node.start()
    assert node.get_info()["height"] == stored
    node.generate_blocks(blocks=2)
    assert node.get_info()["height"] == stored + 2
    assert not any("refuses writes" in reason for reason in _unmet(node))
