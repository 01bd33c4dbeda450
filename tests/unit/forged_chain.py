"""A chain whose block 1 holds a forged input signature, and a node on its genesis: what the
assume-valid tests (test_assume_valid, test_sync_headers) stage."""

from __future__ import annotations

import msgspec

from snode.core.transition import apply_block
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.params import COIN
from snode.store.memory import MemoryStore


def forged_chain(chain_factory):
    """A chain whose block 1 holds a transfer with a forged input signature, then two good
    blocks; (its genesis state, the chain)."""
    chain = chain_factory()
    genesis = chain.state
    tx = chain.transfer_tx(key_from_label("alice"), key_from_label("bob").public, COIN)
    forged = msgspec.structs.replace(tx, signatures=(bytes(64),) * len(tx.signatures))
    block = chain.block_with([forged])
    chain.state, undo = apply_block(chain.state, block, chain.consensus, verifier=lambda checks: -1)
    chain.blocks.append(block)
    chain.undos.append(undo)
    chain.now = block.header.timestamp
    chain.mine(2)
    return genesis, chain


def node_on(chain, genesis, assume_valid: bytes | None) -> Node:
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis),
                state=genesis, identity=None, producer_key=None, verifier=InlineVerifier())
    node.assume_valid = assume_valid
    return node
