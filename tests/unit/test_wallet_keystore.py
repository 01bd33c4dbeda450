"""The wallet file and seed words: the published faucet words restore the faucet key, the file
round-trips, and every way it can fail names the cause without touching the file."""

from __future__ import annotations

import json
import os
import stat

import pytest

from snode.core.crypto import SigningKey
from snode.params import REGTEST, REGTEST_FAUCET_SEED, REGTEST_FAUCET_WORDS, TESTNET
from snode.wallet import keystore
from snode.wallet.errors import WalletError, WalletFileError, WrongPassword

SEED = bytes(range(32))


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
    keystore.create(path, SEED, "a", REGTEST)
    before = path.read_bytes()
    with pytest.raises(WalletFileError, match="already exists"):
        keystore.create(path, bytes(32), "b", REGTEST)
    assert path.read_bytes() == before


def test_wrong_password(tmp_path) -> None:
    path = tmp_path / "w"
    keystore.create(path, SEED, "right", REGTEST)
    with pytest.raises(WalletFileError, match="wrong password"):
        keystore.load(path, "wrong", REGTEST)


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
    keystore.create(path, SEED, "right", REGTEST)
    damage(path)
    with pytest.raises(WalletFileError, match="is corrupted"):
        keystore.load(path, "right", REGTEST)


def test_missing_file_and_wrong_network(tmp_path) -> None:
    with pytest.raises(WalletFileError, match="does not exist: create one with --generate"):
        keystore.load(tmp_path / "none", "x", REGTEST)
    path = tmp_path / "w"
    keystore.create(path, SEED, "x", REGTEST)
    with pytest.raises(WalletFileError, match="is for regtest, not testnet: add --regtest"):
        keystore.load(path, "x", TESTNET)


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
