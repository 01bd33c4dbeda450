"""snode-wallet: encrypted key file, balances from the daemon, transfers, registration, staking.

Offers `cli` (snode-wallet's entry point, `snode.wallet.cli:main`); the rest is its own.
"""

__all__ = [
    "cli",
]
