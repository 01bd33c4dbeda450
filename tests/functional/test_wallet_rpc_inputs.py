"""The wallet's JSON-RPC server, a real `snode-wallet --rpc-bind` process against a real regtest
daemon, fed what a careless or hostile client sends: amounts beyond 64 bits, values of the wrong
type, unknown parameter names, a foreign Host header. Each gets one -32602 naming the parameter
(or a 403 naming no option the wallet does not have), nothing reaches the mempool, the server
prints no traceback and keeps serving: a good transfer afterwards is sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from snode.params import COIN, REGTEST
from snode.wallet import openrpc as wallet_openrpc
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled
from tests.functional.wallet_helpers import WalletServer, funded, mine

log = narrator(__name__)


def test_wallet_rpc_refuses_bad_params_and_foreign_hosts(sn: Any, tmp_path: Path) -> None:
    wallets = funded(sn, tmp_path, {"payer": 10 * COIN, "payee": 1 * COIN})
    payer, payee = wallets["payer"], wallets["payee"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    ip = next_loopback_ip()
    server_log = tmp_path / "wallet-rpc.log"
    log.info("Start the payer's wallet RPC server")
    server = WalletServer(payer, ip, server_log)
    try:
        log.info("transfer of 2**64 atomic units, of true, of \"5\", of 1.5: -32602 naming amount")
        for amount, rule in [(2**64, "must be at most 9223372036854775807"),
                             (True, "must be an integer, not true/false"),
                             ("5", "must be an integer, not a string"), (1.5, "must be an integer, not a number"),
                             (0, "must be at least 1")]:
            error = server.call("transfer", address=payee.address, amount=amount)["error"]
            assert_equal(error, {"code": -32602, "message": f"Invalid params: amount: {rule}"})
        log.info("Unknown parameters: refused naming them, as the daemon's admin RPC refuses them")
        error = server.call("transfer", address=payee.address, amount=COIN, bogus=True)["error"]
        assert_equal(error["message"], "Invalid params: unknown parameter 'bogus' (this method takes: address, amount)")
        error = server.call("get_balance", bogus=True)["error"]
        assert_equal(error["message"], "Invalid params: unknown parameter 'bogus' (this method takes none)")
        log.info("stake: a huge percent, both amount and percent, a short key: -32602 naming the rule")
        for params, message in [
            ({"service_node_pubkey": pubkey, "percent": 10**40}, "percent: must be above 0 and at most 100"),
            ({"service_node_pubkey": pubkey, "amount": COIN, "percent": 5},
             "give exactly one of amount (atomic units) and percent"),
            ({"service_node_pubkey": pubkey[:10], "percent": 5}, "service_node_pubkey: must be 64 hex characters"),
        ]:
            error = server.call("stake", **params)["error"]
            assert_equal(error, {"code": -32602, "message": f"Invalid params: {message}"})
        log.info("A foreign Host header: 403 that names no option (snode-wallet has no --rpc-allow-host)")
        status, _, text = server.post({"jsonrpc": "2.0", "id": 1, "method": "get_address"},
                                      {"Host": "evil.example:9234"})
        assert_equal((status, text), (403, f"Forbidden: Host 'evil.example:9234' is not this server's address; "
                                           f"call it by {ip}\n"))
        assert_equal(sn.get_mempool()["transactions"], [], "mempool after the refusals")
        log.info("The server still serves: a transfer of 2 coins is sent and arrives")
        sent = server.call("transfer", address=payee.address, amount=2 * COIN)["result"]
        assert len(sent["txid"]) == 64
        mine(sn)
        assert_equal(payee.balances()["balance"], 3 * COIN)
    finally:
        code = server.stop()
    assert_equal(code, 0)
    printed = server_log.read_text()
    assert "Traceback" not in printed and "Error" not in printed, printed


def _fields(record: type[msgspec.Struct]) -> set[str]:
    return set(record.__struct_fields__)


def test_wallet_rpc_discover_answers_its_document_and_the_answers_are_as_documented(sn: Any, tmp_path: Path) -> None:
    wallets = funded(sn, tmp_path, {"payer": 10 * COIN, "payee": 1 * COIN})
    server = WalletServer(wallets["payer"], next_loopback_ip(), tmp_path / "wallet-rpc.log")
    try:
        log.info("rpc.discover answers docs/wallet-openrpc.json's document")
        assert_equal(server.call("rpc.discover")["result"], json.loads(json.dumps(wallet_openrpc.document())))
        log.info("What get_address, get_balance and transfer answer is their documented result record")
        answers: list[tuple[str, dict[str, Any], type[msgspec.Struct]]] = [
            ("get_address", {}, wallet_openrpc.AddressResult), ("get_balance", {}, wallet_openrpc.BalanceResult),
            ("transfer", {"address": wallets["payee"].address, "amount": COIN}, wallet_openrpc.SendResult),
        ]
        for method, params, record in answers:
            result = server.call(method, **params)["result"]
            assert_equal(set(result), _fields(record), method)
            msgspec.convert(result, record)
    finally:
        code = server.stop()
    assert_equal(code, 0)


def test_a_second_server_of_one_wallet_file_is_refused_and_the_first_keeps_its_login(sn: Any, tmp_path: Path) -> None:
    wallet = funded(sn, tmp_path, {"payer": 1 * COIN})["payer"]
    server = WalletServer(wallet, next_loopback_ip(), tmp_path / "wallet-rpc.log")
    try:
        log.info("A second snode-wallet serving the same file: refused (it once overwrote the first's cookie, "
                 "then removed it at its stop)")
        second = subprocess.run([sys.executable, "-m", "snode.wallet", *wallet.args(), "--rpc-bind",
                                 f"{next_loopback_ip()}:{REGTEST.wallet_rpc_port}"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=scaled(60))
        assert second.returncode != 0
        assert f"--rpc-server: {wallet.path} is served by another snode-wallet (pid {server.process.pid})" in (
            second.stderr), second.stderr
        assert "Traceback" not in second.stderr
        assert_equal(server.call("get_address")["result"], {"address": wallet.address}, "the first, after it")
    finally:
        assert_equal(server.stop(), 0)
