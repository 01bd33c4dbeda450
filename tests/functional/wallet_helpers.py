"""Shared steps for wallet tests: run the real `snode-wallet` program as an operator does.

`Wallet` is one wallet file driven through `--command` (and `--yes`), the way a script or an
operator at a shell uses it; the terminal tests (pexpect) reuse its files and arguments. Every
run is checked for a stack trace, since nothing a user types may produce one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snode.api.credentials import Login, read_cookie
from snode.core.address import decode_address
from snode.core.units import parse_coins
from snode.params import REGTEST
from tests.functional.framework import assert_equal, fund, scaled, wait_until
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
        return {"balance": parse_coins(pairs["Balance"].split()[0]),
                "unlocked": parse_coins(pairs["Unlocked balance"].split()[0])}


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


class WalletServer:
    """A real `snode-wallet --rpc-bind ip:<regtest wallet RPC port>` process serving `wallet`,
    and calls to it that send the login in its cookie file (`<wallet file>.rpc-cookie`).

    Started when made: it has answered get_address with the wallet's address. `stop()` sends
    SIGTERM (SIGKILL when it does not stop in time) and returns the exit status."""

    def __init__(self, wallet: Wallet, ip: str, log_path: Path, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, login: Login | None = None) -> None:
        self.url = f"http://{ip}:{REGTEST.wallet_rpc_port}/json_rpc"
        self.cookie = wallet.path.with_name(wallet.path.name + ".rpc-cookie")
        self.log_path = log_path
        with open(log_path, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "snode.wallet", *wallet.args(), "--rpc-bind",
                 f"{ip}:{REGTEST.wallet_rpc_port}", *extra],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.headers = {"Authorization": login.header()} if login is not None else {}

        def up() -> dict[str, Any] | None:
            assert self.process.poll() is None, log_path.read_text()
            if "listening on" not in log_path.read_text():
                return None
            if login is None and self.cookie.exists():
                self.headers = {"Authorization": read_cookie(self.cookie).header()}
            return self.call("get_address")
        try:
            assert_equal(wait_until(up, what="wallet RPC")["result"], {"address": wallet.address})
        except BaseException:
            self.stop()
            raise

    def post(self, body: Any, headers: dict[str, str] | None = None, *,
             login: bool = True) -> tuple[int, dict[str, str], str]:
        """One POST of `body` (JSON) with the login (unless not `login`) and `headers`: (HTTP
        status, headers, text)."""
        sent = {"Content-Type": "application/json", **(self.headers if login else {}), **(headers or {})}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=scaled(30)) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One JSON-RPC call with the login; the whole reply (HTTP 200 asserted)."""
        status, _, text = self.post({"jsonrpc": "2.0", "id": "1", "method": method, "params": params})
        assert status == 200, text
        reply: dict[str, Any] = json.loads(text)
        return reply

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            self.process.kill()  # never leave it running; the caller's status check then fails
            self.process.wait()
        return self.process.returncode
