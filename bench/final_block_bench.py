"""A validator's signed block staged with its template's result, against staged in full (issue
#27, docs/PERFORMANCE.md "2f. The final block applied once").

`python -m bench.final_block_bench`: a devnet chain of 12 active, payable service nodes (the
blocks benchmark's network) built in this process, SN_BLOCKS of their blocks on it; round 0's
block on its tip, built by its
leader and signed by all its validators, with 0 and with 10 transfers. A node at that tip
stages the signed block (`Node.stage_batch`, and waits for its signatures: what a validator's
store thread does with it before the write) in full, and after it checked the block's template
(`Node.check_template`, which a validator does anyway before it signs), with the template's
result. CPU of the calling thread (`time.thread_time`), the two ways interleaved, medians of
RUNS; with the signature cache off and on (`run`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Final

import msgspec

from snode.core import mempool as mp
from snode.core.blocks import Block
from snode.core.crypto import SigningKey, signature_cache
from snode.core.pulse import Mode, production_mode
from snode.core.state import ChainState
from snode.core.txbuilder import build_transfer
from snode.devchain import DevChain, key_from_label, sn_block
from snode.node.node import Node
from snode.node.templates import CheckedTemplates
from snode.node.verifier import InlineVerifier
from snode.params import COIN, DEVNET
from snode.store.memory import MemoryStore

SERVICE_NODES: Final = 12
TRANSFERS: Final = (0, 10)
SN_BLOCKS: Final = 40
"""Service-node blocks on the chain before the one measured."""
RUNS: Final = 200


def build_chain() -> tuple[DevChain, ChainState, dict[bytes, SigningKey], list[SigningKey]]:
    """A devnet chain whose SERVICE_NODES nodes produce the next block, its genesis state, the
    nodes' keys and funded spenders."""
    operators = [key_from_label(f"final operator {i}") for i in range(SERVICE_NODES)]
    nodes = [key_from_label(f"final node {i}") for i in range(SERVICE_NODES)]
    spenders = [key_from_label(f"final spender {i}") for i in range(max(TRANSFERS))]
    allocations = {k.public: 200_001 * COIN for k in operators} | {k.public: 1_000 * COIN for k in spenders}
    chain = DevChain.create(allocations, params=DEVNET)
    genesis = chain.state
    chain.register_active(list(zip(operators, nodes)))
    chain.mine(chain.params.payable_grace)
    if production_mode(chain.state, DEVNET) is not Mode.SERVICE_NODES:
        raise AssertionError("the service nodes do not produce the next block")
    keys = {k.public: k for k in nodes}
    for _ in range(SN_BLOCKS):  # quorums and checkpoint slots of service-node heights, as a devnet's
        _, block = signed_block(chain, keys, spenders, 0)
        chain.now = max(chain.now, block.header.timestamp)
        chain.apply(block)
    return chain, genesis, keys, spenders


def signed_block(chain: DevChain, keys: dict[bytes, SigningKey], spenders: list[SigningKey],
                 transfers: int) -> tuple[Block, Block]:
    """(template, signed block) of round 0 on the tip, holding `transfers` transfers."""
    state = chain.state
    pool = mp.Mempool()
    for i, key in enumerate(spenders[:transfers]):
        tx = build_transfer(chain.spendable(key.public), key, spenders[i - 1].public, 10 * COIN, chain.params)
        pool, _ = mp.admit(pool, tx, state, chain.consensus, now=chain.now)
    block, _ = sn_block(state, chain.consensus, keys, pool=pool)
    if len(block.transactions) != transfers + 1:
        raise AssertionError(f"the block holds {len(block.transactions) - 1} of {transfers} transfers")
    return msgspec.structs.replace(block, validator_bitset=0, validator_signatures=()), block


def _cpu(fn: Callable[[], object]) -> float:
    started = time.thread_time()
    fn()
    return time.thread_time() - started


def measure(chain: DevChain, genesis: ChainState, template: Block, block: Block) -> dict[str, float]:
    """Median CPU seconds of the template check, and of staging the signed block each way."""
    node = Node(params=DEVNET, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier())
    now = block.header.timestamp
    times: dict[str, list[float]] = {"check_s": [], "full_s": [], "reused_s": []}
    reused = []

    def stage() -> None:
        batch = node.stage_batch([block], now)
        if batch.first_bad_signature() >= 0:
            raise AssertionError("the signed block has a bad signature")
        reused.append(batch.reused)
    for _ in range(RUNS):
        node.templates = CheckedTemplates()
        times["full_s"].append(_cpu(stage))
        times["check_s"].append(_cpu(lambda: node.check_template(template, now)))
        times["reused_s"].append(_cpu(stage))
    if reused != [0, 1] * RUNS:
        raise AssertionError("the template's result was not taken exactly when it was kept")
    return {name: statistics.median(values) for name, values in times.items()}


def run() -> dict[str, dict[str, float]]:
    """Figures by block and signature cache: off, every signature costs its first sight (as the
    floor counts them); on and warm, every signature is a cache hit and what is left is the rest
    of the work. In a validator the two ways differ by the second: its template check put the
    producer's and the transactions' signatures in the cache, and the validators' signatures
    are new to either way."""
    chain, genesis, keys, spenders = build_chain()
    results = {}
    for cache in (False, True):
        signature_cache(cache)
        for transfers in TRANSFERS:
            template, block = signed_block(chain, keys, spenders, transfers)
            name = f"{transfers:>2} transfers, signature cache {'on, warm' if cache else 'off'}"
            results[name] = measure(chain, genesis, template, block)
    signature_cache(True)
    return results


def main() -> None:
    for name, figures in run().items():
        print(f"{name}: template check {figures['check_s'] * 1e3:.3f} ms; signed block staged in full "
              f"{figures['full_s'] * 1e3:.3f} ms, with the template's result {figures['reused_s'] * 1e3:.3f} ms "
              f"(saves {(figures['full_s'] - figures['reused_s']) * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
