"""The chain the proof-intake benchmark serves: a regtest chain with many registered service
nodes, built in-process with DevChain and written into a data dir that `snoded --regtest` opens.

It starts from the built-in regtest genesis (the published authority and faucet keys), so any
`snoded --regtest` accepts it; a chain of more service nodes than the built-in faucet can stake
(about 4,999) gets a larger faucet allocation in its own genesis.json, which the daemon reads from
the data dir. The faucet funds one operator key per service node (1,000 payments
a transaction, the faucet's change unlocking in between); each operator registers its service
node with a real registration transaction signed by the service node's own key (250 a block);
one block of authority-voted state changes activates them all. About 40 blocks in all, built in
about 5 s; each block is committed to the store as it is made.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, encode_genesis, genesis_state, regtest_genesis
from snode.devchain import DevChain
from snode.params import COIN, REGTEST, REGTEST_AUTHORITY_SEED, REGTEST_FAUCET_SEED
from snode.store import DATABASE_FILE, ChainStore

PARAMS: Final = REGTEST
GENESIS_FILE: Final = "genesis.json"
FUND_PER_TX: Final = 1_000
"""Payments per faucet transaction (about 44 bytes each; a transaction holds 100 KB)."""
REGISTRATIONS_PER_BLOCK: Final = 250
SPILL_BLOCKS: Final = 4
"""Blocks mined after the activations for those that did not fit in the first (2 MB a block)."""


def sn_key(index: int) -> SigningKey:
    """The deterministic key of service node `index` of this benchmark."""
    return SigningKey(hashlib.blake2b(f"snode proof bench node {index}".encode(), digest_size=32).digest())


def operator_key(index: int) -> SigningKey:
    """The deterministic key of the operator of service node `index`."""
    return SigningKey(hashlib.blake2b(f"snode proof bench operator {index}".encode(), digest_size=32).digest())


@dataclass(frozen=True)
class BuiltChain:
    """What build_chain made."""

    sn_keys: list[SigningKey]
    height: int
    tip_hash: bytes
    service_nodes: int
    active_service_nodes: int
    build_s: float
    chain: DevChain
    """The chain itself, at the tip written (no longer committing to the store), to mine on."""


def funded_genesis(service_nodes: int) -> GenesisDoc:
    """The built-in regtest genesis, its faucet's allocation raised where it cannot stake
    `service_nodes` (with a tenth to spare for the fees)."""
    doc = regtest_genesis()
    (faucet,) = doc.outputs
    needed = service_nodes * (PARAMS.staking_requirement + COIN) * 11 // 10
    if needed <= faucet.amount:
        return doc
    return msgspec.structs.replace(doc, outputs=[msgspec.structs.replace(faucet, amount=needed)])


def build_chain(data_dir: Path, service_nodes: int) -> BuiltChain:
    """Build the chain and write it into `data_dir` (genesis.json and the store)."""
    started = time.perf_counter()
    doc = funded_genesis(service_nodes)
    state, block0, consensus = genesis_state(doc, PARAMS)
    chain = DevChain(params=PARAMS, authority=SigningKey(REGTEST_AUTHORITY_SEED), state=state,
                     consensus=consensus, now=state.timestamp, blocks=[block0])
    faucet = SigningKey(REGTEST_FAUCET_SEED)
    operators = [operator_key(i) for i in range(service_nodes)]
    nodes = [sn_key(i) for i in range(service_nodes)]
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (data_dir / GENESIS_FILE).write_bytes(encode_genesis(doc))
    with ChainStore.open(data_dir / DATABASE_FILE, genesis_block=block0, genesis_state=state) as store:
        chain.on_block = store.commit_block
        for start in range(0, service_nodes, FUND_PER_TX):
            group = operators[start:start + FUND_PER_TX]
            chain.pay_many(faucet, {k.public: PARAMS.staking_requirement + COIN for k in group})
            chain.mine(PARAMS.unlock_confirmations)  # the faucet's change and the payments unlock
        chain.register_active(list(zip(operators, nodes)), per_block=REGISTRATIONS_PER_BLOCK)
        for _ in range(SPILL_BLOCKS):  # 10,000 activations fill more than one block
            if not len(chain.pool):
                break
            chain.mine()
        if len(chain.pool):
            raise AssertionError(f"{len(chain.pool)} transactions did not fit in the setup blocks")
    chain.on_block = None
    sns = chain.state.service_nodes
    missing = [k for k in nodes if k.public not in sns]
    if missing:
        raise AssertionError(f"{len(missing)} of {service_nodes} service nodes are not registered")
    return BuiltChain(
        sn_keys=nodes, height=chain.state.height, tip_hash=chain.state.tip_hash,
        service_nodes=len(sns), active_service_nodes=sum(1 for sn in sns.values() if sn.active),
        build_s=time.perf_counter() - started, chain=chain,
    )
