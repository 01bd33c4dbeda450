"""Ed25519 keys and signatures (libsodium via PyNaCl), X25519 derivation, BLAKE2b-256 hashing."""

from __future__ import annotations

import functools
import hashlib
from typing import Final

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


GOOD_CACHE_SIZE: Final = 16_384
"""Good signatures remembered (a few MB at most): a service node meets each of a block's
signatures two or three times within a few blocks (the template, its validators' answers, the
block relayed; an uptime proof or vote gossiped, then carried by a block)."""


class _GoodSignatures:
    """The signature cache: two generations of good triples, each a dict used as a set. When
    the newer one is full it becomes the older, and the older is dropped. No lock: a rebinding
    and a dict operation are each atomic under the GIL, and a race can only lose an entry."""

    def __init__(self, size: int = GOOD_CACHE_SIZE) -> None:
        self.half = size // 2
        """Triples a generation holds (the cache remembers `size` at most)."""
        self.newer: dict[bytes, None] = {}
        self.older: dict[bytes, None] = {}

    def __contains__(self, key: bytes) -> bool:
        return key in self.newer or key in self.older

    def add(self, key: bytes) -> None:
        newer = self.newer
        newer[key] = None
        if len(newer) >= self.half:
            self.older, self.newer = newer, {}

    def __len__(self) -> int:
        return len(self.newer) + len(self.older)


class _NoCache(_GoodSignatures):
    """The cache switched off (`signature_cache(False)`): remembers nothing."""

    def __contains__(self, key: bytes) -> bool:
        return False

    def add(self, key: bytes) -> None:
        pass


_good: _GoodSignatures = _GoodSignatures()


def signature_cache(on: bool, size: int = GOOD_CACHE_SIZE) -> None:
    """Switch the signature cache on (the default, emptied, remembering `size` good triples at
    most) or off: the benchmarks measure what a signature costs when it is first seen, verifying
    the same ones over and over; a test of the bound passes a small `size`."""
    global _good
    _good = _GoodSignatures(size) if on else _NoCache()


def verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """True when signature is a valid Ed25519 signature of message by public.

    Each good signature is verified once per process (as Bitcoin Core's signature cache): a
    triple that verified before is answered from a bounded cache of good triples. A bad
    signature is never remembered, so it is checked in full every time."""
    if len(public) != PUBKEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False  # first: the cache's key (their concatenation) needs their fixed lengths
    key = public + signature + message
    if key in _good:
        return True
    if not verify_uncached(public, message, signature):
        return False
    _good.add(key)
    return True


def verify_uncached(public: bytes, message: bytes, signature: bytes) -> bool:
    """`verify` without the cache: for a process that sees each signature once (a sync's
    signature worker)."""
    if len(public) != PUBKEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        sodium.crypto_sign_open(signature + message, public)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError,
            nacl.exceptions.TypeError, nacl.exceptions.RuntimeError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def x25519_public(public: bytes) -> bytes:
    """The X25519 public key derived from an Ed25519 public key (raises ValueError if invalid).
    Remembered: quorumnet derives every service node's key again at each quorum change."""
    try:
        return sodium.crypto_sign_ed25519_pk_to_curve25519(public)
    except nacl.exceptions.RuntimeError as err:
        raise ValueError("not a valid Ed25519 public key") from err
