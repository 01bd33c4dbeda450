"""snode-wallet against real regtest daemons, run as an operator runs it (`--command`, `--yes`).

Solo: the faucet wallet (restored from the published words) funds a new wallet, whose balance
shows Unlocked < Balance and the height at which the locked coins unlock (exactly when they do);
a spend refused for want of unlocked coins says when more unlock. The daemon's registration
command pasted unchanged registers a funded node with the right fee and height; until it is
mined, `balance` and `stakes` show it as pending. Pool: operator 100,000 coins and a 5 % cut
(Await), then `stake <pk> 60000` (pending until mined) and `stake <pk> 100%` fill it. Every
refusal of the registration and stake commands prints one line naming what to fix, exits 1 and
sends nothing (the mempool is unchanged). A wrong password, a damaged wallet file, a wallet file
other users may read and an empty or short password for a new wallet give one line, exit 1, and
leave the file as it was (or make none). A wallet file written before the MODERATE key
derivation (tests/fixtures) opens and is rewritten at MODERATE cost; the test suite's cheap cost
(SNODE_TEST_WALLET_KDF) is refused on mainnet.

The wallet runs as a child process through `wallet_helpers.Wallet` against a regtest service
node (`sn`); the wallet-file tests need no daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from snode.core.registration import format_command, sign_registration
from snode.core.transactions import Reservation
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST, REGTEST_FAUCET_WORDS
from snode.wallet.commands import CANCELLED
from tests.functional.framework import assert_equal, faucet_key, narrator
from tests.functional.sn_helpers import POOL_MIN, SOLO, record
from tests.functional.wallet_helpers import Run, Wallet, funded, mine, registration_cmd, run_wallet

PREFIX = REGTEST.address_prefix
UNLOCK = REGTEST.unlock_confirmations
YES_HINT = "Add --yes to confirm it without a question (standard input is not a terminal)."
"""What --command adds after `Transaction cancelled.` when no Yes came from a non-terminal."""
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

log = narrator(__name__)


def test_solo_registration_from_the_faucet(sn, tmp_path):
    log.info("Restore the faucet wallet from its published words; make an operator wallet")
    faucet = Wallet(sn, tmp_path, "faucet", words=REGTEST_FAUCET_WORDS)
    assert_equal(faucet.public, faucet_key().public, "faucet words restore the faucet key")
    operator = Wallet(sn, tmp_path, "operator")
    log.info("The faucet pays the operator 200,100 coins; mine it: balance shown, all locked")
    sent = faucet.ok(f"transfer {operator.address} 200100", yes=True)
    assert sn.get_transaction(txid=sent.txid())["in_pool"] is True
    mine(sn)
    locked = operator.balances()
    assert_equal(locked["balance"], 200_100 * COIN)
    assert locked["unlocked"] < locked["balance"]
    # The coins count as unlocked once the tip is UNLOCK - 1 blocks past the block that paid them.
    unlock_at = sn.get_height()["height"] + UNLOCK - 1
    lines = operator.ok("balance").lines
    assert_equal(lines[:3], ["Balance: 200100 coins", "Unlocked balance: 0 coins",
                             f"Locked: 200100 coins, unlocking at height {unlock_at} (in {UNLOCK - 1} blocks)"])
    log.info("A transfer from locked coins is refused, saying when they unlock")
    operator.refused(f"transfer {faucet.address} 1",
                     "unlocked balance 0 is not enough: 1 coin plus a fee of ")
    operator.refused(f"transfer {faucet.address} 1",
                     f"; 200100 more coins unlock at height {unlock_at}, in {UNLOCK - 1} blocks")
    log.info("Mine to one block before the unlock height, then to it: unlocked exactly then")
    mine(sn, UNLOCK - 2)
    assert f"unlocking at height {unlock_at} (in 1 block)" in operator.ok("balance").out
    assert_equal(operator.balances()["unlocked"], 0)
    mine(sn)
    assert_equal(operator.balances(), {"balance": 200_100 * COIN, "unlocked": 200_100 * COIN})
    assert "Locked" not in operator.ok("balance").out

    log.info("Paste the daemon's registration command (2.5 % fee) into the wallet")
    line = registration_cmd(sn, operator.address, SOLO, cut="2.5")
    done = operator.ok(line, yes=True)
    assert "Operator stake: 200000 coins" in done.out and "Operator fee: 2.5 %" in done.out
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    log.info("Until it is mined: balance and stakes show it pending, the change unconfirmed")
    pending = operator.ok("balance").lines
    assert f"Staked (pending): 200000 coins on service node {pubkey} (registration in the mempool, " \
           "not yet mined)" in pending
    assert "Staked: 0 coins on 0 service nodes" in pending
    assert any(line.startswith("Pending (unconfirmed): 99.9") for line in pending), pending
    assert_equal(operator.ok("stakes").lines, [
        f"{pubkey}  mine: 200000 (pending)  registration in the mempool, not yet mined",
        "Total staked: 0 coins, plus 200000 coins (pending)"])
    operator.refused(f"transfer {faucet.address} 1", "more coins in unconfirmed transactions "
                     f"unlock {UNLOCK} confirmations after they are mined")
    log.info("Mine it: the node is funded with the right fee, at this height")
    mine(sn)
    height = sn.get_height()["height"]
    rec = record(sn, pubkey)
    assert_equal(rec["funded"], True)
    assert_equal(rec["total_contributed"], 200_000_000_000_000)
    assert_equal(rec["operator_fee"], 25_000)
    assert_equal(rec["registration_height"], height)
    assert_equal(sn.get_transaction(txid=done.txid())["height"], height)

    log.info("stakes and balance show the stake; the change is locked; history lists it")
    stakes = operator.ok("stakes").out
    assert pubkey in stakes and "mine: 200000" in stakes and "200000 / 200000" in stakes
    after = operator.balances()
    assert 99 * COIN < after["balance"] < 100 * COIN
    assert "Staked: 200000 coins on 1 service node" in operator.ok("balance").out
    assert "pending" not in operator.ok("stakes").out
    operator.refused(f"transfer {faucet.address} 1", f"more coins unlock at height "
                     f"{sn.get_height()['height'] + UNLOCK - 1}, in {UNLOCK - 1} blocks")
    history = operator.ok("show_transfers").lines
    assert [entry.split()[1] for entry in history[1:]] == ["in", "registration"]


def test_pool_node_filled_by_two_contributors(sn, tmp_path):
    log.info("Fund an operator, alice and bob; the operator registers a pool node with a 5 % cut")
    wallets = funded(sn, tmp_path, {"operator": 100_010 * COIN, "alice": 60_010 * COIN,
                                    "bob": 40_010 * COIN})
    operator, alice, bob = wallets["operator"], wallets["alice"], wallets["bob"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    mine(sn)
    rec = record(sn, pubkey)
    assert_equal((rec["funded"], rec["operator_fee"], rec["total_contributed"]),
                 (False, 50_000, POOL_MIN))
    assert "Await" in operator.ok("stakes").out

    log.info("alice stakes 60,000: pending until mined")
    alice.ok(f"stake {pubkey} 60000", yes=True)
    expires = rec["leaves_at"]  # an open pool's stakes come back if it is not filled by then
    assert_equal(alice.ok("stakes").lines, [
        f"{pubkey}  mine: 0 + 60000 (pending)  Await   100000 / 200000  returned at height {expires} "
        "unless filled by then",
        "Total staked: 0 coins, plus 60000 coins (pending)"])
    assert (f"Staked (pending): 60000 coins on service node {pubkey} (stake in the mempool, "
            "not yet mined)") in alice.ok("balance").lines
    mine(sn)
    assert "pending" not in alice.ok("stakes").out + alice.ok("balance").out
    assert_equal(record(sn, pubkey)["total_contributed"], 160_000 * COIN)
    log.info("bob stakes 100%, the 40,000 that are left: the node is funded by 3 contributors")
    done = bob.ok(f"stake {pubkey} 100%", yes=True)
    assert "Staking 40000 coins" in done.out
    mine(sn)
    rec = record(sn, pubkey)
    assert_equal(rec["funded"], True)
    assert_equal(rec["total_contributed"], rec["staking_requirement"])
    assert_equal(len(rec["contributors"]), 3)
    assert_equal({c["address"]: c["amount"] for c in rec["contributors"]},
                 {operator.address: POOL_MIN, alice.address: 60_000 * COIN, bob.address: 40_000 * COIN})
    assert "mine: 60000" in alice.ok("stakes").out


def _own_line(operator: Wallet, expiry: int) -> str:
    """A correctly signed line for a key of our own, to reach the expiry rules."""
    reg = sign_registration(key_from_label("own sn"), REGTEST, 0,
                            (Reservation(operator.public, SOLO),), expiry)
    return format_command(reg, REGTEST)


def test_registration_refusals_send_nothing(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"operator": 200_010 * COIN, "poor": 150_000 * COIN})
    operator, poor = wallets["operator"], wallets["poor"]
    line = registration_cmd(sn, operator.address, SOLO)
    words = line.split()
    now = sn.get_block(height=sn.get_height()["height"])["timestamp"]

    log.info("Paste broken, expired, foreign, unaffordable and forged lines: each refused, nothing sent")
    operator.refused(" ".join(words[:-1]), "malformed")
    operator.refused(line.replace(f" {PREFIX}1", " snt1", 1), "wrong network prefix")
    address = words[2]
    operator.refused(line.replace(address, address[:20] + " " + address[20:]), "contains whitespace")
    operator.refused(_own_line(operator, now - 3600), "expired: re-generate the command")
    operator.refused(_own_line(operator, now + 15 * 86400), "more than 14 days ahead: re-generate")
    poor.refused(line, "not this wallet's address")
    poor.refused(registration_cmd(sn, poor.address, SOLO), "unlocked balance 150000 is not enough")
    bad_sig = words[-1][:10] + ("0" if words[-1][10] != "0" else "1") + words[-1][11:]
    operator.refused(" ".join(words[:-1] + [bad_sig]), "signature is not valid")
    operator.refused(line.replace(f" {SOLO} ", f" {SOLO - COIN} "), "signature is not valid")

    log.info("Answer No, then nothing, to the confirmation: cancelled, nothing sent")
    answered_no = operator.run(line, stdin="No\n")
    assert answered_no.rc == 1 and answered_no.lines[-1] == "Transaction cancelled."
    assert "(Yes/No)" in answered_no.out and "Operator stake: 200000 coins" in answered_no.out
    assert_equal(sn.get_mempool()["transactions"], [])
    ignored = operator.run(line, stdin="")
    assert ignored.rc == 1 and ignored.lines[-1] == f"{CANCELLED} {YES_HINT}", ignored.out
    assert_equal(sn.get_mempool()["transactions"], [])

    log.info("Register for real and mine it: the same line again is refused")
    operator.ok(line, yes=True)
    mine(sn)
    operator.refused(line, "is already registered")


def test_stake_refusals_send_nothing(sn, tmp_path):
    log.info("Fund four wallets; the operator registers a pool node")
    wallets = funded(sn, tmp_path, {"operator": 100_010 * COIN, "rich": 120_000 * COIN,
                                    "poor": 5_000 * COIN, "solo": 200_010 * COIN})
    operator, rich, poor = wallets["operator"], wallets["rich"], wallets["poor"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    mine(sn)

    log.info("Stakes to unknown or malformed keys, too small, bad percents and unaffordable: refused")
    rich.refused(f"stake {'ab' * 32} 100", "is not registered")
    rich.refused(f"stake {pubkey[:10]} 100", "not 64 hex characters")
    rich.refused(f"stake {pubkey} 5000", "below the minimum contribution of 10000 coins")
    rich.refused(f"stake {pubkey} 5%", "below the minimum contribution of 10000 coins")
    for bad in ("0%", "101%", "-3%"):
        rich.refused(f"stake {pubkey} {bad}", "must be above 0% and at most 100%")
    rich.refused(f"stake {pubkey} abc%", "percent 'abc%' is not a number")
    rich.refused(f"stake {pubkey} 1,000", "comma")
    poor.refused(f"stake {pubkey} 10000", "unlocked balance 5000 is not enough")

    log.info("A stake above what the node needs is capped, and the question says so")
    capped = rich.run(f"stake {pubkey} 150000", stdin="no\n")
    assert "The node needs only 100000 more coins: staking 100000 instead of 150000." in capped.out
    assert capped.lines[-1] == "Transaction cancelled."
    assert_equal(sn.get_mempool()["transactions"], [])
    log.info("Stake it for real: the node is full, and a further stake is refused")
    rich.ok(f"stake {pubkey} 150000", yes=True)
    mine(sn)
    assert_equal(record(sn, pubkey)["total_contributed"], SOLO)
    rich.refused(f"stake {pubkey} 10", "is already full")


def test_transfer_refusals_and_usage(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"payer": 10 * COIN})
    payer = wallets["payer"]
    other = Wallet(sn, tmp_path, "other")
    log.info("Transfers too large, to another network, too precise and of zero: refused")
    payer.refused(f"transfer {other.address} 11", "unlocked balance 10 is not enough")
    payer.refused(f"transfer {other.address.replace('snr1', 'sn1')} 1", "wrong network prefix")
    payer.refused(f"transfer {other.address} 1.0000000001", "more than 9 decimal places")
    payer.refused(f"transfer {other.address} 0", "above 0")
    log.info("A transfer without arguments prints its usage; unknown commands are echoed as typed")
    usage = payer.run("transfer")
    assert usage.lines == ["Usage: transfer <address> <amount>"]
    unknown = payer.run("fly me")
    assert unknown.rc == 1 and "unknown command 'fly'" in unknown.out
    assert "unknown command 'No'" in payer.run("No").out  # echoed as typed
    log.info("Piped to --command, anything but Yes cancels at once (no second question), saying to add --yes")
    unclear = payer.run(f"transfer {other.address} 1", stdin="maybe\n")
    assert unclear.rc == 1 and unclear.lines[-1] == f"{CANCELLED} {YES_HINT}", unclear.out
    assert "Please answer" not in unclear.out and "Sending 1 coin to" in unclear.out
    assert "Send 1 coin plus a fee of 0." in unclear.out
    closed = payer.run(f"transfer {other.address} 1")  # standard input closed: no answer at all
    assert closed.rc == 1 and closed.lines[-1] == f"{CANCELLED} {YES_HINT}", closed.out
    declined = payer.run(f"transfer {other.address} 1", stdin="No\n")  # a plain No needs no hint
    assert declined.rc == 1 and declined.lines[-1] == CANCELLED and "--yes" not in declined.out, declined.out
    assert_equal(sn.get_mempool()["transactions"], [])
    log.info("A transfer of 2.5 coins arrives")
    payer.ok(f"transfer {other.address} 2.5", yes=True)
    mine(sn)
    assert_equal(other.balances()["balance"], 2_500_000_000)


def test_daemon_down_is_one_line(tmp_path, nodes):
    node = nodes.add(start=False)
    wallet = Wallet(node, tmp_path, "lonely")
    log.info("balance with the daemon not running: one line asking whether snoded runs")
    result = wallet.run("balance")
    assert result.rc == 1
    assert result.lines == [f"Error: Unable to connect to http://{node.ip}:{node.rpc_port}: is snoded running?"]


# --- the command line (no daemon needed) -----------------------------------------------------

@pytest.mark.parametrize(("args", "line"), [
    (["--wallet-file", "."], "snode-wallet: --wallet-file: '.' is a directory: give the path of a wallet "
                             "file, such as ./wallet"),
    (["--idle-timeout", "-1"], "snode-wallet: --idle-timeout: '-1' is not a number of seconds from 0 to "
                               "999999999 (0: never lock)"),
    (["--idle-timeout", "1" * 5000], "snode-wallet: --idle-timeout: '" + "1" * 40 + "' is not a number of "
                                     "seconds from 0 to 999999999 (0: never lock)"),
    (["--bogus"], "snode-wallet: No such option '--bogus'."),
    (["--daemon-address", "nothost"], "snode-wallet: --daemon-address: 'nothost' is not of the form "
                                      "HOST:PORT or http://HOST:PORT"),
    (["--rpc", "nothost"], "snode-wallet: --daemon-address: 'nothost' is not of the form "  # snode-cli's spelling
                           "HOST:PORT or http://HOST:PORT"),
    (["--rpc-bind", "nothost"], "snode-wallet: --rpc-bind: 'nothost' is not of the form HOST:PORT"),
    (["--rpc-bind", "0.0.0.0:38094"], "snode-wallet: --rpc-bind: refusing to bind the wallet RPC to 0.0.0.0: "
                                      "it is local only; use a loopback address such as 127.0.0.1"),
    (["--regtest", "--testnet"], "snode-wallet: choose one network: --testnet or --regtest"),
])
def test_bad_command_line_input_is_one_line(tmp_path, args, line):
    log.info("snode-wallet %s: one line naming the option, exit status 1, no usage block", " ".join(args)[:40])
    own_file = [] if "--wallet-file" in args else ["--wallet-file", str(tmp_path / "w")]
    result = run_wallet([*own_file, *args, "--command", "address"])
    assert (result.rc, result.out, result.err) == (1, "", line + "\n")
    assert not (tmp_path / "w").exists()


def test_help_and_daemon_address_agree(tmp_path):
    log.info("--help says HOST:PORT; a host name and port is taken as the daemon's address")
    shown = run_wallet(["--help"])
    assert shown.rc == 0 and "--daemon-address, --rpc HOST:PORT" in shown.out and "Usage: snode-wallet" in shown.out
    password = tmp_path / "pw"
    password.write_text("password x\n")
    wallet = ["--regtest", "--wallet-file", str(tmp_path / "w"), "--password-file", str(password)]
    assert run_wallet([*wallet, "--generate", "--command", "address"]).rc == 0
    port = _closed_port()
    named = run_wallet([*wallet, "--daemon-address", f"localhost:{port}", "--command", "balance"])
    assert (named.rc, named.lines) == (1, [f"Error: Unable to connect to http://localhost:{port}: is snoded running?"])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- wallet files (no daemon needed) --------------------------------------------------------

def _open(path: Path, password_file: Path, *extra: str) -> Run:
    """Open the wallet file (no daemon) and print its address."""
    return run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password_file),
                       *extra, "--command", "address"])


@pytest.fixture
def wallet_file(tmp_path) -> tuple[Path, Path]:
    """A new wallet file (private, with 24 seed words) and its password file."""
    log.info("Generate a wallet file")
    password = tmp_path / "pw"
    password.write_text("right password\n")
    path = tmp_path / "w.wallet"
    made = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password),
                       "--generate", "--command", "address"])
    assert made.rc == 0 and "Seed words" in made.out
    words = made.lines[made.lines.index(next(line for line in made.lines if line.startswith("Seed words"))) + 1]
    assert len(words.split()) == 24
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    return path, password


def test_wrong_password_is_one_line_and_leaves_the_file(tmp_path, wallet_file):
    path, _ = wallet_file
    before = path.read_bytes()
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong password\n")
    log.info("Open it with a wrong password: one line, the file unchanged")
    result = _open(path, wrong)
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == f"Error: wrong password for wallet file {path}"
    assert path.read_bytes() == before


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_damaged_wallet_file_is_one_line_and_left_alone(wallet_file, damage):
    path, password = wallet_file
    data = path.read_bytes()
    if damage == "flip":
        at = data.index(b'"box": "') + 30
        data = data[:at] + (b"0" if data[at:at + 1] != b"0" else b"1") + data[at + 1:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = b"\x00\xff" * 50
    path.write_bytes(data)
    log.info("Open the file after a %s: one line saying it is corrupted, the file left alone", damage)
    result = _open(path, password)
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == f"Error: wallet file {path} is corrupted: restore it from its seed words"
    assert path.read_bytes() == data


def test_missing_file_existing_file_and_wrong_network(tmp_path, wallet_file):
    path, password = wallet_file
    log.info("Open a missing file: refused, none made")
    missing = _open(tmp_path / "none.wallet", password)
    assert missing.rc == 1 and "does not exist: create one with --generate" in missing.err
    assert not (tmp_path / "none.wallet").exists()
    log.info("Generate over an existing file: refused, the file unchanged")
    before = path.read_bytes()
    again = _open(path, password, "--generate")
    assert again.rc == 1 and "already exists" in again.err and path.read_bytes() == before
    log.info("Open the regtest file as testnet, and with two networks: refused, naming the fix")
    testnet = run_wallet(["--testnet", "--wallet-file", str(path), "--password-file", str(password),
                          "--command", "address"])
    assert testnet.rc == 1 and "is for regtest, not testnet: add --regtest" in testnet.err
    both = _open(path, password, "--testnet")
    assert both.rc == 1 and "choose one network" in both.err


def test_restore_from_bad_seed_file(tmp_path):
    password = tmp_path / "pw"
    password.write_text("password x\n")
    seed = tmp_path / "seed"
    seed.write_text(" ".join(REGTEST_FAUCET_WORDS.split()[:23]) + "\n")
    log.info("Restore from a seed file of 23 words: refused, no wallet made")
    result = run_wallet(["--regtest", "--wallet-file", str(tmp_path / "w"), "--password-file",
                         str(password), "--restore-seed-file", str(seed), "--command", "address"])
    assert result.rc == 1 and "seed has 23 words" in result.err
    assert not (tmp_path / "w").exists()


EMPTY = "an empty password is not allowed for a new wallet"
SHORT = "a wallet password needs at least 8 characters, this one has 7"


@pytest.mark.parametrize(("contents", "from_file", "piped"), [
    ("\n", f" is empty: {EMPTY}; write the password on its first line", f"{EMPTY}: give a password"),
    ("", f" is empty: {EMPTY}; write the password on its first line", f"{EMPTY}: give a password"),
    ("seven c\n", f": {SHORT}", f"{SHORT}: give a longer password"),
])
def test_a_new_wallet_refuses_an_empty_or_short_password(tmp_path, contents, from_file, piped):
    password = tmp_path / "pw"
    password.write_text(contents)
    path = tmp_path / "w.wallet"
    log.info("Generate a wallet with the password file %r: refused, no file made", contents)
    made = ["--regtest", "--wallet-file", str(path), "--generate", "--command", "address"]
    result = run_wallet([*made, "--password-file", str(password)])
    assert (result.rc, result.out, result.err.strip()) == (1, "", f"Error: password file {password}{from_file}")
    assert not path.exists()
    log.info("The same password piped to stdin: refused, no file made")
    typed = run_wallet(made, stdin=contents or "\n")
    assert (typed.rc, typed.err.strip()) == (1, f"Error: {piped}")
    assert not path.exists()
    log.info("Eight characters make the wallet")
    password.write_text("eight ch\n")
    assert run_wallet([*made, "--password-file", str(password)]).rc == 0 and path.exists()


def test_an_empty_password_file_for_a_wallet_is_said_to_be_empty(wallet_file, tmp_path):
    path, _ = wallet_file
    empty = tmp_path / "empty-pw"
    empty.write_text("")
    log.info("Open a wallet with an empty password file: it is said to be empty, not a wrong password")
    result = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(empty),
                         "--command", "address"])
    assert (result.rc, result.err.strip()) == (1, f"Error: password file {empty} is empty: write the wallet's "
                                                   "password on its first line")


def test_a_wallet_file_of_another_version_is_one_line_and_left_alone(wallet_file):
    path, password = wallet_file
    record = json.loads(path.read_text())
    record["version"] = 99
    path.write_text(json.dumps(record))
    before = path.read_bytes()
    log.info("Open a wallet file of version 99: one line naming the version, the file untouched")
    result = _open(path, password)
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == f"Error: wallet file {path} is not a version 1 snode wallet file"
    assert path.read_bytes() == before


@pytest.mark.parametrize(("seed", "reason"), [
    (b"abandon " * 12, "seed has 12 words; a wallet seed is 24 BIP-39 words"),
    (bytes(range(256)) * 2, "is not text"),
    (None, "cannot read seed file"),
])
def test_bad_seed_files_are_one_line_and_make_nothing(tmp_path, seed, reason):
    password = tmp_path / "pw"
    password.write_text("password x\n")
    seed_file = tmp_path / "seed"
    if seed is not None:
        seed_file.write_bytes(seed)
    log.info("Restore from a bad seed file (%s): one line, no wallet made", reason)
    result = run_wallet(["--regtest", "--wallet-file", str(tmp_path / "w"), "--password-file",
                         str(password), "--restore-seed-file", str(seed_file), "--command", "address"])
    assert result.rc == 1 and reason in result.err and len(result.err.strip().splitlines()) == 1, result.err
    assert not (tmp_path / "w").exists()


def test_a_wallet_file_from_before_moderate_cost_opens_and_is_re_encrypted(tmp_path):
    path = tmp_path / "old.wallet"
    shutil.copyfile(FIXTURES / "wallet-v1-interactive.json", path)
    path.chmod(0o600)
    password = tmp_path / "pw"
    password.write_text("fixture-password\n")
    real_cost = {k: v for k, v in os.environ.items() if k != "SNODE_TEST_WALLET_KDF"}
    log.info("Open the kept version-1 wallet file (INTERACTIVE cost) with today's wallet: its address")
    opened = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password),
                         "--command", "address"], env=real_cost)
    assert (opened.rc, opened.lines, opened.err) == (
        0, ["snr157fy32cg88clz6e4xv72twyv6tfy8sss52nj0gppgevr37nwgp0d4hm4n5"], ""), opened
    log.info("The file is now at MODERATE cost (3 passes, 256 MiB), still private, and opens again")
    kdf = json.loads(path.read_text())["kdf"]
    assert_equal((kdf["opslimit"], kdf["memlimit"]), (3, 256 * 1024 * 1024))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    again = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password),
                        "--command", "address"])
    assert_equal(again.lines, opened.lines)


def test_a_wallet_file_other_users_can_read_is_refused_naming_the_chmod(wallet_file):
    path, password = wallet_file
    before = path.read_bytes()
    path.chmod(0o644)
    log.info("Open a wallet file of mode 0644: one line naming the file and the chmod, the file untouched")
    result = _open(path, password)
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == (f"Error: wallet file {path} is open to other users of this machine "
                                  f"(mode 0644): run chmod 600 {path}")
    assert path.read_bytes() == before and oct(path.stat().st_mode & 0o777) == "0o644"
    path.chmod(0o600)
    assert _open(path, password).rc == 0


def test_the_test_suites_cheap_key_derivation_is_refused_on_mainnet(tmp_path):
    password = tmp_path / "pw"
    password.write_text("long enough\n")
    path = tmp_path / "w"
    log.info("SNODE_TEST_WALLET_KDF=min with a mainnet wallet: refused in one line, no file made")
    result = run_wallet(["--wallet-file", str(path), "--password-file", str(password), "--generate",
                         "--command", "address"], env={**os.environ, "SNODE_TEST_WALLET_KDF": "min"})
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == ("Error: SNODE_TEST_WALLET_KDF is for the test suite, and refused on "
                                  "mainnet: unset it")
    assert not path.exists()
