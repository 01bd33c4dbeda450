"""RPC credentials: the cookie file, an operator's own login, and HTTP Basic auth on both sides.

A cookie file holds one line `__cookie__:<64 lowercase hex>`, mode 0600, written by the server at
start and removed at a clean stop (as bitcoind's `.cookie`): whoever may read the file, the
server's own user, may call. An operator who wants a fixed login gives `user:pass` in a file
(`--rpc-login-file`) or in SNODE_RPC_LOGIN, never on the command line, where every user of the
machine reads it in the process list. Clients send either as HTTP Basic auth; the server
compares in constant time.

Which servers ask for it: the admin RPC on a bind that is not loopback (on loopback it needs
nothing, as the specification shows it) and the wallet RPC always, unless `--disable-rpc-login`
on a loopback bind.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from snode.common.data_dir import write_atomically
from snode.common.endpoints import ConfigError
from snode.common.files import SMALL_FILE_BYTES, read_bounded, too_open

if TYPE_CHECKING:  # the servers have aiohttp loaded; the clients (snode-cli, the wallet) need not
    from aiohttp import web

COOKIE_USER: Final = "__cookie__"
ADMIN_COOKIE_FILE: Final = "rpc.cookie"
"""In the data dir."""
WALLET_COOKIE_SUFFIX: Final = ".rpc-cookie"
"""After the wallet file's name."""
LOGIN_ENV: Final = "SNODE_RPC_LOGIN"
LOGIN_FILE_OPTION: Final = "--rpc-login-file"
COMMAND_LINE_LOGIN: Final = (
    "--rpc-login: a login on the command line is visible to every user of this machine in the "
    f"process list; put user:pass in a file and give {LOGIN_FILE_OPTION} FILE, or set {LOGIN_ENV}"
)
"""The one line that refuses `--rpc-login user:pass` (the option exists only to say this)."""


@dataclass(frozen=True, slots=True)
class Login:
    """A user name and password, as HTTP Basic auth carries them."""

    user: str
    password: str

    def header(self) -> str:
        """The Authorization header's value."""
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost`; a wildcard bind (0.0.0.0, ::) is not loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_cookie() -> Login:
    """A fresh random cookie login (256 bits)."""
    return Login(COOKIE_USER, secrets.token_hex(32))


def parse_login(text: str, where: str) -> Login:
    """`user:pass` (user without `:`, both non-empty); ConfigError naming where it came from."""
    user, sep, password = text.strip("\r\n").partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"{where}: a login is one line user:password (both non-empty)")
    return Login(user, password)


def read_login_file(path: str, option: str = LOGIN_FILE_OPTION) -> Login:
    """The `user:pass` on the first line of the file at path; ConfigError naming `option` (also
    when other users of this machine may read it: a login is a key)."""
    problem = too_open(Path(path), f"{option}: the login file")
    if problem is not None:
        raise ConfigError(problem)
    try:
        text = read_bounded(path, SMALL_FILE_BYTES).decode()
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or "it is not text"
        raise ConfigError(f"{option}: cannot read {path}: {reason}") from None
    lines = text.splitlines()
    return parse_login(lines[0] if lines else "", f"{option}: {path}")


def operator_login(login_file: str | None, env: Mapping[str, str]) -> Login | None:
    """The operator's own login: `--rpc-login-file`, else SNODE_RPC_LOGIN, else None."""
    if login_file is not None:
        return read_login_file(login_file)
    text = env.get(LOGIN_ENV)
    return parse_login(text, LOGIN_ENV) if text else None


def write_cookie(path: Path, login: Login) -> None:
    """Write the cookie file (mode 0600 from its creation), replacing one a crash left behind."""
    write_atomically(path, f"{login.user}:{login.password}\n".encode(), mode=0o600)


def remove_cookie(path: Path, login: Login) -> None:
    """Remove the cookie file at a clean stop, unless it now holds another server's cookie."""
    try:
        if read_cookie(path) == login:
            path.unlink()
    except (ConfigError, OSError):
        pass


def read_cookie(path: Path) -> Login:
    """The login in a cookie file; ConfigError naming the file."""
    try:
        text = read_bounded(path, SMALL_FILE_BYTES).decode()
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or "it is not text"
        raise ConfigError(f"cannot read the RPC cookie {path}: {reason}") from None
    return parse_login(text.splitlines()[0] if text else "", f"RPC cookie {path}")


def cookie_dir_for(data_dir: str | None, default: Path, daemon_url: str) -> Path | None:
    """Where a client looks for the admin RPC's cookie: the data dir it was given, else this
    machine's default data dir only when the daemon it calls is on this machine (loopback). A
    cookie found on this machine is never sent to a daemon elsewhere unless the user named its
    data dir: plain HTTP to a remote (or a lying) daemon would hand it the local node's login."""
    if data_dir:
        return Path(data_dir).expanduser()
    host = daemon_url.partition("://")[2].rpartition(":")[0] or daemon_url.rpartition(":")[0]
    return default if is_loopback(host) else None


def client_login(login_file: str | None, env: Mapping[str, str], cookie_dir: Path | None,
                 option: str = LOGIN_FILE_OPTION) -> Login | None:
    """What a client sends: the login in `login_file`, else SNODE_RPC_LOGIN, else the cookie in
    `cookie_dir` when there is one (a daemon on loopback writes none and needs none)."""
    if login_file is not None:
        return read_login_file(login_file, option)
    if env.get(LOGIN_ENV):
        return parse_login(env[LOGIN_ENV], LOGIN_ENV)
    if cookie_dir is not None and (cookie_dir / ADMIN_COOKIE_FILE).exists():
        return read_cookie(cookie_dir / ADMIN_COOKIE_FILE)
    return None


class BasicAuth:
    """The server side: whether a request carries the login, and the 401 that refuses one.

    `hint` is the one line a refused client reads: which file holds the credential.
    """

    def __init__(self, login: Login, hint: str, realm: str) -> None:
        self._expected = f"{login.user}:{login.password}".encode()
        self._header = login.header()
        self.hint = hint
        self.realm = realm

    def allows(self, header: str | None) -> bool:
        """Whether an Authorization header carries the login (compared in constant time)."""
        if header is None:
            return False
        # aiohttp hands over undecodable header bytes as surrogates: compared, never a 500.
        if hmac.compare_digest(header.encode("utf-8", "surrogateescape"), self._header.encode()):
            return True  # the usual spelling: no decoding on the hot path
        scheme, _, encoded = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self._expected)

    def refusal(self) -> web.Response:
        """401 with the challenge and the hint."""
        from aiohttp import web

        return web.Response(
            status=401, text=f"Unauthorized: {self.hint}\n", content_type="text/plain",
            headers={"WWW-Authenticate": f'Basic realm="{self.realm}"'},
        )
