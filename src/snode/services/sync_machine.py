"""Chain sync from one peer, as a state machine without I/O (h11's way: events in, actions out).

The machine decides what to ask the peer for, whether its answers make sense, and what the
node must do with them; an adapter (`services.sync.Syncer`) does the asking over P2P and the
doing through the node. Unit tests drive it with no sockets (tests/unit/test_sync_machine.py),
including a peer that lies and one that stalls.

Inputs (methods): `start`, `on_blocks` (a peer's reply, decoded, and when it arrived),
`on_staged` (the adapter staged a batch: how far it got), `on_node` (where the node's tip is
now), `resume` (the adapter did what it was told: what next?), `on_timeout`, `on_gone` (the
peer disconnected), `on_preempted` (the adapter moves to a peer that proved a height).
Outputs (returned lists of actions): `Request` (GetBlocks), `Stage` (apply a download in memory,
joined to the staged batch or after it), `Finish` (store and adopt the staged batch),
`Reorganize` (switch to a fork the peer showed), `ApplyOrphans`, `Score` (misbehaviour points),
`Backoff` (do not sync from this peer's address for a while), `Ban`, `Done`.

The pipeline it drives: while batch N is being stored, the request for N+1 is already out and
N+1 is applied in memory with its signatures checked in the verifier's workers; two downloads
(1,000 blocks) are stored per transaction. A fork is collected whole (bounded) and applied only
once it is longer than our chain, and only while each of its blocks was made by a key that could
have made it (an authority, a registered service node: the relay's test for orphans; or a node
registered by an earlier block of the fork itself), so that a peer cannot fill the buffer with
blocks it signed itself; a peer whose fork is dropped scores. Each fork block's producer
signature (and transaction root) is checked before it is kept, so a peer cannot fill the buffer
with blocks nobody signed (it is banned), and the buffer counts what the decoded blocks take in
memory (`block_memory`), not their encoding.

A peer that does not deliver is a staller: one that times out (`on_timeout`), answers slower
than SYNC_STALL_S at less than MIN_SYNC_RATE, or sends less than a whole download while it
claims more (what an honest node's `blocks_after` never does: the slow drip of one block per
request) is scored, backed off (`Backoff`: per address, by the adapter) and left for another
peer. The machine reads time only from its `clock` and the arrival times it is given, so that
tests drive it with a fake one.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec

from snode.core.blocks import Block, BlockHeader, block_hash
from snode.core.transactions import Registration
from snode.net.limits import (
    DEFAULT_SYNC_LIMITS,
    SCORE_FORK_RESET,
    SCORE_SYNC_STALL,
    SCORE_SYNC_TIMEOUT,
    SCORE_UNKNOWN_PRODUCER,
    SyncLimits,
)


@dataclass(frozen=True, slots=True)
class Request:
    """Send GetBlocks: after `top` alone (a pipelined request for the next download), or with
    the node's whole locator after it (`top` None: the locator alone)."""

    top: bytes | None
    with_locator: bool


@dataclass(frozen=True, slots=True)
class Stage:
    """Apply `blocks` in memory and hand their signatures to the verifier: joined to the staged
    batch (`join`: stored with it, in one transaction), or after it (then the batch staged
    before is stored and adopted as soon as this one is staged, so that the verifier works on
    this one meanwhile). Answer with `on_staged`."""

    blocks: list[Block]
    join: bool


@dataclass(frozen=True, slots=True)
class Finish:
    """Store and adopt the staged batch. An invalid block in it is the peer's fault (ban it)."""


@dataclass(frozen=True, slots=True)
class Reorganize:
    """Switch the node to this fork (it ends higher than our chain)."""

    branch: list[Block]


@dataclass(frozen=True, slots=True)
class ApplyOrphans:
    """Blocks relayed while we synced may now connect."""


@dataclass(frozen=True, slots=True)
class Ban:
    """The peer broke the protocol."""

    reason: str


@dataclass(frozen=True, slots=True)
class Score:
    """The peer misbehaved, short of a certain ban: add `points` to its score."""

    points: int
    reason: str


@dataclass(frozen=True, slots=True)
class Backoff:
    """The peer did not deliver: sync from others, and not from its address for a while."""

    reason: str


@dataclass(frozen=True, slots=True)
class Done:
    """This sync is over; the peer's height as we now believe it."""

    peer_height: int


Action: TypeAlias = Request | Stage | Finish | Reorganize | ApplyOrphans | Score | Backoff | Ban | Done


@dataclass(slots=True)
class Staged:
    """What the machine knows of the staged batch."""

    height: int
    tip_hash: bytes
    blocks: int
    failed: bool


@dataclass(slots=True)
class SyncMachine:
    """One sync from one peer."""

    peer_height: int
    node_height: int
    node_tip: bytes
    store_blocks: int
    """Blocks stored per transaction (two downloads)."""
    batch_blocks: int
    """Blocks per download."""
    could_produce: Callable[[bytes], bool]
    """Whether a producer key is one that could have made a block (an authority, or a registered
    service node); a fork is kept only while all of its blocks' producers are."""
    check_signed: Callable[[Block], str]
    """Why a block's producer signature or transaction root does not hold ('' if they do): a
    fork block is kept only once they do."""
    clock: Callable[[], float]
    """Seconds, monotonic: when a request goes out (its answer's arrival is given to `on_blocks`)."""
    whole_bytes: int
    """A download of this many bytes or more is whole even with fewer than `batch_blocks` blocks
    (the sender's next block did not fit its batch's byte limit)."""
    limits: SyncLimits = DEFAULT_SYNC_LIMITS
    """The fork buffer's bounds (a fork offered by a peer is held in memory until it is longer
    than ours) and what makes a staller (`net.limits`; a test passes small ones)."""
    outstanding: int = 0
    """Requests sent and not answered yet..."""
    sent: deque[float] = field(default_factory=deque)
    """...and when each went out, oldest first."""
    delivered: int = 0
    """Blocks the peer has sent in this sync."""
    staged: Staged | None = None
    branch: list[Block] = field(default_factory=list)
    branch_bytes: int = 0
    """What the branch's decoded blocks take in memory (`block_memory`)."""
    branch_registered: set[bytes] = field(default_factory=set)
    """Service nodes registered by the branch's blocks: producers on that chain, unknown to ours."""
    done: bool = False

    # --- inputs -------------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """The first request."""
        return self._ask()

    def on_node(self, height: int, tip_hash: bytes) -> None:
        """The node's tip (after a batch was stored, or moved by a relayed block)."""
        self.node_height, self.node_tip = height, tip_hash

    def on_timeout(self) -> list[Action]:
        """The peer did not answer in time: scored and backed off (not a ban: it may only be
        slow), keeping what is staged (its blocks are good once their signatures check out)."""
        reason = "did not answer a sync request in time"
        return self._leave([Score(SCORE_SYNC_TIMEOUT, reason), Backoff(reason)])

    def on_gone(self) -> list[Action]:
        """The peer disconnected with a request out: backed off, not scored."""
        return self._leave([Backoff("disconnected during a sync request")])

    def on_preempted(self) -> list[Action]:
        """The adapter leaves this peer, which has sent nothing yet, for one that proved a
        height: no fault of this one's."""
        return self._leave([])

    def on_blocks(self, reply_height: int, blocks: list[Block], size: int, arrived: float) -> list[Action]:
        """A reply to one of our requests: `blocks` decoded, `size` their encoded bytes,
        `arrived` when it came (on `clock`)."""
        self.outstanding -= 1
        took = arrived - self.sent.popleft() if self.sent else 0.0
        if not blocks:
            return self._on_empty(reply_height)
        self.peer_height = reply_height
        broken = _chain_break(blocks)
        if broken:
            return [Ban(broken)]
        self.delivered += len(blocks)
        stall = self._stall(reply_height, blocks, size, took)
        if stall:
            self._drop_branch()
            return self._leave([Score(SCORE_SYNC_STALL, stall), Backoff(stall)])
        first = blocks[0].header
        if self.branch and first.prev_hash != block_hash(self.branch[-1].header):
            # The peer's chain moved under us (rare, for an honest peer): start over, scored, so
            # that emptying and refilling the buffer again and again ends in a ban.
            self._drop_branch()
            return [Score(SCORE_FORK_RESET, "offered a fork, then blocks that do not follow on it")] + self._ask()
        if not self.branch and first.prev_hash == self._tip_hash():
            return self._extend(reply_height, blocks)
        return self._fork(blocks)

    def on_staged(self, staged: Staged, more: bool) -> list[Action]:
        """The adapter staged the last `Stage` (`staged`: the batch it holds now; `more`: the
        peer has blocks after it). A batch with more to come stays staged, to be joined or
        stored when the next download arrives; the last one, or one that broke a rule, is
        stored at once."""
        self.staged = staged
        if more and not staged.failed:
            return []
        self.staged = None
        return [Finish(), ApplyOrphans()]

    def resume(self) -> list[Action]:
        """What next, once the actions handed out are done and `on_node` told where the tip
        is: finished when we have the peer's height (storing what is staged); otherwise ask
        on, unless a request is still out (then wait for its reply)."""
        if self.done:
            return []
        if self._top_height() >= self.peer_height and not self.branch:
            self.done = True
            return self._finish_staged() + [Done(self.peer_height)]
        return self._ask()

    # --- rules --------------------------------------------------------------------------------

    def _tip_hash(self) -> bytes:
        return self.staged.tip_hash if self.staged is not None else self.node_tip

    def _top_height(self) -> int:
        return self.staged.height if self.staged is not None else self.node_height

    def _ask(self) -> list[Action]:
        if self.outstanding:
            return []
        self._sending()
        if self.branch:
            return [Request(block_hash(self.branch[-1].header), with_locator=True)]
        return [Request(self.staged.tip_hash if self.staged else None, with_locator=True)]

    def _sending(self) -> None:
        self.outstanding += 1
        self.sent.append(self.clock())

    def _leave(self, actions: list[Action]) -> list[Action]:
        """End this sync: what is staged is stored, the peer believed only as far as it delivered."""
        top = self._top_height()
        self.done = True
        return self._finish_staged() + actions + [Done(min(self.peer_height, top))]

    def _stall(self, reply_height: int, blocks: list[Block], size: int, took: float) -> str:
        """Why a download shows a staller, or '': less than a whole download while the peer
        claims more, or slow and thin."""
        if (reply_height > blocks[-1].header.height and len(blocks) < self.batch_blocks
                and size < self.whole_bytes):
            return (f"sent {len(blocks)} blocks ({size} bytes) for a download of up to "
                    f"{self.batch_blocks} while claiming height {reply_height}")
        if took > self.limits.sync_stall_s and size < self.limits.min_sync_rate * took:
            return f"took {took:.0f} s to send a download of {size} bytes"
        return ""

    def _on_empty(self, reply_height: int) -> list[Action]:
        """The peer has nothing after what we have: a lie if it claims more."""
        top = self._top_height()
        actions = self._finish_staged()
        if reply_height > top and not self.branch:
            return actions + [Ban(f"claims height {reply_height} but has no blocks after this "
                                  f"node's {top}")]
        self.done = True
        return actions + [Done(min(reply_height, top))]

    def _extend(self, reply_height: int, blocks: list[Block]) -> list[Action]:
        """A download on our tip (or on the staged batch)."""
        actions: list[Action] = []
        more = reply_height > blocks[-1].header.height
        if more:
            # Ask for the next download before applying this one: the peer reads and sends it
            # while we validate.
            self._sending()
            actions.append(Request(block_hash(blocks[-1].header), with_locator=False))
        staged = self.staged
        join = (staged is not None and not staged.failed
                and staged.blocks + len(blocks) <= self.store_blocks)
        actions.append(Stage(blocks, join=join))
        return actions

    def _fork(self, blocks: list[Block]) -> list[Action]:
        """Blocks that do not extend our tip: a fork, held until it is longer than our chain."""
        top = self._top_height()
        actions = self._finish_staged(orphans=False)
        forged = self._unknown_producer(blocks)
        if forged is not None:
            self._drop_branch()
            self.done = True
            return actions + [Score(SCORE_UNKNOWN_PRODUCER, f"offered a fork with block {forged.height} signed "
                                    "by a key that is neither an authority nor a registered service node"),
                              Done(top)]
        for block in blocks:
            bad = self.check_signed(block)
            if bad:
                self._drop_branch()
                return actions + [Ban(f"offered a fork with an invalid block {block.header.height}: {bad}")]
            self.branch.append(block)
            self.branch_bytes += block_memory(block)
            limits = self.limits
            if len(self.branch) > limits.max_branch_blocks or self.branch_bytes > limits.max_branch_bytes:
                self._drop_branch()
                return actions + [Ban(f"offers a fork of more than {limits.max_branch_blocks} blocks or "
                                      f"{limits.max_branch_bytes} bytes in memory")]
        if self.branch[-1].header.height > top:
            actions.append(Reorganize(self.branch))
            self._drop_branch()
        return actions

    def _unknown_producer(self, blocks: list[Block]) -> BlockHeader | None:
        """The first of `blocks` whose producer could not have made it on the fork, or None;
        the registrations in them are noted for the blocks after."""
        registered = self.branch_registered
        for block in blocks:
            producer = block.header.producer
            if not self.could_produce(producer) and producer not in registered:
                return block.header
            registered.update(tx.payload.sn_pubkey for tx in block.transactions
                              if isinstance(tx.payload, Registration))
        return None

    def _drop_branch(self) -> None:
        self.branch, self.branch_bytes, self.branch_registered = [], 0, set()

    def _finish_staged(self, *, orphans: bool = True) -> list[Action]:
        if self.staged is None:
            return []
        self.staged = None
        actions: list[Action] = [Finish()]
        return actions + [ApplyOrphans()] if orphans else actions


def block_memory(block: Block) -> int:
    """Bytes a decoded block takes in memory: every object in it (`sys.getsizeof`), an empty
    tuple counted at each use though CPython shares one. A block of many outputs takes about 3.5
    times its encoding (a 1.6 MB one: 5.6 MB, as tracemalloc measures it), 40 ms to count."""
    return _memory(block)


def _memory(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            size += _memory(getattr(value, name))
    elif isinstance(value, tuple):
        for item in value:
            size += _memory(item)
    return size


def _chain_break(blocks: list[Block]) -> str:
    """Why a download is not a chain (heights consecutive, each block the child of the one
    before), or ''."""
    for parent, child in zip(blocks, blocks[1:]):
        if (child.header.prev_hash != block_hash(parent.header)
                or child.header.height != parent.header.height + 1):
            return "sent blocks that do not form a chain"
    return ""
