"""Domain aliases and sizes shared by the core."""

from __future__ import annotations

from typing import Annotated, Final, TypeAlias

import msgspec

HASH_BYTES: Final = 32
PUBKEY_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
SEED_BYTES: Final = 32

Hash32: TypeAlias = Annotated[bytes, msgspec.Meta(min_length=HASH_BYTES, max_length=HASH_BYTES)]
"""BLAKE2b-256 digest."""
PubKey: TypeAlias = Annotated[bytes, msgspec.Meta(min_length=PUBKEY_BYTES, max_length=PUBKEY_BYTES)]
"""Ed25519 public key."""
Signature: TypeAlias = Annotated[
    bytes, msgspec.Meta(min_length=SIGNATURE_BYTES, max_length=SIGNATURE_BYTES)
]
"""Ed25519 signature."""
Amount: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
"""Atomic units (1 coin = 10**9)."""
Height: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
"""Block height; genesis is 0."""
Timestamp: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
"""Unix seconds."""
Ppm: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
"""Parts per million."""
