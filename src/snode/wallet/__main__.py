"""`python -m snode.wallet`: the same as the `snode-wallet` command."""

from snode.wallet.cli import main

main()
