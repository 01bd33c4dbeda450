"""The sync state machine, driven with no sockets: an honest peer (pipelined requests, two
downloads stored per transaction), a peer whose chain forks from ours (collected, then a
reorganisation), a peer that lies about its height, one that sends blocks that are not a chain,
one that offers an endless fork, one whose fork was signed by keys that could not have made it,
and one that stalls.

A `Driver` plays the adapter: it executes the machine's actions against a real in-process chain
(the blocks are the core's), and answers requests from the peer's chain.
"""

from __future__ import annotations

import os
import tracemalloc
from dataclasses import dataclass, field

import msgspec
import pytest

from snode.core.blocks import Block, block_hash, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode, encode
from snode.core.transactions import TX_VERSION, Registration, Transaction, Transfer, TxOut
from snode.net import limits as L
from snode.services import sync_machine as S
from tests.unit.conftest import LabChain, new_chain

DOWNLOAD = 10
STORE = 2 * DOWNLOAD
WHOLE_BYTES = 10_000
"""A download of this many bytes is whole with fewer than DOWNLOAD blocks."""


@dataclass
class Driver:
    """The adapter's side: our chain (a list of blocks after genesis), the peer's chain, and
    what the machine made us do."""

    ours: list[Block]
    genesis_hash: bytes
    theirs: list[Block]
    staged: list[list[Block]] = field(default_factory=list)
    """Batches staged and not finished, in order (a joined batch is one list)."""
    finished: list[int] = field(default_factory=list)
    """Blocks per store transaction."""
    reorgs: list[int] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    requests: list[S.Request] = field(default_factory=list)
    strangers: set[bytes] = field(default_factory=set)
    """Producer keys that could not have made a block (neither an authority nor a registered SN)."""
    now: float = 1_000.0
    """The fake clock the machine reads."""
    limits: L.SyncLimits = L.DEFAULT_SYNC_LIMITS
    """The machine's bounds (a test passes small ones)."""

    def tip(self) -> tuple[int, bytes]:
        if not self.ours:
            return 0, self.genesis_hash
        return self.ours[-1].header.height, block_hash(self.ours[-1].header)

    def machine(self, peer_height: int) -> S.SyncMachine:
        height, tip = self.tip()
        return S.SyncMachine(peer_height=peer_height, node_height=height, node_tip=tip,
                             store_blocks=STORE, batch_blocks=DOWNLOAD,
                             could_produce=lambda producer: producer not in self.strangers,
                             check_signed=lambda block: "",
                             clock=lambda: self.now, whole_bytes=WHOLE_BYTES, limits=self.limits)

    def run(self, machine: S.SyncMachine, actions: list[S.Action]) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            self.log.append(type(action).__name__)
            match action:
                case S.Request():
                    self.requests.append(action)
                case S.Stage():
                    queue[:0] = self._stage(machine, action)
                case S.Finish():
                    self._finish()
                case S.Reorganize():
                    fork = action.branch[0].header.height - 1
                    self.ours = self.ours[:fork] + action.branch
                    self.reorgs.append(len(action.branch))
                case S.ApplyOrphans() | S.Score() | S.Ban() | S.Done():
                    pass

    def _stage(self, machine: S.SyncMachine, action: S.Stage) -> list[S.Action]:
        if action.join:
            self.staged[-1] = self.staged[-1] + action.blocks
        else:
            if self.staged:
                self._finish()
            self.staged.append(list(action.blocks))
        top = self.staged[-1][-1].header
        more = machine.peer_height > action.blocks[-1].header.height
        return machine.on_staged(S.Staged(top.height, block_hash(top), len(self.staged[-1]), False), more)

    def _finish(self) -> None:
        batch = self.staged.pop(0)
        self.ours += batch
        self.finished.append(len(batch))

    def answer(self, request: S.Request, peer_height: int) -> tuple[int, list[Block]]:
        """What an honest peer with `theirs` sends for a request (locator: the request's top,
        then our chain)."""
        known = {block_hash(b.header): b.header.height for b in self.theirs}
        known[self.genesis_hash] = 0
        start = 0
        if request.top is not None and request.top in known:
            start = known[request.top]
        elif request.with_locator:
            for block in reversed(self.ours):
                h = block_hash(block.header)
                if h in known and known[h] == block.header.height:
                    start = known[h]
                    break
        return peer_height, self.theirs[start:start + DOWNLOAD]


def sync(driver: Driver, peer_height: int, *, max_replies: int = 100) -> S.SyncMachine:
    """Drive a machine to the end as the adapter does; fail if it never ends."""
    machine = driver.machine(peer_height)
    driver.run(machine, machine.start())
    for _ in range(max_replies):
        if machine.done:
            return machine
        machine.on_node(*driver.tip())
        actions = machine.resume()
        if actions or machine.done:
            driver.run(machine, actions)
            continue
        request = driver.requests.pop(0)
        reply_height, blocks = driver.answer(request, peer_height)
        driver.run(machine, machine.on_blocks(reply_height, blocks, 100 * len(blocks), driver.now))
        if "Ban" in driver.log:
            return machine
    raise AssertionError(f"the machine did not finish: {driver.log[-20:]}")


@pytest.fixture
def long_chain(chain: LabChain) -> LabChain:
    chain.mine(45)
    return chain


def test_an_honest_peer_is_synced_in_pipelined_downloads_stored_two_at_a_time(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver([], block_hash(long_chain.blocks[0].header), blocks)
    machine = sync(driver, peer_height=45)
    assert machine.done and "Ban" not in driver.log
    assert driver.ours == blocks
    # 45 blocks in downloads of 10, stored two downloads (20 blocks) per transaction.
    assert driver.finished == [20, 20, 5]
    # After the first, each request was sent before the download before it was applied.
    assert [r.with_locator for r in driver.requests] == []  # all answered
    assert driver.log.index("Request") < driver.log.index("Stage")


def test_a_peer_with_nothing_new_ends_the_sync_at_once(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver(list(blocks), block_hash(long_chain.blocks[0].header), blocks)
    machine = sync(driver, peer_height=45)
    assert machine.done and driver.finished == [] and "Ban" not in driver.log


def test_a_peer_that_claims_more_than_it_has_is_banned(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver(list(blocks[:20]), block_hash(long_chain.blocks[0].header), blocks[:20])
    machine = driver.machine(peer_height=40)
    driver.run(machine, machine.start())
    actions = machine.on_blocks(40, [], 0, 1_000.0)
    assert isinstance(actions[-1], S.Ban) and "claims height 40" in actions[-1].reason


def test_a_lie_after_staged_blocks_stores_them_first_then_bans(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver([], block_hash(long_chain.blocks[0].header), blocks)
    machine = driver.machine(peer_height=45)
    driver.run(machine, machine.start())
    driver.requests.pop(0)
    driver.run(machine, machine.on_blocks(45, blocks[:10], 1000, 1_000.0))  # staged, more to come
    assert driver.staged and not driver.finished
    actions = machine.on_blocks(45, [], 0, 1_000.0)  # the pipelined request: "nothing after yours"
    assert [type(a).__name__ for a in actions] == ["Finish", "ApplyOrphans", "Ban"]


def test_blocks_that_are_not_a_chain_get_the_peer_banned(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver([], block_hash(long_chain.blocks[0].header), blocks)
    machine = driver.machine(peer_height=45)
    machine.start()
    actions = machine.on_blocks(45, [blocks[0], blocks[2]], 200, 1_000.0)
    assert actions == [S.Ban("sent blocks that do not form a chain")]


def test_a_longer_fork_is_collected_then_switched_to(chain: LabChain) -> None:
    genesis = block_hash(chain.blocks[0].header)
    chain.mine(5)
    ours = chain.blocks[1:]
    fork = chain.fork(at=2)
    fork.mine(15)
    theirs = fork.blocks[1:]
    assert theirs[1] == ours[1] and theirs[2] != ours[2]
    driver = Driver(list(ours), genesis, theirs)
    machine = sync(driver, peer_height=17)
    assert machine.done and "Ban" not in driver.log
    assert driver.ours == theirs
    assert driver.reorgs  # the fork was applied as a reorganisation


def test_an_endless_fork_is_refused_with_a_ban(chain: LabChain) -> None:
    genesis = block_hash(chain.blocks[0].header)
    chain.mine(29)
    ours = chain.blocks[1:]
    fork = chain.fork(at=1)
    fork.mine(29)
    driver = Driver(list(ours), genesis, fork.blocks[1:], limits=L.SyncLimits(max_branch_blocks=15))
    sync(driver, peer_height=30)  # the fork is longer only at its end, past the bound
    assert driver.log[-1] == "Ban" and not driver.reorgs


def test_a_stalling_peer_is_dropped_and_what_was_staged_is_kept(long_chain: LabChain) -> None:
    blocks = long_chain.blocks[1:]
    driver = Driver([], block_hash(long_chain.blocks[0].header), blocks)
    machine = driver.machine(peer_height=45)
    driver.run(machine, machine.start())
    driver.requests.pop(0)
    driver.run(machine, machine.on_blocks(45, blocks[:10], 1000, 1_000.0))
    actions = machine.on_timeout()  # the pipelined request is never answered
    assert [type(a).__name__ for a in actions] == ["Finish", "ApplyOrphans", "Score", "Backoff", "Done"]
    assert actions[2] == S.Score(L.SCORE_SYNC_TIMEOUT, "did not answer a sync request in time")
    driver.run(machine, actions)
    assert driver.ours == blocks[:10] and machine.done
    assert actions[-1] == S.Done(10)  # the peer is believed only as far as it delivered


def forked(chain: LabChain, *, strangers: bool = False,
           limits: L.SyncLimits = L.DEFAULT_SYNC_LIMITS) -> tuple[S.SyncMachine, list[Block]]:
    """Our chain of 5 and a peer's fork of it from height 2 up to 14 (its producer a stranger:
    a key that could not have made a block), the machine's first request sent (under `limits`)."""
    genesis = block_hash(chain.blocks[0].header)
    chain.mine(5)
    fork = chain.fork(at=2)
    fork.mine(12)
    driver = Driver(list(chain.blocks[1:]), genesis, fork.blocks[1:], limits=limits)
    if strangers:
        driver.strangers.add(fork.blocks[3].header.producer)
    machine = driver.machine(peer_height=14)
    machine.batch_blocks = 2  # the peer's downloads are of two blocks: whole ones
    driver.run(machine, machine.start())
    driver.requests.pop(0)
    return machine, fork.blocks


def test_a_peer_whose_chain_moves_under_us_is_asked_again(chain: LabChain) -> None:
    machine, fork = forked(chain)
    actions = machine.on_blocks(14, fork[3:5], 200, 1_000.0)  # a fork, not longer yet: kept
    assert machine.branch and not any(isinstance(a, S.Score) for a in actions)
    assert machine.resume() == [S.Request(block_hash(fork[4].header), with_locator=True)]
    # The next download does not follow what we collected: start over from our locator.
    actions = machine.on_blocks(14, chain.blocks[1:3], 200, 1_000.0)
    assert machine.branch == [] and actions == [
        S.Score(L.SCORE_FORK_RESET, "offered a fork, then blocks that do not follow on it"),
        S.Request(None, with_locator=True),
    ], "emptying the fork buffer costs the peer nothing: it can refill it again and again"


def test_a_fork_signed_by_a_key_that_could_not_have_made_it_is_dropped_and_scored(chain: LabChain) -> None:
    machine, fork = forked(chain, strangers=True)
    actions = machine.on_blocks(14, fork[3:5], 200, 1_000.0)
    assert machine.branch == [] and machine.done, "the fork buffer kept blocks nobody could have made"
    assert actions == [
        S.Score(L.SCORE_UNKNOWN_PRODUCER, "offered a fork with block 3 signed by a key that is neither an "
                "authority nor a registered service node"),
        S.Done(5),  # the peer is believed no further than our chain: no sync from it again at once
    ]


def _newcomer_fork(chain: LabChain, *, registered: bool) -> tuple[S.SyncMachine, list[S.Action], list[Block]]:
    """A download of a fork whose second block is made by a key our chain does not know; the first
    block registers that key (`registered`) or not."""
    machine, fork = forked(chain)
    newcomer = b"\x07" * 32
    machine.could_produce = lambda producer: producer != newcomer
    by_newcomer = msgspec.structs.replace(fork[4], header=msgspec.structs.replace(fork[4].header, producer=newcomer))
    first = fork[3]
    if registered:
        registration = Transaction(TX_VERSION, (), (), Registration(0, (), 0, newcomer, bytes(64)), ())
        first = msgspec.structs.replace(first, transactions=first.transactions + (registration,))
    download = [first, by_newcomer]
    return machine, machine.on_blocks(14, download, 200, 1_000.0), download


def test_a_fork_block_of_a_node_the_fork_registered_before_it_is_kept(chain: LabChain) -> None:
    machine, actions, download = _newcomer_fork(chain, registered=True)
    assert not any(isinstance(a, S.Score) for a in actions)
    assert machine.branch == download, "a producer the fork registered could have made the block"


def test_a_fork_block_of_a_node_nobody_registered_is_dropped(chain: LabChain) -> None:
    machine, actions, _ = _newcomer_fork(chain, registered=False)
    assert machine.branch == [] and actions[0] == S.Score(
        L.SCORE_UNKNOWN_PRODUCER, "offered a fork with block 4 signed by a key that is neither an authority nor a "
        "registered service node")


# --- stallers: a slow drip, a slow download, a timeout (the fake clock) -----------------------

def _first_request(long_chain: LabChain) -> tuple[Driver, S.SyncMachine, list[Block]]:
    """A fresh node asking an honest-looking peer of 45 blocks for its first download at t=1000."""
    blocks = long_chain.blocks[1:]
    driver = Driver([], block_hash(long_chain.blocks[0].header), blocks)
    machine = driver.machine(peer_height=45)
    driver.run(machine, machine.start())
    driver.requests.pop(0)
    return driver, machine, blocks


def test_a_peer_that_drips_one_block_per_request_is_a_staller(long_chain: LabChain) -> None:
    driver, machine, blocks = _first_request(long_chain)
    driver.run(machine, machine.on_blocks(45, blocks[:10], 1000, 1_000.5))  # a whole download: staged
    # The pipelined request: one valid block, just before the timeout, while it claims 45.
    actions = machine.on_blocks(45, blocks[10:11], 300, 1_029.0)
    reason = "sent 1 blocks (300 bytes) for a download of up to 10 while claiming height 45"
    assert actions == [S.Finish(), S.ApplyOrphans(), S.Score(L.SCORE_SYNC_STALL, reason), S.Backoff(reason),
                       S.Done(10)]
    driver.run(machine, actions)
    assert machine.done and driver.ours == blocks[:10], "what it delivered whole is kept, the drip is not"


def test_a_short_download_that_fills_the_byte_limit_is_whole(long_chain: LabChain) -> None:
    driver, machine, blocks = _first_request(long_chain)
    actions = machine.on_blocks(45, blocks[:3], WHOLE_BYTES, 1_000.5)  # three big blocks: the next did not fit
    assert not any(isinstance(a, S.Score | S.Backoff) for a in actions)
    assert isinstance(actions[0], S.Request) and actions[0].top == block_hash(blocks[2].header)


def test_a_download_slower_than_the_stall_time_must_bring_the_minimum_rate(long_chain: LabChain) -> None:
    driver, machine, blocks = _first_request(long_chain)
    took = L.SYNC_STALL_S + 5
    thin = int(L.MIN_SYNC_RATE * took) - 1
    actions = machine.on_blocks(45, blocks[:10], thin, 1_000.0 + took)
    assert actions[0] == S.Score(L.SCORE_SYNC_STALL, f"took {took:.0f} s to send a download of {thin} bytes")
    assert isinstance(actions[1], S.Backoff) and machine.done


def test_a_slow_download_at_the_minimum_rate_or_within_the_stall_time_is_taken(long_chain: LabChain) -> None:
    took = L.SYNC_STALL_S + 5
    for size, arrived in ((int(L.MIN_SYNC_RATE * took), 1_000.0 + took), (1000, 1_000.0 + L.SYNC_STALL_S)):
        driver, machine, blocks = _first_request(long_chain)
        actions = machine.on_blocks(45, blocks[:10], size, arrived)
        assert not any(isinstance(a, S.Score | S.Backoff) for a in actions), (size, arrived)


def test_the_time_of_a_pipelined_request_counts_from_when_it_was_sent(long_chain: LabChain) -> None:
    driver, machine, blocks = _first_request(long_chain)
    driver.now = 1_100.0  # the first answer came late (a fine one: within the stall time of its request)
    driver.run(machine, machine.on_blocks(45, blocks[:10], 1000, 1_005.0))
    actions = machine.on_blocks(45, blocks[10:20], 1000, 1_100.0 + L.SYNC_STALL_S - 1)
    assert not any(isinstance(a, S.Score | S.Backoff) for a in actions)


def test_a_peer_that_goes_away_is_backed_off_not_scored(long_chain: LabChain) -> None:
    driver, machine, _ = _first_request(long_chain)
    assert machine.on_gone() == [S.Backoff("disconnected during a sync request"), S.Done(0)]


def test_leaving_a_silent_peer_for_a_proven_one_costs_it_nothing(long_chain: LabChain) -> None:
    driver, machine, _ = _first_request(long_chain)
    assert machine.delivered == 0
    assert machine.on_preempted() == [S.Done(0)] and machine.done


# --- the fork buffer: signed blocks only, counted in memory -----------------------------------

def test_a_fork_block_with_a_bad_signature_gets_the_peer_banned(chain: LabChain) -> None:
    machine, fork = forked(chain)
    forged_at = fork[4].header.height
    machine.check_signed = lambda block: "bad producer signature" if block.header.height == forged_at else ""
    actions = machine.on_blocks(14, fork[3:5], 200, 1_000.0)
    assert actions == [S.Ban(f"offered a fork with an invalid block {forged_at}: bad producer signature")]
    assert machine.branch == [] and machine.branch_bytes == 0


def test_the_fork_buffer_counts_decoded_memory_not_encoded_bytes(chain: LabChain) -> None:
    machine, fork = forked(chain)
    download = fork[3:5]
    machine.on_blocks(14, download, 200, 1_000.0)
    memory = sum(S.block_memory(b) for b in download)
    assert machine.branch_bytes == memory > sum(len(encode(b)) for b in download)
    # A buffer bound the encoding stays under but the decoded blocks pass: refused.
    machine, fork = forked(new_chain(), limits=L.SyncLimits(max_branch_bytes=memory - 1))
    actions = machine.on_blocks(14, fork[3:5], 200, 1_000.0)
    assert isinstance(actions[-1], S.Ban) and "bytes in memory" in actions[-1].reason
    assert machine.branch == []


def test_block_memory_is_what_tracemalloc_sees() -> None:
    outputs = tuple(TxOut(os.urandom(32), i + 1) for i in range(2_000))
    many_outputs = Transaction(TX_VERSION, (), outputs, Transfer(), ())
    block = make_block(version=1, height=3, prev_hash=bytes(32), timestamp=1, transactions=(many_outputs,) * 5,
                       producer_key=SigningKey(bytes(32)), network_id=1)
    raw = encode(block)
    tracemalloc.start()
    try:
        decoded = decode(raw, Block)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    counted = S.block_memory(decoded)
    assert counted > 3 * len(raw), "many small outputs take several times their encoding"
    assert 0.9 * held <= counted <= 1.2 * held, (held, counted)
