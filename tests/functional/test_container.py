"""The container image, built and run without a Docker engine (`make container-test`): buildah
builds the Dockerfile on a local Debian base (.ci/rootfs, imported once per root), in Docker's
format so that the HEALTHCHECK is kept, and runs it with chroot isolation, which shares this
machine's network: the admin port "mapped" is the daemon's 0.0.0.0 bind, called at 127.0.0.1.

A regtest daemon started by the image's entrypoint on a volume owned by uid 10001 answers
get_info from outside the container (with the cookie of /data/rpc.cookie when the daemon writes
one), passes the image's own health check, stops on SIGTERM (sent to its pid), and the data dir
reopens with the same key.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snode import __version__
from snode.app.cli import VERSION_LINE
from snode.common.procs import all_pids, process_args, stat_fields
from tests.functional.framework import assert_equal, narrator, scaled, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]  # the first build is slow on vfs
log = narrator(__name__)

ROOT = Path(__file__).resolve().parent.parent.parent
BUILDAH = ["buildah", "--storage-driver=vfs"]
IMAGE = "localhost/snoded:test"
ADMIN_PORT = 39231
"""The admin port of the daemon in the container, bound on 0.0.0.0: no other test uses 392xx."""
UID = 10001


def buildah(*args: str, timeout: float = 120) -> str:
    done = subprocess.run([*BUILDAH, *args], capture_output=True, text=True, timeout=scaled(timeout),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr.strip()[-2000:]}"
    return done.stdout.strip()


def base_image() -> str:
    """The Debian root of SNODE_BASE_ROOTFS as an image, imported on first use."""
    rootfs = Path(os.environ["SNODE_BASE_ROOTFS"])
    name = f"localhost/snode-base:{rootfs.name}"
    if subprocess.run([*BUILDAH, "inspect", "--type", "image", name], capture_output=True).returncode == 0:
        return name
    started = time.monotonic()
    container = buildah("from", "scratch")
    try:
        mount = buildah("mount", container)
        subprocess.run(["cp", "-a", f"{rootfs}/.", mount], check=True, timeout=scaled(600))
        buildah("umount", container)
        buildah("commit", "--format", "docker", container, name, timeout=600)
    finally:
        buildah("rm", container)
    log.info("Imported %s as %s in %.0f s", rootfs, name, time.monotonic() - started)
    return name


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    """The image built from the Dockerfile on the local base; its Docker config."""
    base = base_image()
    started = time.monotonic()
    buildah("bud", "--isolation=chroot", "--format", "docker", "--layers", "--build-arg", f"BASE={base}",
            "--build-arg", "PIP_CERT=/etc/ssl/host-ca.crt",
            "--volume", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca.crt:ro",
            "-t", IMAGE, str(ROOT), timeout=1200)
    log.info("Built %s in %.0f s", IMAGE, time.monotonic() - started)
    config: dict[str, Any] = json.loads(buildah("inspect", "--type", "image", IMAGE))["Docker"]["config"]
    return config


@pytest.fixture
def container(image: dict[str, Any]) -> Iterator[str]:
    name = buildah("from", IMAGE)
    # `buildah run` mounts a scratch dir of its own on each of the image's VOLUMEs, over any
    # --volume given for the same path (a build step's view); a container runtime mounts the
    # operator's volume there. Dropped from this working container (not the image), /data is
    # the volume the test gives, as `docker run -v` makes it.
    buildah("config", "--volume", "/data-", name)
    yield name
    buildah("rm", name)


def run_in(container: str, volume: Path, *command: str) -> list[str]:
    """`buildah run` of command in the container, as uid 10001 with the volume on /data."""
    return [*BUILDAH, "run", "--isolation=chroot", "--user", f"{UID}:{UID}",
            "--volume", f"{volume}:/data", container, "--", *command]


def start_daemon(container: str, volume: Path, entrypoint: list[str], log_file: Path,
                 *extra: str) -> subprocess.Popen[bytes]:
    """The image's entrypoint on regtest, its admin RPC on 0.0.0.0:ADMIN_PORT; its other ports
    moved off the defaults and onto loopback (the container shares this machine's network)."""
    with open(log_file, "ab") as out:
        return subprocess.Popen(
            run_in(container, volume, *entrypoint, "--regtest", f"--rpc-admin=0.0.0.0:{ADMIN_PORT}",
                   "--p2p-bind-ip=127.0.0.1", "--p2p-bind-port=39230", "--quorumnet-port=39232", *extra),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)


def call(volume: Path, method: str) -> Any:
    """A JSON-RPC call from outside the container, with the cookie when the daemon wrote one."""
    import http.client

    headers = {"Content-Type": "application/json"}
    cookie = volume / "rpc.cookie"
    if cookie.exists():
        headers["Authorization"] = "Basic " + base64.b64encode(cookie.read_text().strip().encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", ADMIN_PORT, timeout=scaled(10))
    try:
        conn.request("POST", "/json_rpc", body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}),
                     headers=headers)
        answer = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert "result" in answer, answer
    return answer["result"]


def answering(process: subprocess.Popen[bytes], volume: Path, log_file: Path) -> Any:
    """get_info once the daemon in the container answers it."""
    def up() -> Any:
        assert process.poll() is None, f"the container's daemon exited:\n{log_file.read_text()[-3000:]}"
        try:
            return call(volume, "get_info")
        except (OSError, ValueError, AssertionError):  # not listening yet, or its cookie not written yet
            return None
    return wait_until(up, timeout=120, what="get_info from outside the container")


def descendants(pid: int) -> list[int]:
    """Every live process under pid (buildah run -> its chroot runtime -> exec -> snoded)."""
    parents: dict[int, int] = {}
    for each in all_pids():
        fields = stat_fields(each)
        if fields is not None:  # else gone meanwhile
            parents[each] = int(fields[1])
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        todo += children
    return found


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM to the daemon's pid (under buildah run), then wait for buildah run to end."""
    daemons = []
    for pid in descendants(process.pid):
        argv = process_args(pid)
        if argv is None:
            continue
        # The Python running the snoded script, not buildah's chroot exec wrapper above it.
        if not argv[0].startswith(b"buildah") and any(a.endswith(b"/snoded") for a in argv[:2]):
            daemons.append(pid)
    assert len(daemons) == 1, f"expected one snoded under buildah run {process.pid}, found {daemons}"
    os.kill(daemons[0], signal.SIGTERM)
    try:
        return process.wait(scaled(60))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError("the container's daemon did not stop within 60 s of SIGTERM") from None


def test_the_image_keeps_its_liveness_health_check_and_runs_as_10001(image: dict[str, Any]) -> None:
    assert_equal(image["Healthcheck"]["Test"], ["CMD", "python3", "/opt/snode/healthcheck.py"])
    assert_equal((image["User"], image["Entrypoint"][0]), (f"{UID}:{UID}", "snoded"))
    assert "9231/tcp" in image["ExposedPorts"] and "--rpc-admin=0.0.0.0:9231" in image["Entrypoint"], image


def test_a_regtest_daemon_from_the_entrypoint_answers_from_outside_and_its_data_dir_reopens(
    image: dict[str, Any], container: str, tmp_path: Path
) -> None:
    volume = tmp_path / "data"
    volume.mkdir()
    os.chown(volume, UID, UID)
    log_file = tmp_path / "container.log"
    version = subprocess.run(run_in(container, volume, "snoded", "--version"), capture_output=True, text=True,
                             timeout=scaled(120), stdin=subprocess.DEVNULL)
    expected = VERSION_LINE % {"prog": "snoded", "version": __version__}
    assert_equal((version.returncode, version.stdout.strip()), (0, expected), version.stderr)

    log.info("The entrypoint's daemon on regtest, the volume owned by %d, called from outside", UID)
    daemon = start_daemon(container, volume, image["Entrypoint"], log_file)
    try:
        info = answering(daemon, volume, log_file)
        assert info["status_line"].startswith(f"v{__version__}; Height: 0, SN: not registered"), info
        key = call(volume, "get_service_node_key")["service_node_pubkey"]
        owners = {(p.stat().st_uid, p.stat().st_gid) for p in volume.iterdir()}
        assert_equal(owners, {(UID, UID)}, f"owners of {sorted(p.name for p in volume.iterdir())}")
        log.info("The image's health check passes against it")
        check = ["env", f"SNODE_HEALTH_PORT={ADMIN_PORT}", *image["Healthcheck"]["Test"][1:]]
        health = subprocess.run(run_in(container, volume, *check), capture_output=True, text=True,
                                timeout=scaled(60), stdin=subprocess.DEVNULL)
        assert_equal(health.returncode, 0, health.stderr)
    finally:
        code = stop(daemon)
    assert_equal(code, 0, f"exit code after SIGTERM:\n{log_file.read_text()[-3000:]}")
    assert not (volume / "rpc.cookie").exists(), "the cookie outlived a clean stop"

    log.info("Started again on the same volume with --rpc-no-login (the specification's way: the "
             "mapping restricted to loopback): the same key, answered with no credential, one warning")
    log_file.write_bytes(b"")
    daemon = start_daemon(container, volume, image["Entrypoint"], log_file, "--rpc-no-login")
    try:
        answering(daemon, volume, log_file)
        assert not (volume / "rpc.cookie").exists(), "a cookie written though no login is asked"
        assert_equal(call(volume, "get_service_node_key")["service_node_pubkey"], key)
    finally:
        assert_equal(stop(daemon), 0)
    warnings = [line for line in log_file.read_text().splitlines() if "admin RPC bound to" in line]
    assert_equal(len(warnings), 1, "\n".join(warnings))
    assert "asks no login (--rpc-no-login)" in warnings[0], warnings[0]
