"""A devnet chain whose service nodes produce its next block, and their signed blocks: shared by
the unit tests of service-node blocks (kept here, not in a test module, so that no test module
imports another)."""

from __future__ import annotations

from collections.abc import Sequence

from snode import devchain
from snode.core.blocks import Block, Checkpoint
from snode.core.crypto import SigningKey
from snode.core.mempool import Mempool
from snode.core.pulse import Mode, RoundQuorum, production_mode
from snode.core.service_nodes import StateChangeKind
from snode.core.state import ChainState
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET
from tests.unit.conftest import LabChain

SN_LABELS = [f"sn block {i}" for i in range(4)]
KEYS: dict[bytes, SigningKey] = {k.public: k for k in map(key_from_label, SN_LABELS)}


def new_sn_chain(labels: Sequence[str] = SN_LABELS, operators: Sequence[str] | None = None) -> LabChain:
    """A devnet chain whose four registered nodes (the devnet minimum, keys from `labels`, run
    by `operators`) are active, the first three payable: service nodes produce its next block."""
    operators = operators or [f"op {label}" for label in labels]
    chain = LabChain.create({key_from_label(op).public: 1_000_000 * COIN for op in operators}, params=DEVNET)
    nodes = [chain.new_node(op, label) for op, label in zip(operators, labels)]
    for pubkey in nodes[:3]:
        chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.mine(DEVNET.payable_grace)
    assert production_mode(chain.state, DEVNET) is Mode.AUTHORITY  # three active, four needed
    chain.change_state(nodes[3], StateChangeKind.ACTIVATE)  # the authority's last block
    assert production_mode(chain.state, DEVNET) is Mode.SERVICE_NODES
    return chain


def sn_block(
    state: ChainState, chain: LabChain, *, round: int = 0, signers: int | None = None,
    checkpoint: Checkpoint | None = None, pool: Mempool | None = None,
) -> tuple[Block, RoundQuorum]:
    """The block of `round` on `state`, built by its leader from `pool` (none by default) and
    signed by `signers` of its validators (all by default)."""
    return devchain.sn_block(state, chain.consensus, KEYS, round=round, signers=signers, checkpoint=checkpoint,
                             pool=pool)


def advance(chain: LabChain, block: Block) -> None:
    chain.now = max(chain.now, block.header.timestamp)
    chain.apply(block)
