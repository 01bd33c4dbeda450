"""The child process of the store crash test: mines blocks into a store until it is killed.

    python store_crash_child.py DB_PATH

Every start opens the store, loads the state at its tip and keeps mining from there, so the chain
grows across kills. After each commit it prints the committed height on a line of its own and
flushes: what it has printed must survive a kill. Production depends on the stored state alone
(fixed keys, transactions chosen by height, the clock taken from the tip's timestamp), and the
child stops by itself when its parent stops reading (a broken pipe).
"""

from __future__ import annotations

import sys
from pathlib import Path

from snode.core.service_nodes import Reason, StateChangeKind
from snode.devchain import DevChain, key_from_label
from snode.params import COIN
from snode.store import ChainStore

WALLETS = tuple(key_from_label(f"crash test wallet {i}") for i in range(36))
"""Three pay each block, in turn: a wallet pays every 12 blocks, after its change has unlocked."""
OPERATOR = key_from_label("crash test operator")
SERVICE_NODE = key_from_label("crash test service node")


def new_chain() -> DevChain:
    """The crash test's chain at genesis, the same in the parent and in every child."""
    allocations = {wallet.public: 1_000 * COIN for wallet in WALLETS}
    allocations[OPERATOR.public] = 300_000 * COIN
    return DevChain.create(allocations)


def queue_transactions(chain: DevChain) -> None:
    """The next block's transactions: register the service node, then activate it (so rewards
    change its record every block), and three transfers between wallets every block."""
    node = chain.state.service_nodes.get(SERVICE_NODE.public)
    if node is None:
        chain.register(OPERATOR, SERVICE_NODE, chain.params.staking_requirement)
    elif not node.active:
        chain.state_change(SERVICE_NODE.public, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    first = 3 * (chain.state.height % 12)
    for payer in WALLETS[first:first + 3]:
        payees = (WALLETS[(first + 3 + i) % len(WALLETS)] for i in range(3))
        chain.pay_many(payer, {payee.public: (i + 1) * COIN for i, payee in enumerate(payees)})


def main(db: Path) -> None:
    """Mine and commit blocks forever, reporting each committed height."""
    chain = new_chain()
    with ChainStore.open(db, genesis_block=chain.blocks[0], genesis_state=chain.state) as store:
        chain.state = store.load_state()
        chain.now = chain.state.timestamp
        while True:
            queue_transactions(chain)
            chain.mine()
            store.commit_block(chain.blocks[-1], chain.state, chain.undos[-1])
            print(chain.state.height, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
