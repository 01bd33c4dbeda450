"""The wallet file: one Ed25519 seed, encrypted with a password, written atomically.

The seed is the 32-byte entropy of the wallet's 24 BIP-39 words, so the words restore the key.
The file is JSON: the Argon2id parameters and salt, the SecretBox ciphertext (nonce first) of
the secret part, and a BLAKE2b checksum of the ciphertext, sealed by `snode.common.sealed` (as
snode-cli's exported service-node keys are). The checksum tells a damaged file from a wrong
password, which SecretBox alone cannot.

The file key is derived at libsodium's MODERATE cost (3 passes over 256 MiB: 0.6 s on the
project's 2-core machine, against 0.1 s at the INTERACTIVE cost of the first release's wallet
files). The cost is stored in each file, so a file written at another cost opens as it is; one
written at a lower cost than new files get is re-encrypted at theirs as soon as it is opened,
which is the next time the wallet holds its password. The test suite writes its wallets at the
lowest cost through TEST_COST_ENV, which is refused on every network but regtest and devnet.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import msgspec
import nacl.utils
from mnemonic import Mnemonic

from snode.common import sealed
from snode.common.files import LARGE_FILE_BYTES, read_bounded, too_open
from snode.common.sealed import MEMLIMIT, OPSLIMIT, Kdf
from snode.common.sealed import TEST_COST_ENV as TEST_COST_ENV  # the tests set it by this name
from snode.core.crypto import SigningKey
from snode.core.types import SEED_BYTES
from snode.params import NetworkParams
from snode.wallet.errors import WalletError, WalletFileError, WrongPassword

FORMAT: Final = "snode-wallet"
VERSION: Final = 1
WORD_COUNT: Final = 24
MIN_PASSWORD_LENGTH: Final = sealed.MIN_PASSPHRASE_LENGTH
"""Characters a new wallet's password needs at least (common.sealed's floor for every sealed
file); the seed words, not the password, are the backup, so a floor stops `pw` without pushing
people to write passwords down."""
EMPTY_PASSWORD: Final = "an empty password is not allowed for a new wallet"
_MNEMONIC: Final = Mnemonic("english")


class WalletDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The JSON of a wallet file."""

    format: str
    version: int
    network: str
    kdf: Kdf
    box: str
    """Hex SecretBox output (nonce + ciphertext) of the encoded `Secret`."""
    checksum: str
    """Hex BLAKE2b-256 of the box bytes."""


class Secret(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the box holds."""

    seed: str
    """Hex Ed25519 seed (the BIP-39 entropy)."""
    network: str


@dataclass(frozen=True, slots=True)
class OpenWallet:
    """A decrypted wallet: its key and the network it belongs to."""

    key: SigningKey
    network: str
    cost: tuple[int, int] = (OPSLIMIT, MEMLIMIT)
    """The file's key-derivation cost: (Argon2id opslimit, memlimit)."""
    warning: str | None = None
    """Something the user should know that did not stop the wallet (a re-encryption that failed)."""


# --- seed words ---------------------------------------------------------------------------

def seed_to_words(seed: bytes) -> str:
    """The 24 BIP-39 English words of a 32-byte seed."""
    return _MNEMONIC.to_mnemonic(seed)


def words_to_seed(text: str) -> bytes:
    """The seed of 24 BIP-39 words (any case, any whitespace); WalletError says what is wrong."""
    words = text.lower().split()
    if len(words) != WORD_COUNT:
        raise WalletError(
            f"seed has {len(words)} words; a wallet seed is {WORD_COUNT} BIP-39 words"
        )
    unknown = [w for w in words if w not in _MNEMONIC.wordlist]
    if unknown:
        raise WalletError(f"seed word '{unknown[0]}' is not a BIP-39 English word: check its spelling")
    if not _MNEMONIC.check(" ".join(words)):
        raise WalletError("seed words fail their checksum: check their spelling and order")
    return bytes(_MNEMONIC.to_entropy(words))


def new_seed() -> bytes:
    """A fresh random seed."""
    return nacl.utils.random(SEED_BYTES)


# --- the file -----------------------------------------------------------------------------

def kdf_cost(params: NetworkParams) -> tuple[int, int]:
    """(opslimit, memlimit) new files of this network are written at (`sealed.kdf_cost`)."""
    try:
        return sealed.kdf_cost(params.name)
    except sealed.SealError as err:
        raise WalletError(str(err)) from None


def new_password_problem(password: str) -> str | None:
    """Why `password` may not guard a new wallet, or None."""
    if password == "":
        return EMPTY_PASSWORD
    if len(password) < MIN_PASSWORD_LENGTH:
        return (f"a wallet password needs at least {MIN_PASSWORD_LENGTH} characters, this one "
                f"has {len(password)}")
    return None


def encrypt(seed: bytes, password: str, params: NetworkParams) -> bytes:
    """The bytes of a wallet file holding seed, at `kdf_cost`."""
    secret = msgspec.json.encode(Secret(seed=seed.hex(), network=params.name))
    kdf, box = sealed.seal(secret, password, kdf_cost(params))
    doc = WalletDocument(
        format=FORMAT, version=VERSION, network=params.name, kdf=kdf, box=box.hex(),
        checksum=sealed.checksum(box),
    )
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"


def decrypt(data: bytes, password: str, params: NetworkParams, path: str) -> OpenWallet:
    """Open the bytes of a wallet file; WalletFileError for damage, wrong network or password."""
    corrupted = f"wallet file {path} is corrupted: restore it from its seed words"
    try:
        doc = msgspec.json.decode(data, type=WalletDocument)
    except msgspec.DecodeError:
        raise WalletFileError(corrupted) from None
    if doc.format != FORMAT or doc.version != VERSION or doc.kdf.name != sealed.KDF_NAME:
        raise WalletFileError(
            f"wallet file {path} is not a version {VERSION} snode wallet file"
        )
    try:
        box = sealed.verified_box(doc.kdf, doc.box, doc.checksum)
    except sealed.Damaged:
        raise WalletFileError(corrupted) from None
    if doc.network != params.name:
        fix = f"add --{doc.network}" if doc.network != "mainnet" else f"leave out --{params.name}"
        raise WalletFileError(f"wallet file {path} is for {doc.network}, not {params.name}: {fix}")
    try:
        plain = sealed.unseal(doc.kdf, box, password)
    except sealed.WrongPassphrase:
        raise WrongPassword(f"wrong password for wallet file {path}") from None
    except sealed.Damaged:
        raise WalletFileError(corrupted) from None
    try:
        secret = msgspec.json.decode(plain, type=Secret)
        seed = bytes.fromhex(secret.seed)
        key = SigningKey(seed)
    except (msgspec.DecodeError, ValueError):
        raise WalletFileError(corrupted) from None
    return OpenWallet(key=key, network=secret.network, cost=(doc.kdf.opslimit, doc.kdf.memlimit))


def load(path: str | os.PathLike[str], password: str, params: NetworkParams) -> OpenWallet:
    """Read and decrypt the wallet file at path; one written at a lower cost than `kdf_cost` is
    rewritten at that cost (a failure to write it is the result's warning, not an error).

    A file the group or others may read or write is refused before it is read, as OpenSSH
    refuses such a private key."""
    name = str(path)
    problem = too_open(Path(path), "wallet file")
    if problem is not None:
        raise WalletFileError(problem)
    try:
        data = read_bounded(path, LARGE_FILE_BYTES)
    except FileNotFoundError:
        raise WalletFileError(
            f"wallet file {name} does not exist: create one with --generate or "
            "--restore-seed-file"
        ) from None
    except IsADirectoryError:
        raise WalletFileError(f"wallet file {name} is a directory: give a file name") from None
    except OSError as err:
        raise WalletFileError(f"cannot read wallet file {name}: {err.strerror}") from None
    opened = decrypt(data, password, params, name)
    cost = kdf_cost(params)
    if opened.cost[0] >= cost[0] and opened.cost[1] >= cost[1]:
        return opened
    try:
        write_atomically(Path(path), encrypt(opened.key.seed, password, params))
    except WalletFileError as err:
        return replace(opened, warning=f"{err}; it stays at its older, cheaper key derivation")
    return opened


def create(
    path: str | os.PathLike[str], seed: bytes, password: str, params: NetworkParams
) -> OpenWallet:
    """Write a new wallet file (mode 0600) holding seed; refuses to replace an existing one.

    A password shorter than MIN_PASSWORD_LENGTH is refused: an empty one would leave the seed
    readable by anyone who gets the file, a short one guessable.
    """
    problem = new_password_problem(password)
    if problem is not None:
        raise WalletError(f"{problem}: choose a {'longer ' if password else ''}password")
    target = Path(path)
    if target.exists():
        raise WalletFileError(
            f"wallet file {target} already exists: choose another --wallet-file"
        )
    write_atomically(target, encrypt(seed, password, params))
    return OpenWallet(key=SigningKey(seed), network=params.name, cost=kdf_cost(params))


def write_atomically(target: Path, data: bytes) -> None:
    """Write data to target through a temporary file, fsync and rename, mode 0600."""
    directory = target.parent if str(target.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise WalletFileError(f"cannot write wallet file {target}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise WalletFileError(f"cannot write wallet file {target}: {err.strerror}") from None
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
