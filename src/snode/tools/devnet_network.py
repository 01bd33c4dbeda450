"""What snode-devnet does to a local network: `up` (genesis, daemons, faucet wallet, and the
operators' registrations), `down`, `restart`, the wallets it runs (`run_wallet`, `create_wallet`)
and the status of its processes (`node_rows`, `status_table`). The command line (`tools.devnet`)
and the demo (`tools.devnet_demo`) both use it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemonic import Mnemonic
from rich import box
from rich.table import Table

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.types import BlockResult, InfoResult, RegistrationCmdResult, ServiceNodeKeyResult
from snode.core.address import InvalidAddress, decode_address, encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.params import COIN, DEVNET, ScheduleError, schedule_test_forks
from snode.tools.devnet_procs import (
    AUTHORITY,
    FAUCET_COINS,
    FAUCET_OUTPUTS,
    IP_PREFIX,
    SERVICE_NODE,
    STATE_FILE,
    Devnet,
    DevnetError,
    NodeEntry,
    clear_stopped,
    command_line,
    is_our_process,
    spawn,
    stop_node,
    wait_rpc,
)


def run_wallet(devnet: Devnet, name: str, *args: str,
               daemon: NodeEntry | None = None) -> subprocess.CompletedProcess[str]:
    """Run `snode-wallet args` on the devnet's wallet `name` (its file and password file in the
    faucet dir) against `daemon`, or the first daemon still running."""
    wallets = devnet.faucet_dir
    # The first daemon still running (the story may have stopped the authority).
    node = daemon or next((n for n in devnet.nodes if is_our_process(n)), devnet.nodes[0])
    cmd = [sys.executable, "-m", "snode.wallet", "--devnet", *(f"--test-fork={f}" for f in devnet.test_forks),
           f"--wallet-file={wallets / (name + '.wallet')}",
           f"--password-file={wallets / (name + '.password')}", f"--daemon-address={node.ip}:{DEVNET.rpc_port}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def _write_private(path: Path, text: str) -> None:
    """Write a secret (a key, a password, seed words) to a file of mode 0600 from its creation."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def create_wallet(devnet: Devnet, name: str, seed: bytes | None = None) -> str:
    """Create wallet `name` (from `seed` if given) with a random password; its address."""
    wallets = devnet.faucet_dir
    wallets.mkdir(parents=True, exist_ok=True)
    password = wallets / f"{name}.password"
    _write_private(password, secrets.token_urlsafe(16) + "\n")
    if seed is not None:
        words = wallets / f"{name}.seed"
        _write_private(words, Mnemonic("english").to_mnemonic(seed) + "\n")
        out = run_wallet(devnet, name, f"--restore-seed-file={words}", "--command", "address")
    else:
        out = run_wallet(devnet, name, "--generate", "--command", "address")
    if out.returncode != 0:
        raise DevnetError(f"could not create wallet {name}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip().splitlines()[-1].split()[-1]


def up(base_dir: Path, count: int, ip_prefix: str = IP_PREFIX, *, register: int = 0,
       say: Callable[[str], None] = lambda _: None, test_forks: tuple[str, ...] = ()) -> Devnet:
    """Write the genesis, start the authority and `count` service-node daemons, make the faucet
    wallet; register the last `register` nodes, each from an operator wallet of its own (paid
    by the genesis): with all of them, the network reaches service-node block production alone."""
    if count < 1 or count > 200:
        raise DevnetError("--nodes must be between 1 and 200")
    if not ip_prefix.startswith("127.") or ip_prefix.count(".") != 3 or not ip_prefix.endswith("."):
        raise DevnetError(f"IP prefix '{ip_prefix}' must be a loopback prefix such as 127.0.100.")
    try:
        schedule_test_forks(DEVNET, test_forks)
    except ScheduleError as err:
        raise DevnetError(f"--test-fork: {err}") from None
    if clear_stopped(base_dir):
        say(f"removed the stopped devnet's data dirs, wallets and genesis from {base_dir}")
    base_dir.mkdir(parents=True, exist_ok=True)
    authority = SigningKey(os.urandom(32))
    faucet_seed = os.urandom(32)
    operators = [os.urandom(32) for _ in range(min(register, count))]
    _write_genesis(base_dir / "genesis.json", authority, SigningKey(faucet_seed), operators)
    devnet = Devnet(base_dir, [NodeEntry(AUTHORITY, AUTHORITY, f"{ip_prefix}1", 0, str(base_dir / AUTHORITY))],
                    list(test_forks))
    devnet.nodes += [NodeEntry(f"node{i}", SERVICE_NODE, f"{ip_prefix}{i + 1}", 0, str(base_dir / f"node{i}"))
                     for i in range(1, count + 1)]
    key_file = Path(devnet.authority.data_dir) / "authority_key"
    key_file.parent.mkdir(parents=True, exist_ok=True)
    _write_private(key_file, authority.seed.hex() + "\n")
    for entry in devnet.nodes:
        entry.pid = spawn(entry, base_dir / "genesis.json", _seed_of(devnet, entry), devnet.test_forks)
        devnet.save()
    try:
        for entry in devnet.nodes:
            wait_rpc(entry)
    except DevnetError as err:  # no half-started devnet stays behind; the data dirs keep the logs
        down(devnet)
        raise DevnetError(f"{err.message}; the devnet's other daemons were stopped") from None
    create_wallet(devnet, "faucet", faucet_seed)
    if operators:
        register_nodes(devnet, devnet.service_nodes[count - len(operators):], operators, say)
    return devnet


def _write_genesis(path: Path, authority: SigningKey, faucet: SigningKey, operators: list[bytes]) -> None:
    prefix = DEVNET.address_prefix
    # Several faucet outputs, so the faucet can pay several wallets before its change unlocks;
    # one output per operator (its stake and a fee) when the nodes are registered by `up`.
    outputs = [GenesisOutput(encode_address(prefix, faucet.public), FAUCET_COINS * COIN // FAUCET_OUTPUTS)
               for _ in range(FAUCET_OUTPUTS)]
    outputs += [GenesisOutput(encode_address(prefix, SigningKey(seed).public), DEVNET.staking_requirement + COIN)
                for seed in operators]
    path.write_bytes(encode_genesis(GenesisDoc(
        network=DEVNET.name, timestamp=int(time.time()), authorities=[authority.public.hex()],
        outputs=outputs,
    )))


def _seed_of(devnet: Devnet, entry: NodeEntry) -> str | None:
    """The peer a daemon dials first: the authority, for every service node."""
    return None if entry.role == AUTHORITY else devnet.authority.p2p


def register_nodes(devnet: Devnet, entries: list[NodeEntry], seeds: list[bytes],
                   say: Callable[[str], None] = lambda _: None) -> None:
    """Each node's operator (a wallet restored from `seeds[i]`, funded by the genesis) asks its
    node for the registration command and pastes it into its wallet, as an operator does."""
    for entry, seed in zip(entries, seeds):
        name = f"{entry.name}-operator"
        address = create_wallet(devnet, name, seed)
        _wait_synced(entry)
        client = RpcClient(entry.rpc_url, timeout=30)
        try:
            cmd = client.call_typed("get_service_node_registration_cmd", {
                "operator_cut": "0", "contributor_addresses": [address],
                "contributor_amounts": [DEVNET.staking_requirement]}, RegistrationCmdResult).registration_cmd
        except (RpcUnavailable, RpcFailure) as err:
            raise DevnetError(f"{entry.name} gave no registration command: {err}") from None
        finally:
            client.close()
        out = run_wallet(devnet, name, "--command", cmd, "--yes", daemon=entry)
        if out.returncode != 0:
            raise DevnetError(f"{name} could not register {entry.name}: {(out.stdout + out.stderr).strip()}")
        say(f"{entry.name} registered by its operator ({address[:14]}...)")


FAUCET_AMOUNT = 1_000
"""Coins `snode-devnet faucet ADDRESS` pays when no amount is given."""


def faucet(devnet: Devnet, address: str, amount: str) -> str:
    """Pay `amount` coins (decimals allowed) from the devnet's faucet wallet to `address`; the
    transaction's id. DevnetError says, in one line, why not (a bad address or amount, a
    faucet whose coins wait for their unlock, no daemon running)."""
    try:
        decode_address(DEVNET.address_prefix, address)
    except InvalidAddress as err:
        raise DevnetError(f"faucet: {err}") from None
    if not (devnet.faucet_dir / "faucet.wallet").is_file():
        raise DevnetError(f"this devnet has no faucet wallet ({devnet.faucet_dir / 'faucet.wallet'})")
    if not any(is_our_process(n) for n in devnet.nodes):
        raise DevnetError(f"no daemon of this devnet is running; start one with: "
                          f"{command_line(devnet.base_dir, 'start ' + devnet.authority.name)}")
    out = run_wallet(devnet, "faucet", "--command", f"transfer {address} {amount}", "--yes")
    lines = (out.stdout + out.stderr).strip().splitlines()
    sent = next((line for line in lines if line.startswith("Transaction sent.")), None)
    if out.returncode != 0 or sent is None:
        why = next((line for line in reversed(lines) if line.strip()), f"exit code {out.returncode}")
        raise DevnetError(f"the faucet could not pay {address}: {why.removeprefix('Error: ')}")
    return sent.rsplit(" ", 1)[-1]


def _wait_synced(entry: NodeEntry, timeout: float = 60) -> None:
    client = RpcClient(entry.rpc_url, timeout=5)
    deadline = time.monotonic() + timeout
    try:
        while True:
            info = client.call_typed("get_info", None, InfoResult)
            if info.target_height == 0 and info.height > 0:
                return
            if time.monotonic() > deadline:
                raise DevnetError(f"{entry.name} did not sync within {timeout:.0f} s")
            time.sleep(0.2)
    finally:
        client.close()


def restart(devnet: Devnet, entry: NodeEntry) -> None:
    """Start a stopped process again with the same data dir."""
    entry.pid = spawn(entry, devnet.base_dir / "genesis.json", _seed_of(devnet, entry), devnet.test_forks)
    devnet.save()
    wait_rpc(entry)


def down(devnet: Devnet) -> int:
    stopped = sum(stop_node(n) for n in devnet.nodes)
    (devnet.base_dir / STATE_FILE).unlink(missing_ok=True)
    return stopped


def node_rows(devnet: Devnet) -> list[dict[str, Any]]:
    """One row per process: its name, role, pid, RPC URL, service-node key, status and height."""
    rows = []
    for entry in devnet.nodes:
        row: dict[str, Any] = {"name": entry.name, "role": entry.role, "pid": entry.pid,
                               "rpc": entry.rpc_url, "sn_pubkey": None, "status": "stopped",
                               "height": None, "proof": None}
        if is_our_process(entry):
            row.update(_live_row(entry))
        rows.append(row)
    return rows


def _live_row(entry: NodeEntry) -> dict[str, Any]:
    client = RpcClient(entry.rpc_url, timeout=5)
    try:
        info = client.call_typed("get_info", None, InfoResult)
        row: dict[str, Any] = {"height": info.height}
        if entry.role == AUTHORITY:
            row["status"] = AUTHORITY
        else:
            row["sn_pubkey"] = client.call_typed("get_service_node_key", None,
                                                 ServiceNodeKeyResult).service_node_pubkey
            state, _, proof = info.status_line.partition("SN: ")[2].partition(", proof: ")
            row["status"], row["proof"] = state, proof or None
        return row
    except (RpcUnavailable, RpcFailure) as err:
        return {"status": f"not answering ({err})"}
    finally:
        client.close()


def trusted_point(devnet: Devnet) -> str:
    """`HEIGHT:HASH` of the newest final snapshot height of the devnet's chain (a multiple of
    `snapshot_interval` at or below the immutable height, at fork v2 or later), as a running node
    of it sees it: what a new node's `--trusted-checkpoint` takes to start from that snapshot."""
    params = schedule_test_forks(DEVNET, tuple(devnet.test_forks))
    for entry in devnet.nodes:
        if not is_our_process(entry):
            continue
        client = RpcClient(entry.rpc_url, timeout=5)
        try:
            final = client.call_typed("get_info", None, InfoResult).immutable_height
            height = final // params.snapshot_interval * params.snapshot_interval
            if height <= 0 or not params.rules_at(height).state_root:
                raise DevnetError(f"no snapshot height is final yet (immutable height {final}; snapshots are "
                                  f"every {params.snapshot_interval} blocks from fork v2: schedule it with "
                                  "up --test-fork v2@H)")
            block = client.call_typed("get_block", {"height": height}, BlockResult)
            return f"{height}:{block.hash}"
        except (RpcUnavailable, RpcFailure):
            continue
        finally:
            client.close()
    raise DevnetError("no daemon of the devnet answers: start it with 'snode-devnet up'")


def status_table(devnet: Devnet) -> Any:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("name", "role", "address", "status", "height", "proof age", "pid"):
        table.add_column(column)
    for row in node_rows(devnet):
        table.add_row(row["name"], row["role"], row["rpc"].removeprefix("http://"), row["status"],
                      str(row["height"] if row["height"] is not None else "-"), row["proof"] or "-",
                      str(row["pid"]))
    return table
