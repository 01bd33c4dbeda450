"""Daemon processes for tests, benchmarks and tools: the command line that starts a snoded, how
one is stopped, and what Linux's /proc shows of it and its signature-verifying workers. Every
reading is None (or empty) where the process is gone or the system has no /proc; nothing here
raises for that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def snoded_args(
    network: str, data_dir: Path | str, ip: str, rpc_port: int, p2p_port: int, *, python: Sequence[str] = (),
) -> list[str]:
    """The command line of a snoded on `network` with its data dir, its admin RPC and P2P on
    `ip`, reading no console; `python`: interpreter options before `-m` (cProfile's)."""
    return [
        sys.executable, *python, "-m", "snode.app.daemon", *([f"--{network}"] if network != "mainnet" else []),
        "--non-interactive", f"--data-dir={data_dir}", f"--rpc-admin={ip}:{rpc_port}", f"--p2p-bind-ip={ip}",
        f"--p2p-bind-port={p2p_port}",
    ]


def stop_process(proc: subprocess.Popen[Any], timeout: float, sig: int = signal.SIGTERM) -> bool:
    """Send `sig` to this child by its pid; SIGKILL it if it has not stopped after `timeout`
    seconds. True if it had to be killed."""
    if proc.poll() is not None:
        return False
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
        return False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return True


def child_pids(pid: int) -> list[int]:
    """Live child processes of pid (its signature-verifying workers, for a snoded)."""
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return children


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: [0] the state (`Z` a zombie), [1]
    the parent's pid, [11] and [12] user and system CPU in clock ticks."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process pid so far, all its threads."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int, field: str = "VmRSS") -> float | None:
    """A memory line of /proc/PID/status in MiB: `VmRSS` (resident now) or `VmHWM` (its peak)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return None


def process_args(pid: int) -> list[bytes] | None:
    """The arguments process pid was started with."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def open_descriptors(pid: int) -> int | None:
    """How many file descriptors process pid has open."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def all_pids() -> list[int]:
    """Every process's pid."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
