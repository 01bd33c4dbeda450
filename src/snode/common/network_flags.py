"""The network flags of every command line (snoded, snode-cli, snode-wallet): one option set, so
that the three take the same flags with the same help and read them the same way. Mainnet is
the default; each command refuses more than one flag in its own words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

NETWORK_FLAGS: Final = {
    "testnet": "Use the test network.",
    "devnet": "Use a local development network.",
    "regtest": "Use the regression-test network (blocks on demand).",
}
"""Each flag's network (its `params.NETWORKS` name) and its help, in --help's order."""


def network_flags(command: F) -> F:
    """Give a click command --testnet, --devnet and --regtest: boolean keywords of the same
    names, to hand to `given_networks`."""
    for name, help_text in reversed(NETWORK_FLAGS.items()):
        command = click.option(f"--{name}", name, is_flag=True, help=help_text)(command)
    return command


def given_networks(testnet: bool, devnet: bool, regtest: bool) -> list[str]:
    """The networks whose flags were given, in --help's order (none: mainnet)."""
    return [name for name, on in zip(NETWORK_FLAGS, (testnet, devnet, regtest)) if on]
