"""Regtest nodes with snapshots, shared by the snapshot and backfill tests."""

from __future__ import annotations

import json
from pathlib import Path

from snode.core.blocks import Block, block_hash
from snode.core.encoding import decode
from snode.store.snapshot import Snapshots
from tests.functional.framework import connect_nodes, sync_blocks, wait_until

V2_AT = 1
"""Fork v2 from the first block: no state before it to prime (main's checksum primer, which races a
generate_blocks of many blocks when v2 is a few blocks ahead: its keep_checksum changes the tip
between a block's store and its adoption)."""


def header(node, height: int):
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header


def written(data_dir: Path) -> list[int]:
    return [int(p.name[:10]) for p in Snapshots(data_dir).paths()]


def trusted(node, height: int) -> str:
    return f"--trusted-checkpoint={height}:{block_hash(header(node, height)).hex()}"


def servers(nodes, envs: list[dict[str, str]]) -> list:
    """Nodes with snapshots at heights 5 and 10 (tip 12), each started with its environment."""
    started = []
    for env in envs:
        server = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", "--snapshots"], start=False)
        server.start(env=env)
        started.append(server)
    for server in started[1:]:
        connect_nodes(server, started[0])
    started[0].generate_blocks(blocks=12)
    sync_blocks(started)
    wait_until(lambda: all(written(s.data_dir) == [5, 10] for s in started), timeout=30)
    return started


def unmet(node) -> list[str]:
    """/readyz's unmet conditions (503 while any)."""
    _, _, data = node.rpc.raw("", method="GET", path="/readyz")
    return json.loads(data)["unmet"]
