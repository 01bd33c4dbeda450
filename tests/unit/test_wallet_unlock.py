"""The wallet's view of stake exit (issue #13): the stake returns a block carries show as
incoming transfers with their reason, an unlock request as its own line; `balance` counts the
unlocking stakes apart; `stakes` says when each unlocks; `when` says how far a height is."""

from __future__ import annotations

import msgspec

from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.stake_exit import stake_return_tx
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, MAINNET, REGTEST
from snode.wallet.logic import Balance, Unlocking, balance_lines, duration, scan_block, transfer_lines, when
from snode.wallet.staking import locked_line, stake_line, stakes_lines
from tests.unit.conftest import POOL_MINIMUM, REQUIREMENT

OPERATOR, ALICE = key_from_label("operator"), key_from_label("alice")


def test_returned_stakes_and_unlock_requests_in_the_transfer_history(chain):
    pubkey = chain.new_node(amount=POOL_MINIMUM, reserved=((ALICE, POOL_MINIMUM),))
    chain.stake(ALICE, pubkey, POOL_MINIMUM)
    chain.mine()
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.request_unlock(ALICE, pubkey)
    chain.mine()
    chain.mine_to(chain.node(pubkey).leaves_at)
    mine: dict[bytes, int] = {}
    records = [r for block in chain.blocks for r in scan_block(block, ALICE.public, mine)]
    kinds = [r.kind for r in records if r.kind != "reward"]
    assert kinds == ["genesis", "stake", "unlock request", "stake returned: unlock"], kinds
    assert records[-1].amount == POOL_MINIMUM
    lines = transfer_lines(records)
    assert any("stake returned: unlock" in line and f"+{POOL_MINIMUM // COIN}" in line for line in lines)
    assert len({len(line) - len(line.split()[-1]) for line in lines}) == 1  # columns stay aligned


def test_a_deregistration_return_is_named(chain):
    pubkey = chain.new_node()
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.change_state(pubkey, StateChangeKind.DECOMMISSION)
    chain.mine(chain.params.credit_initial)
    chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    block = chain.mine()[0]
    records = scan_block(block, OPERATOR.public, {})
    assert [(r.kind, r.amount) for r in records] == [("stake returned: deregistration", REQUIREMENT)]


def test_a_pool_expiry_is_named(chain):
    pubkey = chain.new_node(amount=POOL_MINIMUM)
    node = chain.node(pubkey)
    returned = stake_return_tx(msgspec.structs.replace(node))
    block = msgspec.structs.replace(chain.blocks[-1], transactions=(chain.blocks[-1].transactions[0], returned))
    assert [r.kind for r in scan_block(block, OPERATOR.public, {})] == ["stake returned: pool expired"]


def test_balance_counts_unlocking_stakes_apart():
    balance = Balance(total=10 * COIN, unlocked=10 * COIN, pending=0, staked=260_000 * COIN, height=100,
                      unlocking=(Unlocking(bytes(32), 60_000 * COIN, 120),))
    lines = balance_lines(balance, nodes=2, confirmations=10)
    assert lines[:2] == ["Balance: 10 coins", "Unlocked balance: 10 coins"]  # the amount first, then its unit
    assert "Staked: 200000 coins on 1 service node" in lines
    assert ("Unlocking: 60000 coins on 1 service node (the first unlocking at height 120, returned at "
            "height 121, spendable from height 131)") in lines


def test_when_and_duration():
    assert when(30, REGTEST, 0) == "in 30 blocks"
    assert when(1, REGTEST, 0) == "in 1 block"
    assert when(15 * 720, MAINNET, 0) == "in 10800 blocks, about 15 days, around 1970-01-16 00:00 UTC"
    assert when(30, DEVNET, 0).startswith("in 30 blocks, about 1 minute")
    assert [duration(s) for s in (40, 60, 5_400, 90_000)] == ["40 seconds", "1 minute", "2 hours", "1 day"]


def test_stake_lines_say_when_a_stake_unlocks(chain):
    pubkey = chain.new_node()
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.request_unlock(OPERATOR, pubkey)
    chain.mine()
    node = chain.node(pubkey)
    line = stake_line(node, OPERATOR.public, unlock=lambda at: f"in {at - chain.state.height} blocks")
    unlock = node.requested_unlock_height
    assert line.endswith(f"unlocking at height {unlock}, returned at height {unlock + 1} "
                         f"(in {REGTEST.unlock_duration + 1} blocks)")
    total = stakes_lines([node], OPERATOR.public, unlock=lambda at: "soon")[-1]
    assert total == f"Total staked: 0 coins; unlocking: {REQUIREMENT // COIN} coins"  # as `balance` counts it
    # As `balance` says it (issue #38): the output spendable in block 90 counts as unlocked at tip 89.
    assert locked_line("ab" * 32, 5 * COIN, 90, "missed_uptime_proofs", 80).endswith(
        "Deregistered (missed_uptime_proofs)  locked by deregistration, unlocking at height 89 (in 9 blocks)")
