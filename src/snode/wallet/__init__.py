"""snode-wallet: encrypted key file, balances from the daemon, transfers, registration, staking."""
