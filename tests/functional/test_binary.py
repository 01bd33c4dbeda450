"""The single-file executables (issue #14, item 12): `make binary` builds dist/snoded,
dist/snode-wallet and dist/snode-cli; copied to an empty directory and run with a minimal PATH
and no virtualenv, each answers --version, and snoded serves a regtest chain that snode-cli reads.
It also starts its signature workers as `<itself> -m snode.node.verify_worker`.

Run by `make binary-test` (which builds them first); start-up times are logged for the docs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from snode.api.client import RpcClient, RpcUnavailable
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled, wait_until

pytestmark = pytest.mark.binary
log = narrator(__name__)
DIST = Path(__file__).resolve().parents[2] / "dist"
PROGRAMS = ("snoded", "snode-wallet", "snode-cli")


@pytest.fixture
def bare(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The three executables alone in a directory, and an environment with nothing of ours."""
    missing = [p for p in PROGRAMS if not (DIST / p).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not built: `make binary-test` builds them first")
    where = tmp_path / "bin"
    where.mkdir()
    for program in PROGRAMS:
        shutil.copy2(DIST / program, where / program)
    return where, {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=scaled(60),
                          stdin=subprocess.DEVNULL)


def _serving(daemon: subprocess.Popen[str], ip: str) -> bool:
    assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
    client = RpcClient(f"http://{ip}:38091", timeout=1)
    try:
        client.call("get_info")
    except RpcUnavailable:
        return False
    finally:
        client.close()
    return True


def _start_and_stop(command: list[str], data_dir: Path, env: dict[str, str]) -> float:
    """Seconds from start to a served get_info, for one daemon started and stopped by its pid."""
    ip = next_loopback_ip()
    started = time.monotonic()
    daemon = subprocess.Popen([*command, "--regtest", "--non-interactive", f"--data-dir={data_dir}",
                               f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _serving(daemon, ip), timeout=30, what="snoded serving")
        return time.monotonic() - started
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=scaled(20))
        if daemon.stderr is not None:
            daemon.stderr.close()


def test_the_executables_run_without_python_of_ours(bare, tmp_path):
    where, env = bare
    log.info("--version of each, from %s with PATH=%s and no virtualenv", where, env["PATH"])
    for program in PROGRAMS:
        out = _run([str(where / program), "--version"], env)
        detail = " (peer protocol 5; forks v1, v2)" if program == "snoded" else ""
        assert_equal((out.returncode, out.stdout.strip()), (0, f"{program} v0.2.0{detail}"))
    log.info("A copy under another name says how to use it")
    shutil.copy2(where / "snoded", where / "other")
    out = _run([str(where / "other")], env)
    assert out.returncode == 2 and "run this file as one of snoded, snode-wallet, snode-cli" in out.stderr
    log.info("The signature worker entry: it serves until its input closes, then exits 0")
    out = _run([str(where / "snoded"), "-m", "snode.node.verify_worker"], env)
    assert_equal(out.returncode, 0, out.stderr)

    log.info("Start-up to a served get_info: the venv's snoded, then the frozen one")
    venv_seconds = _start_and_stop([sys.executable, "-m", "snode.app.daemon"], tmp_path / "venv-data",
                                   dict(os.environ))
    log.info("venv snoded: start to serving in %.2f s", venv_seconds)
    log.info("snoded serves a regtest chain; snode-cli reads it")
    ip = next_loopback_ip()
    args = [str(where / "snoded"), "--regtest", "--non-interactive", f"--data-dir={tmp_path / 'data'}",
            f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}"]
    started = time.monotonic()
    daemon = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _serving(daemon, ip), timeout=30, what="the frozen snoded serving its admin RPC")
        log.info("frozen snoded: start to serving in %.2f s", time.monotonic() - started)
        out = _run([str(where / "snode-cli"), "--rpc", f"http://{ip}:38091", "call", "generate_blocks",
                    '{"blocks": 2}'], env)
        assert_equal(out.returncode, 0, out.stderr)
        info = json.loads(_run([str(where / "snode-cli"), "--rpc", f"http://{ip}:38091", "call",
                                "get_info"], env).stdout)
        assert_equal((info["height"], info["network"]), (2, "regtest"))
    finally:
        daemon.send_signal(signal.SIGTERM)  # by its pid
        try:
            daemon.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        if daemon.stderr is not None:
            daemon.stderr.close()
    assert_equal(daemon.returncode, 0)
