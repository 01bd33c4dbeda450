"""Signature checks as data: every rule that needs a signature verified says so with a
`SigCheck`, and the checks of a whole block are verified in one batch at the end (by the
caller's `BatchVerifier`: serially here, in worker processes in a daemon)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from snode.core.crypto import verify


class SigCheck(NamedTuple):
    """One signature to verify, and what to blame if it is bad."""

    public: bytes
    message: bytes
    signature: bytes
    what: str
    input: bool = False
    """A transaction input's signature: what assume-valid may skip below its block, and nothing
    else (`node.batches.stage`)."""


BatchVerifier = Callable[[Sequence[SigCheck]], int]
"""Returns the index of the first bad signature, or -1 when all are good."""


def verify_serially(checks: Sequence[SigCheck]) -> int:
    """The default BatchVerifier: one core, in order."""
    for i, check in enumerate(checks):
        if not verify(check.public, check.message, check.signature):
            return i
    return -1


def run_checks(checks: Sequence[SigCheck], verifier: BatchVerifier, error: type[Exception]) -> None:
    """Verify `checks`; raise `error` naming the first bad signature."""
    bad = verifier(checks)
    if bad >= 0:
        raise error(f"{checks[bad].what} has a bad signature")
