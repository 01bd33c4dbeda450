"""What the kill -9 loop (test_crash_loop.py) drives besides the devnet tool: RPC calls that may
find a daemon gone, and the faucet wallet sending transfers while daemons die."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from snode.api.client import RpcFailure, RpcUnavailable, call_once
from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.params import DEVNET
from tests.functional.framework import scaled

TXID = re.compile(r"Transaction ID: ([0-9a-f]{64})")


def answers(url: str, method: str, params: Any = None) -> Any:
    """`call_once`, or None while the daemon does not answer (starting, or just killed)."""
    try:
        return call_once(url, method, params)
    except (RpcUnavailable, RpcFailure, OSError):
        return None


def wallet(base: Path, daemon_rpc: str, *args: str) -> subprocess.Popen[str]:
    """The devnet's faucet wallet running `args`, talking to the daemon at `daemon_rpc`."""
    wallets = base / "wallets"
    address = daemon_rpc.removeprefix("http://").rstrip("/")
    return subprocess.Popen(
        [sys.executable, "-m", "snode.wallet", "--devnet", f"--wallet-file={wallets / 'faucet.wallet'}",
         f"--password-file={wallets / 'faucet.password'}", f"--daemon-address={address}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    """Wait for a wallet process (killed by its pid if it outlives `timeout`)."""
    try:
        out, err = proc.communicate(timeout=scaled(timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err


PAYEE = encode_address(DEVNET.address_prefix, SigningKey(bytes(range(32))).public)
WALLET_LOCK = threading.Lock()
"""One wallet process at a time on the faucet's wallet file (the loop's own send and the
spender's)."""


class Spender(threading.Thread):
    """Transactions flowing: the faucet pays 1 coin again and again through the authority (never
    killed), so that every transfer it reports sent must end up in a block."""

    def __init__(self, base: Path, authority_rpc: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.authority_rpc = authority_rpc
        self.sent: list[str] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            with WALLET_LOCK:
                code, out, err = finish(wallet(self.base, self.authority_rpc, "--command",
                                               f"transfer {PAYEE} 1", "--yes"))
            found = TXID.search(out)
            if code == 0 and found:
                self.sent.append(found[1])
            else:
                self.failures.append((err or out).strip()[-300:])
            self.stopping.wait(0.5)  # pace: about a transfer a second, not a wait for a condition

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=scaled(180))
