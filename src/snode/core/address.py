"""Wallet addresses: `<prefix>1<data>`, where data is base32 of (public key + 4-byte checksum).

The prefix is the network's human-readable part (`sn`, `snt`, `snd`, `snr`); the checksum is the
first 4 bytes of BLAKE2b-256(prefix + public key), so an address of one network never decodes on
another. The base32 alphabet is bech32's: lower case, no `1`, `b`, `i` or `o`. The encoding is
not bech32 (its checksum covers the exact text, case included), so addresses are lower case only:
an upper-case one is refused for its case, never silently taken.
"""

from __future__ import annotations

from typing import Final

from snode.core.crypto import hash32
from snode.core.errors import InvalidAddress
from snode.core.types import PUBKEY_BYTES

ALPHABET: Final = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_INDEX: Final = {c: i for i, c in enumerate(ALPHABET)}
SEPARATOR: Final = "1"
CHECKSUM_BYTES: Final = 4
_PAYLOAD_BYTES: Final = PUBKEY_BYTES + CHECKSUM_BYTES
DATA_CHARS: Final = -(-_PAYLOAD_BYTES * 8 // 5)


def _checksum(prefix: str, public: bytes) -> bytes:
    return hash32(prefix.encode() + public)[:CHECKSUM_BYTES]


def encode_address(prefix: str, public: bytes) -> str:
    """The address of public key `public` on the network with address prefix `prefix`."""
    if len(public) != PUBKEY_BYTES:
        raise ValueError(f"a public key is {PUBKEY_BYTES} bytes")
    payload = public + _checksum(prefix, public)
    bits = int.from_bytes(payload, "big") << (DATA_CHARS * 5 - _PAYLOAD_BYTES * 8)
    chars = [ALPHABET[(bits >> (5 * (DATA_CHARS - 1 - i))) & 31] for i in range(DATA_CHARS)]
    return prefix + SEPARATOR + "".join(chars)


def decode_address(prefix: str, text: str) -> bytes:
    """The public key inside address `text`; InvalidAddress says what is wrong with it."""
    if not isinstance(text, str) or text == "":
        raise InvalidAddress("address is empty")
    if any(ch.isspace() for ch in text):
        raise InvalidAddress("address contains whitespace: paste it as one word")
    if any("A" <= ch <= "Z" for ch in text):
        raise InvalidAddress(_upper_case(prefix, text))
    # No network prefix holds the separator, so the first one ends the prefix: a `1` typed into
    # the data part is then named as a bad character, not as a wrong network.
    hrp, sep, data = text.partition(SEPARATOR)
    if not sep or hrp != prefix:
        raise InvalidAddress(
            f"address '{text[:12]}...' has the wrong network prefix: addresses on this network "
            f"begin with '{prefix}{SEPARATOR}'"
        )
    bad = sorted({ch for ch in data if ch not in _INDEX})
    if bad:
        raise InvalidAddress(
            f"address contains characters that are not in an address: {''.join(bad)!r}"
        )
    if len(data) != DATA_CHARS:
        raise InvalidAddress(
            f"address has the wrong length: {len(text)} characters instead of "
            f"{len(prefix) + 1 + DATA_CHARS}"
        )
    bits = 0
    for ch in data:
        bits = (bits << 5) | _INDEX[ch]
    padding = DATA_CHARS * 5 - _PAYLOAD_BYTES * 8
    if bits & ((1 << padding) - 1):
        raise InvalidAddress("address has a bad checksum: check it for typing errors")
    payload = (bits >> padding).to_bytes(_PAYLOAD_BYTES, "big")
    public, check = payload[:PUBKEY_BYTES], payload[PUBKEY_BYTES:]
    if _checksum(prefix, public) != check:
        raise InvalidAddress("address has a bad checksum: check it for typing errors")
    return public


def _upper_case(prefix: str, text: str) -> str:
    """Why an address with upper-case letters is refused: its case, then the lower-case form to
    use, or what would still be wrong with that one (so the operator fixes both at once)."""
    reason = f"address '{text[:12]}...' has upper-case letters: addresses are all lower case"
    lower = text.lower()
    try:
        decode_address(prefix, lower)
    except InvalidAddress as err:
        return f"{reason}; in lower case: {err.reason}"
    return f"{reason} (as in '{lower[:12]}...')"
