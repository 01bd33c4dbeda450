"""Operator tools: snode-cli, snode-devnet, the walkthrough (`make demo`) and their shared tables.

Offers `cli` and `devnet` (snode-cli's and snode-devnet's entry points); the rest is their own.
"""

__all__ = [
    "cli", "devnet",
]
