"""snode-devnet: a whole local network on one machine.

`up --nodes N` writes a genesis (fresh authority and faucet keys), starts N service-node daemons
on 127.0.100.x with their own data dirs under a base dir it prints, and creates a funded faucet
wallet. `status` shows a table, `down` stops exactly the processes `up` started (by pid, after
checking each pid still runs that data dir), `demo` runs the operator flow against real daemons.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
from mnemonic import Mnemonic
from rich import box
from rich.table import Table

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.params import COIN, DEVNET
from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.types import InfoResult
from snode.common.entry import run_command
from snode.tools.tables import make_console

STATE_FILE = "devnet.json"
IP_PREFIX = os.environ.get("SNODE_DEVNET_IP_PREFIX", "127.0.100.")
"""Node i listens on IP_PREFIX + (i + 1); tests set another prefix to run beside a devnet."""
FAUCET_COINS = 100_000_000
FAUCET_OUTPUTS = 20
STOP_TIMEOUT = 15.0


class DevnetError(click.ClickException):
    """One line `snode-devnet: <reason>` on stderr, exit code 1 (printed by `entry.run_command`)."""


@dataclass
class NodeEntry:
    index: int
    ip: str
    pid: int
    data_dir: str

    @property
    def rpc_url(self) -> str:
        return f"http://{self.ip}:{DEVNET.rpc_port}"

    @property
    def p2p(self) -> str:
        return f"{self.ip}:{DEVNET.p2p_port}"


@dataclass
class Devnet:
    base_dir: Path
    nodes: list[NodeEntry]

    @classmethod
    def load(cls, base_dir: Path) -> "Devnet":
        path = base_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text())
            return cls(base_dir, [NodeEntry(**n) for n in raw["nodes"]])
        except FileNotFoundError:
            raise DevnetError(f"no devnet in {base_dir} (no {STATE_FILE}); start one with 'snode-devnet up'") from None
        except (ValueError, KeyError, TypeError) as err:
            raise DevnetError(f"{path} is damaged ({err}); stop the processes by hand and remove it") from None

    def save(self) -> None:
        tmp = self.base_dir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps({"nodes": [asdict(n) for n in self.nodes]}, indent=2) + "\n")
        os.replace(tmp, self.base_dir / STATE_FILE)

    @property
    def faucet_dir(self) -> Path:
        return self.base_dir / "wallets"


def default_base_dir() -> Path:
    return Path(os.environ.get("SNODE_DEVNET_DIR", Path.cwd() / "devnet"))


def _daemon_args(entry: NodeEntry, genesis: Path, seed: str | None) -> list[str]:
    args = [sys.executable, "-m", "snode.app.daemon", "--devnet", "--service-node", "--non-interactive",
            f"--data-dir={entry.data_dir}", f"--genesis={genesis}",
            f"--rpc-admin={entry.ip}:{DEVNET.rpc_port}", f"--p2p-bind-ip={entry.ip}",
            f"--p2p-bind-port={DEVNET.p2p_port}", f"--quorumnet-port={DEVNET.quorumnet_port}"]
    if seed is not None:
        args.append(f"--add-priority-node={seed}")
    return args


def _spawn(entry: NodeEntry, genesis: Path, seed: str | None) -> int:
    log = Path(entry.data_dir) / "daemon.out"
    Path(entry.data_dir).mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(_daemon_args(entry, genesis, seed), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def _is_our_process(entry: NodeEntry) -> bool:
    """True when entry.pid still runs snoded on entry's data dir (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{entry.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"--data-dir={entry.data_dir}".encode() in cmdline


def _wait_rpc(entry: NodeEntry, timeout: float = 30) -> None:
    client = RpcClient(entry.rpc_url, timeout=5)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.call("get_info")
                return
            except (RpcUnavailable, RpcFailure):
                if not _is_our_process(entry):
                    log = Path(entry.data_dir) / "daemon.out"
                    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                    raise DevnetError(f"node{entry.index} exited during start-up: {' | '.join(tail)}") from None
                if time.monotonic() > deadline:
                    raise DevnetError(
                        f"node{entry.index} did not answer on {entry.rpc_url} within {timeout:.0f} s"
                    ) from None
                time.sleep(0.1)
    finally:
        client.close()


def _wallet(devnet: Devnet, name: str, *args: str, daemon: NodeEntry | None = None) -> subprocess.CompletedProcess[str]:
    wallets = devnet.faucet_dir
    node = daemon or devnet.nodes[0]
    cmd = [sys.executable, "-m", "snode.wallet", "--devnet", f"--wallet-file={wallets / (name + '.wallet')}",
           f"--password-file={wallets / (name + '.password')}", f"--daemon-address={node.ip}:{DEVNET.rpc_port}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def create_wallet(devnet: Devnet, name: str, seed: bytes | None = None) -> str:
    """Create wallet `name` (from `seed` if given) with a random password; its address."""
    wallets = devnet.faucet_dir
    wallets.mkdir(parents=True, exist_ok=True)
    password = wallets / f"{name}.password"
    password.write_text(secrets.token_urlsafe(16) + "\n")
    password.chmod(0o600)
    if seed is not None:
        words = wallets / f"{name}.seed"
        words.write_text(Mnemonic("english").to_mnemonic(seed) + "\n")
        words.chmod(0o600)
        out = _wallet(devnet, name, f"--restore-seed-file={words}", "--command", "address")
    else:
        out = _wallet(devnet, name, "--generate", "--command", "address")
    if out.returncode != 0:
        raise DevnetError(f"could not create wallet {name}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip().splitlines()[-1].split()[-1]


def up(base_dir: Path, count: int, ip_prefix: str = IP_PREFIX) -> Devnet:
    """Write the genesis, start `count` daemons and make the faucet wallet."""
    if count < 1 or count > 200:
        raise DevnetError("--nodes must be between 1 and 200")
    if not ip_prefix.startswith("127.") or ip_prefix.count(".") != 3 or not ip_prefix.endswith("."):
        raise DevnetError(f"IP prefix '{ip_prefix}' must be a loopback prefix such as 127.0.100.")
    if (base_dir / STATE_FILE).exists():
        running = [n for n in Devnet.load(base_dir).nodes if _is_our_process(n)]
        if running:
            raise DevnetError(f"a devnet is already running in {base_dir}; stop it with "
                              f"'snode-devnet --base-dir {base_dir} down'")
    base_dir.mkdir(parents=True, exist_ok=True)
    authority = SigningKey(os.urandom(32))
    faucet_seed = os.urandom(32)
    faucet = SigningKey(faucet_seed)
    genesis = base_dir / "genesis.json"
    genesis.write_bytes(encode_genesis(GenesisDoc(
        network=DEVNET.name, timestamp=int(time.time()), authorities=[authority.public.hex()],
        # Several outputs, so the faucet can pay several wallets before its change unlocks.
        outputs=[
            GenesisOutput(encode_address(DEVNET.address_prefix, faucet.public), FAUCET_COINS * COIN // FAUCET_OUTPUTS)
            for _ in range(FAUCET_OUTPUTS)
        ],
    )))
    devnet = Devnet(base_dir, [])
    for i in range(count):
        entry = NodeEntry(index=i, ip=f"{ip_prefix}{i + 1}", pid=0, data_dir=str(base_dir / f"node{i}"))
        if i == 0:
            Path(entry.data_dir).mkdir(parents=True, exist_ok=True)
            key_file = Path(entry.data_dir) / "authority_key"
            key_file.write_text(authority.seed.hex() + "\n")
            key_file.chmod(0o600)
        entry.pid = _spawn(entry, genesis, None if i == 0 else devnet.nodes[0].p2p)
        devnet.nodes.append(entry)
        devnet.save()
    for entry in devnet.nodes:
        _wait_rpc(entry)
    create_wallet(devnet, "faucet", faucet_seed)
    return devnet


def restart(devnet: Devnet, entry: NodeEntry) -> None:
    """Start a stopped node again with the same data dir."""
    entry.pid = _spawn(entry, devnet.base_dir / "genesis.json", None if entry.index == 0 else devnet.nodes[0].p2p)
    devnet.save()
    _wait_rpc(entry)


def stop_node(entry: NodeEntry) -> bool:
    """SIGTERM this node's own pid, wait, SIGKILL if needed; False if it was not running."""
    if not _is_our_process(entry):
        return False
    os.kill(entry.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _is_our_process(entry) and time.monotonic() < deadline:
        _reap(entry.pid)
        time.sleep(0.1)
    if _is_our_process(entry):
        os.kill(entry.pid, signal.SIGKILL)
    _reap(entry.pid)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def down(devnet: Devnet) -> int:
    stopped = sum(stop_node(n) for n in devnet.nodes)
    (devnet.base_dir / STATE_FILE).unlink(missing_ok=True)
    return stopped


def node_rows(devnet: Devnet) -> list[dict[str, Any]]:
    """One row per node: its own view of height and SN state."""
    rows = []
    for entry in devnet.nodes:
        row: dict[str, Any] = {"node": f"node{entry.index}", "address": f"{entry.ip}:{DEVNET.rpc_port}",
                               "status": "stopped", "height": "-", "proof": "-", "pid": entry.pid}
        if _is_our_process(entry):
            client = RpcClient(entry.rpc_url, timeout=5)
            try:
                info = client.call_typed("get_info", None, InfoResult)
                row["height"] = info.height
                sn_part = info.status_line.partition("SN: ")[2]
                row["status"], _, proof = sn_part.partition(", proof: ")
                row["proof"] = proof or "-"
            except (RpcUnavailable, RpcFailure) as err:
                row["status"] = f"not answering ({err})"
            finally:
                client.close()
        rows.append(row)
    return rows


def status_table(devnet: Devnet) -> Any:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column in ("node", "address", "SN status", "height", "proof age", "pid"):
        table.add_column(column)
    for row in node_rows(devnet):
        table.add_row(row["node"], row["address"], row["status"], str(row["height"]), row["proof"], str(row["pid"]))
    return table


@click.group(context_settings={"help_option_names": ["--help", "-h"]})
@click.option("--base-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the devnet lives [./devnet, or $SNODE_DEVNET_DIR].")
@click.pass_context
def cli(ctx: click.Context, base_dir: Path | None) -> None:
    """snode-devnet: a local service-node network on loopback (127.0.100.x)."""
    ctx.obj = (base_dir or default_base_dir()).resolve()
    ctx.meta["explicit_base_dir"] = base_dir is not None


@cli.command("up")
@click.option("--nodes", "count", default=3, show_default=True, help="Service-node daemons to start.")
@click.option("--ip-prefix", default=IP_PREFIX, show_default=True,
              help="Node i listens on <prefix><i+1> (or set SNODE_DEVNET_IP_PREFIX).")
@click.pass_obj
def up_cmd(base_dir: Path, count: int, ip_prefix: str) -> None:
    """Write a genesis, start the daemons and a funded faucet wallet."""
    devnet = up(base_dir, count, ip_prefix)
    click.echo(f"devnet of {count} nodes running in {base_dir}")
    click.echo(f"faucet wallet: {devnet.faucet_dir / 'faucet.wallet'} (password in faucet.password)")
    for n in devnet.nodes:
        click.echo(f"  node{n.index}: pid {n.pid}, admin RPC {n.rpc_url}, data dir {n.data_dir}")
    where = f" --base-dir {base_dir}" if base_dir != default_base_dir().resolve() else ""
    click.echo("stop it with: snode-devnet down" + where)


@cli.command()
@click.pass_obj
def status(base_dir: Path) -> None:
    """A table of the nodes: address, SN status, height, proof age."""
    make_console().print(status_table(Devnet.load(base_dir)))


@cli.command("down")
@click.pass_obj
def down_cmd(base_dir: Path) -> None:
    """Stop exactly the processes 'up' started."""
    devnet = Devnet.load(base_dir)
    click.echo(f"stopped {down(devnet)} of {len(devnet.nodes)} daemons in {base_dir}")


@cli.command()
@click.option("--keep", is_flag=True, help="Leave the devnet running at the end.")
@click.pass_context
def demo(ctx: click.Context, keep: bool) -> None:
    """The operator flow against real daemons, with a live table (a fresh temporary base dir
    unless --base-dir is given)."""
    from snode.tools.devnet_demo import run_demo

    sys.exit(run_demo(ctx.obj if ctx.meta.get("explicit_base_dir") else None, keep=keep))


def main(argv: list[str] | None = None) -> None:
    run_command(cli, "snode-devnet", argv)


if __name__ == "__main__":
    main()
