"""snode-devnet as an operator uses it: up prints where things are, status shows a table, down
stops exactly the processes up started; and the whole demo (the issue's lifecycle, through the
real wallet and CLI) completes against real daemons.

`snode-devnet` runs as a child process on this worker's own 127.x.251.* addresses; the test reads
what it prints and checks the daemons it started by their pids in /proc.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.functional.framework import _WORKER_INDEX, assert_equal, narrator, scaled, wait_until

log = narrator(__name__)


def devnet(base: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `snode-devnet --base-dir base args...` to completion, output captured."""
    env = dict(os.environ, SNODE_DEVNET_IP_PREFIX=f"127.{_WORKER_INDEX + 1}.251.")
    return subprocess.run([sys.executable, "-m", "snode.tools.devnet", "--base-dir", str(base), *args],
                          capture_output=True, text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=env)


def pid_alive(pid: int) -> bool:
    """True while process pid runs (a zombie counts as gone)."""
    return Path(f"/proc/{pid}").exists() and b"zombie" not in Path(f"/proc/{pid}/status").read_bytes().lower()


def test_up_status_down(tmp_path):
    base = tmp_path / "net"
    log.info("devnet up with 2 nodes: it says where, and both daemons run")
    out = devnet(base, "up", "--nodes", "2")
    pids = []
    try:
        assert_equal(out.returncode, 0, out.stderr)
        assert f"running in {base}" in out.stdout
        pids = [int(line.split("pid ")[1].split(",")[0]) for line in out.stdout.splitlines() if "pid " in line]
        assert_equal(len(pids), 2)
        assert all(pid_alive(p) for p in pids)
        assert (base / "wallets" / "faucet.wallet").is_file()
        log.info("devnet up again: refused, already running")
        again = devnet(base, "up", "--nodes", "2")
        assert_equal(again.returncode, 1)
        assert "already running" in again.stderr
        log.info("devnet status: a table of both nodes")
        status = devnet(base, "status")
        assert_equal(status.returncode, 0, status.stderr)
        assert "node0" in status.stdout and "node1" in status.stdout and "not registered" in status.stdout
    finally:
        log.info("devnet down: both daemons stop")
        stopped = devnet(base, "down")
    assert_equal(stopped.returncode, 0, stopped.stderr)
    assert "stopped 2 of 2" in stopped.stdout
    wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=20, what="devnet daemons gone")
    log.info("devnet status after down: no devnet")
    missing = devnet(base, "status")
    assert_equal(missing.returncode, 1)
    assert "no devnet in" in missing.stderr


def test_demo_runs_the_operator_flow(tmp_path):
    log.info("Run the whole demo; its output must state every step of the lifecycle")
    out = devnet(tmp_path / "demo", "demo", timeout=300)
    assert_equal(out.returncode, 0, out.stdout[-3000:] + out.stderr[-2000:])
    for claim in ("node2 shows Await", "node2 is full: 3 contributors", "node1 and node2 are Active",
                  "node1 is payable", "node1 is Decomm, decommission_count 1, reason missed_uptime_proofs",
                  "node1 is Active again", "rewards arrived", "demo complete", "stopped 3 daemons;"):
        assert claim in out.stdout, claim
