"""snode-devnet as a test drives it: a child process on this worker's own 127.x.251.* addresses
(so that two workers, or an operator's devnet on 127.0.100.*, never share an address), its status
rows, and the pid its state file holds for a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from snode.tools.devnet_procs import STATE_FILE
from tests.functional.framework import _WORKER_INDEX, scaled

ENV = dict(os.environ, SNODE_DEVNET_IP_PREFIX=f"127.{_WORKER_INDEX + 1}.251.")


def devnet_command(base: Path, *args: str) -> list[str]:
    """`snode-devnet --base-dir base args...` (run it with `env=ENV`)."""
    return [sys.executable, "-m", "snode.tools.devnet", "--base-dir", str(base), *args]


def devnet(base: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `snode-devnet --base-dir base args...` to completion, output captured."""
    return subprocess.run(devnet_command(base, *args), capture_output=True, text=True, timeout=scaled(timeout),
                          stdin=subprocess.DEVNULL, env=ENV)


def rows(base: Path) -> list[dict[str, Any]]:
    """`snode-devnet status --json`: a row per process."""
    return json.loads(devnet(base, "status", "--json").stdout)


def pid_of(base: Path, name: str) -> int | None:
    """The pid the devnet's state file holds for process `name` (written as soon as it is spawned)."""
    try:
        nodes = json.loads((base / STATE_FILE).read_text())["nodes"]
    except (OSError, ValueError, KeyError):
        return None
    return next((n["pid"] for n in nodes if n["name"] == name), None)
