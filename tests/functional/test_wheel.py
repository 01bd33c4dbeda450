"""The packages a release publishes (`make wheel-test` builds them into dist/ with `python -m
build`, which makes the wheel from the sdist, and checks them with `twine check` first): the
wheel installed into a fresh venv outside the repository gives working programs, with no source
tree on sys.path, and the sdist holds what a rebuild needs and no test artefacts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from snode import __version__
from snode.api.client import RpcClient, RpcUnavailable
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled, wait_until

pytestmark = pytest.mark.wheel
log = narrator(__name__)

ROOT = Path(__file__).resolve().parent.parent.parent
DIST = Path(os.environ.get("SNODE_DIST", ROOT / "dist"))
PROGRAMS = ("snoded", "snode-wallet", "snode-cli", "snode-devnet", "snode-sim")


def _one(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {DIST} (run `make wheel-test`), found {found}"
    return found[0]


def _clean_env() -> dict[str, str]:
    """This environment without anything that would put the source tree or our venv in reach."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_the_sdist_holds_the_sources_and_no_test_artefacts() -> None:
    sdist = _one(f"snode-{__version__}.tar.gz")
    top = f"snode-{__version__}/"
    with tarfile.open(sdist) as tar:
        names = {n.removeprefix(top) for n in tar.getnames()}
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "src"], capture_output=True, text=True,
                             check=True).stdout.split()
    missing = [p for p in ["pyproject.toml", "README.md", *tracked] if p not in names]
    assert not missing, f"the sdist lacks {missing[:10]}"
    unwanted = sorted(n for n in names if n.startswith(("tests", "build/", "dist/", ".venv", "bench"))
                      or "__pycache__" in n or n.endswith((".pyc", ".sqlite3", ".tar.gz")))
    assert not unwanted, f"the sdist holds {unwanted[:10]}"


def test_the_wheel_in_a_fresh_venv_gives_every_program_and_a_daemon_that_answers(tmp_path: Path) -> None:
    wheel = _one(f"snode-{__version__}-py3-none-any.whl")
    venv = tmp_path / "venv"
    log.info("A fresh venv in %s, outside the repository, installed as the README tells an operator: the "
             "tested versions from requirements.lock (hashed), then the wheel on them", venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=scaled(120))
    pip = [str(venv / "bin/pip"), "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--require-hashes", "-r", str(ROOT / "requirements.lock")],
                   check=True, timeout=scaled(600), cwd=tmp_path, env=_clean_env())
    subprocess.run([*pip, "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=scaled(120), cwd=tmp_path, env=_clean_env())
    log.info("pip check: the wheel's ranges admit every locked version, and nothing is missing")
    subprocess.run([*pip, "check"], check=True, timeout=scaled(60), cwd=tmp_path, env=_clean_env())
    env = _clean_env()
    where = subprocess.run([str(venv / "bin/python"), "-c", "import snode, sys; print(snode.__file__, sys.path)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout
    assert where.startswith(str(venv)) and str(ROOT) not in where, where
    log.info("--version of each program")
    for program in PROGRAMS:
        out = subprocess.run([str(venv / "bin" / program), "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env=env, timeout=scaled(60), stdin=subprocess.DEVNULL)
        assert out.returncode == 0 and out.stdout.startswith(f"{program} v{__version__}"), (program, out.stdout)
    log.info("A regtest daemon from the venv answers get_info, and stops on SIGTERM")
    ip = next_loopback_ip()
    stderr = tmp_path / "snoded.stderr"
    with open(stderr, "wb") as err:
        daemon = subprocess.Popen(
            [str(venv / "bin/snoded"), "--regtest", "--non-interactive", f"--data-dir={tmp_path / 'data'}",
             f"--rpc-admin={ip}:38091", f"--p2p-bind-ip={ip}", "--p2p-bind-port=38090"],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    rpc = RpcClient(f"http://{ip}:38091", timeout=scaled(10))
    try:
        def answers() -> bool:
            assert daemon.poll() is None, stderr.read_text()
            try:
                return bool(rpc.call("get_info")["status_line"].startswith(f"v{__version__}; Height: 0"))
            except RpcUnavailable:
                return False
        wait_until(answers, timeout=60, what="the installed snoded's RPC")
    finally:
        rpc.close()
        daemon.send_signal(signal.SIGTERM)
        try:
            code = daemon.wait(scaled(30))
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
            raise
    assert_equal(code, 0, "exit code after SIGTERM")
