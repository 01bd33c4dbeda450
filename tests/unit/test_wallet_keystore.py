"""The wallet file and seed words: the published faucet words restore the faucet key, the file
round-trips, and every way it can fail names the cause without touching the file; files written
by the version before MODERATE cost (tests/fixtures) open and are re-encrypted at today's cost;
the test suite's cheap cost (tests/conftest.py) is refused outside regtest and devnet."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import nacl.pwhash
import pytest

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.params import MAINNET, REGTEST, REGTEST_FAUCET_SEED, REGTEST_FAUCET_WORDS, TESTNET
from snode.wallet import keystore
from snode.wallet.errors import WalletError, WalletFileError, WrongPassword

SEED = bytes(range(32))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD_WALLETS = [  # tests/fixtures/README.md: (file, password, seed, address)
    ("wallet-v1-interactive.json", "fixture-password",
     "872adcfb86a386213c202735abea69ce415e53232a4ef848f4c71fd3f57f1122",
     "snr157fy32cg88clz6e4xv72twyv6tfy8sss52nj0gppgevr37nwgp0d4hm4n5"),
    ("wallet-v1-short-password.json", "pw",
     "e544eeb060888219b38bbf6b281e8162cf9fd1aa2be4639e1e446cfc5682c939",
     "snr1m23vl00c8j9g7fwhf32n0ve0m5ezjyn9gfzvjdmzsgk0dqu0fydsas9flq"),
]
MODERATE = (nacl.pwhash.argon2id.OPSLIMIT_MODERATE, nacl.pwhash.argon2id.MEMLIMIT_MODERATE)
INTERACTIVE = (nacl.pwhash.argon2id.OPSLIMIT_INTERACTIVE, nacl.pwhash.argon2id.MEMLIMIT_INTERACTIVE)


def test_faucet_words_restore_the_faucet_seed() -> None:
    assert keystore.words_to_seed(REGTEST_FAUCET_WORDS) == REGTEST_FAUCET_SEED
    assert keystore.seed_to_words(REGTEST_FAUCET_SEED) == REGTEST_FAUCET_WORDS


def test_words_are_read_in_any_case_and_spacing() -> None:
    messy = "\n  ".join(REGTEST_FAUCET_WORDS.upper().split())
    assert keystore.words_to_seed(messy) == REGTEST_FAUCET_SEED


@pytest.mark.parametrize(("words", "needle"), [
    (" ".join(REGTEST_FAUCET_WORDS.split()[:12]), "12 words"),
    (REGTEST_FAUCET_WORDS.replace("clinic", "clinik"), "'clinik' is not a BIP-39"),
    (" ".join(reversed(REGTEST_FAUCET_WORDS.split())), "checksum"),
])
def test_bad_words_say_what_is_wrong(words: str, needle: str) -> None:
    with pytest.raises(WalletError, match=needle):
        keystore.words_to_seed(words)


def test_new_seeds_round_trip_through_words() -> None:
    seed = keystore.new_seed()
    assert keystore.words_to_seed(keystore.seed_to_words(seed)) == seed
    assert keystore.new_seed() != seed


def test_file_round_trip_mode_0600_and_no_leftovers(tmp_path) -> None:
    path = tmp_path / "sub" / "w"
    created = keystore.create(path, SEED, "pass phrase", REGTEST)
    assert created.key.public == SigningKey(SEED).public
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(path.parent) == ["w"]
    opened = keystore.load(path, "pass phrase", REGTEST)
    assert opened.key.seed == SEED and opened.network == "regtest"
    text = path.read_text()
    assert SEED.hex() not in text and "pass phrase" not in text


def test_create_refuses_to_replace_a_wallet(tmp_path) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "password a", REGTEST)
    before = path.read_bytes()
    with pytest.raises(WalletFileError, match="already exists"):
        keystore.create(path, bytes(32), "password b", REGTEST)
    assert path.read_bytes() == before


def test_wrong_password(tmp_path) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "right password", REGTEST)
    with pytest.raises(WalletFileError, match="wrong password"):
        keystore.load(path, "wrong password", REGTEST)


def _flip_box_digit(path) -> None:
    doc = json.loads(path.read_text())
    box = doc["box"]
    doc["box"] = box[:40] + ("0" if box[40] != "0" else "1") + box[41:]
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("damage", [
    lambda p: _flip_box_digit(p),
    lambda p: p.write_bytes(p.read_bytes()[:100]),
    lambda p: p.write_bytes(b""),
    lambda p: p.write_bytes(os.urandom(300)),
])
def test_damaged_file_is_reported_as_corrupted_not_as_a_wrong_password(tmp_path, damage) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "right password", REGTEST)
    damage(path)
    with pytest.raises(WalletFileError, match="is corrupted"):
        keystore.load(path, "right password", REGTEST)


def test_missing_file_and_wrong_network(tmp_path) -> None:
    with pytest.raises(WalletFileError, match="does not exist: create one with --generate"):
        keystore.load(tmp_path / "none", "password", REGTEST)
    path = tmp_path / "w"
    keystore.create(path, SEED, "password", REGTEST)
    with pytest.raises(WalletFileError, match="is for regtest, not testnet: add --regtest"):
        keystore.load(path, "password", TESTNET)


def test_a_new_wallet_never_gets_an_empty_password(tmp_path) -> None:
    path = tmp_path / "w"
    with pytest.raises(WalletError, match="an empty password is not allowed for a new wallet"):
        keystore.create(path, SEED, "", REGTEST)
    assert not path.exists() and os.listdir(tmp_path) == []


def test_a_file_with_an_empty_password_made_elsewhere_still_opens(tmp_path) -> None:
    path = tmp_path / "w"
    keystore.write_atomically(path, keystore.encrypt(SEED, "", REGTEST))
    assert keystore.load(path, "", REGTEST).key.seed == SEED
    with pytest.raises(WrongPassword, match="wrong password"):
        keystore.load(path, "x", REGTEST)


def _cost(path: Path) -> tuple[int, int]:
    kdf = json.loads(path.read_text())["kdf"]
    return kdf["opslimit"], kdf["memlimit"]


def _private_copy(name: str, tmp_path: Path) -> Path:
    """A fixture copied with the mode a wallet file has (git keeps 0644)."""
    path = tmp_path / name
    shutil.copyfile(FIXTURES / name, path)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(("name", "password", "seed", "address"), OLD_WALLETS)
def test_a_wallet_written_before_moderate_cost_opens_and_is_re_encrypted_at_moderate_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, password: str, seed: str, address: str,
) -> None:
    monkeypatch.delenv(keystore.TEST_COST_ENV, raising=False)  # today's real cost
    path = _private_copy(name, tmp_path)
    before = json.loads(path.read_text())
    assert _cost(path) == INTERACTIVE
    opened = keystore.load(path, password, REGTEST)
    assert opened.key.seed.hex() == seed and opened.warning is None
    assert encode_address(REGTEST.address_prefix, opened.key.public) == address
    after = json.loads(path.read_text())
    assert _cost(path) == MODERATE
    assert after["kdf"]["salt"] != before["kdf"]["salt"] and after["box"] != before["box"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and os.listdir(tmp_path) == [name]
    again = keystore.load(path, password, REGTEST)
    assert again.key.seed.hex() == seed and again.cost == MODERATE
    assert path.read_text() == json.dumps(after, indent=2) + "\n", "opened at today's cost: left as it is"


def test_an_old_wallet_that_cannot_be_rewritten_still_opens_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(keystore.TEST_COST_ENV, raising=False)
    name, password, seed, _ = OLD_WALLETS[0]
    path = _private_copy(name, tmp_path)

    def read_only_directory(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(keystore.tempfile, "mkstemp", read_only_directory)  # as for root: chmod would not stop it
    opened = keystore.load(path, password, REGTEST)
    assert opened.key.seed.hex() == seed
    assert opened.warning == (f"cannot write wallet file {path}: Permission denied; it stays at its "
                              "older, cheaper key derivation")
    assert _cost(path) == INTERACTIVE


def test_new_wallets_are_written_at_moderate_cost_without_the_test_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(keystore.TEST_COST_ENV, raising=False)
    path = tmp_path / "w"
    assert keystore.create(path, SEED, "long enough", MAINNET).cost == MODERATE
    assert _cost(path) == MODERATE


def test_the_test_suite_writes_cheap_wallets_on_regtest_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(keystore.TEST_COST_ENV, "min")
    cheap = (nacl.pwhash.argon2id.OPSLIMIT_MIN, nacl.pwhash.argon2id.MEMLIMIT_MIN)
    assert keystore.create(tmp_path / "r", SEED, "long enough", REGTEST).cost == cheap
    assert _cost(tmp_path / "r") == cheap
    for params in (MAINNET, TESTNET):
        with pytest.raises(WalletError) as refused:
            keystore.create(tmp_path / params.name, SEED, "long enough", params)
        assert str(refused.value) == (f"SNODE_TEST_WALLET_KDF is for the test suite, and refused on "
                                      f"{params.name}: unset it")
        assert not (tmp_path / params.name).exists()
    monkeypatch.setenv(keystore.TEST_COST_ENV, "max")
    with pytest.raises(WalletError, match="SNODE_TEST_WALLET_KDF: 'max' is not 'min'"):
        keystore.create(tmp_path / "x", SEED, "long enough", REGTEST)


@pytest.mark.parametrize("password", ["pw", "1234567", "\u00e9" * 7])
def test_a_new_wallet_needs_a_password_of_eight_characters(tmp_path: Path, password: str) -> None:
    with pytest.raises(WalletError) as refused:
        keystore.create(tmp_path / "w", SEED, password, REGTEST)
    assert str(refused.value) == (f"a wallet password needs at least 8 characters, this one has "
                                  f"{len(password)}: choose a longer password")
    assert os.listdir(tmp_path) == []
    padded = password.ljust(8, "8")
    assert keystore.create(tmp_path / "w", SEED, padded, REGTEST).key.seed == SEED


@pytest.mark.parametrize("kdf", [{"opslimit": 10**6}, {"memlimit": 2**40}, {"opslimit": 0}, {"memlimit": -1}])
def test_a_file_asking_for_an_absurd_cost_is_corrupted_and_costs_nothing(tmp_path: Path, kdf: dict[str, int]) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "long enough", REGTEST)
    doc = json.loads(path.read_text())
    doc["kdf"].update(kdf)
    path.write_text(json.dumps(doc))
    with pytest.raises(WalletFileError, match="is corrupted"):
        keystore.load(path, "long enough", REGTEST)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o660, 0o606])
def test_a_wallet_file_open_to_other_users_is_refused_naming_the_chmod(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "long enough", REGTEST)
    path.chmod(mode)
    with pytest.raises(WalletFileError) as refused:
        keystore.load(path, "long enough", REGTEST)
    assert str(refused.value) == (f"wallet file {path} is open to other users of this machine "
                                  f"(mode {mode:04o}): run chmod 600 {path}")
    path.chmod(0o400)
    assert keystore.load(path, "long enough", REGTEST).key.seed == SEED
