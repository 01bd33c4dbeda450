"""The functional core: frozen records and pure functions. No I/O, clock, randomness or asyncio.

Time and randomness enter as arguments; the shell (store, net, rpc, node, wallet, tools) owns
sockets, the clock and the disk. `tests/unit/test_layering.py` enforces this.
"""
