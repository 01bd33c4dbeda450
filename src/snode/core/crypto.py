"""Ed25519 keys and signatures (libsodium via PyNaCl), X25519 derivation, BLAKE2b-256 hashing."""

from __future__ import annotations

import hashlib

import nacl.bindings as sodium
import nacl.exceptions

from snode.core.types import PUBKEY_BYTES, SEED_BYTES, SIGNATURE_BYTES


def hash32(data: bytes) -> bytes:
    """BLAKE2b-256 of data (hashlib: about 15x faster than PyNaCl's wrapper for small inputs)."""
    return hashlib.blake2b(data, digest_size=32).digest()


class SigningKey:
    """An Ed25519 secret key, created from its 32-byte seed."""

    __slots__ = ("seed", "public", "_secret")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is {SEED_BYTES} bytes, not {len(seed)}")
        self.seed = bytes(seed)
        self.public, self._secret = sodium.crypto_sign_seed_keypair(self.seed)

    def sign(self, message: bytes) -> bytes:
        """Detached 64-byte signature of message."""
        return sodium.crypto_sign(message, self._secret)[:SIGNATURE_BYTES]

    def x25519_secret(self) -> bytes:
        """The X25519 secret derived from this key (quorumnet's CurveZMQ identity)."""
        return sodium.crypto_sign_ed25519_sk_to_curve25519(self._secret)

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public.hex()})"


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """True when signature is a valid Ed25519 signature of message by public."""
    if len(public) != PUBKEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        sodium.crypto_sign_open(signature + message, public)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError,
            nacl.exceptions.TypeError, nacl.exceptions.RuntimeError):
        return False
    return True


def x25519_public(public: bytes) -> bytes:
    """The X25519 public key derived from an Ed25519 public key (raises ValueError if invalid)."""
    try:
        return sodium.crypto_sign_ed25519_pk_to_curve25519(public)
    except nacl.exceptions.RuntimeError as err:
        raise ValueError("not a valid Ed25519 public key") from err
