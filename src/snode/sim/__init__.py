"""snode-sim: a simulation of a whole service-node network in one process, on the real core and
node code (in-memory store, inline verifier, simulated clock and network), for scale figures
(docs/SCALE.md).

Offers `cli` (snode-sim's entry point, `snode.sim.cli:main`); the rest is its own.
"""

__all__ = [
    "cli",
]
