"""Expected failures. Each carries a reason an operator can read; nothing here is a bug."""

from __future__ import annotations


class SnodeError(Exception):
    """Base of every expected failure; `str(err)` is the operator-readable reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidAmount(SnodeError):
    """An amount or percentage typed by a user does not follow the rules."""


class InvalidAddress(SnodeError):
    """A wallet address does not decode for this network."""


class DecodeError(SnodeError):
    """Bytes are not the canonical encoding of the expected object."""


class InvalidTransaction(SnodeError):
    """A transaction breaks a consensus rule."""


class BadSignature(InvalidTransaction):
    """A transaction carries a signature that does not verify: never an honest mistake."""


class WrongFork(InvalidTransaction):
    """A transaction signed for the other side of a fork (its branch id): an honest mistake of
    a wallet or a peer on another schedule, not a forgery."""


class InvalidRegistration(InvalidTransaction):
    """A service-node registration breaks a staking rule."""


class InvalidStake(InvalidTransaction):
    """A contribution to a service node breaks a staking rule."""


class InvalidStateChange(InvalidTransaction):
    """A quorum state change is not valid for the node or the quorum."""


class InvalidBlock(SnodeError):
    """A block breaks a consensus rule."""


class BlockFromFuture(InvalidBlock):
    """A block dated too far ahead of this node's clock: maybe our clock, maybe theirs."""


class InvalidGenesis(SnodeError):
    """A genesis document is malformed."""


class GenesisOfAnotherNetwork(InvalidGenesis):
    """A genesis document of another network (`network`, as the document names it)."""

    def __init__(self, reason: str, network: str) -> None:
        super().__init__(reason)
        self.network = network


class MempoolRejection(SnodeError):
    """A valid-looking transaction the mempool will not take (duplicate, conflict, full)."""
