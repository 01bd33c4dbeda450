"""The devnet's processes: what `snode-devnet` keeps in its state file (each daemon's name, role,
address, pid and data dir) and how it starts, finds and stops them, always by pid, checking
first that the pid still runs that data dir (pids get reused)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.common.procs import process_args, snoded_args
from snode.params import DEVNET

STATE_FILE = "devnet.json"
IP_PREFIX = os.environ.get("SNODE_DEVNET_IP_PREFIX", "127.0.100.")
"""Node i listens on IP_PREFIX + (i + 1); tests set another prefix to run beside a devnet."""
FAUCET_COINS = 100_000_000
FAUCET_OUTPUTS = 20
STOP_TIMEOUT = 15.0


class DevnetError(click.ClickException):
    """One line `snode-devnet: <reason>` on stderr, exit code 1 (printed by `entry.run_command`)."""


AUTHORITY = "authority"
SERVICE_NODE = "service_node"


@dataclass
class NodeEntry:
    """One daemon of the devnet: `authority` (the genesis authority, not a service node) or
    `node<i>` (a service node)."""

    name: str
    role: str
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
    test_forks: list[str] = field(default_factory=list)
    """The `--test-fork NAME@HEIGHT` values every daemon and wallet of it runs with (`up
    --test-fork`): kept in devnet.json, so that `start` and the wallets follow the same schedule."""

    @classmethod
    def load(cls, base_dir: Path) -> "Devnet":
        path = base_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text())
            return cls(base_dir, [NodeEntry(**n) for n in raw["nodes"]], [str(f) for f in raw.get("test_forks", [])])
        except FileNotFoundError:
            raise DevnetError(f"no devnet in {base_dir} (no {STATE_FILE}); start one with: "
                              f"{command_line(base_dir, 'up')}") from None
        except (ValueError, KeyError, TypeError) as err:
            raise DevnetError(f"{path} is damaged or from an older snode-devnet ({err}); stop its "
                              "processes by hand and remove it") from None

    def save(self) -> None:
        tmp = self.base_dir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps({"nodes": [asdict(n) for n in self.nodes], "test_forks": self.test_forks},
                                  indent=2) + "\n")
        os.replace(tmp, self.base_dir / STATE_FILE)

    @property
    def faucet_dir(self) -> Path:
        return self.base_dir / "wallets"

    @property
    def authority(self) -> NodeEntry:
        return self.nodes[0]

    @property
    def service_nodes(self) -> list[NodeEntry]:
        return [n for n in self.nodes if n.role == SERVICE_NODE]

    def entry(self, name: str) -> NodeEntry:
        """The process named `name`; DevnetError listing the names otherwise."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise DevnetError(f"no process named '{name}' in this devnet; the names are "
                          + ", ".join(n.name for n in self.nodes))


def devnet_node(base_dir: Path, name: str | None) -> NodeEntry | None:
    """The devnet process that `snode-cli --devnet` talks to: the one named `name`, or without
    a name the first that runs (the authority unless it was stopped); None when no name was
    given and base_dir holds no devnet (the network's default address then)."""
    if name is None and not (base_dir / STATE_FILE).exists():
        return None
    devnet = Devnet.load(base_dir)
    if name is not None:
        return devnet.entry(name)
    return next((n for n in devnet.nodes if is_our_process(n)), devnet.nodes[0] if devnet.nodes else None)


def command_line(base_dir: Path, subcommand: str) -> str:
    """The snode-devnet command an operator can paste to run `subcommand` on the devnet in
    base_dir: the dir is always named (the default depends on the directory it is run from) and
    quoted for a shell."""
    return f"snode-devnet --base-dir {shlex.quote(str(base_dir))} {subcommand}"


def default_base_dir() -> Path:
    return Path(os.environ.get("SNODE_DEVNET_DIR", Path.cwd() / "devnet"))


_OUR_DIR = re.compile(r"authority|node[0-9]+")
"""The daemons' data dirs `up` creates in a base dir (each with its `daemon.out`), beside
`wallets/` (with the faucet's wallet), `genesis.json` and the state file."""


def _ours(path: Path) -> bool:
    """True for an entry of a base dir that `up` made: names alone are not enough (a base dir
    may be a directory of the operator's own, such as a home with a `wallets` folder)."""
    if path.is_symlink():
        return False
    if _OUR_DIR.fullmatch(path.name):
        return (path / "daemon.out").is_file()
    if path.name == "wallets":
        return (path / "faucet.wallet").is_file()
    return path.name == STATE_FILE and path.is_file()


def clear_stopped(base_dir: Path) -> list[str]:
    """Remove what `up` wrote into base_dir for an earlier devnet, once none of its processes
    runs (a `down` keeps the data dirs for their logs): an old node's data dir holds another
    genesis' chain, so a new devnet cannot start on it. Only what `up` made goes (`_ours`, and
    the genesis beside it); the names removed, sorted."""
    if (base_dir / STATE_FILE).exists():
        running = [n for n in Devnet.load(base_dir).nodes if is_our_process(n)]
        if running:
            raise DevnetError(f"a devnet is already running in {base_dir}; stop it with: "
                              f"{command_line(base_dir, 'down')}")
    try:
        ours = sorted(p for p in base_dir.iterdir() if _ours(p))
    except FileNotFoundError:
        return []
    except OSError as err:
        raise DevnetError(f"--base-dir: cannot read {base_dir}: {err.strerror or err}") from None
    genesis = base_dir / "genesis.json"
    if ours and genesis.is_file() and not genesis.is_symlink():
        ours.append(genesis)
    for path in ours:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return sorted(p.name for p in ours)


def _daemon_args(entry: NodeEntry, genesis: Path, seed: str | None, test_forks: Sequence[str]) -> list[str]:
    args = snoded_args("devnet", entry.data_dir, entry.ip, DEVNET.rpc_port, DEVNET.p2p_port) + [f"--genesis={genesis}"]
    args += [f"--test-fork={fork}" for fork in test_forks]
    if entry.role == SERVICE_NODE:
        args += ["--service-node", f"--quorumnet-port={DEVNET.quorumnet_port}"]
    if seed is not None:
        args.append(f"--add-priority-node={seed}")
    return args


def spawn(entry: NodeEntry, genesis: Path, seed: str | None, test_forks: Sequence[str] = ()) -> int:
    log = Path(entry.data_dir) / "daemon.out"
    Path(entry.data_dir).mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(_daemon_args(entry, genesis, seed, test_forks), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def is_our_process(entry: NodeEntry) -> bool:
    """True when entry.pid still runs snoded on entry's data dir (pids get reused)."""
    cmdline = process_args(entry.pid)
    return cmdline is not None and f"--data-dir={entry.data_dir}".encode() in cmdline


def wait_rpc(entry: NodeEntry, timeout: float = 30) -> None:
    client = RpcClient(entry.rpc_url, timeout=5)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.call("get_info")
                return
            except (RpcUnavailable, RpcFailure):
                if not is_our_process(entry):
                    log = Path(entry.data_dir) / "daemon.out"
                    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
                    raise DevnetError(f"{entry.name} exited during start-up{_how_it_ended(entry.pid)}: "
                                      f"{' | '.join(tail)}") from None
                if time.monotonic() > deadline:
                    raise DevnetError(
                        f"{entry.name} did not answer on {entry.rpc_url} within {timeout:.0f} s"
                    ) from None
                time.sleep(0.1)
    finally:
        client.close()


def _how_it_ended(pid: int) -> str:
    """` (exit code N)` or ` (killed by SIGX)` for a child of this process that has ended, read
    with waitpid (which also reaps it); empty when that is not known (not our child)."""
    try:
        ended, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return ""
    if ended != pid:
        return ""
    if os.WIFSIGNALED(status):
        return f" (killed by {signal.Signals(os.WTERMSIG(status)).name})"
    return f" (exit code {os.waitstatus_to_exitcode(status)})"


def stop_node(entry: NodeEntry) -> bool:
    """SIGTERM this node's own pid, wait, SIGKILL if needed; False if it was not running."""
    if not is_our_process(entry):
        return False
    os.kill(entry.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while is_our_process(entry) and time.monotonic() < deadline:
        _reap(entry.pid)
        time.sleep(0.1)
    if is_our_process(entry):
        os.kill(entry.pid, signal.SIGKILL)
    _reap(entry.pid)
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
