"""Which peers one sync downloads from and which is asked each range (`services.sync_ranges`),
without I/O: up to MAX_SYNC_SOURCES peers whose proven height covers the range, never a backed-off
address nor two of one address, each asked two downloads in turn (one store transaction), busy
ones skipped, a failed one left; a request is hedged after SYNC_HEDGE_S.
"""

from __future__ import annotations

import asyncio
import os
import time
from types import SimpleNamespace
from typing import Any

import pytest

from snode.core.blocks import block_hash, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.net import protocol as P
from snode.net.limits import (
    DEFAULT_SYNC_LIMITS,
    MAX_SYNC_SOURCES,
    SCORE_SYNC_STALL,
    SCORE_SYNC_TIMEOUT,
    SYNC_HEDGE_S,
    SyncLimits,
)
from snode.net.peer import Peer, PeerWriter, RequestTimeout
from snode.params import REGTEST
from snode.services.sync import Syncer, _Ask, _Run
from snode.services.sync_peers import Backoffs, Claim
from snode.services.sync_ranges import TURN, Sources, hedge_wait


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _claim(name: str, proven: int, *, key: str | None = None) -> Claim:
    return Claim(name, key or name, proven, proven)


def _turns(sources: Sources, count: int) -> list[object]:
    out = []
    for _ in range(count):
        member = sources.next()
        assert member is not None
        out.append(member.peer)
    return out


def test_sources_are_peers_that_proved_the_range_highest_first_up_to_the_limit() -> None:
    backoffs = Backoffs(_Clock())
    sources = Sources([_claim("a", 3000)])
    claims = [_claim("low", 900), _claim("b", 1200), _claim("c", 3000), _claim("d", 2000), _claim("e", 1500)]
    taken = sources.fill(claims, 1000, backoffs)
    assert [c.peer for c in taken] == ["c", "d"], "the highest proven first, up to the limit"
    assert len(sources.members) == MAX_SYNC_SOURCES
    assert sources.fill(claims, 1000, backoffs) == [], "full"


def test_a_backed_off_address_a_hint_and_a_second_peer_of_one_address_are_never_sources() -> None:
    backoffs = Backoffs(_Clock())
    backoffs.fail("10.0.0.9")
    sources = Sources([_claim("a", 3000, key="10.0.0.1")])
    claims = [_claim("staller", 3000, key="10.0.0.9"), _claim("twin", 3000, key="10.0.0.1"),
              Claim("liar", "10.0.0.7", 10**9, 0), _claim("ok", 1000, key="10.0.0.2")]
    assert [c.peer for c in sources.fill(claims, 1000, backoffs)] == ["ok"]


def test_each_source_is_asked_two_downloads_in_turn() -> None:
    sources = Sources([_claim("a", 9), _claim("b", 9), _claim("c", 9)])
    assert TURN == 2
    assert _turns(sources, 7) == ["a", "a", "b", "b", "c", "c", "a"]


def test_a_busy_source_is_skipped_and_none_when_all_are() -> None:
    sources = Sources([_claim("a", 9), _claim("b", 9)])
    member = sources.next(busy={"a"})
    assert member is not None and member.peer == "b"
    assert sources.next(busy={"a", "b"}) is None
    spare = sources.spare({"b"})
    assert spare is not None and spare.peer == "a"
    assert sources.spare({"a", "b"}) is None


def test_a_dropped_source_is_asked_no_more_and_the_turn_goes_on() -> None:
    sources = Sources([_claim("a", 9), _claim("b", 9), _claim("c", 9)])
    assert _turns(sources, 3) == ["a", "a", "b"]
    sources.drop("b")
    assert not sources.has("b")
    assert _turns(sources, 3) == ["c", "c", "a"]
    sources.drop("a")
    sources.drop("c")
    assert sources.next() is None and sources.spare(()) is None
    sources.drop("nobody")


def test_blocks_are_credited_to_their_source() -> None:
    sources = Sources([_claim("a", 9)])
    sources.credit("a", 500)
    sources.credit("b", 500)
    sources.credit("a", 10)
    assert sources.delivered == {"a": 510, "b": 500}


def test_a_request_is_hedged_after_the_hedge_delay() -> None:
    assert hedge_wait(100.0, 100.0) == SYNC_HEDGE_S
    assert hedge_wait(100.0, 100.0 + SYNC_HEDGE_S + 1) == 0.0
    assert hedge_wait(100.0, 100.5, hedge_s=1.0) == 0.5


# --- the adapter's use of them (`sync._Run._answer`), with stand-in peers ----------------------

class _Source(Peer):
    """A stand-in peer: answers each GetBlocks with `reply`, times out (`fail`), or holds it."""

    def __init__(self, key: str, proven: int, reply: P.Blocks | None = None, *, fail: bool = False) -> None:
        self.ip, self.port, self.key, self.height, self.proven = key, 9230, key, proven, proven
        self.hello, self.tip_header, self.blocks_owed, self.pending = object(), None, 0, None  # type: ignore[assignment]
        self.writer = PeerWriter(SimpleNamespace(is_closing=lambda: False))  # type: ignore[arg-type]
        self.outbound, self.reply, self.fail, self.asked, self.closed = True, reply, fail, 0, False

    def ask_blocks(self, locator: list[bytes], max_count: int) -> asyncio.Future[P.Blocks]:
        self.asked += 1
        self.pending = asyncio.get_running_loop().create_future()
        if self.reply is not None:
            self.pending.set_result(self.reply)
        return self.pending

    async def answer(self, request: asyncio.Future[P.Blocks]) -> P.Blocks:
        if self.fail:
            raise RequestTimeout(f"{self.name} did not send the blocks it was asked for")
        return await request

    def close(self) -> None:
        self.closed = True


def _run(peers: list[_Source], scores: list[tuple[str, int]], limits: SyncLimits = DEFAULT_SYNC_LIMITS) -> Any:
    node = SimpleNamespace(height=0, state=SimpleNamespace(tip_hash=bytes(32)), consensus=None,
                           hub=SimpleNamespace(subscribe=lambda kind, handler: None), note_sync_target=lambda h: None)
    manager = SimpleNamespace(on=lambda kind, handler: None, peers=peers,
                              misbehaving=lambda peer, points, reason: scores.append((peer.key, points)))
    syncer = Syncer(manager, SimpleNamespace(could_produce=lambda key: True),  # type: ignore[arg-type]
                    SimpleNamespace(node=node), limits)  # type: ignore[arg-type]
    return _Run(syncer, peers[0])


def _blocks(parent: bytes, count: int) -> list[bytes]:
    key, out = SigningKey(os.urandom(32)), []
    for height in range(1, count + 1):
        block = make_block(version=1, height=height, prev_hash=parent, timestamp=1, transactions=(),
                           producer_key=key, network_id=REGTEST.network_id)
        parent = block_hash(block.header)
        out.append(encode(block))
    return out


def _answer(peers: list[_Source], top: bytes | None = None,
            limits: SyncLimits = DEFAULT_SYNC_LIMITS) -> tuple[Any, list[tuple[str, int]], Any]:
    scores: list[tuple[str, int]] = []

    async def go() -> tuple[Any, Any]:
        run = _run(peers, scores, limits)
        run.sources.fill(run.syncer._claims(), 1, run.syncer.backoffs)
        ask = _Ask([top or bytes(32)], top, time.monotonic())
        run._send(ask, peers[0])
        return run, await run._answer(ask)
    run, got = asyncio.run(go())
    return got, scores, run


def test_a_held_request_is_asked_of_another_source_and_the_slow_one_is_left() -> None:
    holder, honest = _Source("10.0.0.1", 50), _Source("10.0.0.2", 50, P.Blocks([], 50))
    (peer, reply, _, _), scores, run = _answer([holder, honest], limits=SyncLimits(sync_hedge_s=0.05))
    assert peer is honest and reply.height == 50
    assert holder.blocks_owed == 1, "the held answer, when it comes, is dropped"
    assert run.syncer.backoffs.blocked(holder.key) and not run.sources.has(holder)
    assert scores == [], "slower is not scored"


def test_a_source_that_times_out_is_scored_closed_and_its_range_asked_of_another() -> None:
    late, honest = _Source("10.0.0.1", 50, fail=True), _Source("10.0.0.2", 50, P.Blocks([], 50))
    (peer, _, _, _), scores, run = _answer([late, honest])
    assert peer is honest and honest.asked == 1
    assert scores == [(late.key, SCORE_SYNC_TIMEOUT)] and late.closed
    assert run.syncer.backoffs.blocked(late.key)


def test_a_range_that_does_not_follow_the_asked_block_is_scored_and_asked_again() -> None:
    top = os.urandom(32)
    wrong, right = _blocks(os.urandom(32), 2), _blocks(top, 2)
    liar, honest = _Source("10.0.0.1", 50, P.Blocks(wrong, 50)), _Source("10.0.0.2", 50, P.Blocks(right, 50))
    (peer, _, blocks, _), scores, run = _answer([liar, honest], top)
    assert peer is honest and blocks[0].header.prev_hash == top
    assert scores == [(liar.key, SCORE_SYNC_STALL)] and not run.sources.has(liar)


def test_the_last_source_that_times_out_ends_the_sync_as_before() -> None:
    late = _Source("10.0.0.1", 50, fail=True)
    with pytest.raises(RequestTimeout):
        _answer([late])
