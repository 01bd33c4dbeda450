"""The wallet JSON-RPC (aiohttp): get_balance, get_address, transfer, register_service_node, stake,
request_stake_unlock.

Loopback only: a non-loopback bind is refused at start-up, and so are requests whose Host header
is not a loopback name (DNS rebinding) or that carry a browser Origin header (cross-site
requests). Every request needs the login (HTTP Basic auth, 401 otherwise): the cookie the server
writes to `<wallet-file>.rpc-cookie` (0600) at start and removes at a clean stop, or the
operator's own (`--rpc-login-file`, SNODE_RPC_LOGIN); a loopback port is open to every user of
the machine, and a transfer needs no confirmation, so without it any local process could spend.
`--disable-rpc-login` turns the check off (the bind is loopback: refused on any other).
Amounts are atomic units, as on the daemon's RPC.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from snode.api import errors as E
from snode.api.base import Params
from snode.api.connections import GatedSite, runner_options
from snode.api.credentials import (
    LOGIN_ENV,
    LOGIN_FILE_OPTION,
    WALLET_COOKIE_SUFFIX,
    BasicAuth,
    Login,
    is_loopback,
    new_cookie,
    operator_login,
    remove_cookie,
    write_cookie,
)
from snode.api.errors import RpcError
from snode.api.server import make_app as make_rpc_app
from snode.common.endpoints import ConfigError, Endpoint, parse_endpoint
from snode.core.errors import SnodeError
from snode.wallet.errors import DaemonError, OptionError, WalletError, option_error
from snode.wallet.openrpc import served_document
from snode.wallet.rpc_params import (
    InvalidParams,
    NoParams,
    PubkeyParams,
    RegisterParams,
    StakeParams,
    TransferParams,
    address_param,
    checked,
    pubkey_param,
    stake_text,
)
from snode.wallet.service import Pending, WalletService

REFUSED: Final = -1
"""The wallet or the daemon refused the request; the message says why."""
DAEMON_UNREACHABLE: Final = -2


def check_bind(text: str) -> Endpoint:
    """Parse `HOST:PORT`; OptionError unless HOST is a loopback address or `localhost`."""
    try:
        bind = parse_endpoint("--rpc-bind", text, allow_names=True)
    except ConfigError as err:
        raise option_error(err, "HOST:PORT") from None
    if not is_loopback(bind.host):
        raise OptionError(
            f"--rpc-bind: refusing to bind the wallet RPC to {bind.host}: it is local only; use a "
            "loopback address such as 127.0.0.1"
        )
    return bind


Method = Callable[[Any], dict[str, Any]]


class WalletRpc:
    """Method table and dispatch; calls run one at a time in a worker thread, each with its
    parameters checked first (rpc_params)."""

    def __init__(self, service: WalletService) -> None:
        self.service = service
        self._lock = asyncio.Lock()
        self.methods: dict[str, tuple[Method, type[Params]]] = {
            "get_address": (self.get_address, NoParams),
            "get_balance": (self.get_balance, NoParams),
            "transfer": (self.transfer, TransferParams),
            "register_service_node": (self.register_service_node, RegisterParams),
            "stake": (self.stake, StakeParams),
            "request_stake_unlock": (self.request_stake_unlock, PubkeyParams),
        }

    def get_address(self, _: NoParams) -> dict[str, Any]:
        """This wallet's address."""
        return {"address": self.service.address}

    def get_balance(self, _: NoParams) -> dict[str, Any]:
        """Balances in atomic units; `pending_staked` is in registrations and stakes not yet mined."""
        balance, nodes = self.service.balance()
        return {
            "balance": balance.total, "unlocked_balance": balance.unlocked,
            "pending": balance.pending, "staked": balance.staked, "staked_nodes": nodes,
            "pending_staked": balance.pending_staked,
            "unlocking": sum(u.amount for u in balance.unlocking),
        }

    def _send(self, pending: Pending) -> dict[str, Any]:
        return {"txid": self.service.submit(pending), "fee": pending.fee}

    def transfer(self, params: TransferParams) -> dict[str, Any]:
        """Send `amount` atomic units to `address`."""
        address_param(self.service.params.address_prefix, params.address)
        return self._send(self.service.prepare_transfer(params.address, params.amount))

    def register_service_node(self, params: RegisterParams) -> dict[str, Any]:
        """Register from the daemon's `registration_cmd` line."""
        return self._send(self.service.prepare_registration(params.registration_cmd))

    def stake(self, params: StakeParams) -> dict[str, Any]:
        """Stake `amount` atomic units, or `percent` of what the node still needs."""
        pubkey = pubkey_param(params.service_node_pubkey)
        pending = self.service.prepare_stake(pubkey, stake_text(params))
        result = self._send(pending)
        result["amount"] = getattr(pending.tx.payload, "amount", 0)
        return result

    def request_stake_unlock(self, params: PubkeyParams) -> dict[str, Any]:
        """Ask for the unlock of a node this wallet staked on; its unlock height."""
        pending = self.service.prepare_unlock(pubkey_param(params.service_node_pubkey))
        result = self._send(pending)
        result["unlock_height"] = self.service.daemon.tip().height + 1 + self.service.params.unlock_duration
        return result

    async def call(self, name: str, params: dict[str, Any]) -> Any:
        """Run one method (the daemon's JSON-RPC envelope calls this); RpcError on failure.

        Every parameter is checked before the method runs, so nothing a client sends reaches
        the envelope's internal-error path."""
        entry = self.methods.get(name)
        if entry is None:
            raise RpcError(E.METHOD_NOT_FOUND, f"Method not found: {name}")
        method, schema = entry
        args = checked(params, schema)
        try:
            async with self._lock:
                return await asyncio.to_thread(method, args)
        except InvalidParams as err:
            raise RpcError(E.INVALID_PARAMS, f"Invalid params: {err}") from None
        except DaemonError as err:
            raise RpcError(DAEMON_UNREACHABLE if err.code is None else REFUSED, str(err)) from None
        except SnodeError as err:
            raise RpcError(REFUSED, str(err)) from None


def make_app(rpc: WalletRpc, bind: Endpoint, auth: BasicAuth | None = None) -> web.Application:
    """POST /json_rpc with the daemon's envelope and HTTP rules (405, 413, 415, Host, Origin, and
    401 without `auth`'s login). The wallet has no option that allows another Host name, so its
    403 names none."""
    return make_rpc_app(rpc, bind_host=bind.host, allowed_hosts=(), allow_host_flag=None,
                        log_name="the wallet's output", discover=served_document, auth=auth)


REALM: Final = "snode-wallet"


@dataclass(frozen=True, slots=True)
class Access:
    """Who may call: the check (None: anyone, --disable-rpc-login), and the cookie file to write
    at start and remove at the stop (None: the operator's own login, or none)."""

    auth: BasicAuth | None
    cookie: Path | None = None
    login: Login | None = None


def rpc_access(wallet_file: Path, bind: Endpoint, login_file: str | None, disable: bool,
               env: Mapping[str, str]) -> Access:
    """The wallet RPC's access from its options; OptionError for a refused combination."""
    try:
        login = operator_login(login_file, env)
    except ConfigError as err:
        raise OptionError(str(err)) from None
    if disable:
        if login is not None:
            raise OptionError(f"--disable-rpc-login: it turns off the login that {LOGIN_FILE_OPTION} or "
                              f"{LOGIN_ENV} gives: give one or the other")
        if not is_loopback(bind.host):
            raise OptionError(f"--disable-rpc-login: refused on {bind.host}: only a loopback bind may "
                              "go without a login")
        return Access(None)
    if login is not None:
        return Access(BasicAuth(login, f"send the operator's login ({LOGIN_FILE_OPTION} or {LOGIN_ENV}) "
                                       "as HTTP Basic auth", REALM))
    cookie = wallet_file.with_name(wallet_file.name + WALLET_COOKIE_SUFFIX)
    login = new_cookie()
    hint = f"send the login in {cookie} (user:password) as HTTP Basic auth"
    return Access(BasicAuth(login, hint, REALM), cookie, login)


async def serve_forever(service: WalletService, bind: Endpoint, access: Access) -> None:
    """Serve until SIGINT or SIGTERM; the cookie exists while the server listens."""
    # The admin RPC's connection bounds (`api.connections`): a header deadline, and caps per
    # client address and in all, so that a local process holding half-sent requests cannot take
    # the wallet's descriptors or lock out its owner's calls (issue #33).
    runner = web.AppRunner(make_app(WalletRpc(service), bind, access.auth), access_log=None, **runner_options())
    await runner.setup()
    try:
        family = socket.AF_INET6 if ":" in bind.host else socket.AF_INET
        sock = socket.create_server((bind.host, bind.port), family=family, backlog=128)
        sock.setblocking(False)
        await GatedSite(runner, sock).start()
        if access.cookie is not None and access.login is not None:
            write_cookie(access.cookie, access.login)
    except OSError as err:
        await runner.cleanup()
        if err.errno == errno.EADDRINUSE:
            raise WalletError(f"--rpc-bind: {bind} is already in use by another program") from None
        why = os.strerror(err.errno) if err.errno else str(err)
        raise WalletError(f"--rpc-bind: cannot listen on {bind}: {why}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    login = (f"login in {access.cookie}" if access.cookie else "the operator's login" if access.auth
             else "no login (--disable-rpc-login)")
    print(f"Wallet RPC for {service.address} listening on http://{bind}/json_rpc; {login}", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        if access.cookie is not None and access.login is not None:
            remove_cookie(access.cookie, access.login)
