"""The service-node key moved between data dirs: `snode-cli key export`, `key import`, `key show`.

An exported key is a JSON file sealed with a passphrase exactly as the wallet file is
(`snode.common.sealed`: Argon2id at the MODERATE cost, SecretBox, a checksum that tells damage
from a wrong passphrase). Beside the box it names its network and the key's public half, so a
file is told apart, and sent to the right network, before any passphrase is asked for; the box
holds the seed and the network again, so neither can be swapped outside it.

Neither the key nor the passphrase is ever on the command line (every user of the machine reads
the process list): the passphrase comes from a prompt, a line of piped input or
`--password-file`. Every file is written whole or not at all, mode 0600. An import takes the data
dir's lock, as snoded does, so it never writes under a running daemon, and a daemon cannot start
while it writes.
"""

from __future__ import annotations

import getpass
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from snode.common import sealed
from snode.common.data_dir import (
    GENESIS_FILE,
    KEY_FILE,
    KEY_PUB_FILE,
    DirLocked,
    create_file,
    key_file_text,
    seed_of,
    take_lock,
    write_atomically,
)
from snode.common.files import LARGE_FILE_BYTES, SMALL_FILE_BYTES, read_bounded
from snode.core.crypto import SigningKey

FORMAT: Final = "snode-service-node-key"
VERSION: Final = 1
MAX_GENESIS_READ: Final = 1 << 20
PASSPHRASE_TRIES: Final = 3
"""New passphrases typed on a terminal before `export` gives up."""


class KeyCommandError(Exception):
    """One line for the operator naming what to fix."""


class KeyDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The JSON of an exported service-node key."""

    format: str
    version: int
    network: str
    service_node_pubkey: str
    """Hex; the box's key must have it."""
    kdf: sealed.Kdf
    box: str
    """Hex SecretBox output (nonce + ciphertext) of the encoded `KeySecret`."""
    checksum: str
    """Hex BLAKE2b-256 of the box bytes."""


class KeySecret(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the box holds."""

    seed: str
    """Hex Ed25519 seed, as the data dir's key file holds it."""
    network: str


@dataclass(frozen=True, slots=True)
class DataDirKey:
    """A data dir's service-node key and where it lies."""

    key: SigningKey
    path: Path


# --- the data dir ---------------------------------------------------------------------------

def data_dir_key(data_dir: Path) -> DataDirKey:
    """The service-node key of an existing data dir; KeyCommandError when there is none."""
    if not data_dir.is_dir():
        what = "is not a directory" if data_dir.exists() else "does not exist"
        raise KeyCommandError(f"--data-dir: {data_dir} {what}: give the data dir of the node (its snoded --data-dir)")
    path = data_dir / KEY_FILE
    try:
        raw = read_bounded(path, SMALL_FILE_BYTES)
    except FileNotFoundError:
        pub = data_dir / KEY_PUB_FILE
        ran = ""
        if pub.exists():
            ran = f" ({pub} says it ran {_printable_pub(pub)}: put its key back with snode-cli key import FILE)"
        raise KeyCommandError(
            f"--data-dir: {data_dir} holds no service-node key file {path}{ran}; snoded "
            "--service-node makes one at its first start"
        ) from None
    except OSError as err:
        raise KeyCommandError(f"--data-dir: cannot read {path}: {err.strerror or err}") from None
    try:
        return DataDirKey(SigningKey(seed_of(raw)), path)
    except ValueError:
        raise KeyCommandError(
            f"--data-dir: key file {path} is damaged (expected 64 hex characters); restore it from your backup"
        ) from None


def check_network(data_dir: Path, network: str) -> None:
    """KeyCommandError when the data dir's chain (its genesis.json) is of another network than
    the one the command was given: a key is exported for, and imported into, one network."""
    try:
        with open(data_dir / GENESIS_FILE, "rb") as handle:
            doc = json.loads(handle.read(MAX_GENESIS_READ))
        held = doc.get("network") if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return  # no chain yet, or one snoded itself refuses with its own words
    if isinstance(held, str) and held != network and held.isalnum() and len(held) < 20:
        fix = f"add --{held}" if held != "mainnet" else f"leave out --{network}"
        raise KeyCommandError(f"--data-dir: {data_dir} holds a {held} chain ({GENESIS_FILE}), not {network}: {fix}")


def _printable_pub(path: Path) -> str:
    text = path.read_bytes()[:80].decode(errors="replace").strip()
    return text if all(c in "0123456789abcdef" for c in text) and text else "another key"


def install_key(data_dir: Path, key: SigningKey, *, force: bool) -> bool:
    """Write `key` as the data dir's service-node key (made if missing, 0700), under its lock;
    False when it already holds that very key. Refuses a running daemon's data dir, and another
    key there without `force`."""
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise KeyCommandError(f"--data-dir: cannot create {data_dir}: {err.strerror or err}") from None
    try:
        lock = take_lock(data_dir)
    except DirLocked as held:
        raise KeyCommandError(
            f"--data-dir: {data_dir} is in use by a running snoded (pid {held.holder}): stop it "
            "before importing a key into it"
        ) from None
    except OSError as err:
        raise KeyCommandError(f"--data-dir: cannot lock {data_dir}: {err.strerror or err}") from None
    try:
        path = data_dir / KEY_FILE
        if path.exists():
            try:
                present: str = SigningKey(seed_of(path.read_bytes())).public.hex()
            except (OSError, ValueError):
                present = "a damaged key"
            if present == key.public.hex():
                return False
            if not force:
                raise KeyCommandError(
                    f"--data-dir: {path} already holds service-node key {present}: add --force to "
                    "replace it (export it first unless you mean to lose it)"
                )
        try:
            write_atomically(path, key_file_text(key.seed), mode=0o600)
            write_atomically(data_dir / KEY_PUB_FILE, key.public.hex().encode() + b"\n", mode=0o644)
        except OSError as err:
            raise KeyCommandError(f"--data-dir: cannot write {path}: {err.strerror or err}") from None
        return True
    finally:
        lock.close()


# --- the exported file ----------------------------------------------------------------------

def sealed_key(key: SigningKey, passphrase: str, network: str) -> bytes:
    """The bytes of an exported key file holding `key`."""
    try:
        cost = sealed.kdf_cost(network)
    except sealed.SealError as err:
        raise KeyCommandError(str(err)) from None
    secret = msgspec.json.encode(KeySecret(seed=key.seed.hex(), network=network))
    kdf, box = sealed.seal(secret, passphrase, cost)
    doc = KeyDocument(format=FORMAT, version=VERSION, network=network, service_node_pubkey=key.public.hex(),
                      kdf=kdf, box=box.hex(), checksum=sealed.checksum(box))
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"


def write_export(path: Path, data: bytes, *, force: bool) -> None:
    """Write an exported key file whole, mode 0600; never over a file without `force`."""
    if path.is_dir():
        raise KeyCommandError(f"FILE: {path} is a directory: give a file name")
    try:
        if force:
            write_atomically(path, data, mode=0o600)
        elif not create_file(path, data, mode=0o600):
            raise KeyCommandError(f"FILE: {path} already exists: choose another file, or add --force to replace it")
    except OSError as err:
        raise KeyCommandError(f"FILE: cannot write {path}: {err.strerror or err}") from None


def read_export(path: Path, network: str) -> tuple[KeyDocument, bytes]:
    """An exported key file's document and verified box, before any passphrase: KeyCommandError
    for a missing, damaged or foreign file, or one of another network."""
    try:
        data = read_bounded(path, LARGE_FILE_BYTES)
    except FileNotFoundError:
        raise KeyCommandError(f"FILE: {path} does not exist") from None
    except IsADirectoryError:
        raise KeyCommandError(f"FILE: {path} is a directory: give the file key export wrote") from None
    except OSError as err:
        raise KeyCommandError(f"FILE: cannot read {path}: {err.strerror or err}") from None
    corrupted = f"FILE: {path} is corrupted: export the key again from its data dir, or use another copy"
    try:
        doc = msgspec.json.decode(data, type=KeyDocument)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise KeyCommandError(
            corrupted if data.lstrip().startswith(b"{") else
            f"FILE: {path} is not a service-node key file written by snode-cli key export"
        ) from None
    if doc.format != FORMAT or doc.version != VERSION:
        raise KeyCommandError(
            f"FILE: {path} is not a version {VERSION} service-node key file written by snode-cli key export")
    try:
        box = sealed.verified_box(doc.kdf, doc.box, doc.checksum)
    except sealed.Damaged:
        raise KeyCommandError(corrupted) from None
    if doc.network != network:
        fix = f"add --{doc.network}" if doc.network != "mainnet" else f"leave out --{network}"
        raise KeyCommandError(f"FILE: {path} holds a key for {doc.network}, not {network}: {fix}")
    return doc, box


def opened_key(path: Path, doc: KeyDocument, box: bytes, passphrase: str) -> SigningKey:
    """The key in a file `read_export` passed; KeyCommandError for a wrong passphrase or damage."""
    corrupted = f"FILE: {path} is corrupted: export the key again from its data dir, or use another copy"
    try:
        plain = sealed.unseal(doc.kdf, box, passphrase)
    except sealed.WrongPassphrase:
        raise KeyCommandError(f"wrong passphrase for key file {path}") from None
    except sealed.Damaged:
        raise KeyCommandError(corrupted) from None
    try:
        secret = msgspec.json.decode(plain, type=KeySecret)
        key = SigningKey(bytes.fromhex(secret.seed))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        raise KeyCommandError(corrupted) from None
    if key.public.hex() != doc.service_node_pubkey or secret.network != doc.network:
        raise KeyCommandError(corrupted)
    return key


# --- the passphrase -------------------------------------------------------------------------

def new_passphrase_problem(passphrase: str) -> str | None:
    """Why `passphrase` may not seal a new key file, or None."""
    if len(passphrase) < sealed.MIN_PASSPHRASE_LENGTH:
        return (f"a key file's passphrase needs at least {sealed.MIN_PASSPHRASE_LENGTH} characters, "
                f"this one has {len(passphrase)}")
    return None


def passphrase(password_file: str | None, *, new: bool) -> str:
    """The passphrase: the first line of --password-file, a line of piped input, or typed on
    the terminal (twice for a new file). A new one shorter than MIN_PASSPHRASE_LENGTH is refused."""
    if password_file is not None:
        given, where = _file_passphrase(password_file), f"--password-file {password_file}"
    elif not sys.stdin.isatty():
        line = sys.stdin.readline()
        if not line:
            raise KeyCommandError("no passphrase given: type it, or use --password-file FILE")
        given, where = line.rstrip("\r\n"), "the passphrase"
    elif new:
        return _typed_new_passphrase()
    else:
        return getpass.getpass("Key file passphrase: ")
    problem = new_passphrase_problem(given) if new else None
    if problem is not None:
        raise KeyCommandError(f"{where}: {problem}")
    return given


def _file_passphrase(password_file: str) -> str:
    try:
        text = read_bounded(password_file, SMALL_FILE_BYTES).decode()
    except OSError as err:
        raise KeyCommandError(f"--password-file: cannot read {password_file}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise KeyCommandError(f"--password-file: {password_file} is not text") from None
    return text.splitlines()[0] if text else ""


def _typed_new_passphrase() -> str:
    for attempt in range(PASSPHRASE_TRIES):
        given = getpass.getpass("New passphrase for the key file: ")
        problem = new_passphrase_problem(given)
        if problem is None and getpass.getpass("The passphrase again: ") != given:
            problem = "the two passphrases differ"
        if problem is None:
            return given
        if attempt + 1 < PASSPHRASE_TRIES:
            print(f"Error: {problem}: try again.", file=sys.stderr)
        else:
            raise KeyCommandError(f"{problem}: run the command again")
    raise AssertionError("unreachable")
