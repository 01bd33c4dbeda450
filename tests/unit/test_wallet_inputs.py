"""What a client or an operator may type at the wallet, and the one clear refusal each gets: every
wallet RPC parameter is checked (type, range, unknown names) before the method runs and refused
as `-32602 Invalid params: <name>: <rule>`, as the daemon's admin RPC refuses its own; the wallet
RPC's 403 for a foreign Host names no option (the wallet has none to allow one); amounts and
percentages too long for Python's int() are refused as too large; an endpoint's form is written
as --help writes it.

The RPC calls go through a real WalletService whose daemon address is a closed port: a check
that let a bad value through would reach the daemon and fail with code -2 instead of -32602.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from snode.api import errors as E
from snode.api.errors import RpcError
from snode.core.address import encode_address
from snode.core.errors import InvalidAmount
from snode.core.units import parse_coins
from snode.devchain import key_from_label
from snode.params import REGTEST
from snode.wallet.daemon import DaemonClient
from snode.wallet.errors import OptionError
from snode.wallet.rpc_server import WalletRpc, check_bind, make_app
from snode.wallet.service import WalletService, parse_amount
from snode.wallet.staking import parse_stake_percent

OTHER = encode_address(REGTEST.address_prefix, key_from_label("other").public)
PUBKEY = "ab" * 32


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def rpc() -> WalletRpc:
    """The wallet RPC's method table over a wallet whose daemon is not running."""
    daemon = DaemonClient(f"127.0.0.1:{_closed_port()}", timeout=2)
    return WalletRpc(WalletService(key_from_label("operator"), REGTEST, daemon))


def _refusal(rpc: WalletRpc, method: str, params: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(RpcError) as refused:
        asyncio.run(rpc.call(method, params))
    return refused.value.code, refused.value.message


@pytest.mark.parametrize(("method", "params", "message"), [
    ("transfer", {"address": OTHER, "amount": 2**64},
     "Invalid params: amount: must be at most 9223372036854775807"),
    ("transfer", {"address": OTHER, "amount": 10**400},
     "Invalid params: amount: must be at most 9223372036854775807"),
    ("transfer", {"address": OTHER, "amount": 0}, "Invalid params: amount: must be at least 1"),
    ("transfer", {"address": OTHER, "amount": -5}, "Invalid params: amount: must be at least 1"),
    ("transfer", {"address": OTHER, "amount": True}, "Invalid params: amount: must be an integer, not true/false"),
    ("transfer", {"address": OTHER, "amount": 1.5}, "Invalid params: amount: must be an integer, not a number"),
    ("transfer", {"address": OTHER, "amount": "5"}, "Invalid params: amount: must be an integer, not a string"),
    ("transfer", {"address": OTHER}, "Invalid params: missing parameter 'amount'"),
    ("transfer", {"address": 7, "amount": 5}, "Invalid params: address: must be a string, not an integer"),
    ("transfer", {"address": "sn1" + OTHER[4:], "amount": 5}, "Invalid params: address: "),
    ("register_service_node", {"registration_cmd": ["a"]},
     "Invalid params: registration_cmd: must be a string, not an array"),
    ("stake", {"service_node_pubkey": PUBKEY, "amount": 2**64},
     "Invalid params: amount: must be at most 9223372036854775807"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": 10**5000},
     "Invalid params: percent: must be above 0 and at most 100"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": 0},
     "Invalid params: percent: must be above 0 and at most 100"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": 100.5},
     "Invalid params: percent: must be above 0 and at most 100"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": 1e-05},
     "Invalid params: percent: percent '0.00001%' has more than 4 decimal places"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": "1" * 5000},
     "Invalid params: percent: percent '" + "1" * 5000 + "%' must be above 0% and at most 100%"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": "half"},
     "Invalid params: percent: percent 'half%' is not a number"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": True}, "Invalid params: percent: must be "),
    ("stake", {"service_node_pubkey": PUBKEY}, "Invalid params: give exactly one of amount (atomic units) and percent"),
    ("stake", {"service_node_pubkey": PUBKEY, "amount": 5, "percent": 5},
     "Invalid params: give exactly one of amount (atomic units) and percent"),
    ("stake", {"service_node_pubkey": "xyz", "percent": 5},
     "Invalid params: service_node_pubkey: must be 64 hex characters"),
    ("request_stake_unlock", {"service_node_pubkey": "ab" * 31},
     "Invalid params: service_node_pubkey: must be 64 hex characters"),
    ("request_stake_unlock", {}, "Invalid params: missing parameter 'service_node_pubkey'"),
])
def test_bad_rpc_params_are_refused_naming_the_parameter(rpc: WalletRpc, method: str, params: dict[str, Any],
                                                          message: str) -> None:
    code, text = _refusal(rpc, method, params)
    assert (code, text[:len(message)]) == (E.INVALID_PARAMS, message), text


@pytest.mark.parametrize(("method", "params", "takes"), [
    ("transfer", {"address": OTHER, "amount": 5, "bogus": True}, "(this method takes: address, amount)"),
    ("stake", {"service_node_pubkey": PUBKEY, "percent": 5, "bogus": True},
     "(this method takes: service_node_pubkey, amount, percent)"),
    ("register_service_node", {"registration_cmd": "x", "bogus": True}, "(this method takes: registration_cmd)"),
    ("request_stake_unlock", {"service_node_pubkey": PUBKEY, "bogus": True},
     "(this method takes: service_node_pubkey)"),
    ("get_balance", {"bogus": True}, "(this method takes none)"),
    ("get_address", {"bogus": True}, "(this method takes none)"),
])
def test_unknown_rpc_params_are_refused_naming_them(rpc: WalletRpc, method: str, params: dict[str, Any],
                                                    takes: str) -> None:
    assert _refusal(rpc, method, params) == (E.INVALID_PARAMS, f"Invalid params: unknown parameter 'bogus' {takes}")


def test_good_params_pass_the_checks_and_reach_the_daemon(rpc: WalletRpc) -> None:
    """The largest amount and a string percent are let through: the daemon (down) is asked next."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("transfer", {"address": OTHER, "amount": 2**63 - 1}),
        ("stake", {"service_node_pubkey": PUBKEY, "percent": "12.5%"}),
        ("stake", {"service_node_pubkey": PUBKEY, "amount": 10**9}),
        ("get_balance", {}),
    ]
    for method, params in calls:
        code, text = _refusal(rpc, method, params)
        assert code == -2 and "is snoded running?" in text, (method, text)
    assert asyncio.run(rpc.call("get_address", {})) == {"address": rpc.service.address}


async def test_a_foreign_host_gets_a_403_that_names_no_option(rpc: WalletRpc) -> None:
    app = make_app(rpc, check_bind("127.0.0.1:38094"))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": "get_address"}
        refused = await client.post("/json_rpc", json=body, headers={"Host": "evil.example:38094"})
        text = await refused.text()
        assert refused.status == 403
        assert text == "Forbidden: Host 'evil.example:38094' is not this server's address; call it by 127.0.0.1\n"
        assert "--" not in text
        served = await client.post("/json_rpc", json=body, headers={"Host": "127.0.0.1:38094"})
        assert (await served.json())["result"] == {"address": rpc.service.address}


def test_a_registration_line_with_a_huge_number_is_refused_in_one_line(rpc: WalletRpc) -> None:
    """The wallet RPC's register_service_node and the CLI's share check_registration_line; a
    number past int()'s 4,300 digits never reaches int()."""
    operator = encode_address(REGTEST.address_prefix, key_from_label("operator").public)
    expected = [
        "operator amount '" + "9" * 40 + "' is not a whole number of atomic units",
        "operator cut: percent '" + "9" * 30 + "...' is too large (5000 digits)",
        "expiry '" + "9" * 40 + "' is not a Unix timestamp",
    ]
    for numbers, reason in zip([("0", "9" * 5000, "123"), ("9" * 5000, "100", "123"), ("0", "100", "9" * 5000)],
                               expected):
        cut, amount, expiry = numbers
        line = f"register_service_node {cut} {operator} {amount} {expiry} {PUBKEY} {'cd' * 64}"
        code, text = _refusal(rpc, "register_service_node", {"registration_cmd": line})
        assert code == -1 and reason in text and len(text) < 200, text


@pytest.mark.parametrize("parse", [parse_amount, parse_coins])
def test_amounts_too_long_for_int_are_refused_as_too_large(parse: Any) -> None:
    with pytest.raises(InvalidAmount, match=r"^amount '1{30}\.\.\.' is too large \(5000 digits\)$"):
        parse("1" * 5000)
    assert parse("2.5") == 2_500_000_000


def test_percents_too_long_for_int_are_refused() -> None:
    with pytest.raises(InvalidAmount, match="must be above 0% and at most 100%$"):
        parse_stake_percent("1" * 5000 + "%")


@pytest.mark.parametrize(("text", "message"), [
    ("nothost", "--daemon-address: 'nothost' is not of the form HOST:PORT or http://HOST:PORT"),
    ("ftp://x:1", "--daemon-address: 'ftp://x:1' is not of the form HOST:PORT or http://HOST:PORT"),
    ("bad_host:1", "--daemon-address: 'bad_host' is not a valid host name or IP address"),
])
def test_a_bad_daemon_address_says_the_form_help_gives(text: str, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        DaemonClient(text)
    assert str(refused.value) == message


def test_a_daemon_address_may_name_a_host() -> None:
    """--help promises HOST:PORT: a host name is taken as well as an IP."""
    assert DaemonClient("localhost:38091").url == "http://localhost:38091"
    assert DaemonClient("http://node.example:38091/").url == "http://node.example:38091"
