"""The functional core: frozen records and pure functions. No I/O, clock, randomness or asyncio.

Time and randomness enter as arguments; the shell (store, net, rpc, node, wallet, tools) owns
sockets, the clock and the disk. `tests/unit/test_layering.py` enforces this.

The modules in `__all__` are the core's face to the other packages; the rest is its own.
"""

__all__ = [
    "address", "block_head", "blocks", "chain", "credit", "crypto", "encoding", "equivocation", "errors",
    "final_block", "finality", "genesis", "mempool", "obligations", "participation", "production",
    "proofs", "pulse", "registration", "round_actions", "round_messages", "rounds",
    "service_nodes", "sigchecks", "snapshot", "stake_exit", "standing", "state", "state_change", "state_root",
    "transactions", "transition", "txbuilder", "types", "units", "utxo_set",
]
