"""snode-wallet against real regtest daemons, run as an operator runs it (`--command`, `--yes`).

Solo: the faucet wallet (restored from the published words) funds a new wallet, whose balance
shows Unlocked < Balance and the height at which the locked coins unlock (exactly when they do);
a spend refused for want of unlocked coins says when more unlock. The daemon's registration
command pasted unchanged registers a funded node with the right fee and height; until it is
mined, `balance` and `stakes` show it as pending. Pool: operator 100,000 coins and a 5 % cut
(Await), then `stake <pk> 60000` (pending until mined) and `stake <pk> 100%` fill it. Every
refusal of the registration and stake commands prints one line naming what to fix, exits 1 and
sends nothing (the mempool is unchanged). A wrong password, a damaged wallet file and an empty
password for a new wallet give one line, exit 1, and leave the file as it was (or make none).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from snode.core.address import decode_address
from snode.core.registration import format_command, sign_registration
from snode.core.transactions import Reservation
from snode.core.units import parse_coins
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST, REGTEST_FAUCET_WORDS
from tests.functional.framework import TIMEOUT_FACTOR, assert_equal, faucet_key, fund

PREFIX = REGTEST.address_prefix
SOLO = REGTEST.staking_requirement
POOL_MIN = REGTEST.pool_operator_min
UNLOCK = REGTEST.unlock_confirmations


@dataclass(frozen=True)
class Run:
    """What one wallet invocation did."""

    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def txid(self) -> str:
        line = next(l for l in self.lines if "Transaction ID:" in l)
        return line.split()[-1]


def run_wallet(args: list[str], stdin: str | None = None, timeout: float = 60) -> Run:
    done = subprocess.run(
        [sys.executable, "-m", "snode.wallet", *args], input=stdin if stdin is not None else "",
        capture_output=True, text=True, timeout=timeout * TIMEOUT_FACTOR,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return Run(done.returncode, done.stdout, done.stderr)


class Wallet:
    """One wallet file used through the real `snode-wallet` program."""

    def __init__(self, node, tmp_path: Path, name: str, *, words: str | None = None) -> None:
        self.node = node
        self.path = tmp_path / f"{name}.wallet"
        self.password_file = tmp_path / f"{name}.password"
        self.password_file.write_text(f"password of {name}\n")
        if words is None:
            made = self.run("address", extra=["--generate"])
        else:
            seed_file = tmp_path / f"{name}.words"
            seed_file.write_text(words + "\n")
            made = self.run("address", extra=["--restore-seed-file", str(seed_file)])
        assert made.rc == 0, made.out + made.err
        self.address = made.lines[-1]
        self.public = decode_address(PREFIX, self.address)

    def args(self) -> list[str]:
        return ["--regtest", "--daemon-address", f"{self.node.ip}:{self.node.rpc_port}",
                "--wallet-file", str(self.path), "--password-file", str(self.password_file)]

    def run(self, command: str, *, yes: bool = False, stdin: str | None = None,
            extra: list[str] | None = None) -> Run:
        args = self.args() + (extra or []) + ["--command", command] + (["--yes"] if yes else [])
        return run_wallet(args, stdin)

    def ok(self, command: str, *, yes: bool = False) -> Run:
        result = self.run(command, yes=yes)
        assert result.rc == 0, f"{command!r} failed:\n{result.out}{result.err}"
        return result

    def refused(self, command: str, needle: str) -> str:
        """Run a command that must be refused: one Error line naming needle, exit 1, nothing sent."""
        before = self.node.get_mempool()["transactions"]
        result = self.run(command, yes=True)
        errors = [l for l in result.lines if l.startswith("Error:")]
        assert result.rc == 1, result.out
        assert len(errors) == 1 and needle in errors[0], result.out
        assert "Transaction ID" not in result.out
        assert_equal(self.node.get_mempool()["transactions"], before, "mempool after a refusal")
        return errors[0]

    def balances(self) -> dict[str, int]:
        out = self.ok("balance").lines
        pairs = dict(line.split(": ", 1) for line in out if ": " in line)
        return {"balance": parse_coins(pairs["Balance"]), "unlocked": parse_coins(pairs["Unlocked balance"])}


def registration_cmd(sn, address: str, amount: int, cut: str = "0") -> str:
    return sn.get_service_node_registration_cmd(
        operator_cut=cut, contributor_addresses=[address], contributor_amounts=[amount],
        staking_requirement=SOLO,
    )["registration_cmd"]


def node_record(sn, pubkey: str) -> dict:
    states = sn.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"]
    assert len(states) == 1, states
    return states[0]


def mine(node, blocks: int = 1) -> None:
    node.generate_blocks(blocks=blocks)


@pytest.fixture
def sn(nodes):
    return nodes.add(extra_args=["--service-node"])


def funded(sn, tmp_path, payments: dict[str, int]) -> dict[str, Wallet]:
    """New wallets paid by the faucet in one transaction, unlocked."""
    wallets = {name: Wallet(sn, tmp_path, name) for name in payments}
    fund(sn, {wallets[n].public: amount for n, amount in payments.items()})
    mine(sn, UNLOCK + 1)
    return wallets


def test_solo_registration_from_the_faucet(sn, tmp_path):
    faucet = Wallet(sn, tmp_path, "faucet", words=REGTEST_FAUCET_WORDS)
    assert_equal(faucet.public, faucet_key().public, "faucet words restore the faucet key")
    operator = Wallet(sn, tmp_path, "operator")
    sent = faucet.ok(f"transfer {operator.address} 200100", yes=True)
    assert sn.get_transaction(txid=sent.txid())["in_pool"] is True
    mine(sn)
    locked = operator.balances()
    assert_equal(locked["balance"], 200_100 * COIN)
    assert locked["unlocked"] < locked["balance"]
    # The coins count as unlocked once the tip is UNLOCK - 1 blocks past the block that paid them.
    unlock_at = sn.get_height()["height"] + UNLOCK - 1
    lines = operator.ok("balance").lines
    assert_equal(lines[:3], ["Balance: 200100", "Unlocked balance: 0",
                             f"Locked: 200100 coins, unlocking at height {unlock_at} (in {UNLOCK - 1} blocks)"])
    operator.refused(f"transfer {faucet.address} 1",
                     "unlocked balance 0 is not enough: 1 coin plus a fee of ")
    operator.refused(f"transfer {faucet.address} 1",
                     f"; 200100 more coins unlock at height {unlock_at}, in {UNLOCK - 1} blocks")
    mine(sn, UNLOCK - 2)
    assert f"unlocking at height {unlock_at} (in 1 block)" in operator.ok("balance").out
    assert_equal(operator.balances()["unlocked"], 0)
    mine(sn)
    assert_equal(operator.balances(), {"balance": 200_100 * COIN, "unlocked": 200_100 * COIN})
    assert "Locked" not in operator.ok("balance").out

    line = registration_cmd(sn, operator.address, SOLO, cut="2.5")
    done = operator.ok(line, yes=True)
    assert "Operator stake: 200000 coins" in done.out and "Operator fee: 2.5 %" in done.out
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    # Until it is mined the registration shows as pending, and the change as unconfirmed.
    pending = operator.ok("balance").lines
    assert f"Staked (pending): 200000 coins on service node {pubkey} (registration in the mempool, " \
           "not yet mined)" in pending
    assert "Staked: 0 coins on 0 service nodes" in pending
    assert any(l.startswith("Pending (unconfirmed): 99.9") for l in pending), pending
    assert_equal(operator.ok("stakes").lines, [
        f"{pubkey}  mine: 200000 (pending)  registration in the mempool, not yet mined",
        "Total staked: 0 coins, plus 200000 coins (pending)"])
    operator.refused(f"transfer {faucet.address} 1", "more coins in unconfirmed transactions "
                     f"unlock {UNLOCK} confirmations after they are mined")
    mine(sn)
    height = sn.get_height()["height"]
    record = node_record(sn, pubkey)
    assert_equal(record["funded"], True)
    assert_equal(record["total_contributed"], 200_000_000_000_000)
    assert_equal(record["operator_fee"], 25_000)
    assert_equal(record["registration_height"], height)
    assert_equal(sn.get_transaction(txid=done.txid())["height"], height)

    stakes = operator.ok("stakes").out
    assert pubkey in stakes and "mine: 200000" in stakes and "200000 / 200000" in stakes
    after = operator.balances()
    assert 99 * COIN < after["balance"] < 100 * COIN
    assert "Staked: 200000 coins on 1 service node" in operator.ok("balance").out
    assert "pending" not in operator.ok("stakes").out
    operator.refused(f"transfer {faucet.address} 1", f"more coins unlock at height "
                     f"{sn.get_height()['height'] + UNLOCK - 1}, in {UNLOCK - 1} blocks")
    history = operator.ok("show_transfers").lines
    assert [l.split()[1] for l in history[1:]] == ["in", "registration"]


def test_pool_node_filled_by_two_contributors(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"operator": 100_010 * COIN, "alice": 60_010 * COIN,
                                    "bob": 40_010 * COIN})
    operator, alice, bob = wallets["operator"], wallets["alice"], wallets["bob"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    mine(sn)
    record = node_record(sn, pubkey)
    assert_equal((record["funded"], record["operator_fee"], record["total_contributed"]),
                 (False, 50_000, POOL_MIN))
    assert "Await" in operator.ok("stakes").out

    alice.ok(f"stake {pubkey} 60000", yes=True)
    assert_equal(alice.ok("stakes").lines, [
        f"{pubkey}  mine: 0 + 60000 (pending)  Await   100000 / 200000",
        "Total staked: 0 coins, plus 60000 coins (pending)"])
    assert (f"Staked (pending): 60000 coins on service node {pubkey} (stake in the mempool, "
            "not yet mined)") in alice.ok("balance").lines
    mine(sn)
    assert "pending" not in alice.ok("stakes").out + alice.ok("balance").out
    assert_equal(node_record(sn, pubkey)["total_contributed"], 160_000 * COIN)
    done = bob.ok(f"stake {pubkey} 100%", yes=True)
    assert "Staking 40000 coins" in done.out
    mine(sn)
    record = node_record(sn, pubkey)
    assert_equal(record["funded"], True)
    assert_equal(record["total_contributed"], record["staking_requirement"])
    assert_equal(len(record["contributors"]), 3)
    assert_equal({c["address"]: c["amount"] for c in record["contributors"]},
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

    answered_no = operator.run(line, stdin="No\n")
    assert answered_no.rc == 1 and answered_no.lines[-1] == "Transaction cancelled."
    assert "(Yes/No)" in answered_no.out and "Operator stake: 200000 coins" in answered_no.out
    assert_equal(sn.get_mempool()["transactions"], [])
    ignored = operator.run(line, stdin="")
    assert ignored.lines[-1] == "Transaction cancelled."
    assert_equal(sn.get_mempool()["transactions"], [])

    operator.ok(line, yes=True)
    mine(sn)
    operator.refused(line, "is already registered")


def test_stake_refusals_send_nothing(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"operator": 100_010 * COIN, "rich": 120_000 * COIN,
                                    "poor": 5_000 * COIN, "solo": 200_010 * COIN})
    operator, rich, poor = wallets["operator"], wallets["rich"], wallets["poor"]
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    mine(sn)

    rich.refused(f"stake {'ab' * 32} 100", "is not registered")
    rich.refused(f"stake {pubkey[:10]} 100", "not 64 hex characters")
    rich.refused(f"stake {pubkey} 5000", "below the minimum contribution of 10000 coins")
    rich.refused(f"stake {pubkey} 5%", "below the minimum contribution of 10000 coins")
    for bad in ("0%", "101%", "-3%"):
        rich.refused(f"stake {pubkey} {bad}", "must be above 0% and at most 100%")
    rich.refused(f"stake {pubkey} abc%", "percent 'abc%' is not a number")
    rich.refused(f"stake {pubkey} 1,000", "comma")
    poor.refused(f"stake {pubkey} 10000", "unlocked balance 5000 is not enough")

    capped = rich.run(f"stake {pubkey} 150000", stdin="no\n")
    assert "The node needs only 100000 more coins: staking 100000 instead of 150000." in capped.out
    assert capped.lines[-1] == "Transaction cancelled."
    assert_equal(sn.get_mempool()["transactions"], [])
    rich.ok(f"stake {pubkey} 150000", yes=True)
    mine(sn)
    assert_equal(node_record(sn, pubkey)["total_contributed"], SOLO)
    rich.refused(f"stake {pubkey} 10", "is already full")


def test_transfer_refusals_and_usage(sn, tmp_path):
    wallets = funded(sn, tmp_path, {"payer": 10 * COIN})
    payer = wallets["payer"]
    other = Wallet(sn, tmp_path, "other")
    payer.refused(f"transfer {other.address} 11", "unlocked balance 10 is not enough")
    payer.refused(f"transfer {other.address.replace('snr1', 'sn1')} 1", "wrong network prefix")
    payer.refused(f"transfer {other.address} 1.0000000001", "more than 9 decimal places")
    payer.refused(f"transfer {other.address} 0", "above 0")
    usage = payer.run("transfer")
    assert usage.lines == ["Usage: transfer <address> <amount>"]
    unknown = payer.run("fly me")
    assert unknown.rc == 1 and "unknown command 'fly'" in unknown.out
    assert "unknown command 'No'" in payer.run("No").out  # echoed as typed
    # Piped to --command, anything but Yes cancels at once (no second question).
    unclear = payer.run(f"transfer {other.address} 1", stdin="maybe\n")
    assert unclear.rc == 1 and unclear.lines[-1] == "Transaction cancelled.", unclear.out
    assert "Please answer" not in unclear.out and "Sending 1 coin to" in unclear.out
    assert "Send 1 coin plus a fee of 0." in unclear.out
    payer.ok(f"transfer {other.address} 2.5", yes=True)
    mine(sn)
    assert_equal(other.balances()["balance"], 2_500_000_000)


def test_daemon_down_is_one_line(tmp_path, nodes):
    node = nodes.add(start=False)
    wallet = Wallet(node, tmp_path, "lonely")
    result = wallet.run("balance")
    assert result.rc == 1
    assert result.lines == [f"Error: Unable to connect to http://{node.ip}:{node.rpc_port}: is snoded running?"]


# --- wallet files (no daemon needed) --------------------------------------------------------

def _open(path: Path, password_file: Path, *extra: str) -> Run:
    return run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password_file),
                       *extra, "--command", "address"])


@pytest.fixture
def wallet_file(tmp_path) -> tuple[Path, Path]:
    password = tmp_path / "pw"
    password.write_text("right\n")
    path = tmp_path / "w.wallet"
    made = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password),
                       "--generate", "--command", "address"])
    assert made.rc == 0 and "Seed words" in made.out
    words = made.lines[made.lines.index(next(l for l in made.lines if l.startswith("Seed words"))) + 1]
    assert len(words.split()) == 24
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    return path, password


def test_wrong_password_is_one_line_and_leaves_the_file(tmp_path, wallet_file):
    path, _ = wallet_file
    before = path.read_bytes()
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong\n")
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
    result = _open(path, password)
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == f"Error: wallet file {path} is corrupted: restore it from its seed words"
    assert path.read_bytes() == data


def test_missing_file_existing_file_and_wrong_network(tmp_path, wallet_file):
    path, password = wallet_file
    missing = _open(tmp_path / "none.wallet", password)
    assert missing.rc == 1 and "does not exist: create one with --generate" in missing.err
    assert not (tmp_path / "none.wallet").exists()
    before = path.read_bytes()
    again = _open(path, password, "--generate")
    assert again.rc == 1 and "already exists" in again.err and path.read_bytes() == before
    testnet = run_wallet(["--testnet", "--wallet-file", str(path), "--password-file", str(password),
                          "--command", "address"])
    assert testnet.rc == 1 and "is for regtest, not testnet: add --regtest" in testnet.err
    both = _open(path, password, "--testnet")
    assert both.rc == 1 and "choose one network" in both.err


def test_restore_from_bad_seed_file(tmp_path):
    password = tmp_path / "pw"
    password.write_text("x\n")
    seed = tmp_path / "seed"
    seed.write_text(" ".join(REGTEST_FAUCET_WORDS.split()[:23]) + "\n")
    result = run_wallet(["--regtest", "--wallet-file", str(tmp_path / "w"), "--password-file",
                         str(password), "--restore-seed-file", str(seed), "--command", "address"])
    assert result.rc == 1 and "seed has 23 words" in result.err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("contents", ["\n", ""])
def test_a_new_wallet_refuses_an_empty_password_file(tmp_path, contents):
    password = tmp_path / "pw"
    password.write_text(contents)
    path = tmp_path / "w.wallet"
    result = run_wallet(["--regtest", "--wallet-file", str(path), "--password-file", str(password),
                         "--generate", "--command", "address"])
    assert (result.rc, result.out) == (1, "")
    assert result.err.strip() == (f"Error: password file {password} is empty: an empty password is "
                                  "not allowed for a new wallet; write the password on its first line")
    assert not path.exists()
    piped = run_wallet(["--regtest", "--wallet-file", str(path), "--generate", "--command", "address"],
                       stdin="\n")
    assert piped.rc == 1 and "an empty password is not allowed for a new wallet" in piped.err
    assert not path.exists()
