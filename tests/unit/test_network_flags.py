"""The three command lines take one network option set (`common.network_flags`): the same flags
with the same help, and more than one refused in one line."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from snode.app.cli import snoded_command
from snode.common.network_flags import NETWORK_FLAGS, given_networks
from snode.tools.cli import cli as snode_cli
from snode.wallet.cli import cli as snode_wallet


def _flags(command: click.Command) -> dict[str, str | None]:
    return {p.name: p.help for p in command.params if isinstance(p, click.Option) and p.name in NETWORK_FLAGS}


@pytest.mark.parametrize("command", [snoded_command(lambda config: None), snode_cli, snode_wallet],
                         ids=["snoded", "snode-cli", "snode-wallet"])
def test_every_command_line_has_the_same_network_flags(command: click.Command):
    assert _flags(command) == NETWORK_FLAGS


def test_the_flags_given_in_help_order():
    assert given_networks(False, False, False) == []
    assert given_networks(True, False, True) == ["testnet", "regtest"]


def test_snode_cli_refuses_two_network_flags_in_one_line():
    result = CliRunner().invoke(snode_cli, ["--regtest", "--testnet", "status"])
    assert result.exit_code == 1
    assert "--testnet and --regtest: give at most one network flag" in result.output
