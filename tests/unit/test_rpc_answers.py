"""The kept answers (`rpc.answers`) move with every kind of change they show, and only then.

A method table over a real in-process service node (memory store, two active service nodes, ours
and a peer's) on a stopped clock: the clock's second is part of get_info's key, so with the clock
still, a kept answer can only be refreshed by the node's revision (`Node.revision`). For each kind
of change the node can make (a transaction admitted, a block, a reorganisation, a peer's uptime
proof, the network's word on our own proof either way, the sync target, stale transactions dropped
while building a block, and the records written straight, past any Node method: the mempool, the
proof book, the upgrade watch) the kept get_info or get_service_nodes answer must show it at once; the
peer count and the clock's second, which are not the node's, must show too. With nothing changed,
both answers are the very objects kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

import msgspec
import pytest

from snode import __version__
from snode.api import types as T
from snode.common.clock import MockableClock
from snode.core import mempool as mp
from snode.core.proofs import ProofRefusal, make_proof
from snode.core.service_nodes import StateChangeKind
from snode.devchain import key_from_label
from snode.node.node import Identity, Node
from snode.node.verifier import InlineVerifier
from snode.params import COIN
from snode.rpc.answers import Answers
from snode.rpc.methods import MethodTable
from snode.store.memory import MemoryStore
from tests.unit.conftest import REQUIREMENT, LabChain, new_chain

OURS, PEER_SN = key_from_label("answers sn"), key_from_label("answers peer sn")
BOB, CAROL, DAVE = (key_from_label(n) for n in ("bob", "carol", "dave"))
VERDICT_FROM = "127.0.0.9:9230"
Listed: TypeAlias = T.ServiceNodesResult[T.ServiceNodeState]
Shows: TypeAlias = Callable[[T.InfoResult, Listed], bool]
"""Whether the answers (get_info, the whole get_service_nodes list) show a change."""


def proof_time(listed: Listed, key: bytes) -> int:
    [record] = [r for r in listed.service_node_states if r.service_node_pubkey == key.hex()]
    return record.last_uptime_proof


@dataclass
class Lab:
    """A service node's method table on a stopped clock, over `chain`'s blocks."""

    chain: LabChain
    node: Node
    clock: MockableClock
    table: MethodTable
    before: tuple[int, T.InfoResult, Listed] | None = None
    """The revision and both answers just before the change (`mark`)."""

    async def mark(self) -> None:
        """Note the revision and the kept answers as they are before a change."""
        self.before = (self.node.revision, await self.info(), await self.listed())

    @property
    def now(self) -> int:
        return self.node.now()

    async def info(self) -> T.InfoResult:
        return msgspec.json.decode(msgspec.json.encode(await self.table.call("get_info", {})), type=T.InfoResult)

    async def listed(self) -> Listed:
        raw = msgspec.json.encode(await self.table.call("get_service_nodes", {}))
        return msgspec.json.decode(raw, type=Listed)


@pytest.fixture
def lab() -> Lab:
    chain = new_chain()
    for operator, key in (("operator", OURS), ("carol", PEER_SN)):
        chain.register(key_from_label(operator), key, REQUIREMENT)
        chain.mine()
        chain.change_state(key.public, StateChangeKind.ACTIVATE)
    genesis = chain.fork(at=0).state
    clock = MockableClock()
    clock.set_mock(chain.now + 60)
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], genesis),
                state=genesis, identity=Identity(OURS, "203.0.113.5", 9230, 9232),
                producer_key=chain.authority, clock=clock, verifier=InlineVerifier())
    node.accept_blocks(chain.blocks[1:], node.now())
    return Lab(chain, node, clock, MethodTable(node, request_stop=lambda: None, clock=clock))


# --- the changes, each with what it must show -----------------------------------------------

async def admit_a_transaction(lab: Lab) -> Shows:
    lab.node.submit_transaction(lab.chain.transfer_tx(BOB, DAVE.public, COIN), lab.now)
    return lambda info, _: info.mempool_size == 1


async def adopt_a_block(lab: Lab) -> Shows:
    height = lab.node.height
    lab.node.accept_block(lab.chain.mine()[0], lab.now)
    return lambda info, listed: info.height == listed.height == height + 1


async def reorganise(lab: Lab) -> Shows:
    fork = lab.chain.fork(at=lab.node.height - 1)
    branch = fork.mine(2)
    assert lab.node.reorganize(branch, lab.now)
    return lambda info, _: info.top_block_hash == fork.tip_hash().hex()


async def accept_a_peers_proof(lab: Lab) -> Shows:
    proof = make_proof(PEER_SN, lab.node.params, timestamp=lab.now, public_ip="203.0.113.6", p2p_port=9230,
                       quorumnet_port=9232, version=__version__)
    lab.node.accept_proof(proof, lab.now)
    return lambda _, listed: proof_time(listed, PEER_SN.public) == lab.now


async def our_proof_accepted(lab: Lab) -> Shows:
    sent = lab.node.own_proof.send(lab.now)
    lab.node.own_proof.accepted(sent.timestamp, VERDICT_FROM)
    return lambda info, listed: (proof_time(listed, OURS.public) == sent.timestamp
                                 and "proof: never" not in info.status_line)


async def our_proof_refused(lab: Lab) -> Shows:
    sent = lab.node.own_proof.send(lab.now)
    lab.node.own_proof.refused(VERDICT_FROM, sent.timestamp, ProofRefusal.CLOCK)
    return lambda info, _: (info.last_uptime_proof_rejection.startswith(f"uptime proof rejected by {VERDICT_FROM}")
                            and ", refused: " in info.status_line)


async def note_a_sync_target(lab: Lab) -> Shows:
    lab.node.note_sync_target(lab.node.height + 5)
    return lambda info, _: info.target_height == lab.node.height + 5


async def _expire_a_registration(lab: Lab) -> None:
    expiring = lab.chain.registration(key_from_label("answers late sn"), [(DAVE, REQUIREMENT)], expiry=lab.now + 5)
    lab.node.submit_transaction(lab.chain.spend(DAVE, expiring), lab.now)
    lab.clock.set_mock(lab.now + 10)  # the registration has expired: building a block drops it
    await lab.mark()
    assert lab.before is not None and lab.before[1].mempool_size == 1


async def drop_stale_transactions_while_building(lab: Lab) -> Shows:
    await _expire_a_registration(lab)
    lab.node.build_block(lab.now)  # as the authority
    return lambda info, _: info.mempool_size == 0


async def drop_stale_transactions_while_leading_a_round(lab: Lab) -> Shows:
    await _expire_a_registration(lab)
    lab.node.build_round_block(0, lab.now)
    return lambda info, _: info.mempool_size == 0


async def swap_the_pool_straight(lab: Lab) -> Shows:
    """A mempool written without any Node method: nothing counts it but `Node.revision` itself."""
    node = lab.node
    node.pool, _ = mp.admit(node.pool, lab.chain.transfer_tx(BOB, DAVE.public, COIN), node.state, node.consensus,
                            now=lab.now, verifier=node.verifier)
    return lambda info, _: info.mempool_size == 1


async def record_a_proof_straight_in_the_book(lab: Lab) -> Shows:
    """A proof written in the book without `Node.accept_proof` (the simulation's judges did so)."""
    lab.node.proofs.record(PEER_SN.public, lab.now, ("203.0.113.6", 9232))
    return lambda _, listed: proof_time(listed, PEER_SN.public) == lab.now


async def learn_of_a_fork_straight_in_the_upgrade_watch(lab: Lab) -> Shows:
    """Proofs tell the upgrade watch of a fork this node does not know, written past
    `Node.accept_proof`: get_info says what to do (`UpgradeWatch.revision` counts it)."""
    for source in ("ab", "cd", "ef"):
        lab.node.upgrade.learn_from_proof("zeta", lab.node.height + 3, lab.node.height, version="9.0.0",
                                          source=source * 8, needed=0)
    return lambda info, _: info.upgrade_required is not None


CHANGES = [admit_a_transaction, adopt_a_block, reorganise, accept_a_peers_proof, our_proof_accepted,
           our_proof_refused, note_a_sync_target, drop_stale_transactions_while_building,
           drop_stale_transactions_while_leading_a_round, swap_the_pool_straight,
           record_a_proof_straight_in_the_book, learn_of_a_fork_straight_in_the_upgrade_watch]


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__)
async def test_a_kept_answer_shows_each_kind_of_change_at_once(
    lab: Lab, change: Callable[[Lab], Awaitable[Shows]],
) -> None:
    await lab.mark()
    shows = await change(lab)
    assert lab.before is not None
    revision, info, listed = lab.before
    assert lab.node.revision > revision, "the node counts the change"
    assert not shows(info, listed), "the change is not visible before it"
    info, listed = await lab.info(), await lab.listed()
    assert shows(info, listed), f"the kept answers do not show it: {info}"


async def test_with_nothing_changed_the_kept_answers_are_served_again(lab: Lab) -> None:
    info = await lab.table.call("get_info", {})
    listed = await lab.table.call("get_service_nodes", {})
    lab.node.own_proof.send(lab.now)  # signed and sent: not the network's word yet, nothing to show
    assert await lab.table.call("get_info", {}) is info
    assert await lab.table.call("get_service_nodes", {}) is listed


def test_get_info_follows_the_peer_count_and_the_clocks_second(lab: Lab) -> None:
    peers = [0]
    answers = Answers(lab.node, lambda: peers[0])
    first = msgspec.json.decode(answers.info(lab.now), type=T.InfoResult)
    peers[0] = 3
    assert msgspec.json.decode(answers.info(lab.now), type=T.InfoResult).peer_count == 3
    sent = lab.node.own_proof.send(lab.now)
    lab.node.own_proof.accepted(sent.timestamp, VERDICT_FROM)
    shown = answers.info(lab.now)
    assert answers.info(lab.now) is shown
    later = msgspec.json.decode(answers.info(lab.now + 90), type=T.InfoResult)
    assert later.status_line != first.status_line and later.status_line.endswith("proof: 1m30s"), later.status_line
