"""The wallet's `rewards` lines read right for one reward as for many."""

from __future__ import annotations

from snode.api.types import RewardPaid, RewardShare, ServiceNodeRewardsResult
from snode.params import COIN
from snode.wallet.commands import reward_lines


def _found(heights: list[int]) -> ServiceNodeRewardsResult:
    paid = [RewardPaid(h, 2 * COIN, [RewardShare("me", COIN), RewardShare("other", COIN)]) for h in heights]
    return ServiceNodeRewardsResult("ab" * 32, 0, max(heights), paid, 2 * COIN * len(heights),
                                    [RewardShare("me", COIN * len(heights))], True)


def test_one_reward_and_many_are_counted_in_words_that_fit() -> None:
    assert reward_lines(_found([19]), "me")[0] == (f"Node {'ab' * 32}: 1 reward at height 19, 2 coins in all, "
                                                  "1 coin to this wallet.")
    assert reward_lines(_found([19, 20, 21]), "me")[0].startswith(f"Node {'ab' * 32}: 3 rewards from height 19 to 21,")
