"""The simulated clock and network of `snode-sim`: a discrete-event queue in simulated seconds,
and point-to-point messages that arrive after a latency, or never (loss, a partition).

Nothing here sleeps: the simulation jumps from one event to the next, so a 60-second round that
fails costs what its events cost, not a minute. Every draw comes from the seeded `random.Random`
the simulation gives it, so a run is reproduced exactly by its seed.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LinkModel:
    """How messages travel: a one-way latency with jitter, and a chance of loss."""

    latency_s: float = 0.05
    """Mean one-way latency in seconds."""
    jitter: float = 0.5
    """Each message's latency is uniform in latency x [1 - jitter, 1 + jitter]."""
    loss: float = 0.0
    """Chance that a message is lost, 0 to 1."""

    def __post_init__(self) -> None:
        if self.latency_s < 0 or not 0 <= self.jitter <= 1 or not 0 <= self.loss < 1:
            raise ValueError("latency must be >= 0, jitter in [0, 1] and loss in [0, 1)")


@dataclass(order=True, slots=True)
class _Event:
    at: float
    seq: int
    action: Callable[[], None] = field(compare=False)


class SimNetwork:
    """The event queue and the links between simulated nodes (named by public key)."""

    def __init__(self, rng: random.Random, link: LinkModel, start: float) -> None:
        self.rng = rng
        self.link = link
        self.now = start
        self._queue: list[_Event] = []
        self._seq = 0
        self._side: dict[bytes, int] = {}
        """Partition side of each node cut off (side 0, the default, is everyone else)."""
        self.sent = 0
        """Messages handed to the network."""
        self.lost = 0
        """Of which lost on the way or across a partition."""

    # --- time ---------------------------------------------------------------------------------

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` at simulated time `when` (never before now)."""
        self._seq += 1
        heapq.heappush(self._queue, _Event(max(when, self.now), self._seq, action))

    def run_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Run events in time order until `done()` holds (True) or none is due before
        `deadline` (False; the clock is then at the deadline)."""
        while not done():
            if not self._queue or self._queue[0].at > deadline:
                self.now = max(self.now, deadline)
                return False
            event = heapq.heappop(self._queue)
            self.now = event.at
            event.action()
        return True

    def clear(self) -> None:
        """Drop every pending event (a height is settled: its round messages are moot)."""
        self._queue.clear()

    # --- messages -----------------------------------------------------------------------------

    def send(self, sender: bytes, receiver: bytes, deliver: Callable[[], None]) -> None:
        """One message from `sender` to `receiver`: `deliver` runs on arrival, if it arrives."""
        self.sent += 1
        if self._side.get(sender, 0) != self._side.get(receiver, 0) or (
            self.link.loss and self.rng.random() < self.link.loss
        ):
            self.lost += 1
            return
        self.at(self.now + self.delay(), deliver)

    def delay(self) -> float:
        """One message's latency."""
        spread = self.link.jitter * self.link.latency_s
        return self.link.latency_s + self.rng.uniform(-spread, spread)

    def partition(self, nodes: Iterable[bytes]) -> None:
        """Cut `nodes` off from everyone else (they still reach each other)."""
        for node in nodes:
            self._side[node] = 1

    def heal(self) -> None:
        """Every node reaches every node again."""
        self._side.clear()

    def reachable(self, a: bytes, b: bytes) -> bool:
        """True when no partition separates `a` and `b`."""
        return self._side.get(a, 0) == self._side.get(b, 0)
