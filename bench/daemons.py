"""Daemon plumbing shared by the benchmarks that run a real `snoded --regtest` (rpc, sync, proof).

A `Daemon` is one `python -m snode.app.daemon --regtest --non-interactive` subprocess on a 127.x
address of its own with its own data dir, optionally under cProfile; it is stopped by its own pid
(SIGTERM, or the signal asked for, then SIGKILL after a timeout). `loopback_ip` gives each
benchmark a distinct range of 127.x addresses (the *_NET bases below), so that concurrent runs,
the benchmarks and the test suite never collide.
"""

from __future__ import annotations

import compileall
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from snode.api.client import RpcClient, RpcUnavailable
from snode.common.procs import child_pids, cpu_seconds, memory_mib, snoded_args, stop_process

BENCH_DIR: Final = Path(__file__).resolve().parent
REPO_DIR: Final = BENCH_DIR.parent

NET_WIDTH: Final = 31
PROOF_NET: Final = 129
SYNC_NET: Final = PROOF_NET + NET_WIDTH
RPC_NET: Final = SYNC_NET + NET_WIDTH
BLOCKS_NET: Final = RPC_NET + NET_WIDTH
"""Second-octet bases of the benchmarks' 127.x ranges (NET_WIDTH values each, a run's picked by its
pid): 129-252, above the test suite's 1-128 (tests/functional/framework.py TEST_OCTETS)."""
BENCH_OCTETS: Final = range(PROOF_NET, BLOCKS_NET + NET_WIDTH)

P2P_PORT: Final = 38090
RPC_PORT: Final = 38091
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 20.0
POLL_S: Final = 0.05


def log(bench: str, text: str) -> None:
    """Progress on stderr, so that stdout holds the figures."""
    print(f"{bench}: {text}", file=sys.stderr, flush=True)


def loopback_ip(second_octet_base: int, last: int) -> str:
    """A 127.x address of this run in the range starting at second_octet_base (one of the *_NET)."""
    pid = os.getpid()
    return f"127.{second_octet_base + pid % NET_WIDTH}.{(pid // NET_WIDTH) % 250}.{last}"


def child_env() -> dict[str, str]:
    """The environment for children: `snode` and `bench` importable as in this process."""
    env = dict(os.environ)
    paths = [str(REPO_DIR / "src"), str(REPO_DIR)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


@functools.cache
def compile_sources() -> None:
    """Byte-compile snode's sources, as an installed daemon has them. Where
    PYTHONDONTWRITEBYTECODE is set (as on our CI machines), an editable install would otherwise
    compile every module again at each daemon start: about 0.1 s of its start-up."""
    compileall.compile_dir(REPO_DIR / "src", quiet=1)


def process_tree_cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(the process's own, its living children's) user + system CPU seconds so far: a daemon and
    its signature workers (Linux /proc); None where unknown."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own, sum(cpu_seconds(child) or 0.0 for child in child_pids(pid))


class Daemon:
    """One `snoded --regtest` (or `network`) subprocess on its own 127.x address, optionally
    under cProfile."""

    def __init__(
        self, ip: str, data_dir: Path, *, name: str = "", extra: Sequence[str] = (),
        rpc_port: int = RPC_PORT, p2p_port: int = P2P_PORT, profile_to: Path | None = None,
        stderr: Path | None = None, stdout: Path | None = None, rpc_timeout: float = 60,
        start_timeout: float = START_TIMEOUT, stop_timeout: float = STOP_TIMEOUT,
        log: Callable[[str], None] | None = None, network: str = "regtest",
        env: dict[str, str] | None = None,
    ) -> None:
        """extra: more daemon arguments; profile_to: run it under cProfile writing there (stop it
        with SIGINT so the file is written); stderr: its stderr file (default
        data_dir/../NAME.stderr); stdout: its stdout file (default discarded)."""
        self.ip = ip
        self.data_dir = data_dir
        self.name = name
        self.rpc_port = rpc_port
        self.p2p_port = p2p_port
        runner = ["-m", "cProfile", "-o", str(profile_to)] if profile_to is not None else []
        self.args = [*snoded_args(network, data_dir, ip, rpc_port, p2p_port, python=runner), *extra]
        self.stderr = stderr if stderr is not None else data_dir.parent / f"{name or 'snoded'}.stderr"
        self.stdout = stdout
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log = log
        self.env = env or {}
        """More environment variables for it (SNODE_PROFILE, say)."""
        self.rpc = RpcClient(f"http://{ip}:{rpc_port}", timeout=rpc_timeout)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def label(self) -> str:
        return f"{self.name} snoded" if self.name else "snoded"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> float:
        """Start the process (without waiting for its RPC); the perf_counter time just before."""
        compile_sources()
        with open(self.stderr, "ab") as err, \
                (open(self.stdout, "wb") if self.stdout is not None else open(os.devnull, "wb")) as out:
            started = time.perf_counter()
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         env={**child_env(), **self.env})
        return started

    def info(self) -> dict[str, Any] | None:
        """get_info, or None while the RPC is not up; RuntimeError if the process died."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.label} exited with code {self.proc.returncode}:\n{self.log_tail()}")
        try:
            result: dict[str, Any] = self.rpc.call("get_info")
            return result
        except RpcUnavailable:
            return None

    def wait_for_rpc(self) -> dict[str, Any]:
        """Poll get_info until the RPC answers; its get_info."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            info = self.info()
            if info is not None:
                return info
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.label}'s RPC did not come up in {self.start_timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(POLL_S)

    def call(self, method: str, params: Any = None) -> Any:
        return self.rpc.call(method, params)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """`sig` (SIGTERM, or SIGINT for cProfile) by pid; SIGKILL if it has not stopped after
        stop_timeout."""
        self.rpc.close()
        if self.proc is not None and stop_process(self.proc, self.stop_timeout, sig) and self.log:
            self.log(f"{self.label} did not stop within {self.stop_timeout:.0f} s of signal {sig}; killed it")

    def peak_rss_mb(self) -> float | None:
        """The process's peak resident memory (VmHWM) in MiB, None if it cannot be read."""
        return memory_mib(self.pid, "VmHWM")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the process (all its threads) and its live child
        processes (signature workers) have used so far."""
        cpu = cpu_seconds(self.pid)
        if cpu is None:
            raise RuntimeError(f"no CPU time for {self.label} (pid {self.pid})")
        return cpu + sum(cpu_seconds(child) or 0.0 for child in child_pids(self.pid))

    def workers_rss_mb(self) -> float:
        """Resident memory of its live child processes (signature workers), in MiB."""
        return sum(memory_mib(child) or 0.0 for child in child_pids(self.pid))

    def log_tail(self, chars: int = 3_000) -> str:
        return self.stderr.read_text(errors="replace")[-chars:] if self.stderr.exists() else ""
