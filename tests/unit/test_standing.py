"""What an operator is told of its own node's standing (issue #38, items 1 to 4 and the pending
registration of 11): the downtime credit short of an outage, in words with the real stake lock;
a decommission's reason; how a key left the registry, seen as blocks are adopted and found again
by looking back after a restart; a registration waiting in the mempool; the heights events carry.
A real lab chain (regtest numbers: credit 60 at activation and minimum 60, lock 40 blocks) and a
node with the service node's identity that adopts its blocks."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from snode.core.service_nodes import Reason, StateChangeKind, status_words
from snode.core.standing import credit_warning, departure_words
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.own_proof import Identity
from snode.node.verifier import InlineVerifier
from snode.params import MAINNET, REGTEST
from snode.rpc.answers import own_standing
from snode.rpc.health import unmet_conditions
from snode.services.departure import find_departure
from snode.services.event_feed import EventFeed
from snode.store.memory import MemoryStore
from tests.unit.conftest import LabChain, new_chain
from tests.unit.conftest import credit_record as _record

SN_LABEL = "standing sn"
SN = key_from_label(SN_LABEL)


def test_an_active_node_short_of_the_minimum_is_told_its_next_outage_deregisters_it_with_the_real_lock():
    low = _record(active=True, credit=0, since=1000)
    assert credit_warning(low, 1000, MAINNET) == (
        "credit 0 blocks: the next outage deregisters this node; stake locked 30 days; avoid downtime "
        "until height 2800 (credit 60 in 1800 blocks, about 2 days)")
    assert credit_warning(low, 1000, REGTEST) == (
        "credit 0 blocks: the next outage deregisters this node; stake locked 40 blocks; avoid downtime "
        "until height 2800 (credit 60 in 1800 blocks)")
    assert credit_warning(_record(active=True, credit=59, since=1000), 1029, MAINNET).startswith(
        "credit 59 blocks: the next outage deregisters")
    assert credit_warning(_record(active=True, credit=59, since=1000), 1030, MAINNET) == "", "60 covers it"
    assert credit_warning(_record(active=True, credit=60, since=1), 1, MAINNET) == ""
    assert credit_warning(_record(active=False, credit=60, since=1, activated=False), 500, MAINNET) == ""


def test_a_decommissioned_node_is_told_when_its_credit_runs_out_and_shows_its_reason():
    down = msgspec.structs.replace(_record(active=False, credit=50, since=100),
                                   last_decommission_reason=Reason.MISSED_UPTIME_PROOFS)
    assert credit_warning(down, 110, MAINNET) == (
        "credit 40 blocks: deregistered at height 150 unless its uptime proofs are accepted again "
        "before; stake locked 30 days")
    assert status_words(down) == "Decomm (missed_uptime_proofs)"
    assert status_words(msgspec.structs.replace(down, last_decommission_reason=99)) == "Decomm (reason 99)"


def _follower(chain: LabChain) -> Node:
    """A node with SN's identity at the chain's genesis (it adopts blocks with `_catch_up`)."""
    genesis = chain.fork(at=0).state
    return Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis),
                state=genesis, identity=Identity(SN, "203.0.113.5", 9230, 9232), producer_key=None,
                verifier=InlineVerifier())


def _catch_up(node: Node, chain: LabChain) -> None:
    node.accept_blocks(chain.blocks[node.height + 1:], chain.now)


def _events(node: Node) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    EventFeed(node).listen(got.append)
    return got


def test_registration_pending_then_active_then_short_of_credit_everywhere_the_state_is_shown():
    chain = new_chain()
    node = _follower(chain)
    assert node.sn_state_word() == "not registered"
    tx_id = chain.register(key_from_label("operator"), SN, REGTEST.staking_requirement)
    node.submit_transaction(chain.pool.entries[tx_id].tx, chain.now)
    assert node.sn_state_word() == "registration pending"
    assert own_standing(node)["registration_pending"] is True
    assert unmet_conditions(node, chain.now, peer_count=1)["unmet"] == [
        "service node registration pending: it waits in the mempool for a block"]
    chain.mine()
    active = chain.change_state(SN.public, StateChangeKind.ACTIVATE)
    events = _events(node)
    _catch_up(node, chain)
    assert node.sn_state_word() == "Active" and node.credit_warning() == ""
    # Item 11: serving but not paid yet is named, and does not make the node unready by itself.
    assert unmet_conditions(node, chain.now, peer_count=1)["warnings"] == [
        f"not payable yet: rewards from height {active + 4} (4 blocks after activation)"]
    down = chain.change_state(SN.public, StateChangeKind.DECOMMISSION)
    chain.mine(9)
    back = chain.change_state(SN.public, StateChangeKind.RECOMMISSION)  # 60 - 2 x 10 = 40 left
    _catch_up(node, chain)  # one batch, as a node that syncs after an outage
    warning = ("credit 40 blocks: the next outage deregisters this node; stake locked 40 blocks; avoid "
               f"downtime until height {back + 20 * 30} (credit 60 in 600 blocks)")
    assert node.credit_warning() == warning
    assert node.status_line(chain.now).endswith(f", proof: never, {warning}")
    assert own_standing(node)["downtime_credit"] == 40 and own_standing(node)["credit_warning"] == warning
    assert unmet_conditions(node, chain.now, peer_count=1)["warnings"][0] == warning
    states = [(e["event"], e.get("state"), e["height"]) for e in events]
    assert ("state", "decommissioned", down) in states, "the chain's height, not the batch's tip"
    assert ("state", "recommissioned", back) in states
    assert ("credit_low", None, back) in states
    assert [e for e in events if e["event"] == "credit_low"][0]["credit"] == 40


def test_a_deregistered_key_says_so_as_it_happens_and_after_a_restart_by_looking_back():
    chain = new_chain()
    node = _follower(chain)
    chain.register(key_from_label("operator"), SN, REGTEST.staking_requirement)
    chain.mine()
    chain.change_state(SN.public, StateChangeKind.ACTIVATE)
    chain.change_state(SN.public, StateChangeKind.DECOMMISSION)
    chain.change_state(SN.public, StateChangeKind.RECOMMISSION)
    chain.state_change(SN.public, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    gone = chain.mine()[0].header.height
    chain.mine(5)
    node.accept_blocks(chain.blocks[1:gone - 1], chain.now)  # registered and active when it stopped
    events = _events(node)
    _catch_up(node, chain)  # then the rest in one batch, as after an outage
    said = (f"deregistered at height {gone} (missed_uptime_proofs); stakes locked, spendable from height "
            f"{gone + 40} (in 35 blocks)")
    assert node.sn_state_word() == said
    assert ("state", "left", gone) in [(e["event"], e.get("state"), e["height"]) for e in events]
    assert own_standing(node)["departure"].stakes_locked_blocks == 34
    (unmet,) = [u for u in unmet_conditions(node, chain.now, peer_count=1)["unmet"] if "registered" in u]
    assert unmet == (f"service node {said}: register it with the command from "
                     "get_service_node_registration_cmd to serve again")

    restarted = Node(params=node.params, consensus=node.consensus, store=node.store, state=node.state,
                     identity=node.identity, producer_key=None, verifier=InlineVerifier())
    assert restarted.sn_state_word() == "not registered", "nothing known before looking back"

    class Writer:
        async def call(self, fn: Any, *args: Any) -> Any:
            return fn(*args)

    asyncio.run(find_departure(restarted, Writer(), chunk=4))  # type: ignore[arg-type]
    assert restarted.sn_state_word() == said
    chain.mine(40)
    _catch_up(restarted, chain)
    assert restarted.sn_state_word() == (f"deregistered at height {gone} (missed_uptime_proofs); stakes "
                                         f"returned, spendable from height {gone + 40}")


def test_a_key_the_chain_never_knew_stays_not_registered_after_looking_back():
    chain = new_chain()
    chain.mine(7)
    node = _follower(chain)
    _catch_up(node, chain)

    class Writer:
        async def call(self, fn: Any, *args: Any) -> Any:
            return fn(*args)

    asyncio.run(find_departure(node, Writer(), chunk=3))  # type: ignore[arg-type]
    assert node.departure is None and node.sn_state_word() == "not registered"


def test_a_departure_reads_right_for_an_unlock():
    from snode.core.standing import Departure
    assert departure_words(Departure(90, "unlock", "", 100), 95, REGTEST) == (
        "unlocked at height 90; stakes returned, spendable from height 100")


def test_stakes_and_balance_name_the_same_height_for_a_deregistrations_locked_stake():
    """Issue #38, item 11: `stakes` said 168 where `balance` said 167 for the same coins."""
    from snode.wallet.logic import Output, balance_lines, balance_of
    from snode.wallet.staking import locked_line

    chain = new_chain()
    operator = key_from_label("operator")
    chain.register(operator, SN, REGTEST.staking_requirement)
    chain.mine()
    chain.change_state(SN.public, StateChangeKind.ACTIVATE)
    chain.change_state(SN.public, StateChangeKind.DECOMMISSION)
    chain.mine(REGTEST.credit_initial)
    chain.state_change(SN.public, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    chain.mine()
    height = chain.state.height
    (key, stake), = [(k, u) for k, u in chain.state.utxos.items()
                     if u.owner == operator.public and u.amount == REGTEST.staking_requirement]
    outputs = [Output(k[:32], int.from_bytes(k[32:], "big"), u.amount, u.unlock_height)
               for k, u in chain.state.utxos.items() if u.owner == operator.public]
    shown = balance_lines(balance_of(outputs, height, {}, pending=0, staked=0), 0, REGTEST.unlock_confirmations)
    at = stake.unlock_height - 1
    assert any(f"unlocking at height {at} (in {at - height} blocks)" in line for line in shown), shown
    assert locked_line(SN.public.hex(), stake.amount, stake.unlock_height, "missed_uptime_proofs", height).endswith(
        f"unlocking at height {at} (in {at - height} blocks)")
