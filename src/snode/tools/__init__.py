"""Operator tools: snode-cli, snode-devnet, the walkthrough (`make demo`) and their shared tables."""
