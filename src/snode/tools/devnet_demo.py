"""`snode-devnet demo` (and `make demo`): the operator flow against real daemons.

Everything goes through the operator's own tools: `snode-cli register-cmd` asks a daemon for its
registration command, `snode-wallet --command ... --yes` pastes it, contributors run `stake`,
and the table is what `get_service_nodes` says. Each claim of the story is checked; a claim that
does not hold ends the demo with exit code 1. The devnet is stopped at the end, also on failure.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.types import InfoResult, ServiceNodeKeyResult, ServiceNodesResult, ServiceNodeState
from snode.core.units import counted
from snode.params import DEVNET
from snode.tools.devnet_network import create_wallet, down, restart, run_wallet, status_table, up
from snode.tools.devnet_procs import Devnet, DevnetError, command_line, stop_node
from snode.tools.tables import make_console, service_node_table

NODES = 5
"""Service-node daemons: node1 (solo) and node2 (pool) are registered in the story; node3 to
node5 by their operators as the devnet starts, so that five active nodes take over block
production and one can be stopped without stopping production."""
PRE_REGISTERED = 3


class DemoFailed(Exception):
    """A claim of the story did not hold."""


class Story:
    """Narration plus a live view of the network (plain text when not on a terminal)."""

    def __init__(self, devnet: Devnet) -> None:
        self.devnet = devnet
        self.console = make_console()
        self.lines: list[str] = []
        self.live: Live | None = None
        self.hub = RpcClient(devnet.nodes[2].rpc_url, timeout=10)  # node2: never stopped in the story
        self.started = time.monotonic()

    def __enter__(self) -> "Story":
        if self.console.is_terminal:
            self.live = Live(self._view(), console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._view())
            self.live.__exit__(*exc)
        self.hub.close()

    def records(self) -> list[ServiceNodeState]:
        try:
            listed = self.hub.call_typed("get_service_nodes", None, ServiceNodesResult[ServiceNodeState])
            return listed.service_node_states
        except (RpcUnavailable, RpcFailure):
            return []

    def table(self) -> Table:
        """The service-node table as snode-cli `nodes` shows it."""
        return service_node_table(msgspec.to_builtins(self.records()), now=int(time.time()))

    def _view(self) -> Group:
        recent = "\n".join(self.lines[-12:])
        return Group(Text(recent), Text(""), self.table(), Text(""), status_table(self.devnet))

    def say(self, text: str) -> None:
        stamp = f"[{time.monotonic() - self.started:5.1f}s] "
        self.lines.append(stamp + text)
        if self.live is not None:
            self.live.update(self._view())
        else:
            self.console.print(stamp + text, highlight=False)

    def show(self) -> None:
        """Print the tables (plain mode) after a step."""
        if self.live is None:
            self.console.print(self.table())

    def wait(self, what: str, predicate: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if self.live is not None:
                self.live.update(self._view())
            if time.monotonic() > deadline:
                raise DemoFailed(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    def record(self, pubkey: str) -> ServiceNodeState | None:
        return next((r for r in self.records() if r.service_node_pubkey == pubkey), None)

    def has(self, pubkey: str, claim: Callable[[ServiceNodeState], bool]) -> ServiceNodeState | None:
        """The node's record when it is on the chain and `claim` holds for it, else None."""
        record = self.record(pubkey)
        return record if record is not None and claim(record) else None


def _service_node_key(devnet: Devnet, node: int) -> str:
    client = RpcClient(devnet.nodes[node].rpc_url)
    try:
        return client.call_typed("get_service_node_key", None, ServiceNodeKeyResult).service_node_pubkey
    finally:
        client.close()


def _cli(devnet: Devnet, node: int, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--rpc", devnet.nodes[node].rpc_url, *args],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise DemoFailed(f"snode-cli {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def _wallet_ok(devnet: Devnet, name: str, *args: str) -> str:
    out = run_wallet(devnet, name, *args)
    if out.returncode != 0:
        raise DemoFailed(f"snode-wallet ({name}) {' '.join(args)} failed: {(out.stdout + out.stderr).strip()}")
    return out.stdout.strip()


def _balance(devnet: Devnet, name: str) -> dict[str, str]:
    text = _wallet_ok(devnet, name, "--command", "balance")
    # The amount of `Balance: 12.5 coins` (its first word; the unit follows it).
    return {k.strip(): v.split()[0] for k, _, v in (line.partition(":") for line in text.splitlines()) if v.strip()}


def run_story(devnet: Devnet, story: Story) -> None:
    """The operator's story, act by act (each act checks its claims)."""
    addresses = _fund_wallets(devnet, story)
    solo_pk, pool_pk = _register_solo_and_pool(devnet, story, addresses)
    _activate(devnet, story, solo_pk, pool_pk)
    _service_nodes_take_over(devnet, story)
    _decommission_and_back(devnet, story, solo_pk)
    _rewards(devnet, story)
    _unlock(devnet, story, pool_pk)


def _fund_wallets(devnet: Devnet, story: Story) -> dict[str, str]:
    say = story.say
    say(f"devnet of the authority and {len(devnet.service_nodes)} service-node daemons on "
        f"{devnet.authority.ip}.. (base dir {devnet.base_dir}); the authority holds the genesis key "
        f"and produces a block every {DEVNET.target_block_time} s while the network is small; "
        f"node3..node{NODES} were registered by their operators as the devnet started")
    names = ["solo-operator", "pool-operator", "alice", "bob"]
    addresses = {n: create_wallet(devnet, n) for n in names}
    say("wallets created: " + ", ".join(f"{n} {a[:14]}..." for n, a in addresses.items()))
    for name, coins in (("solo-operator", "200010"), ("pool-operator", "100010"), ("alice", "60010"), ("bob", "40010")):
        _wallet_ok(devnet, "faucet", "--command", f"transfer {addresses[name]} {coins}", "--yes")
    say("faucet paid each wallet; outputs unlock 10 blocks after their block")
    # Every wallet's: the four payments may land in two blocks, a block apart.
    story.wait("the wallets' coins to unlock",
               lambda: all(_balance(devnet, name).get("Unlocked balance", "0") not in ("0", "0.0")
                           for name in names), 60)
    say("solo-operator: " + ", ".join(f"{k} {v}" for k, v in _balance(devnet, "solo-operator").items()))
    return addresses


def _register_solo_and_pool(devnet: Devnet, story: Story, addresses: dict[str, str]) -> tuple[str, str]:
    say = story.say
    solo_pk, pool_pk = (_service_node_key(devnet, i) for i in (1, 2))
    cmd = _cli(devnet, 1, "register-cmd", "--address", addresses["solo-operator"], "--amount", "200000")
    say(f"node1 registration command: {cmd[:60]}...")
    _wallet_ok(devnet, "solo-operator", "--command", cmd, "--yes")
    say("solo-operator pasted it into snode-wallet and answered Yes")
    cmd = _cli(devnet, 2, "register-cmd", "--cut", "5", "--address", addresses["pool-operator"], "--amount", "100000")
    _wallet_ok(devnet, "pool-operator", "--command", cmd, "--yes")
    say("pool-operator registered node2 with 100,000 coins and a 5 % operator cut")
    pool = story.wait("node2 on the chain", lambda: story.record(pool_pk), 30)
    if pool.funded or pool.status != "Await":
        raise DemoFailed(f"a half-filled pool node should be Await, not {pool.status}")
    say("node2 shows Await: it needs 100,000 more coins from contributors; node1 is funded and "
        "shows Decomm (funded, not active) until the quorum accepts its first uptime proof")
    story.show()
    _wallet_ok(devnet, "alice", "--command", f"stake {pool_pk} 60000", "--yes")
    say(f"alice: stake {pool_pk[:12]}... 60000")
    # "100%" means what the node still needs on the chain, so bob waits for alice's stake.
    story.wait("alice's stake to be mined",
               lambda: story.has(pool_pk, lambda r: r.total_contributed >= 160_000 * 10**9), 30)
    _wallet_ok(devnet, "bob", "--command", f"stake {pool_pk} 100%", "--yes")
    say(f"bob: stake {pool_pk[:12]}... 100% (of what node2 still needs)")
    pool = story.wait("node2 to be full", lambda: story.has(pool_pk, lambda r: r.funded), 30)
    if len(pool.contributors) != 3 or pool.total_contributed != pool.staking_requirement:
        raise DemoFailed(f"node2 should have 3 contributors and be full: {pool}")
    say("node2 is full: 3 contributors, total_contributed == staking_requirement")
    return solo_pk, pool_pk


def _activate(devnet: Devnet, story: Story, solo_pk: str, pool_pk: str) -> None:
    say = story.say
    story.wait("the quorum to activate node1 and node2 after their uptime proofs",
               lambda: all(story.has(k, lambda r: r.active) for k in (solo_pk, pool_pk)), 40)
    say("node1 and node2 are Active: the quorum accepted their uptime proofs")
    story.show()
    story.wait("node1 to become payable (4 blocks after activation)",
               lambda: story.has(solo_pk, lambda r: r.payable), 30)
    say("node1 is payable: rewards begin")


def _service_nodes_take_over(devnet: Devnet, story: Story) -> None:
    say = story.say
    story.wait("block production to pass to the service nodes",
               lambda: _info(devnet, 2).block_production == "service_nodes", 60)
    handover = _info(devnet, 2).height
    say(f"{NODES} service nodes are active and payable: from height {handover + 1} the service "
        "nodes produce the blocks, each round's leader with its validators' signatures")
    stop_node(devnet.authority)
    say("stopped the authority (SIGTERM to its pid): the network no longer needs it")
    story.wait("8 blocks from service-node leaders", lambda: _info(devnet, 2).height >= handover + 8, 60)
    say("the last blocks, as snode-cli blocks shows them:\n" + _cli(devnet, 2, "blocks", "--count", "6"))
    final = story.wait("a checkpoint to make blocks final",
                       lambda: _info(devnet, 2).immutable_height > handover and _info(devnet, 2).immutable_height, 60)
    say(f"checkpoint quorums signed the chain: blocks up to height {final} are final, no "
        "reorganisation can undo them")


def _decommission_and_back(devnet: Devnet, story: Story, solo_pk: str) -> None:
    say = story.say
    say("stopping node1 (SIGTERM to its pid) to show a decommission; the other four keep producing")
    stop_node(devnet.nodes[1])
    rec = story.wait("the quorum to decommission node1",
                     lambda: story.has(solo_pk, lambda r: not r.active), 90)
    if rec.decommission_count != 1 or rec.status != "Decomm":
        raise DemoFailed(f"node1 should be Decomm with decommission_count 1: {rec}")
    say(f"node1 is Decomm, decommission_count 1, reason {rec.last_decommission_reason}")
    story.show()
    restart(devnet, devnet.nodes[1])
    say("node1 restarted with the same data dir: same key, same registration")
    story.wait("the quorum to recommission node1", lambda: story.has(solo_pk, lambda r: r.active), 90)
    say("node1 is Active again")
    story.show()


def _rewards(devnet: Devnet, story: Story) -> None:
    say = story.say
    for name in ("solo-operator", "pool-operator", "alice", "bob"):
        bal = _balance(devnet, name)
        say(f"{name}: Balance {bal.get('Balance')}, Unlocked {bal.get('Unlocked balance')}")
    alice = float(_balance(devnet, "alice").get("Balance", "0"))
    if not alice > 10.0:
        raise DemoFailed(f"alice's rewards did not arrive (balance {alice})")
    say("rewards arrived in the contributors' wallets (reward outputs unlock 10 blocks after their block)")


def _unlock(devnet: Devnet, story: Story, pool_pk: str) -> None:
    say = story.say
    _wallet_ok(devnet, "bob", "--command", f"request_stake_unlock {pool_pk}", "--yes")
    rec = story.wait("bob's unlock request to be mined",
                     lambda: story.has(pool_pk, lambda r: r.requested_unlock_height > 0), 30)
    say(f"bob asked to unlock his stake on node2 (request_stake_unlock): node2 keeps working until "
        f"height {rec.requested_unlock_height}, then every stake on it comes back")
    story.show()
    story.wait("node2 to leave and return its stakes", lambda: story.record(pool_pk) is None,
               DEVNET.unlock_duration * DEVNET.target_block_time + 60)
    returned = [line for line in _wallet_ok(devnet, "alice", "--command", "show_transfers").splitlines()
                if "stake returned: unlock" in line]
    if not returned:
        raise DemoFailed("alice's wallet does not show her returned stake")
    say("node2 left the list; alice, bob and pool-operator got their stakes back:\n" + returned[-1]
        + f"\n(spendable {DEVNET.unlock_confirmations} blocks after that block, like any output)")


def _info(devnet: Devnet, node: int) -> InfoResult:
    client = RpcClient(devnet.nodes[node].rpc_url, timeout=10)
    try:
        return client.call_typed("get_info", None, InfoResult)
    finally:
        client.close()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_demo(base_dir: Path | None, *, keep: bool = False) -> int:
    """Run the story on a new devnet in base_dir (a fresh temporary dir when None)."""
    started = time.monotonic()
    base = base_dir or Path(tempfile.mkdtemp(prefix="snode-demo-"))
    console = make_console()
    passed = False
    # A closed terminal (SIGHUP) or a SIGTERM must stop the daemons too, as Ctrl-C does.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        devnet = up(base, NODES, register=PRE_REGISTERED)
    except DevnetError as err:
        console.print(f"demo could not start the devnet: {err.format_message()}")
        return 1
    try:
        with Story(devnet) as story:
            run_story(devnet, story)
        console.print(f"demo complete in {time.monotonic() - started:.0f} s")
        passed = True
        return 0
    except (DemoFailed, DevnetError) as err:
        console.print(f"demo FAILED: {err}")
        console.print(f"logs are in {base}/*/daemon.out")
        return 1
    finally:
        if keep:
            console.print(f"the devnet keeps running; stop it with: {command_line(base, 'down')}")
        else:
            stopped = down(devnet)
            daemons = counted(stopped, "daemon")
            if passed and base_dir is None:
                shutil.rmtree(base, ignore_errors=True)
                console.print(f"stopped {daemons} and removed {base}")
            else:
                console.print(f"stopped {daemons}; data dirs kept in {base}")
