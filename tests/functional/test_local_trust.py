"""Trust on the machine itself, with real `snoded`, `snode-cli` and `snode-wallet` processes.

Admin RPC: on a loopback bind it needs nothing and writes no cookie. Bound on 0.0.0.0 (a
wildcard bind is not loopback; the test connects through its own 127.x address) it writes
`<data-dir>/rpc.cookie` (0600, `__cookie__:<64 hex>`) and answers 401 with
`WWW-Authenticate: Basic realm="snoded"` and one line naming the file to every path but the
probes; snode-cli and the wallet read the cookie from --data-dir or from the default data dir
(SNODE_HOME), and a clean stop removes it. An operator's login comes from --rpc-login-file or
SNODE_RPC_LOGIN; `--rpc-login user:pass` is refused in one line.

Wallet RPC: the operator's login replaces the cookie (none is written), --disable-rpc-login
serves without one, and the refused combinations are one line each.

A service-node key file that other users of the machine may read is refused at start, in one
line naming the file and the `chmod 600` that fixes it (as OpenSSH refuses such a private key),
and the daemon starts once the mode is fixed.
"""

from __future__ import annotations

import http.client
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from snode.api.client import RpcClient, RpcUnavailable
from snode.api.credentials import Login, read_cookie
from tests.functional.framework import (
    NodeSet,
    TestNode,
    assert_equal,
    assert_raises_rpc_error,
    narrator,
    next_loopback_ip,
    run_snoded,
    scaled,
    snode_cli,
    wait_until,
    wildcard_port,
)
from tests.functional.wallet_helpers import Wallet, WalletServer, run_wallet

REALM = 'Basic realm="snoded"'

log = narrator(__name__)


def test_a_service_node_key_file_other_users_can_read_is_refused_at_start(nodes: NodeSet) -> None:
    log.info("Start a service node: its key file is made private (0600)")
    node = nodes.add(extra_args=["--service-node"])
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    key_file = node.data_dir / "key"
    assert_equal(stat.S_IMODE(key_file.stat().st_mode), 0o600)
    assert_equal(node.stop(), 0)
    log.info("chmod 644 the key file and start again: exit 1, one line naming the file and the fix")
    key_file.chmod(0o644)
    node.start(wait=False)
    assert node.process is not None
    try:
        code = node.process.wait(timeout=scaled(30))
    except subprocess.TimeoutExpired:
        node.process.kill()
        raise
    assert_equal(code, 1)
    assert_equal(node.stderr_text().strip().splitlines()[-1],
                 f"snoded: --data-dir: service-node key file {key_file} is open to other users of this "
                 f"machine (mode 0644): run chmod 600 {key_file}")
    assert_equal(stat.S_IMODE(key_file.stat().st_mode), 0o644, "the refusal changes nothing")
    log.info("chmod 600: the same node starts")
    key_file.chmod(0o600)
    node.start()
    assert_equal(node.get_service_node_key()["service_node_pubkey"], pubkey)


def _get(node: TestNode, path: str, login: Login | None = None) -> tuple[int, str, str]:
    """GET path on node's admin port: (status, WWW-Authenticate header, body)."""
    conn = http.client.HTTPConnection(node.ip, node.rpc_port, timeout=scaled(10))
    try:
        conn.request("GET", path, headers={"Authorization": login.header()} if login else {})
        response = conn.getresponse()
        return response.status, response.getheader("WWW-Authenticate", ""), response.read(300).decode()
    finally:
        conn.close()


def _start_off_loopback(node: TestNode) -> Login:
    """Start node with its admin RPC on 0.0.0.0; the cookie's login, once it answers with it."""
    node.rpc_port = wildcard_port()
    node.start([f"--rpc-admin=0.0.0.0:{node.rpc_port}"], wait=False)
    cookie = node.data_dir / "rpc.cookie"

    def answers() -> Login | None:
        assert node.running, node.log_tail()
        if not cookie.exists():
            return None
        login = read_cookie(cookie)
        node.rpc = RpcClient(f"http://{node.ip}:{node.rpc_port}", login=login)
        try:
            node.rpc.call("get_info")
        except RpcUnavailable:
            return None
        return login
    found: Login = wait_until(answers, what="the admin RPC on 0.0.0.0")
    return found


def test_the_admin_rpc_off_loopback_asks_for_its_cookie(nodes: NodeSet, tmp_path: Path) -> None:
    log.info("On loopback: plain calls, no cookie file")
    node = nodes.add()
    assert node.get_info()["height"] == 0
    assert not (node.data_dir / "rpc.cookie").exists()
    assert_equal(node.stop(), 0)

    log.info("Bound on 0.0.0.0: a cookie file of mode 0600, called through 127.x")
    login = _start_off_loopback(node)
    cookie = node.data_dir / "rpc.cookie"
    assert_equal(stat.S_IMODE(cookie.stat().st_mode), 0o600)
    assert re.fullmatch(r"__cookie__:[0-9a-f]{64}\n", cookie.read_text())
    hint = (f"Unauthorized: this admin RPC is not on loopback: send the login in {cookie} as HTTP Basic "
            f"auth (snode-cli --data-dir {node.data_dir} reads it)\n")
    plain = RpcClient(f"http://{node.ip}:{node.rpc_port}")
    try:
        log.info("Without it, or with a wrong one: 401, the Basic challenge, one line naming the file")
        assert_raises_rpc_error(-401, hint.strip(), plain.call, "stop_daemon")
        status, headers, body = plain.raw(b'{"jsonrpc": "2.0", "id": 1, "method": "get_info"}',
                                          headers={"Authorization": Login("__cookie__", "0" * 64).header()})
        assert_equal((status, headers["www-authenticate"], body.decode()), (401, REALM, hint))
    finally:
        plain.close()
    assert node.running, "stop_daemon without the cookie stopped nothing"
    log.info("Every path but the probes asks for it; /healthz and /readyz answer without it")
    for path in ("/metrics", "/", "/events"):
        assert_equal(_get(node, path)[:2], (401, REALM), path)
    assert_equal(_get(node, "/healthz")[0], 200)
    assert _get(node, "/readyz")[0] in (200, 503)
    assert_equal(_get(node, "/metrics", login)[0], 200)
    assert_equal(node.get_info()["height"], 0)

    log.info("snode-cli: refused in one line without the cookie, served with --data-dir")
    url = f"http://{node.ip}:{node.rpc_port}"
    without = snode_cli(url, "status")
    assert_equal((without.returncode, without.stderr.strip()),
                 (1, f"snode-cli: get_info: HTTP 401: {hint.strip()}"))
    served = snode_cli(url, "--data-dir", str(node.data_dir), "status")
    assert served.returncode == 0 and "network regtest, height 0" in served.stdout, served.stderr
    log.info("... and from the default data dir (SNODE_HOME/regtest) without --data-dir")
    home = tmp_path / "home"
    (home / "regtest").mkdir(parents=True)
    (home / "regtest" / "rpc.cookie").write_text(cookie.read_text())
    default = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--regtest", "--rpc", url, "status"],
                             capture_output=True, text=True, timeout=scaled(60), stdin=subprocess.DEVNULL,
                             env={**os.environ, "SNODE_HOME": str(home)})
    assert default.returncode == 0, default.stderr

    log.info("The wallet reads it from --data-dir; without it the daemon's 401 is its one line")
    wallet = Wallet(node, tmp_path, "reader")
    balance = wallet.run("balance", extra=["--data-dir", str(node.data_dir)])
    assert balance.rc == 0 and "Balance: 0 coins" in balance.out, balance.out + balance.err
    refused = wallet.run("balance")
    assert_equal((refused.rc, refused.lines), (1, [f"Error: HTTP 401: {hint.strip()}"]))

    log.info("stop_daemon with the cookie: a clean stop, the cookie file removed")
    node.stop_daemon()
    assert_equal(node.process.wait(timeout=scaled(30)) if node.process else None, 0)
    assert not cookie.exists()


def test_an_operator_login_comes_from_a_file_or_the_environment_never_the_command_line(
    nodes: NodeSet, tmp_path: Path,
) -> None:
    log.info("--rpc-login user:pass: refused in one line naming the file and the variable, no data dir made")
    data_dir = tmp_path / "never"
    refused = run_snoded(["--regtest", f"--data-dir={data_dir}", "--rpc-login", "alice:wonderland"])
    assert_equal((refused.returncode, refused.stderr.strip()), (1,
                 "snoded: --rpc-login: a login on the command line is visible to every user of this machine in "
                 "the process list; put user:pass in a file and give --rpc-login-file FILE, or set SNODE_RPC_LOGIN"))
    assert not data_dir.exists()
    bad = tmp_path / "bad.login"
    bad.write_text("no colon here\n")
    bad.chmod(0o600)
    refused = run_snoded(["--regtest", f"--data-dir={data_dir}", f"--rpc-login-file={bad}"])
    assert_equal(refused.stderr.strip(),
                 f"snoded: --rpc-login-file: {bad}: a login is one line user:password (both non-empty)")

    log.info("--rpc-login-file: the login is asked for (on loopback too), no cookie is written")
    login_file = tmp_path / "operator.login"
    login_file.write_text("alice:wonderland\n")
    login_file.chmod(0o600)
    login = Login("alice", "wonderland")
    node = nodes.add(extra_args=[f"--rpc-login-file={login_file}"], start=False)
    node.rpc = RpcClient(f"http://{node.ip}:{node.rpc_port}", login=login)
    node.start()
    assert not (node.data_dir / "rpc.cookie").exists()
    status, challenge, body = _get(node, "/metrics")
    assert_equal((status, challenge, body), (401, REALM, "Unauthorized: send the operator's login "
                                                         "(--rpc-login-file or SNODE_RPC_LOGIN) as HTTP Basic auth\n"))
    url = f"http://{node.ip}:{node.rpc_port}"
    assert snode_cli(url, "--rpc-login-file", str(login_file), "status").returncode == 0
    by_env = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--rpc", url, "status"], capture_output=True,
                            text=True, timeout=scaled(60), stdin=subprocess.DEVNULL,
                            env={**os.environ, "SNODE_RPC_LOGIN": "alice:wonderland"})
    assert by_env.returncode == 0, by_env.stderr
    assert_equal(node.stop(), 0)
    log.info("SNODE_RPC_LOGIN gives the daemon its login too")
    node.extra_args = []
    node.start(env={"SNODE_RPC_LOGIN": "alice:wonderland"})
    assert_equal(_get(node, "/metrics")[0], 401)
    assert_equal(_get(node, "/metrics", login)[0], 200)


def test_the_wallet_rpc_login_options(nodes: NodeSet, tmp_path: Path) -> None:
    node = nodes.add(start=False)  # the wallet's get_address needs no daemon
    wallet = Wallet(node, tmp_path, "served")
    bind = ["--rpc-bind", f"{next_loopback_ip()}:38094"]
    login_file = tmp_path / "wallet.login"
    login_file.write_text("bob:builder-of-things\n")
    login_file.chmod(0o600)
    log.info("Refused in one line each: --rpc-login, a login option without the server, both logins")
    for extra, line in [
        ([*bind, "--rpc-login", "bob:x"], "snode-wallet: --rpc-login: a login on the command line is visible to "
         "every user of this machine in the process list; put user:pass in a file and give --rpc-login-file "
         "FILE, or set SNODE_RPC_LOGIN"),
        (["--rpc-login-file", str(login_file), "--command", "address"],
         "snode-wallet: --rpc-login-file: it is about the wallet RPC: add --rpc-server (or --rpc-bind)"),
        ([*bind, "--disable-rpc-login", "--rpc-login-file", str(login_file)],
         "snode-wallet: --disable-rpc-login: it turns off the login that --rpc-login-file or SNODE_RPC_LOGIN "
         "gives: give one or the other"),
    ]:
        refused = run_wallet(wallet.args() + extra)
        assert_equal((refused.rc, refused.err.strip()), (1, line))
    cookie = wallet.path.with_name(wallet.path.name + ".rpc-cookie")
    log.info("--rpc-login-file, then SNODE_RPC_LOGIN: that login is asked for, no cookie is written")
    bob = Login("bob", "builder-of-things")
    for options, env in [(("--rpc-login-file", str(login_file)), None),
                         ((), {**os.environ, "SNODE_RPC_LOGIN": "bob:builder-of-things"})]:
        server = WalletServer(wallet, next_loopback_ip(), tmp_path / "server.log", options, env=env, login=bob)
        try:
            assert not cookie.exists()
            status, _, text = server.post({"jsonrpc": "2.0", "id": 1, "method": "get_address"}, login=False)
            assert_equal((status, text), (401, "Unauthorized: send the operator's login (--rpc-login-file or "
                                               "SNODE_RPC_LOGIN) as HTTP Basic auth\n"))
        finally:
            assert_equal(server.stop(), 0)
    log.info("--disable-rpc-login on loopback: served without a login, no cookie")
    server = WalletServer(wallet, next_loopback_ip(), tmp_path / "open.log", ("--disable-rpc-login",))
    try:
        assert not cookie.exists() and server.headers == {}
        assert_equal(server.call("get_address")["result"], {"address": wallet.address})
    finally:
        assert_equal(server.stop(), 0)
    assert "; no login (--disable-rpc-login)" in (tmp_path / "open.log").read_text()
