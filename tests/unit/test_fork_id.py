"""Fork identity in the handshake (net/fork_id.py): EIP-2124's test cases, adapted to our hash
and schedules. The schedule is Ethereum mainnet's up to Petersburg (forks f1..f6 at
Homestead 1,150,000, DAO 1,920,000, Tangerine 2,463,000, Spurious 2,675,000, Byzantium
4,370,000, Petersburg 7,280,000), so that each case is the EIP's own."""

from __future__ import annotations

import pytest

from snode.net.fork_id import ForkId, compatibility, fork_id
from snode.params import REGTEST, V1, V2, Fork, ForkRules

GENESIS = bytes.fromhex("d4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3")
HEIGHTS = (1_150_000, 1_920_000, 2_463_000, 2_675_000, 4_370_000, 7_280_000)
RULES = [ForkRules(f"f{i}", i + 1, (2,), i, (0, 1, i)) for i in range(1, 7)]
PETERSBURG = (Fork(V1, 0), *(Fork(r, h) for r, h in zip(RULES, HEIGHTS)))
BYZANTIUM = PETERSBURG[:-1]
"""A node whose release does not know Petersburg."""
SPURIOUS, BYZ, PETER = 4_369_999, 7_279_999, 7_987_396
"""Heads: last block before Byzantium, last before Petersburg, one past it."""


def _id(schedule: tuple[Fork, ...], head: int) -> ForkId:
    return fork_id(GENESIS, schedule, head)


@pytest.mark.parametrize("local, head, remote, connects", [
    # Same forks passed, same next (none): connect.
    (PETERSBURG, PETER, _id(PETERSBURG, PETER), True),
    # Same forks passed, the remote announces a fork this node does not know yet: connect.
    (PETERSBURG, PETER, ForkId(_id(PETERSBURG, PETER).hash, 2**32), True),
    # Before Petersburg, both knowing it: connect.
    (PETERSBURG, BYZ, _id(PETERSBURG, BYZ), True),
    # Before Petersburg, the remote does not know it: connect (never refused before the fork).
    (PETERSBURG, BYZ, _id(BYZANTIUM, BYZ), True),
    # Past Petersburg, the remote at Byzantium knowing Petersburg is next (it is syncing): connect.
    (PETERSBURG, PETER, _id(PETERSBURG, BYZ), True),
    # Past Petersburg, the remote at Spurious knowing Byzantium is next: connect.
    (PETERSBURG, PETER, _id(PETERSBURG, SPURIOUS), True),
    # This node is syncing: at Byzantium, the remote past Petersburg, which this node knows: connect.
    (PETERSBURG, BYZ, _id(PETERSBURG, PETER), True),
    # Syncing further behind: at Spurious, the remote past two forks this node knows: connect.
    (PETERSBURG, SPURIOUS, _id(PETERSBURG, PETER), True),
    # Past Petersburg, the remote at Byzantium that does not know Petersburg: refused.
    (PETERSBURG, PETER, _id(BYZANTIUM, BYZ), False),
    # Past Petersburg, the remote at Spurious that knows no further fork: refused.
    (PETERSBURG, PETER, ForkId(_id(PETERSBURG, SPURIOUS).hash, 0), False),
    # The remote passed a fork this node does not know (a newer release, or another chain): refused.
    (PETERSBURG, PETER, _id((*PETERSBURG, Fork(ForkRules("f7", 8, (2,), 7, (0, 1, 7)), 7_900_000)), PETER), False),
    # This node's release does not know Petersburg, which the remote passed: refused.
    (BYZANTIUM, BYZ, _id(PETERSBURG, PETER), False),
    (BYZANTIUM, PETER, _id(PETERSBURG, PETER), False),
    # Same hash, but the remote schedules a fork at a height this node passed without it: refused.
    (BYZANTIUM, PETER, _id(PETERSBURG, BYZ), False),
    # Another genesis: refused.
    (PETERSBURG, PETER, fork_id(bytes(32), PETERSBURG, PETER), False),
])
def test_eip_2124_cases(local, head, remote, connects):
    refusal = compatibility(GENESIS, local, head, remote)
    assert (refusal is None) == connects, refusal
    if refusal is not None:
        assert "\n" not in refusal and ("this node is on fork" in refusal or "another branch" in refusal)


def test_the_id_is_genesis_and_passed_fork_heights_and_the_next_fork():
    assert _id(PETERSBURG, 0) == ForkId(_id(PETERSBURG, HEIGHTS[0] - 1).hash, HEIGHTS[0])
    assert _id(PETERSBURG, PETER).next == 0
    assert len({_id(PETERSBURG, h).hash for h in (0, *HEIGHTS)}) == 7
    # Only the schedule's heights count, not what a fork's rules are.
    other = (Fork(V1, 0), *(Fork(RULES[0], h) for h in HEIGHTS[:1]))
    assert _id(other, PETER).hash == _id(PETERSBURG, HEIGHTS[0]).hash


def test_an_old_node_and_an_upgraded_one_on_regtest():
    """v2 at 50: connected before it, the old schedule refused after it in one line naming both."""
    new = REGTEST.with_test_forks((Fork(V2, 50),)).forks
    old = REGTEST.forks
    assert compatibility(GENESIS, new, 49, fork_id(GENESIS, old, 49)) is None
    assert compatibility(GENESIS, old, 49, fork_id(GENESIS, new, 49)) is None
    refusal = compatibility(GENESIS, new, 50, fork_id(GENESIS, old, 49))
    assert refusal == ("peer is on fork v1 with no fork scheduled; this node is on fork v2 from height 50: "
                       "the peer does not know v2 (an older snoded)")
    old_view = compatibility(GENESIS, old, 49, fork_id(GENESIS, new, 50))
    assert old_view is not None and "does not know" in old_view and "this node is on fork v1" in old_view
