"""DiskWatch: the chain database refusing writes, said where the operator looks.

A full disk (or a quota, a file-size limit) makes SQLite refuse a commit and roll it back; the
node goes on with the chain it has, and every block after is refused the same way. Without a
word that is a node falling behind for no visible reason (issue #33 item 9): so the first refusal
is a WARNING line naming the data dir and its free space, repeated at most once a minute while
writes keep failing (one line per block on devnet would be 30 a minute), `/readyz` names it until
a write succeeds again, and that success is one line too.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from snode.store.errors import WriteRefused

log = logging.getLogger(__name__)

WARN_EVERY: Final = 60.0
"""Seconds between two WARNING lines while writes keep being refused."""


def free_bytes(directory: Path) -> int | None:
    """Bytes free for us on the file system of `directory`, None if it cannot be told."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def _size(count: int | None) -> str:
    if count is None:
        return "an unknown amount"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


class DiskWatch:
    """Refused writes of one data dir's database (`refused`), and the next write that works
    (`written`); `shortage` is /readyz's reason while they fail."""

    def __init__(self, data_dir: Path, *, every: float = WARN_EVERY, clock: Callable[[], float] = time.monotonic,
                 free: Callable[[Path], int | None] = free_bytes) -> None:
        self.data_dir, self.every, self._clock, self._free = data_dir, every, clock, free
        self._reason: str | None = None
        self._warned_at: float | None = None
        self.refusals = 0
        """Writes refused since the last that worked."""

    def refused(self, err: WriteRefused) -> None:
        self.refusals += 1
        what = "the disk is full" if err.full else "a write was refused"
        self._reason = (f"the chain database refuses writes ({what}; data dir {self.data_dir} has "
                        f"{_size(self._free(self.data_dir))} free): blocks are not stored until space "
                        "is freed there")
        now = self._clock()
        if self._warned_at is None or now - self._warned_at >= self.every:
            self._warned_at = now
            log.warning("%s; %d write(s) refused so far (%s; said at most once a minute)",
                        self._reason, self.refusals, err.reason)

    def written(self) -> None:
        if self._reason is not None:
            log.warning("the chain database takes writes again, after %d refused", self.refusals)
        self._reason, self._warned_at, self.refusals = None, None, 0

    def shortage(self) -> str | None:
        return self._reason
