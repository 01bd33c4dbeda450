"""File descriptors as a budget of their own (issue #33, item 1).

Every connection a port accepts costs a descriptor, and a process that runs out of them can
neither answer its admin RPC nor accept a P2P peer, nor open its database: under the default soft
limit of 1,024, about 1,100 idle connections to one port did that. Three things hold here:

- At start the daemon raises its own soft RLIMIT_NOFILE to the hard limit (at most
  DESCRIPTOR_TARGET), as Bitcoin Core does, and logs the figure once. Raising the soft limit up
  to the hard one needs no privilege; where setrlimit is forbidden (a systemd unit whose
  `SystemCallFilter=~@resources` filters it) the unit's own `LimitNOFILE=` is what holds, and
  the daemon asks for nothing when the soft limit already is the target.
- Each listener bounds what one address and all addresses may hold (their own modules); on top
  of that the ZeroMQ ports refuse a new connection whose descriptor number shows fewer than
  `reserve` free (`short_of`), so the admin RPC and P2P, bounded by their own caps, keep the
  last descriptors: the flooded port refuses first.
- `DescriptorWatch` counts the descriptors in use every CHECK_INTERVAL seconds (QUIET_INTERVAL
  while fewer than half are in use); under `reserve`
  free it writes one ERROR line (again at most every ERROR_EVERY seconds while it lasts) and
  `/readyz` names the shortage.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from typing import Final

log = logging.getLogger(__name__)

DESCRIPTOR_TARGET: Final = 65_536
"""The soft limit the daemon raises itself to, where the hard limit allows: room for thousands of
service nodes' quorumnet connections and every port's caps together."""
RESERVE_SHARE: Final = 0.10
RESERVE_MIN: Final = 64
"""Descriptors kept free: a tenth of the limit, at least 64. Under that the ZeroMQ ports take no
new connection and the watch reports the shortage."""
CHECK_INTERVAL: Final = 1.0
"""Seconds between two counts while half the descriptors or more are in use, or they are short..."""
QUIET_INTERVAL: Final = 10.0
"""...and while fewer are: a count lists /proc/self/fd, some 0.25 ms with a service node's
hundred descriptors (0.5 ms of its CPU a devnet block, issue #37), and a ZeroMQ port's accept
marks a shortage at once without a count (`short_of`), so the count only catches up."""
ERROR_EVERY: Final = 60.0
"""While descriptors stay short, the ERROR line comes again at most this often."""


def reserve_for(limit: int) -> int:
    return max(RESERVE_MIN, int(limit * RESERVE_SHARE))


def raise_soft_limit(target: int = DESCRIPTOR_TARGET) -> int:
    """Raise RLIMIT_NOFILE's soft limit toward `target` (never above the hard limit, never
    down), log the limit once, and return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = target if hard == resource.RLIM_INFINITY else min(hard, target)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (OSError, ValueError) as err:
            log.warning("file descriptors: cannot raise the soft limit from %d to %d (%s); set "
                        "LimitNOFILE= in the systemd unit or `ulimit -n` / `--ulimit nofile=` for "
                        "the container", soft, wanted, err)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    log.info("file descriptors: soft limit %d (hard %s), %d kept in reserve", soft, shown,
             reserve_for(soft))
    return int(soft)


def in_use() -> int | None:
    """Descriptors this process has open (Linux and the BSDs list them; None elsewhere)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder)) - 1  # the listing's own descriptor
        except OSError:
            continue
    return None


class DescriptorWatch:
    """What the process has left, checked every CHECK_INTERVAL; `shortage` is /readyz's reason."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reserve = reserve_for(limit)
        self.used: int | None = None
        self.low = False
        self._last_error = -ERROR_EVERY

    def short_of(self, descriptor: int) -> bool:
        """Whether a newly opened `descriptor` shows fewer than the reserve free. A new
        descriptor is the lowest number free, so every one below it is in use: a free test at
        each accept, with no count. Marks the watch low at once (the count catches up)."""
        if descriptor < self.limit - self.reserve:
            return False
        self._report(max(descriptor + 1, self.used or 0))
        return True

    def check(self) -> None:
        used = in_use()
        if used is not None:
            self._report(used)

    def _report(self, used: int) -> None:
        self.used = used
        low = self.limit - used < self.reserve
        now = time.monotonic()
        if low and now - self._last_error >= ERROR_EVERY:
            self._last_error = now
            log.error("file descriptors: %d of %d in use, fewer than %d free; new connections to "
                      "the quorumnet and public OMQ ports are refused until some close (raise "
                      "LimitNOFILE= or `ulimit -n` if this is honest load)", used, self.limit, self.reserve)
        elif self.low and not low:
            log.info("file descriptors: %d of %d in use again", used, self.limit)
        self.low = low

    def shortage(self) -> str | None:
        if not self.low:
            return None
        return (f"file descriptors low: {self.used} of {self.limit} in use (fewer than "
                f"{self.reserve} free); new quorumnet and public OMQ connections are refused")

    def interval(self) -> float:
        """Seconds until the next count: CHECK_INTERVAL where a shortage is near or here."""
        near = self.low or self.used is None or 2 * self.used >= self.limit
        return CHECK_INTERVAL if near else QUIET_INTERVAL

    async def run(self) -> None:
        while True:
            self.check()
            await asyncio.sleep(self.interval())
