"""Multi-node test framework, modelled on Bitcoin Core's test/functional/test_framework.

Real `snoded` processes on distinct 127.x.y.z addresses, each with its own data dir under the
test's tmp dir; a node handle is also an RPC proxy (`node.get_info()`); every wait polls a
condition with a timeout scaled by SNODE_TIMEOUT_FACTOR (`scaled`), and so does every socket,
subprocess and fake-peer timeout; every process is stopped by its own pid when the test ends,
pass or fail, and on failure its log tail is printed and its data dir kept.

A test narrates its steps as Bitcoin Core's do with `self.log.info`: each module takes
`log = narrator(__name__)` and logs one line per step, so `pytest -o log_cli=true` tells the
story as it runs and a failure's "Captured log call" shows the step it failed in. Helpers shared
by several test modules live here or in other modules not named test_* (`sn_helpers`,
`wallet_helpers`, `p2p`): a test module never imports another's tests.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.common.procs import child_pids, snoded_args, stat_fields, stop_process

TIMEOUT_FACTOR = float(os.environ.get("SNODE_TIMEOUT_FACTOR", "1"))
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
# SNODE_TEST_SLOT moves a whole run to its own addresses (127.<slot*8 + worker + 1>.*.*), so that
# test runs of several checkouts on one machine never share an address.
MAX_SLOT = 15
TEST_OCTETS = range(1, 8 * MAX_SLOT + 8 + 1)
"""The second octets of the tests' 127.x addresses (slots 0-15, workers 0-7): 1-128. The
benchmarks take 129-255 (bench/daemons.py), so a benchmark and a test run never collide."""
_SLOT = int(os.environ.get("SNODE_TEST_SLOT", "0"))
if not 0 <= _SLOT <= MAX_SLOT:
    raise SystemExit(f"SNODE_TEST_SLOT={_SLOT}: use 0 to {MAX_SLOT} (8 x slot + worker + 1 is an address's "
                     "second octet, below the benchmarks' range)")
_WORKER_INDEX = (int(_WORKER[2:]) if _WORKER[2:].isdigit() else 0) + 8 * _SLOT
_node_counter = itertools.count()


def scaled(seconds: float) -> float:
    """A timeout stretched by SNODE_TIMEOUT_FACTOR, for slow or busy machines."""
    return seconds * TIMEOUT_FACTOR


def narrator(module: str) -> logging.Logger:
    """The logger a test module narrates its steps with, one `log.info` line per step.

    Its level is set here because the root logger's default (WARNING) would drop the lines
    before pytest's capture and live-log handlers see them.
    """
    logger = logging.getLogger(module)
    logger.setLevel(logging.INFO)
    return logger


def next_loopback_ip() -> str:
    """A loopback address no other node of this run uses: 127.<worker+1>.<n/250>.<n%250+1>."""
    n = next(_node_counter) + (os.getpid() % 50) * 1000
    return f"127.{_WORKER_INDEX + 1}.{(n // 250) % 250}.{n % 250 + 1}"


def wildcard_port() -> int:
    """A port for a daemon of this run bound on 0.0.0.0 (every address, the loopback ones too):
    below the ephemeral range and apart from the networks' ports, one per worker of each slot,
    so that it never takes a port another run's daemons bind on their own 127.x address."""
    return 29100 + _WORKER_INDEX


JSONRPCException = RpcFailure
"""A JSON-RPC error answer (Bitcoin Core's name)."""


def wait_until(predicate: Callable[[], Any], *, timeout: float = 30, what: str = "condition",
               interval: float = 0.05) -> Any:
    """Poll predicate until it returns something truthy; fail the test after timeout seconds."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {scaled(timeout):.0f} s waiting for {what}")
        time.sleep(interval)  # the poll interval: the one sleep of the suite, inside wait_until


def strike_at(moment: float) -> None:
    """Return at wall-clock time `moment` (`time.time()`'s scale): a fault test's chosen instant to
    strike (a kill inside a round, a start-up, a sync), not a wait for a condition, which is
    `wait_until`'s."""
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)  # the chosen instant of a fault: with wait_until's, the suite's one sleep


def strike_at_random(rng: random.Random, low: float, high: float) -> None:
    """`strike_at` a moment drawn uniformly between `low` and `high` seconds from now."""
    strike_at(time.time() + rng.uniform(low, high))


def fuzz_settings(examples: int) -> settings:
    """Hypothesis settings of a fuzzing run against a real daemon: `examples` requests, no
    deadline (a daemon's answer takes what it takes)."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def process_gone(pid: int) -> bool:
    """True when process pid has ended (a zombie waiting for its parent counts as ended)."""
    fields = stat_fields(pid)
    return fields is None or fields[0] == "Z"


def assert_equal(actual: Any, expected: Any, what: str = "") -> None:
    if actual != expected:
        raise AssertionError(f"{what + ': ' if what else ''}{actual!r} != {expected!r}")


def assert_raises_rpc_error(code: int | None, text: str | None, fn: Callable[..., Any],
                            *args: Any, **kwargs: Any) -> JSONRPCException:
    """Call fn; it must fail with a JSON-RPC error of this code whose message contains text."""
    try:
        fn(*args, **kwargs)
    except JSONRPCException as err:
        if code is not None and err.code != code:
            raise AssertionError(f"expected error code {code}, got {err.code}: {err.message}") from None
        if text is not None and text not in err.message:
            raise AssertionError(f"expected {text!r} in error message {err.message!r}") from None
        return err
    raise AssertionError("no JSON-RPC error was raised")


class TestNode:
    """One snoded process; attribute access is an RPC call: node.get_info()."""

    __test__ = False  # a helper, not a test class

    def __init__(self, index: int, base_dir: Path, *, network: str = "regtest",
                 extra_args: list[str] | None = None) -> None:
        self.index = index
        self.network = network
        self.ip = next_loopback_ip()
        self.data_dir = base_dir / f"node{index}"
        self.rpc_port = 38091
        self.p2p_port = 38090
        self.extra_args = list(extra_args or [])
        self.nofile: tuple[int, int] | None = None
        """RLIMIT_NOFILE (soft, hard) the daemon starts with (None: this process's)."""
        self.process: subprocess.Popen[bytes] | None = None
        self.rpc = RpcClient(f"http://{self.ip}:{self.rpc_port}")
        self._stdout = self.data_dir.parent / f"node{index}.stdout"
        self._stderr = self.data_dir.parent / f"node{index}.stderr"

    def args(self, extra: list[str] | None = None) -> list[str]:
        args = snoded_args(self.network, self.data_dir, self.ip, self.rpc_port, self.p2p_port)
        return args + ["--log-level=2"] + self.extra_args + list(extra or [])

    def start(self, extra: list[str] | None = None, *, wait: bool = True,
              env: dict[str, str] | None = None) -> None:
        """Start the daemon (`env`: variables added to this process's environment)."""
        assert self.process is None or self.process.poll() is not None, "node already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self._stdout, "ab") as out, open(self._stderr, "ab") as err:
            nofile = self.nofile
            self.process = subprocess.Popen(
                self.args(extra), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env={**os.environ, **env} if env else None,
                preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None)
        if wait:
            self.wait_for_rpc()

    def wait_for_rpc(self, timeout: float = 30) -> None:
        def up() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(
                    f"node{self.index} exited with code {self.process.returncode} during start-up:\n"
                    + self.log_tail()
                )
            try:
                self.rpc.call("get_info")
                return True
            except RpcUnavailable:
                return False
        wait_until(up, timeout=timeout, what=f"node{self.index} RPC")

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(params: Any = None, **kwargs: Any) -> Any:
            return self.rpc.call(method, params if params is not None else (kwargs or None))
        return call

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, wait; SIGKILL if it does not stop in time. Returns the exit code."""
        self.rpc.close()
        if self.process is None:
            return 0
        if stop_process(self.process, scaled(timeout)):
            raise AssertionError(f"node{self.index} did not stop within {scaled(timeout):.0f} s of SIGTERM")
        return self.process.returncode

    def child_pids(self) -> list[int]:
        """Process ids of the daemon's live child processes (its signature-verifying workers)."""
        if not self.running:
            return []
        assert self.process is not None
        return child_pids(self.process.pid)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.rpc.close()
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for path in (self._stderr, self._stdout):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path.name} ---\n" + "\n".join(text))
        return "\n".join(out)

    def stderr_text(self) -> str:
        return self._stderr.read_text(errors="replace") if self._stderr.exists() else ""


def run_snoded(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run snoded to completion (for start-up errors): stdin closed, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "snode.app.daemon", *args], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=scaled(timeout),
    )


def snode_cli(node_or_url: TestNode | str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `snode-cli --rpc <node's URL> args...` to completion, output captured."""
    url = node_or_url if isinstance(node_or_url, str) else f"http://{node_or_url.ip}:{node_or_url.rpc_port}"
    return subprocess.run([sys.executable, "-m", "snode.tools.cli", "--rpc", url, *args],
                          capture_output=True, text=True, timeout=scaled(60), stdin=subprocess.DEVNULL)


class NodeSet:
    """The nodes of one test; stops all of them at the end."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.nodes: list[TestNode] = []

    def add(self, *, network: str = "regtest", extra_args: list[str] | None = None,
            start: bool = True) -> TestNode:
        node = TestNode(len(self.nodes), self.base_dir, network=network, extra_args=extra_args)
        self.nodes.append(node)
        if start:
            node.start()
        return node

    def stop_all(self) -> None:
        for node in self.nodes:
            try:
                node.stop()
            except AssertionError:
                pass
            finally:
                if node.process is not None and node.process.poll() is None:
                    node.process.kill()
                    node.process.wait()


@pytest.fixture
def nodes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[NodeSet]:
    """Start nodes with nodes.add(...); all are stopped by pid afterwards, logs shown on failure."""
    node_set = NodeSet(tmp_path)
    yield node_set
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        for node in node_set.nodes:
            print(f"\nnode{node.index} data dir kept at {node.data_dir}\n{node.log_tail()}")
    node_set.stop_all()


# --- chain helpers: real signed transactions built with the core, sent over RPC ---------------

def spendable_outputs(node: TestNode, key: Any) -> list[Any]:
    """The unlocked outputs of key's address that no mempool transaction spends."""
    from snode.core.address import encode_address
    from snode.core.state import UtxoEntry
    from snode.core.transactions import OutPoint
    from snode.params import NETWORKS

    params = NETWORKS[node.network]
    result = node.get_outputs(address=encode_address(params.address_prefix, key.public))
    in_pool = {s for tx in node.get_mempool()["transactions"] for s in tx["spends"]}
    return [
        (OutPoint(bytes.fromhex(o["txid"]), o["index"]), UtxoEntry(key.public, o["amount"], o["unlock_height"]))
        for o in result["outputs"]
        if o["unlock_height"] <= result["height"] + 1 and f"{o['txid']}:{o['index']}" not in in_pool
    ]


def send_spend(node: TestNode, key: Any, outputs: list[Any], payload: Any) -> str:
    """Build, sign and send a transaction from key's outputs; its txid."""
    from snode.core.encoding import encode
    from snode.core.txbuilder import build_spend
    from snode.params import NETWORKS

    tx = build_spend(spendable_outputs(node, key), key, outputs, payload, NETWORKS[node.network])
    return node.send_raw_transaction(tx_hex=encode(tx).hex())["txid"]


def faucet_key() -> Any:
    """The published regtest faucet key that owns the regtest genesis funds."""
    from snode.core.crypto import SigningKey
    from snode.params import REGTEST_FAUCET_SEED

    return SigningKey(REGTEST_FAUCET_SEED)


def fund(node: TestNode, payments: dict[bytes, int]) -> str:
    """Pay public keys from the regtest faucet in one transaction (not mined yet)."""
    from snode.core.transactions import Transfer, TxOut

    return send_spend(node, faucet_key(), [TxOut(k, a) for k, a in payments.items()], Transfer())


def address_of(node: TestNode, key: Any) -> str:
    """key's address on node's network."""
    from snode.core.address import encode_address
    from snode.params import NETWORKS

    return encode_address(NETWORKS[node.network].address_prefix, key.public)


# --- P2P helpers ---------------------------------------------------------------------------------

def connect_nodes(a: TestNode, b: TestNode, timeout: float = 30) -> None:
    """Make a dial b (and keep the connection); wait until both list each other."""
    a.add_peer(address=f"{b.ip}:{b.p2p_port}")

    def linked() -> bool:
        return (any(p["address"].startswith(b.ip + ":") for p in a.get_peers()["peers"])
                and any(p["address"].startswith(a.ip + ":") for p in b.get_peers()["peers"]))
    wait_until(linked, timeout=timeout, what=f"node{a.index} <-> node{b.index} connection")


def sync_blocks(nodes: list[TestNode], timeout: float = 60) -> None:
    """Wait until every node has the same tip; on failure list every node's tip."""
    tips: list[tuple[int, str]] = []

    def same() -> bool:
        nonlocal tips
        tips = [(n.get_height()["height"], n.get_height()["hash"]) for n in nodes]
        return len({h for _, h in tips}) == 1
    try:
        wait_until(same, timeout=timeout, what="all nodes on one tip")
    except AssertionError:
        listing = "\n".join(f"  node{n.index}: height {h} {t[:16]}" for n, (h, t) in zip(nodes, tips))
        raise AssertionError(f"tips did not converge within {scaled(timeout):.0f} s:\n{listing}") from None


def sync_mempools(nodes: list[TestNode], timeout: float = 30) -> None:
    def same() -> bool:
        pools = [sorted(t["txid"] for t in n.get_mempool()["transactions"]) for n in nodes]
        return all(p == pools[0] for p in pools)
    wait_until(same, timeout=timeout, what="equal mempools")
