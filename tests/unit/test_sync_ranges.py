"""Which peers one sync downloads from and which is asked each range (`services.sync_ranges`),
without I/O: up to MAX_SYNC_SOURCES peers whose proven height covers the range, never a backed-off
address nor two of one address, each asked two downloads in turn (one store transaction), busy
ones skipped, a failed one left; a request is hedged after SYNC_HEDGE_S.
"""

from __future__ import annotations

from snode.net.limits import MAX_SYNC_SOURCES, SYNC_HEDGE_S
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
