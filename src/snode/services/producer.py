"""Block production: the authority's blocks while the network is small (and as the backstop),
and this service node's part in the rounds once service nodes produce.

The rounds themselves are `core.rounds.RoundMachine` (no I/O): one machine per height, made from
the tip when it changes, woken at its `wake_at` and by quorumnet messages; this module only does
what it says. A leader builds its block from the mempool and sends it to its validators over
quorumnet; a validator checks a template fully on the store thread (as a next block, all rules
but the validators' signatures), signs its hash and sends the signature back; the leader puts
the signatures it has into the block as soon as it has enough and hands it to the node, which
stores it, makes it the tip, and (through the event hub) the relay broadcasts it over P2P.

Every daemon logs once when block production passes from the authority to the service nodes
and back (`core.pulse.authority_reason` says why).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from snode.common.aio import wait_set
from snode.common.logs import LIMITED
from snode.core import rounds as R
from snode.core.blocks import Block, block_hash, producer_message
from snode.core.crypto import hash32
from snode.core.encoding import decode, encode
from snode.core.equivocation import EquivocationProof, block_proof
from snode.core.errors import BlockFromFuture, SnodeError
from snode.core.pulse import (
    Mode,
    authority_reason,
    backstop_time,
    production_mode,
    round_quorum,
    round_window,
    signer_indexes,
    validator_message,
)
from snode.core.state import ChainState
from snode.net.events import QuorumMessageReceived
from snode.node.events import BlocksAdopted
from snode.node.writer import ChainWriter, NotOnTip
from snode.services.checkpoints import CheckpointDuties

if TYPE_CHECKING:  # pyzmq is imported only by a service node's daemon (start-up time)
    from snode.net.quorumnet import QuorumNet
    from snode.services.equivocation import EquivocationWatch

log = logging.getLogger(__name__)

MIN_SLEEP = 0.05
"""Seconds: the shortest wait between two looks at the clock."""
MAX_CHECKED = 8
"""Templates a validator remembers for `BlockProducer._check_adopted`."""


class BlockProducer:
    """Produces this daemon's blocks: as the authority (if it holds the key) and as a service
    node (if it is one)."""

    def __init__(self, writer: ChainWriter, quorumnet: QuorumNet | None,
                 checkpoints: CheckpointDuties | None = None, *,
                 equivocations: EquivocationWatch | None = None, misbehave: str = "") -> None:
        self.writer = writer
        self.node = node = writer.node
        self.quorumnet = quorumnet
        self.checkpoints = checkpoints
        """Where a leader finds the checkpoint its block should carry."""
        self.equivocations = equivocations
        """Where a validator's proof that its leader sent two templates goes."""
        self.misbehave = misbehave
        """Test only (`SNODE_TEST_MISBEHAVE`, devnet and regtest): `equivocate` (two templates a
        round) or `drop-signatures` (a block with only the signatures needed)."""
        self.checked: dict[tuple[int, int], Block] = {}
        """Validator: the template of each recent (height, round) it checked: a block of the same
        slot from the same leader with another hash, adopted later, proves an equivocation
        that the leader hid by sending the two to different validators (`_check_adopted`)."""
        self.started = node.clock.time()
        """A round that began before this is not led: the daemon that ran before a restart may have
        signed a template for it, and a second one would be an equivocation."""
        self.machine: R.RoundMachine | None = None
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._mode = production_mode(node.state, node.params)
        node.subscribe(BlocksAdopted, self._on_blocks)
        node.subscribe(QuorumMessageReceived, self._on_message, topics=(R.BlockTemplate, R.ValidatorSignature))

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: wait for the next thing to do (a round to begin or end, the
        authority's turn), do it, and start over on every new tip."""
        node = self.node
        self._new_machine(node.state)
        while True:
            self._changed.clear()
            due = self._next_due(node.state)
            if due is not None:
                delay = max(due - node.clock.time(), MIN_SLEEP)
                if await wait_set(self._changed, delay):
                    continue  # a new tip or a message: look again
                await self._act(node.state)
            else:
                await self._changed.wait()

    def _next_due(self, state: ChainState) -> float | None:
        """When this daemon has something to do next, or None while it has nothing."""
        params = self.node.params
        if self.node.upgrade.stops_at(state.height + 1):
            return None  # a fork this snoded does not know starts there: it makes no block (`node.upgrade`)
        authority = self.node.producer_key is not None and params.target_block_time > 0
        if self._mode is Mode.AUTHORITY:
            return state.timestamp + params.target_block_time if authority else None
        due = []
        if self.machine is not None:
            due.append(self.machine.wake_at)
        if authority:
            due.append(backstop_time(state.timestamp, params))
        return min(due) if due else None

    async def _act(self, state: ChainState) -> None:
        """The time has come: the authority's block, or the round machine's tick."""
        node = self.node
        if state is not node.state or node.upgrade.stops_at(state.height + 1):
            return
        now = node.clock.time()
        if node.producer_key is not None and node.params.target_block_time > 0 and (
            self._mode is Mode.AUTHORITY or now >= backstop_time(state.timestamp, node.params)
        ):
            await self._produce_as_authority()
            return
        if self.machine is not None:
            await self._do(self.machine.tick(now))

    async def _produce_as_authority(self) -> None:
        backstop = self._mode is Mode.SERVICE_NODES
        try:
            block = await self.writer.produce_block()
        except Exception:  # a bug must not end block production for the life of the process
            log.exception("block production failed")
            await asyncio.sleep(max(self.node.params.target_block_time, 1))
            return
        if backstop:
            log.warning("no service-node block for %d rounds: the authority produced block %d as "
                        "the backstop", self.node.params.backstop_rounds, block.header.height)

    # --- events -------------------------------------------------------------------------------

    def _on_blocks(self, event: BlocksAdopted) -> None:
        """A new tip: a new height to produce, perhaps a new mode."""
        self._check_adopted(event.blocks)
        state = self.node.state
        mode = production_mode(state, self.node.params)
        if mode is not self._mode:
            self._mode = mode
            if mode is Mode.SERVICE_NODES:
                log.info("block production passes to the service nodes at height %d",
                            state.height + 1)
            else:
                log.warning("block production passes back to the authority at height %d: %s",
                            state.height + 1, authority_reason(state, self.node.params))
        self._new_machine(state)
        self._changed.set()

    def _new_machine(self, state: ChainState) -> None:
        identity = self.node.identity
        registered = identity is not None and identity.key.public in state.service_nodes
        if self._mode is not Mode.SERVICE_NODES or not registered or self.quorumnet is None:
            self.machine = None
            return
        assert identity is not None
        self.machine = R.RoundMachine.for_state(state, identity.key.public, self.node.params)

    def _on_message(self, event: QuorumMessageReceived) -> None:
        machine, message, now = self.machine, event.message, self.node.clock.time()
        if machine is None:
            return
        match message:
            case R.BlockTemplate():
                self._spawn(self._do(machine.on_template(message, now, event.sender)))
            case R.ValidatorSignature():
                self._spawn(self._do(machine.on_signature(message, now)))
            case _:
                return
        # The machine may wake sooner now (a leader holding enough signatures waits only a
        # short grace for the rest): the loop must look at `wake_at` again, not sleep on to the
        # round's end.
        self._changed.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- actions ------------------------------------------------------------------------------

    async def _do(self, actions: Sequence[R.Action]) -> None:
        """Do what the round machine says, in order (answers may add actions)."""
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            machine = self.machine
            if machine is None:
                return  # the tip moved on: whatever this round wanted is moot
            queue += await self._do_one(machine, action)

    async def _do_one(self, machine: R.RoundMachine, action: R.Action) -> list[R.Action]:
        node = self.node
        match action:
            case R.BuildTemplate():
                if round_window(node.state.timestamp, action.round, node.params)[0] < self.started:
                    log.info("round %d of block %d began before this daemon started: not led", action.round,
                             action.height)
                    return []
                checkpoint = self.checkpoints.best(node.state) if self.checkpoints is not None else None
                block = await self.writer.template(node.leader_key(), action.timestamp, round=action.round,
                                                   checkpoint=checkpoint)
                return machine.on_built(block, node.clock.time())
            case R.SendTemplate():
                second = self._second_template(action.template) if self.misbehave == "equivocate" else None
                for i, validator in enumerate(action.validators):
                    if second is None or i != 0:
                        self._send(validator, action.template)
                    if second is not None and i in (0, 1):
                        self._send(validator, second)
            case R.CheckTemplate():
                self.checked[(action.block.header.height, action.block.header.round)] = action.block
                while len(self.checked) > MAX_CHECKED:
                    del self.checked[next(iter(self.checked))]
                valid = await self._check(action.block)
                return machine.on_checked(action.block_hash, valid, node.clock.time())
            case R.SignTemplate():
                assert node.identity is not None
                key = node.identity.key
                signature = key.sign(validator_message(node.params.network_id, action.block_hash))
                signed = R.ValidatorSignature(action.height, action.round, action.block_hash, key.public, signature)
                self._send(action.leader, signed)
                self._witnesses(signed, action.leader)
                node.participation.witness(signed, node.height)  # its own view knows it signed
            case R.Broadcast():
                await self._finish(action)
            case R.RoundFailed():
                log.info("round %d of block %d failed: no block from leader %s", action.round,
                         action.height, action.leader.hex()[:16])
            case R.Equivocation():
                log.warning("leader %s sent two blocks for round %d of block %d; signing neither",
                            action.leader.hex()[:16], action.round, action.height)
                if self.equivocations is not None:
                    self.equivocations.found(_template_proof(action.first, action.second))
        return []

    def _check_adopted(self, blocks: Sequence[Block]) -> None:
        """A block adopted for a slot whose template this validator checked, by the same leader
        on the same parent, with another hash: the leader signed both (the round machine checked
        the template's signature, the block rules the block's)."""
        for block in blocks:
            header = block.header
            seen = self.checked.pop((header.height, header.round), None)
            if (seen is None or self.equivocations is None or seen.header.producer != header.producer
                    or seen.header.prev_hash != header.prev_hash or block_hash(seen.header) == block_hash(header)):
                continue
            self.equivocations.found(block_proof(seen.header, seen.producer_signature, header,
                                                 block.producer_signature))

    def _witnesses(self, signed: R.ValidatorSignature, leader: bytes) -> None:
        """A validator's signature goes to other active service nodes too: a node that has it
        before the block counts this validator's duty done even if the leader leaves it out
        (docs/PARTICIPATION.md "Framing"). To every one up to MAX_WITNESSES of them; beyond,
        to the tip's obligations quorum (the next judges) and the rest of MAX_WITNESSES drawn
        by the block hash, so that a validator's duty costs it a bounded number of quorumnet
        connections and handshakes at mainnet's size, never one per service node."""
        assert self.quorumnet is not None
        for pubkey in witnesses(self.node.state, signed, leader):
            self.quorumnet.send(pubkey, signed)

    def _second_template(self, template: R.BlockTemplate) -> R.BlockTemplate | None:
        """Test only (`SNODE_TEST_MISBEHAVE=equivocate`): another template of the same round, one second
        apart, signed too. The round's first validator gets only this one (it signs it, the
        others sign the first and make the block: it proves the equivocation from the block),
        the second gets both (it proves it at once and signs neither)."""
        node = self.node
        block = decode(template.block, Block)
        start, end = round_window(node.state.timestamp, block.header.round, node.params)
        moved = start if block.header.timestamp != start else start + 1
        if moved >= end:
            return None
        header = msgspec.structs.replace(block.header, timestamp=moved)
        signature = node.leader_key().sign(producer_message(node.params.network_id, block_hash(header)))
        log.warning("SNODE_TEST_MISBEHAVE: two templates for round %d of block %d", template.round, template.height)
        return R.BlockTemplate(template.height, template.round,
                               encode(msgspec.structs.replace(block, header=header, producer_signature=signature)))

    def _dropped(self, action: R.Broadcast) -> R.Broadcast:
        """Test only (`SNODE_TEST_MISBEHAVE=drop-signatures`): the block with only the validator
        signatures it needs, the lowest bits (a leader framing the others as missing their duty)."""
        header = action.block.header
        needed = round_quorum(self.node.state, header.round, self.node.params).needed
        bits = signer_indexes(action.validator_bitset)[:needed]
        if len(bits) == len(action.validator_signatures):
            return action
        log.warning("SNODE_TEST_MISBEHAVE: block %d carries %d of its %d validator signatures", header.height,
                    len(bits), len(action.validator_signatures))
        return dataclasses.replace(action, validator_bitset=sum(1 << i for i in bits),
                                   validator_signatures=action.validator_signatures[:needed])

    def _send(self, member: bytes, message: R.BlockTemplate | R.ValidatorSignature) -> None:
        assert self.quorumnet is not None
        if not self.quorumnet.send(member, message):
            log.info("quorumnet: cannot reach %s yet (no uptime proof with its address)", member.hex()[:16])

    async def _check(self, block: Block) -> bool:
        """A validator's full check of a template, off the event loop."""
        node = self.node
        try:
            await self.writer.call(node.check_template, block, node.now())
        except BlockFromFuture as err:
            log.info("template %d: %s (check both clocks)", block.header.height, err.reason, extra=LIMITED)
            return False
        except SnodeError as err:  # a leader can send one a round: counted, not each written
            log.info("template %d from %s refused: %s", block.header.height,
                     block.header.producer.hex()[:16], err.reason, extra=LIMITED)
            return False
        return True

    async def _finish(self, action: R.Broadcast) -> None:
        """The leader has its signatures: the block goes to the node, then to every peer."""
        if self.misbehave == "drop-signatures":
            action = self._dropped(action)
        block = msgspec.structs.replace(
            action.block, validator_bitset=action.validator_bitset,
            validator_signatures=action.validator_signatures,
        )
        header = block.header
        try:
            await self.writer.accept_block(block)
        except NotOnTip:
            log.info("own block %d of round %d came too late: the tip moved on", header.height, header.round)
            return
        except SnodeError as err:
            log.warning("own block %d of round %d refused: %s", header.height, header.round, err.reason)
            return
        log.info("led block %d %s in round %d with %d validator signatures", header.height,
                 block_hash(header).hex()[:16], header.round, len(action.validator_signatures))


def _template_proof(first: R.BlockTemplate, second: R.BlockTemplate) -> EquivocationProof:
    """The proof of a leader's two templates (the round machine checked both signatures)."""
    a, b = decode(first.block, Block), decode(second.block, Block)
    return block_proof(a.header, a.producer_signature, b.header, b.producer_signature)


MAX_WITNESSES: Final = 64
"""The most service nodes a validator sends its signature to besides the leader (`witnesses`)."""


def witnesses(state: ChainState, signed: R.ValidatorSignature, leader: bytes) -> list[bytes]:
    """Who gets a validator's signature as its witness: every other active node up to
    MAX_WITNESSES; beyond, the tip's obligations quorum and the rest drawn by the signed hash."""
    others = [pk for pk, sn in state.service_nodes.items() if sn.active and pk not in (signed.validator, leader)]
    if len(others) <= MAX_WITNESSES:
        return others
    quorum, eligible = state.quorums.get(state.height), set(others)
    judges = [pk for pk in (quorum.members if quorum is not None else ()) if pk in eligible]
    drawn = sorted((pk for pk in others if pk not in judges),
                   key=lambda pk: hash32(signed.block_hash + pk))
    return (judges + drawn)[:MAX_WITNESSES]
