"""Which peers a sync believes and asks (`services.sync_peers`), with no sockets and a fake clock:
a tip header proves a height only when its producer could have made it and signed it (and, when
its parent is our tip, when every header rule and its validators hold); a claimed height is a
hint that is never the target; a peer that failed is backed off per address, doubling, bounded.
"""

from __future__ import annotations

import msgspec

from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.net import limits as L
from snode.net import protocol as P
from snode.params import MAX_FUTURE_BLOCK_TIME
from snode.services import sync_peers as SP
from snode.services.sync_peers import Backoffs, Claim, check_tip, choose, target
from tests.unit.conftest import LabChain
from tests.unit.sn_chain import new_sn_chain, sn_block


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _ours_and_ahead(chain: LabChain, ours: int, ahead: int) -> tuple[LabChain, list[Block]]:
    """Our chain of `ours` blocks, and the peer's `ahead` blocks after it (authority-made)."""
    chain.mine(ours)
    theirs = chain.copy()
    return chain, theirs.mine(ahead)


def _check(chain: LabChain, tip: P.TipHeader, *, strangers: frozenset[bytes] = frozenset()) -> SP.TipCheck:
    return check_tip(tip, chain.state, chain.consensus, chain.now,
                     could_produce=lambda key: key in chain.consensus.authorities and key not in strangers)


def test_the_signed_header_of_a_tip_far_ahead_proves_its_height(chain: LabChain) -> None:
    ours, ahead = _ours_and_ahead(chain, 3, 20)
    assert _check(ours, P.tip_header(ahead[-1])) == SP.PROVEN


def test_a_header_with_a_bad_producer_signature_is_a_forgery(chain: LabChain) -> None:
    ours, ahead = _ours_and_ahead(chain, 3, 20)
    tip = msgspec.structs.replace(P.tip_header(ahead[-1]), producer_signature=bytes(64))
    verdict = _check(ours, tip)
    assert not verdict.proven and verdict.forged == "sent the header of block 23 with a bad producer signature"
    # Claiming another height under the real signature breaks it too: the signature covers the header.
    lied = msgspec.structs.replace(P.tip_header(ahead[-1]), header=msgspec.structs.replace(
        ahead[-1].header, height=10**9))
    assert _check(ours, lied).forged


def test_a_header_of_a_key_our_chain_does_not_know_is_only_a_hint(chain: LabChain) -> None:
    ours, ahead = _ours_and_ahead(chain, 3, 2)
    stranger = SigningKey(bytes(range(32)))
    block = ahead[-1]
    header = msgspec.structs.replace(block.header, producer=stranger.public)
    assert _check(ours, P.TipHeader(header, bytes(64))) == SP.HINT, "nothing proven, nothing to ban"
    assert _check(ours, P.tip_header(block), strangers=frozenset({block.header.producer})) == SP.HINT


def test_a_header_from_the_future_is_only_a_hint(chain: LabChain) -> None:
    ours, ahead = _ours_and_ahead(chain, 3, 2)
    ours.now = ahead[-1].header.timestamp - MAX_FUTURE_BLOCK_TIME - 1
    assert _check(ours, P.tip_header(ahead[-1])) == SP.HINT


def test_the_header_of_our_next_block_gets_every_header_rule(chain: LabChain) -> None:
    ours, ahead = _ours_and_ahead(chain, 3, 1)
    assert _check(ours, P.tip_header(ahead[0])) == SP.PROVEN
    padded = msgspec.structs.replace(P.tip_header(ahead[0]), validator_bitset=1, validator_signatures=(bytes(64),))
    assert _check(ours, padded).forged == ("sent an invalid header of block 4: an authority block carries no "
                                           "validator signatures")


def test_a_claim_is_a_hint_that_never_becomes_the_target() -> None:
    clock = Clock()
    backoffs = Backoffs(clock)
    liar = Claim("liar", "10.0.0.1", claimed=10**9, proven=0)
    honest = Claim("honest", "10.0.0.2", claimed=50, proven=50)
    assert target([liar], backoffs) == 0
    assert choose([liar], 0, backoffs) is liar, "with nothing better, a hint may be tried"
    assert choose([liar, honest], 0, backoffs) is honest, "a proven height comes before any hint"
    assert target([liar, honest], backoffs) == 50
    assert choose([liar, honest], 50, backoffs) is liar
    assert choose([honest], 50, backoffs) is None


def test_a_backed_off_address_is_neither_asked_nor_believed_until_its_time_is_up() -> None:
    clock = Clock()
    backoffs = Backoffs(clock)
    staller = Claim("staller", "10.0.0.3", claimed=80, proven=80)
    again = Claim("reconnected", "10.0.0.3", claimed=80, proven=80)
    honest = Claim("honest", "10.0.0.2", claimed=50, proven=50)
    assert backoffs.fail("10.0.0.3") == L.SYNC_BACKOFF_S
    assert choose([staller, again, honest], 0, backoffs) is honest, "a reconnect does not escape the backoff"
    assert target([staller, again, honest], backoffs) == 50
    assert backoffs.next_end(["10.0.0.3", "10.0.0.2"]) == L.SYNC_BACKOFF_S
    clock.now += L.SYNC_BACKOFF_S
    assert choose([staller, honest], 0, backoffs) is staller
    assert backoffs.next_end(["10.0.0.3"]) is None


def test_a_backoff_doubles_up_to_its_cap_and_a_good_download_clears_it() -> None:
    backoffs = Backoffs(Clock())
    delays = [backoffs.fail("a") for _ in range(8)]
    assert delays[:3] == [L.SYNC_BACKOFF_S, 2 * L.SYNC_BACKOFF_S, 4 * L.SYNC_BACKOFF_S]
    assert max(delays) == delays[-1] == L.SYNC_BACKOFF_MAX_S
    backoffs.succeeded("a")
    assert not backoffs.blocked("a") and backoffs.fail("a") == L.SYNC_BACKOFF_S


def test_the_backoff_table_is_bounded() -> None:
    clock = Clock()
    backoffs = Backoffs(clock, L.SyncLimits(max_sync_backoffs=3))
    for key in "abcd":
        backoffs.fail(key)
        clock.now += 1
    assert [k for k in "abcd" if backoffs.blocked(k)] == ["b", "c", "d"], "the first to end made room"


def _sn_check(chain: LabChain, block: Block) -> SP.TipCheck:
    return check_tip(P.tip_header(block), chain.state, chain.consensus, max(chain.now, block.header.timestamp),
                     could_produce=lambda key: key in chain.consensus.authorities or key in chain.state.service_nodes)


def test_a_service_node_header_on_our_tip_needs_its_validators() -> None:
    chain = new_sn_chain()
    block, _ = sn_block(chain.state, chain)
    assert _sn_check(chain, block) == SP.PROVEN
    few, _ = sn_block(chain.state, chain, signers=1)
    assert "sent an invalid header of block" in _sn_check(chain, few).forged, "one validator's signature proves nothing"
    bad = msgspec.structs.replace(block, validator_signatures=(bytes(64),) * len(block.validator_signatures))
    assert _sn_check(chain, bad).forged.endswith("has a bad signature")
