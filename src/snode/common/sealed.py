"""Secrets sealed with a passphrase: Argon2id derives the file key, SecretBox (XSalsa20-Poly1305)
encrypts, a BLAKE2b checksum of the box tells a damaged file from a wrong passphrase (which
SecretBox alone cannot).

The wallet file (`snode.wallet.keystore`) and the exported service-node key (`snode-cli key
export`) both seal their secret here, so both are guarded by the same derivation at the same
cost, and a change to either reaches both. Each file records its derivation's parameters and
salt (`Kdf`); the formats around them are each file's own.

New files are sealed at libsodium's MODERATE cost (3 passes over 256 MiB: 0.6 s on the
project's 2-core machine). The test suite seals at the lowest cost through TEST_COST_ENV, which
is refused on every network but regtest and devnet.
"""

from __future__ import annotations

import hashlib
import os
from typing import Final

import msgspec
import nacl.exceptions
import nacl.pwhash
import nacl.secret
import nacl.utils

KDF_NAME: Final = "argon2id"
OPSLIMIT: Final = nacl.pwhash.argon2id.OPSLIMIT_MODERATE
MEMLIMIT: Final = nacl.pwhash.argon2id.MEMLIMIT_MODERATE
MAX_OPSLIMIT: Final = 4 * nacl.pwhash.argon2id.OPSLIMIT_SENSITIVE
MAX_MEMLIMIT: Final = nacl.pwhash.argon2id.MEMLIMIT_SENSITIVE
"""The most a file may ask for (16 passes, 1 GiB): a damaged or planted file must not make the
program spend minutes or all the memory before it can say the passphrase is wrong."""
SALT_BYTES: Final = nacl.pwhash.argon2id.SALTBYTES
TEST_COST_ENV: Final = "SNODE_TEST_WALLET_KDF"
"""Test suite only: `min` seals new files (wallets, exported keys) at Argon2id's lowest cost (no
protection at all). Refused on mainnet and testnet, so a variable left in a shell can never
weaken a real file."""
TEST_COST_NETWORKS: Final = ("regtest", "devnet")
MIN_PASSPHRASE_LENGTH: Final = 8
"""Characters a new file's passphrase needs at least: NIST SP 800-63B's floor for a chosen
secret; each guess at a stolen file costs a MODERATE derivation."""


class SealError(Exception):
    """Why a secret cannot be sealed or opened (its text is one line for the user)."""


class Damaged(SealError):
    """The sealed data does not hold together: its checksum, salt or cost is wrong."""


class WrongPassphrase(SealError):
    """The checksum holds but the box does not open: the passphrase is not the one it was sealed with."""


class Kdf(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the file key is derived from the passphrase."""

    name: str
    opslimit: int
    memlimit: int
    salt: str
    """Hex."""


def kdf_cost(network: str) -> tuple[int, int]:
    """(opslimit, memlimit) new files of `network` (its name) are sealed at: MODERATE, or the lowest
    cost where the test suite asks for it (TEST_COST_ENV, regtest and devnet only)."""
    asked = os.environ.get(TEST_COST_ENV, "")
    if not asked:
        return OPSLIMIT, MEMLIMIT
    if network not in TEST_COST_NETWORKS:
        raise SealError(f"{TEST_COST_ENV} is for the test suite, and refused on {network}: unset it")
    if asked != "min":
        raise SealError(f"{TEST_COST_ENV}: '{asked[:20]}' is not 'min' (or unset it)")
    return nacl.pwhash.argon2id.OPSLIMIT_MIN, nacl.pwhash.argon2id.MEMLIMIT_MIN


def checksum(box: bytes) -> str:
    """Hex BLAKE2b-256 of the box bytes."""
    return hashlib.blake2b(box, digest_size=32).hexdigest()


def seal(plain: bytes, passphrase: str, cost: tuple[int, int]) -> tuple[Kdf, bytes]:
    """`plain` sealed under `passphrase` with a fresh salt at `cost`: (the derivation, the box:
    nonce first, then the ciphertext)."""
    kdf = Kdf(name=KDF_NAME, opslimit=cost[0], memlimit=cost[1], salt=nacl.utils.random(SALT_BYTES).hex())
    return kdf, bytes(nacl.secret.SecretBox(_file_key(passphrase, kdf)).encrypt(plain))


def verified_box(kdf: Kdf, box_hex: str, box_checksum: str) -> bytes:
    """The box's bytes once its checksum, salt and cost hold; Damaged otherwise. Cheap: run it
    before any other check of a file, so that a damaged file is never called a wrong passphrase."""
    try:
        box, salt = bytes.fromhex(box_hex), bytes.fromhex(kdf.salt)
    except ValueError:
        raise Damaged("not hex") from None
    if (kdf.name != KDF_NAME or checksum(box) != box_checksum or len(salt) != SALT_BYTES
            or not 0 < kdf.opslimit <= MAX_OPSLIMIT or not 0 < kdf.memlimit <= MAX_MEMLIMIT):
        raise Damaged("checksum, salt or cost")
    return box


def unseal(kdf: Kdf, box: bytes, passphrase: str) -> bytes:
    """What `seal` sealed (a box `verified_box` passed); WrongPassphrase, or Damaged."""
    try:
        return nacl.secret.SecretBox(_file_key(passphrase, kdf)).decrypt(box)
    except nacl.exceptions.CryptoError:
        raise WrongPassphrase("wrong passphrase") from None
    except (nacl.exceptions.ValueError, nacl.exceptions.RuntimeError):
        raise Damaged("the box does not open") from None


def _file_key(passphrase: str, kdf: Kdf) -> bytes:
    return nacl.pwhash.argon2id.kdf(
        nacl.secret.SecretBox.KEY_SIZE, passphrase.encode(), bytes.fromhex(kdf.salt),
        opslimit=kdf.opslimit, memlimit=kdf.memlimit,
    )
