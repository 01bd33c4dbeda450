"""The signature cache of `core.crypto.verify`: each good signature is verified once per
process; a bad one is checked in full every time and never remembered."""

from __future__ import annotations

import os

import nacl.bindings as sodium
import pytest

from snode.core import crypto
from snode.core.crypto import SigningKey, verify, verify_uncached

KEY = SigningKey(bytes(range(32)))


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Counts libsodium's verifications (the real one runs): the signed messages it opened."""
    calls: list[bytes] = []
    real = sodium.crypto_sign_open

    def counting(signed: bytes, public: bytes) -> bytes:
        calls.append(signed)
        return real(signed, public)

    monkeypatch.setattr(crypto.sodium, "crypto_sign_open", counting)
    return calls


def test_a_good_signature_is_verified_once(opened: list[bytes]) -> None:
    message = os.urandom(32)
    signature = KEY.sign(message)
    assert verify(KEY.public, message, signature)
    assert verify(KEY.public, message, signature)
    assert verify(KEY.public, bytes(message), bytes(signature))  # equal bytes, other objects
    assert len(opened) == 1


def test_a_bad_signature_is_checked_every_time(opened: list[bytes]) -> None:
    message = os.urandom(32)
    signature = KEY.sign(b"another message")
    assert not verify(KEY.public, message, signature)
    assert not verify(KEY.public, message, signature)
    assert len(opened) == 2


def test_a_cached_signature_vouches_for_nothing_else(opened: list[bytes]) -> None:
    message = os.urandom(32)
    signature = KEY.sign(message)
    other = SigningKey(os.urandom(32))
    assert verify(KEY.public, message, signature)
    assert not verify(KEY.public, message + b"x", signature)
    assert not verify(other.public, message, signature)
    assert not verify(KEY.public, message, signature[:63] + bytes([signature[63] ^ 1]))
    # The same bytes cut elsewhere (a key a byte longer, a signature a byte shorter) are no
    # triple that verified.
    assert not verify(KEY.public + signature[:1], message, signature[1:] + message[:1])
    assert len(opened) == 4  # every refused one was checked in full (the last by its lengths)


def test_the_cache_is_bounded(opened: list[bytes]) -> None:
    crypto.signature_cache(True, size=8)
    try:
        messages = [os.urandom(32) for _ in range(20)]
        signatures = [KEY.sign(m) for m in messages]
        for message, signature in zip(messages, signatures):
            assert verify(KEY.public, message, signature)
        assert len(crypto._good) <= 8
        assert verify(KEY.public, messages[-1], signatures[-1])  # the newest are remembered
        assert verify(KEY.public, messages[-4], signatures[-4])
        assert len(opened) == 20
        assert verify(KEY.public, messages[0], signatures[0])  # the oldest were dropped: checked again
        assert len(opened) == 21
    finally:
        crypto.signature_cache(True)


def test_verify_uncached_checks_every_time(opened: list[bytes]) -> None:
    message = os.urandom(32)
    signature = KEY.sign(message)
    assert verify_uncached(KEY.public, message, signature)
    assert verify_uncached(KEY.public, message, signature)
    assert not verify_uncached(KEY.public, message + b"x", signature)
    assert len(opened) == 3


def test_switched_off_every_signature_is_checked(opened: list[bytes]) -> None:
    message = os.urandom(32)
    signature = KEY.sign(message)
    crypto.signature_cache(False)
    try:
        assert verify(KEY.public, message, signature)
        assert verify(KEY.public, message, signature)
    finally:
        crypto.signature_cache(True)
    assert len(opened) == 2
    assert verify(KEY.public, message, signature)
    assert verify(KEY.public, message, signature)
    assert len(opened) == 3
