"""The interactive wallet in a real terminal (pexpect pty) against a real regtest daemon: the
registration's (Yes/No) question (asked once, also for `--command` on a terminal: an answer that
is neither cancels, as No does, and sends nothing; Yes sends and prints the id), unknown commands echoed as
typed, command completion, help, the idle lock that asks for the password again, a mistyped
password at start-up asked again (three tries), no empty or short password for a new wallet, and the
wallet JSON-RPC server (loopback only, asking for the login in its cookie file) with its
get_address, get_balance, transfer and stake methods.

A terminal wallet is a pexpect child reading and writing a pty; each `expect` waits for the text
an operator would see, with timeouts scaled like every other wait of the suite.
"""

from __future__ import annotations

import os
import re
import stat
import sys

import pexpect

from snode.api.credentials import Login
from snode.params import COIN, REGTEST
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled
from tests.functional.sn_helpers import POOL_MIN, SOLO, record
from tests.functional.wallet_helpers import Wallet, WalletServer, funded, mine, registration_cmd, run_wallet

PROMPT = r"\[wallet snr1"

log = narrator(__name__)

def start(node, path, *extra: str) -> pexpect.spawn:
    """The wallet of file `path` in a terminal, before its password is typed."""
    args = ["-m", "snode.wallet", "--regtest", "--daemon-address", f"{node.ip}:{node.rpc_port}",
            "--wallet-file", str(path), *extra]
    env = dict(os.environ, PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
    return pexpect.spawn(sys.executable, args, env=env, encoding="utf-8",
                         timeout=scaled(30), dimensions=(50, 250))


def spawn(wallet: Wallet, *extra: str) -> pexpect.spawn:
    """The wallet in a terminal, unlocked, at its prompt."""
    child = start(wallet.node, wallet.path, *extra)
    child.expect("Wallet password: ")
    child.sendline(wallet.password_file.read_text().rstrip("\n"))
    child.expect(PROMPT)
    return child


def close(child: pexpect.spawn) -> None:
    """Type exit: the wallet ends with status 0."""
    child.sendline("exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_registration_asks_yes_or_no(sn, tmp_path):
    operator = funded(sn, tmp_path, {"operator": 200_010 * COIN})["operator"]
    line = registration_cmd(sn, operator.address, SOLO, cut="1")
    child = spawn(operator)

    log.info("Paste a registration line and answer maybe: cancelled at once (DESIGN 8), nothing sent")
    child.sendline(line)
    child.expect(r"Operator stake: 200000 coins")
    child.expect(r"Operator fee: 1 %")
    child.expect(r"\(Yes/No\):")
    child.sendline("maybe")  # neither Yes nor No: "anything else prints Transaction cancelled."
    child.expect("Transaction cancelled.")
    assert "Please answer" not in child.before
    child.expect(PROMPT)
    assert "Please answer" not in child.before and "(Yes/No)" not in child.before
    assert_equal(sn.get_mempool()["transactions"], [])
    log.info("Paste it again and answer No: cancelled at once; a lone No is an unknown command")
    child.sendline(line)
    child.expect(r"\(Yes/No\):")
    child.sendline("No")
    child.expect("Transaction cancelled.")
    assert "Please answer" not in child.before
    child.expect(PROMPT)
    child.sendline("No")
    child.expect("Error: unknown command 'No'. Type help for the list.")
    child.expect(PROMPT)
    assert_equal(sn.get_mempool()["transactions"], [])

    log.info("--command on a terminal: maybe cancels at once too, exit status 1, no --yes hint")
    once = pexpect.spawn(sys.executable, ["-m", "snode.wallet", *operator.args(), "--command", line],
                         encoding="utf-8", timeout=scaled(30), dimensions=(50, 250))
    once.expect(r"\(Yes/No\):")
    once.sendline("maybe")
    once.expect("Transaction cancelled.")
    once.expect(pexpect.EOF)
    assert "Please answer" not in once.before and "--yes" not in once.before, once.before
    once.close()
    assert_equal(once.exitstatus, 1)
    assert_equal(sn.get_mempool()["transactions"], [])

    log.info("Paste it and answer yes: sent, its id printed; mined, the node is funded")
    child.sendline(line)
    child.expect(r"\(Yes/No\):")
    child.sendline("yes")
    child.expect(r"Transaction ID: ([0-9a-f]{64})")
    txid = child.match.group(1)
    child.expect(PROMPT)
    pool = sn.get_mempool()["transactions"]
    assert_equal([(t["txid"], t["kind"]) for t in pool], [(txid, "registration")])
    mine(sn)
    assert record(sn, sn.get_service_node_key()["service_node_pubkey"])["funded"] is True

    log.info("Paste it once more: refused, already registered")
    child.sendline(line)
    child.expect("Error: service node [0-9a-f]{64} is already registered")
    child.expect(PROMPT)
    close(child)


def test_completion_help_and_idle_lock(sn, tmp_path):
    wallet = Wallet(sn, tmp_path, "idle")
    child = spawn(wallet)
    log.info("Tab completes show_tr to show_transfers")
    # The completed word is judged by its answer, not by its echo: the terminal may redraw it
    # in pieces ("show_tr", then "ansfers") between escape sequences.
    child.send("show_tr\t")
    child.send("\r")
    child.expect("No transfers yet.")
    child.expect(PROMPT)
    log.info("help lists the commands; help stake explains staking")
    child.sendline("help")
    child.expect(r"register_service_node <operator_cut>")
    child.expect(r"stake <service_node_pubkey> <amount>\|<percent>%")
    child.expect(PROMPT)
    child.sendline("help stake")
    child.expect("100% fills it. Stakes still in the mempool are not counted until they are mined.")
    child.expect("Minimum contribution: the node's open remainder divided by its free contributor slots")
    child.expect(PROMPT)
    close(child)
    # The lock in a wallet of its own: with --idle-timeout on the one above, a loaded machine's
    # pause between two typed lines could lock it mid-test (CI, stop 28).
    child = spawn(wallet, "--idle-timeout", "5")
    log.info("Type nothing for 5 s: the wallet locks; a wrong password is refused, the right one unlocks")
    child.expect("Wallet locked after 5 seconds without input.", timeout=scaled(30))
    child.expect("Password to unlock the wallet:")
    child.sendline("not it")
    child.expect("Error: wrong password")
    child.expect("Password to unlock the wallet:")
    child.sendline(wallet.password_file.read_text().rstrip("\n"))
    child.expect("Wallet unlocked.")
    child.expect(PROMPT)
    child.sendline("address")
    child.expect(wallet.address)
    close(child)


def test_a_mistyped_password_at_start_is_asked_again(nodes, tmp_path):
    wallet = Wallet(nodes.add(start=False), tmp_path, "typo")
    right = wallet.password_file.read_text().rstrip("\n")
    log.info("Mistype the password twice at start-up: asked again; the right one opens the wallet")
    child = start(wallet.node, wallet.path)
    for typo in ("wrong", ""):
        child.expect("Wallet password: ")
        child.sendline(typo)
        child.expect(f"Error: wrong password for wallet file {wallet.path}: try again.")
    child.expect("Wallet password: ")
    child.sendline(right)
    child.expect(PROMPT)
    close(child)

    log.info("Mistype it three times: the wallet gives up with status 1")
    child = start(wallet.node, wallet.path)
    for attempt in range(3):
        child.expect("Wallet password: ")
        child.sendline(f"wrong {attempt}")
    child.expect(f"Error: wrong password for wallet file {wallet.path}\r\n")
    child.expect(pexpect.EOF)
    assert "Wallet password" not in child.before
    child.close()
    assert_equal(child.exitstatus, 1)


def test_a_new_wallet_on_a_terminal_refuses_an_empty_password(nodes, tmp_path):
    node = nodes.add(start=False)
    path = tmp_path / "new.wallet"
    log.info("--generate: an empty password, a short one and two differing ones are asked again, then given up")
    child = start(node, path, "--generate")
    child.expect("Wallet password: ")
    child.sendline("")
    child.expect("Error: an empty password is not allowed for a new wallet: try again.")
    child.expect("Wallet password: ")
    child.sendline("pw")
    child.expect("Error: a wallet password needs at least 8 characters, this one has 2: try again.")
    child.expect("Wallet password: ")
    child.sendline("one password")
    child.expect("Repeat the password: ")
    child.sendline("other password")
    child.expect("Error: the two passwords differ: run the command again")
    child.expect(pexpect.EOF)
    child.close()
    assert_equal(child.exitstatus, 1)
    assert not path.exists()

    log.info("Open a missing file: the wallet offers to create one, and refuses an empty password")
    child = start(node, path)  # no file: the wallet offers to create one
    child.expect(r"does not exist. Create a new wallet\? \(Yes/No\): ")
    child.sendline("maybe")
    child.expect("Please answer Yes or No.")
    child.expect(r"Create a new wallet\? \(Yes/No\): ")
    child.sendline("y")
    child.expect("Wallet password: ")
    child.sendline("")
    child.expect("Error: an empty password is not allowed")
    child.expect("Wallet password: ")
    child.sendline("open sesame")
    child.expect("Repeat the password: ")
    child.sendline("open sesame")
    child.expect(r"Generated new wallet snr1\S+")
    child.expect(PROMPT)
    close(child)
    log.info("Open the new wallet with its password")
    child = start(node, path)
    child.expect("Wallet password: ")
    child.sendline("open sesame")
    child.expect(PROMPT)
    close(child)


def test_wallet_rpc_server(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"operator": 130_010 * COIN, "staker": 150_000 * COIN})
    operator, staker = wallets["operator"], wallets["staker"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    log.info("--rpc-bind on 0.0.0.0 is refused: local only")
    refused = run_wallet(staker.args() + ["--rpc-bind", "0.0.0.0:38094"])
    assert refused.rc == 1 and "local only" in refused.err

    ip = next_loopback_ip()
    url = f"http://{ip}:{REGTEST.wallet_rpc_port}/json_rpc"
    log.info("Start the wallet's RPC server on a loopback address: its login is in a new cookie file")
    server_log = tmp_path / "wallet-rpc.log"
    server = WalletServer(operator, ip, server_log)
    try:
        assert_equal(stat.S_IMODE(server.cookie.stat().st_mode), 0o600)
        assert re.fullmatch(r"__cookie__:[0-9a-f]{64}\n", server.cookie.read_text()), server.cookie.read_text()
        log.info("Without the login, or with a wrong one: 401, a challenge and one line naming the cookie file")
        body = {"jsonrpc": "2.0", "id": 1, "method": "transfer",
                "params": {"address": staker.address, "amount": COIN}}
        wrong = Login("__cookie__", "0" * 64).header()
        for headers in (None, {"Authorization": wrong}, {"Authorization": "Bearer x"}):
            status, answer_headers, text = server.post(body, headers, login=headers is not None)
            assert_equal((status, answer_headers["WWW-Authenticate"], text), (
                401, 'Basic realm="snode-wallet"',
                f"Unauthorized: send the login in {server.cookie} (user:password) as HTTP Basic auth\n"))
        assert_equal(sn.get_mempool()["transactions"], [], "mempool after the refused transfers")
        log.info("get_balance; register_service_node, then again with the coins spent: refused")
        balance = server.call("get_balance")["result"]
        assert_equal((balance["balance"], balance["unlocked_balance"]), (130_010 * COIN, 130_010 * COIN))
        line = registration_cmd(sn, operator.address, POOL_MIN, cut="5")
        sent = server.call("register_service_node", registration_cmd=line)["result"]
        assert len(sent["txid"]) == 64 and sent["fee"] > 0
        again = server.call("register_service_node", registration_cmd=line)
        assert again["error"]["code"] == -1 and "is not enough" in again["error"]["message"]
        assert "more coins in unconfirmed transactions unlock" in again["error"]["message"]
        waiting = server.call("get_balance")["result"]
        assert_equal((waiting["pending_staked"], waiting["staked"]), (POOL_MIN, 0))
        mine(sn, 11)
        log.info("transfer without an amount and an unknown method: JSON-RPC errors; then a transfer")
        bad = server.call("transfer", address=staker.address)
        assert bad["error"]["code"] == -32602 and "'amount'" in bad["error"]["message"]
        unknown = server.call("sweep_all")
        assert unknown["error"]["code"] == -32601
        paid = server.call("transfer", address=staker.address, amount=3 * COIN)["result"]
        assert len(paid["txid"]) == 64
        mine(sn, 11)
        log.info("stake 5 %: below the minimum; stake 10 %: 10,000 coins, staked once mined")
        low = server.call("stake", service_node_pubkey=pubkey, percent=5)
        assert "below the minimum contribution of 10000 coins" in low["error"]["message"]
        staked = server.call("stake", service_node_pubkey=pubkey, percent=10)["result"]
        assert_equal(staked["amount"], 10_000 * COIN)
        mine(sn)
        after = server.call("get_balance")["result"]
        assert_equal((after["staked"], after["pending_staked"]), (POOL_MIN + 10_000 * COIN, 0))
    finally:
        log.info("SIGTERM stops the server with status 0 and removes the cookie file")
        code = server.stop()
    assert_equal(code, 0)
    assert not server.cookie.exists()
    assert f"listening on {url}; login in {server.cookie}" in server_log.read_text()
    assert_equal(record(sn, pubkey)["total_contributed"], POOL_MIN + 10_000 * COIN)
