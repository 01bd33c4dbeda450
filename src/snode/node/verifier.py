"""Signature batches on a thread pool: libsodium releases the GIL, so both cores verify."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from snode.core.transition import SigCheck, verify_serially

INLINE_BELOW = 64
"""Batches smaller than this are verified on the calling thread: a hand-off costs more."""


class ThreadedVerifier:
    """A BatchVerifier that splits large batches over worker threads."""

    def __init__(self, workers: int = 2) -> None:
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify")

    def __call__(self, checks: Sequence[SigCheck]) -> int:
        if len(checks) < INLINE_BELOW:
            return verify_serially(checks)
        step = -(-len(checks) // self.workers)
        starts = range(0, len(checks), step)
        results = self._pool.map(lambda s: verify_serially(checks[s:s + step]), starts)
        for start, bad in zip(starts, results):
            if bad >= 0:
                return start + bad
        return -1

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=True)
