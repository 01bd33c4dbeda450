"""The devnet's chain rebuilt in the test with the real core, and the nodes' own keys (read from
their data dirs): with `snode.devchain.sn_block`, what a hostile peer needs to send service-node
blocks that are right in every way but one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode
from snode.core.genesis import Consensus, genesis_state, parse_genesis
from snode.core.state import ChainState
from snode.core.transition import apply_block
from snode.params import DEVNET


def sn_keys(sns: list[Any]) -> dict[bytes, SigningKey]:
    """Each service-node daemon's key, from its data dir, by public key."""
    keys = {}
    for sn in sns:
        key = SigningKey(bytes.fromhex((Path(sn.data_dir) / "key").read_text().strip()))
        keys[key.public] = key
    return keys


def rebuilt(node: Any, genesis: Path, up_to: int | None = None) -> tuple[ChainState, Consensus, list[Block]]:
    """The state at `node`'s tip (or at height `up_to`), by applying its blocks to genesis."""
    state, _, consensus = genesis_state(parse_genesis(genesis.read_bytes(), DEVNET), DEVNET)
    top = node.get_info()["height"] if up_to is None else up_to
    blocks = []
    for height in range(1, top + 1):
        block = decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block)
        state, _ = apply_block(state, block, consensus)
        blocks.append(block)
    return state, consensus, blocks

