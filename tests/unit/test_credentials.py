"""RPC credentials (snode.api.credentials): which binds are loopback, what a login line may be,
the cookie file's form and mode, and the server's check of an Authorization header."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import pytest

from snode.api.credentials import (
    BasicAuth,
    Login,
    client_login,
    cookie_dir_for,
    is_loopback,
    new_cookie,
    parse_login,
    read_cookie,
    remove_cookie,
    write_cookie,
)
from snode.common.endpoints import ConfigError


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.9.200.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("172.17.0.2", False), ("example.org", False),
])
def test_loopback_is_127_slash_8_and_ipv6_one_never_a_wildcard(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("text", ["", "alice", ":secret", "alice:", "\n"])
def test_a_login_is_user_colon_password_both_non_empty(text: str) -> None:
    with pytest.raises(ConfigError, match="^SNODE_RPC_LOGIN: a login is one line user:password"):
        parse_login(text, "SNODE_RPC_LOGIN")


def test_a_password_may_hold_colons() -> None:
    assert parse_login("alice:a:b:c\n", "x") == Login("alice", "a:b:c")


def test_the_cookie_file_is_private_one_line_and_removed_only_while_it_is_ours(tmp_path: Path) -> None:
    path = tmp_path / "rpc.cookie"
    ours = new_cookie()
    write_cookie(path, ours)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == f"__cookie__:{ours.password}\n" and len(ours.password) == 64
    assert read_cookie(path) == ours and sorted(p.name for p in tmp_path.iterdir()) == ["rpc.cookie"]
    theirs = new_cookie()
    write_cookie(path, theirs)  # another server started since
    remove_cookie(path, ours)
    assert read_cookie(path) == theirs
    remove_cookie(path, theirs)
    assert not path.exists()
    remove_cookie(path, theirs)  # gone already: nothing to do


def test_a_client_sends_the_login_file_then_the_variable_then_a_cookie(tmp_path: Path) -> None:
    cookie = new_cookie()
    write_cookie(tmp_path / "rpc.cookie", cookie)
    login_file = tmp_path / "login"
    login_file.write_text("alice:wonderland\n")
    login_file.chmod(0o644)
    with pytest.raises(ConfigError, match=f"^--rpc-login-file: the login file {login_file} is open to other users "
                                          f"of this machine \\(mode 0644\\): run chmod 600 {login_file}$"):
        client_login(str(login_file), {}, None)
    login_file.chmod(0o600)
    env = {"SNODE_RPC_LOGIN": "bob:builder"}
    assert client_login(str(login_file), env, tmp_path) == Login("alice", "wonderland")
    assert client_login(None, env, tmp_path) == Login("bob", "builder")
    assert client_login(None, {}, tmp_path) == cookie
    assert client_login(None, {}, tmp_path / "elsewhere") is None
    with pytest.raises(ConfigError, match=f"^--daemon-login-file: cannot read {tmp_path / 'none'}: No such file"):
        client_login(str(tmp_path / "none"), {}, None, option="--daemon-login-file")


def _basic(text: bytes) -> str:
    return "Basic " + base64.b64encode(text).decode()


@pytest.mark.parametrize(("header", "allowed"), [
    (_basic(b"alice:wonderland"), True),
    ("basic " + base64.b64encode(b"alice:wonderland").decode(), True),
    ("  Basic   " + base64.b64encode(b"alice:wonderland").decode() + " ", True),
    (None, False), ("", False), ("Basic", False), ("Basic !!!", False), ("Bearer wonderland", False),
    (_basic(b"alice:wonderlanD"), False), (_basic(b"alicE:wonderland"), False),
    (_basic(b"alice:wonderland "), False), (_basic(b"alice"), False), ("Basic \u00e9", False),
    ("Basic \udcff\udcfe", False),  # undecodable bytes, as aiohttp passes them on: no 500
])
def test_the_server_allows_exactly_the_login(header: str | None, allowed: bool) -> None:
    auth = BasicAuth(Login("alice", "wonderland"), "read the file", "snoded")
    assert auth.allows(header) is allowed


def test_the_default_data_dirs_cookie_goes_only_to_a_daemon_on_this_machine(tmp_path: Path) -> None:
    default = tmp_path / "default"
    assert cookie_dir_for(None, default, "http://127.0.0.1:9231") == default
    assert cookie_dir_for(None, default, "127.3.4.5:38091") == default
    assert cookie_dir_for(None, default, "http://[::1]:9231") == default
    assert cookie_dir_for(None, default, "http://203.0.113.9:9231") is None, "a remote daemon gets no local cookie"
    assert cookie_dir_for(None, default, "node.example.org:9231") is None
    assert cookie_dir_for(str(tmp_path / "given"), default, "http://203.0.113.9:9231") == tmp_path / "given"


def test_the_refusal_is_401_with_the_challenge_and_one_line() -> None:
    refusal = BasicAuth(Login("a", "b"), "send the login in /d/rpc.cookie", "snoded").refusal()
    assert refusal.status == 401 and refusal.headers["WWW-Authenticate"] == 'Basic realm="snoded"'
    assert refusal.text == "Unauthorized: send the login in /d/rpc.cookie\n"


def test_the_wallet_rpc_goes_without_a_login_only_on_loopback(tmp_path: Path) -> None:
    from snode.common.endpoints import Endpoint
    from snode.wallet.errors import OptionError
    from snode.wallet.rpc_server import rpc_access

    wallet = tmp_path / "w"
    assert rpc_access(wallet, Endpoint("127.0.0.1", 38094), None, True, {}).auth is None
    with pytest.raises(OptionError, match="^--disable-rpc-login: refused on 10.0.0.5: only a loopback bind"):
        rpc_access(wallet, Endpoint("10.0.0.5", 38094), None, True, {})
    access = rpc_access(wallet, Endpoint("127.0.0.1", 38094), None, False, {})
    assert access.cookie == tmp_path / "w.rpc-cookie" and access.login is not None
    assert access.auth is not None and access.auth.allows(access.login.header())


def test_no_login_is_a_choice_for_a_bind_off_loopback_and_never_beside_a_login(tmp_path: Path) -> None:
    from snode.app.config import build_config
    from snode.app.rpc_access import AdminAccess

    def config(**flags: object) -> Any:
        return build_config(network="regtest", data_dir=str(tmp_path), service_node=False, p2p_bind_ip=None,
                            p2p_bind_port=None, rpc_admin="0.0.0.0:39231", public_ip=None, quorumnet_port=None,
                            priority_nodes=(), log_level="2", non_interactive=True, genesis=None,
                            **flags)  # type: ignore[arg-type]

    access = AdminAccess.open(config(rpc_no_login=True))
    assert (access.auth, access.cookie) == (None, None) and not (tmp_path / "rpc.cookie").exists()
    assert AdminAccess.open(config()).auth is not None  # the default off loopback: the cookie
    login = tmp_path / "login"
    login.write_text("op:secret\n")
    login.chmod(0o600)
    with pytest.raises(ConfigError, match="--rpc-no-login: the admin RPC cannot ask no login and the login of "
                                          "--rpc-login-file: give one of them"):
        config(rpc_no_login=True, rpc_login_file=str(login))
