"""Shared steps for wallet tests: run the real `snode-wallet` program as an operator does.

`Wallet` is one wallet file driven through `--command` (and `--yes`), the way a script or an
operator at a shell uses it; the terminal tests (pexpect) reuse its files and arguments. Every
run is checked for a stack trace, since nothing a user types may produce one.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snode.core.address import decode_address
from snode.core.units import parse_coins
from snode.params import REGTEST
from tests.functional.framework import assert_equal, fund, scaled
from tests.functional.sn_helpers import SOLO


@dataclass(frozen=True)
class Run:
    """What one wallet invocation did."""

    rc: int
    """The exit status."""
    out: str
    """Everything written to standard output."""
    err: str
    """Everything written to standard error."""

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def txid(self) -> str:
        """The id of the transaction the run printed it sent."""
        printed = next(line for line in self.lines if "Transaction ID:" in line)
        return printed.split()[-1]


def run_wallet(args: list[str], stdin: str | None = None, timeout: float = 60,
               env: dict[str, str] | None = None) -> Run:
    """Run `snode-wallet args...` to completion with stdin (closed when None) and `env` (None:
    this process's environment); no traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "snode.wallet", *args], input=stdin if stdin is not None else "",
        capture_output=True, text=True, timeout=scaled(timeout), env=env,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return Run(done.returncode, done.stdout, done.stderr)


class Wallet:
    """One wallet file used through the real `snode-wallet` program."""

    def __init__(self, node: Any, tmp_path: Path, name: str, *, words: str | None = None) -> None:
        self.node = node
        self.path = tmp_path / f"{name}.wallet"
        self.password_file = tmp_path / f"{name}.password"
        self.password_file.write_text(f"password of {name}\n")
        if words is None:
            made = self.run("address", extra=["--generate"])
        else:
            seed_file = tmp_path / f"{name}.words"
            seed_file.write_text(words + "\n")
            made = self.run("address", extra=["--restore-seed-file", str(seed_file)])
        assert made.rc == 0, made.out + made.err
        self.address = made.lines[-1]
        self.public = decode_address(REGTEST.address_prefix, self.address)

    def args(self) -> list[str]:
        """The command line that opens this wallet against its node, without a command."""
        return ["--regtest", "--daemon-address", f"{self.node.ip}:{self.node.rpc_port}",
                "--wallet-file", str(self.path), "--password-file", str(self.password_file)]

    def run(self, command: str, *, yes: bool = False, stdin: str | None = None,
            extra: list[str] | None = None) -> Run:
        args = self.args() + (extra or []) + ["--command", command] + (["--yes"] if yes else [])
        return run_wallet(args, stdin)

    def ok(self, command: str, *, yes: bool = False) -> Run:
        """Run a command that must succeed."""
        result = self.run(command, yes=yes)
        assert result.rc == 0, f"{command!r} failed:\n{result.out}{result.err}"
        return result

    def refused(self, command: str, needle: str) -> str:
        """Run a command that must be refused: one Error line naming needle, exit 1, nothing sent."""
        before = self.node.get_mempool()["transactions"]
        result = self.run(command, yes=True)
        errors = [line for line in result.lines if line.startswith("Error:")]
        assert result.rc == 1, result.out
        assert len(errors) == 1 and needle in errors[0], result.out
        assert "Transaction ID" not in result.out
        assert_equal(self.node.get_mempool()["transactions"], before, "mempool after a refusal")
        return errors[0]

    def balances(self) -> dict[str, int]:
        """`balance`'s Balance and Unlocked balance lines, in atomic units."""
        out = self.ok("balance").lines
        pairs = dict(line.split(": ", 1) for line in out if ": " in line)
        return {"balance": parse_coins(pairs["Balance"]), "unlocked": parse_coins(pairs["Unlocked balance"])}


def registration_cmd(sn: Any, address: str, amount: int, cut: str = "0") -> str:
    """Daemon sn's registration command for one contributor (the operator at address)."""
    return sn.get_service_node_registration_cmd(
        operator_cut=cut, contributor_addresses=[address], contributor_amounts=[amount],
        staking_requirement=SOLO,
    )["registration_cmd"]


def mine(node: Any, blocks: int = 1) -> None:
    node.generate_blocks(blocks=blocks)


def funded(sn: Any, tmp_path: Path, payments: dict[str, int]) -> dict[str, Wallet]:
    """New wallets paid by the faucet in one transaction, unlocked."""
    wallets = {name: Wallet(sn, tmp_path, name) for name in payments}
    fund(sn, {wallets[n].public: amount for n, amount in payments.items()})
    mine(sn, REGTEST.unlock_confirmations + 1)
    return wallets
