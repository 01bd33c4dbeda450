"""The admin RPC methods. Each takes a validated params record and returns a typed result.

Parameters and results are the records of `snode.api.types`, the one definition the wallet and
the tools decode with. Parameter records reject unknown fields, so a typo in a parameter name is
an error naming it rather than a silently ignored option.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from snode.api import errors as E
from snode.api.errors import RpcError
from snode.api.invalid_params import invalid_params
from snode.api.records import cached_address
from snode.api.types import (
    AddPeerParams,
    AddressParams,
    BanInfo,
    BlockResult,
    GenerateBlocksParams,
    GenerateBlocksResult,
    GetBlockParams,
    GetServiceNodesParams,
    HeightResult,
    InfoResult,
    LockedStake,
    LockedStakesResult,
    MempoolEntry,
    MempoolResult,
    MockTimeResult,
    NoParams,
    OutputEntry,
    OutputsResult,
    PeerInfo,
    PeersResult,
    RawTxParams,
    RegistrationCmdResult,
    RewardPaid,
    RewardShare,
    SendProofResult,
    SendTxResult,
    ServiceNodeKeyResult,
    ServiceNodeRewardsParams,
    ServiceNodeRewardsResult,
    ServiceNodesResult,
    ServiceNodeState,
    SetMockTimeParams,
    StakingRequirementResult,
    StatusResult,
    TransactionResult,
    TxidParams,
)
from snode.common.clock import Clock, MockableClock
from snode.common.endpoints import ip_endpoint
from snode.common.text import fixed_hex
from snode.core import service_nodes as sn_rules
from snode.core.address import decode_address
from snode.core.blocks import Block, block_hash
from snode.core.crypto import x25519_public
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, InvalidAddress, SnodeError
from snode.core.proofs import InvalidProof
from snode.core.pulse import signer_indexes
from snode.core.registration import format_command
from snode.core.state import ServiceNode, Undo, last_checkpoint
from snode.core.transactions import StateChange, Transaction, payload_kind, txid
from snode.net.peers import PeerManager
from snode.node.node import Node
from snode.node.views import NodeView
from snode.node.writer import ChainWriter
from snode.params import MAX_FUTURE_BLOCK_TIME
from snode.rpc.answers import Answers
from snode.rpc.registration import REG_FAILED, build_registration
from snode.rpc.signatures import SIGNATURES
from snode.services.sn_duties import ServiceNodeDuties

MAX_REWARDS_LISTED = 2_000
"""Rewards one answer of `get_service_node_rewards` lists at most (oldest left out first; its
`complete` says so). Each costs a block and an undo record read on the store thread."""
Paid = tuple[int, list[tuple[bytes, int]]]
"""A reward: its height, and (owner, atomic amount) of each output the node paid."""
MAX_REWARD_STEPS = 10_000
"""Blocks `get_service_node_rewards` reads back at most for one answer (rewards above
`to_height` are read to get past them)."""


@dataclass(frozen=True, slots=True)
class RpcLimits:
    """The bounds of one answer, as one record the method table takes (the daemon passes the
    defaults, the constants above; a test passes small ones)."""

    max_rewards_listed: int = MAX_REWARDS_LISTED
    max_reward_steps: int = MAX_REWARD_STEPS


DEFAULT_RPC_LIMITS: Final = RpcLimits()
PROOF_ACK_WAIT = 3.0
"""Seconds `send_uptime_proof` waits for a peer to acknowledge the proof it sent."""

_NO_PARAMS = NoParams()
_OK = StatusResult(status="OK")


def _hex32(name: str, text: str) -> bytes:
    raw = fixed_hex(text, 32)
    if raw is None:
        raise RpcError(E.INVALID_PARAMS, f"Invalid params: {name}: must be 64 hex characters")
    return raw


def tx_kind(tx: Transaction) -> str:
    """A transaction's kind as tools show it."""
    return payload_kind(tx.payload).value



def missing_history(node: Node) -> str:
    """Why a block below a snapshot is not here, in the operator's words."""
    if not node.backfilled:
        return (f"it started from the snapshot of height {node.history_start} and holds no block between genesis "
                "and it (not downloaded)")
    return (f"it started from the snapshot of height {node.history_start} and holds no block between block "
            f"{node.backfilled} and it (not downloaded yet: the backfill is at {node.history_percent} %)")


def searched(node: Node) -> str:
    """The heights whose blocks this node holds, for an answer that found nothing there."""
    if node.history_start <= 1 or node.history_percent == 100:
        return ""
    if not node.backfilled:
        return f"from height {node.history_start} on"
    return f"up to height {node.backfilled} and from height {node.history_start} on"

class MethodTable:
    """Dispatch from method name to implementation, over one Node."""

    def __init__(self, node: Node, *, request_stop: Callable[[], None],
                 peers: PeerManager | None = None, duties: ServiceNodeDuties | None = None,
                 writer: ChainWriter | None = None, clock: Clock | None = None,
                 limits: RpcLimits = DEFAULT_RPC_LIMITS) -> None:
        self.node = node
        self.limits = limits
        self.peers = peers
        self.duties = duties
        self.writer = writer if writer is not None else ChainWriter(node)
        """Store reads and chain changes go through it (off the event loop in a daemon)."""
        self.request_stop = request_stop
        self.clock: Clock = clock if clock is not None else node.clock
        """The daemon's clock, the node's too; a MockableClock on regtest (`set_mock_time`)."""
        self.answers = Answers(node, lambda: len(peers.peers) if peers is not None else 0)
        """The answers callers poll, kept encoded between the changes they show."""
        self._table: dict[str, tuple[Callable[[Any], Awaitable[Any]], type[msgspec.Struct] | None]] = {
            name: (getattr(self, attr), params) for name, (attr, params) in SIGNATURES.items()
        }

    @property
    def names(self) -> list[str]:
        return sorted(self._table)

    def now(self) -> int:
        return int(self.clock.time())

    def call(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        """The method's coroutine for the envelope to await (not a coroutine of its own: one frame
        less on every call); an unknown method or invalid params raise RpcError here."""
        entry = self._table.get(method)
        if entry is None:
            raise RpcError(E.METHOD_NOT_FOUND, f"Method not found: {method}")
        fn, schema = entry
        if schema is None:
            return fn(params)
        if schema is NoParams and not params:
            return fn(_NO_PARAMS)
        try:
            args = msgspec.convert(params, schema)
        except msgspec.ValidationError as err:
            raise invalid_params(err, schema) from None
        return fn(args)

    # --- specification methods ------------------------------------------------------------------

    async def get_info(self, _: NoParams) -> InfoResult | msgspec.Raw:
        """Kept encoded while the node's revision, the peer count and the clock's second stand."""
        return self.answers.info(self.now())

    async def get_service_nodes(
        self, p: GetServiceNodesParams
    ) -> ServiceNodesResult[ServiceNodeState] | msgspec.Raw:
        """The whole list is kept encoded while the node's revision stands; a filtered one is built."""
        if p.service_node_pubkeys or p.contributor is not None:
            return self._chosen_service_nodes(p)
        return self.answers.service_nodes()

    def _chosen_service_nodes(self, p: GetServiceNodesParams) -> ServiceNodesResult[ServiceNodeState]:
        """The nodes every given filter lets through."""
        state = self.node.state
        registered = state.service_nodes
        chosen: list[ServiceNode] = list(registered.values())
        if p.service_node_pubkeys:
            keys = dict.fromkeys(_hex32("service_node_pubkeys", k) for k in p.service_node_pubkeys)  # each once
            chosen = [registered[k] for k in keys if k in registered]
        if p.contributor is not None:
            owner = self._address("contributor", p.contributor)
            chosen = [sn for sn in chosen if any(c.owner == owner for c in sn.contributors)]
        return ServiceNodesResult(service_node_states=[self.answers.service_node(sn) for sn in chosen],
                                  height=state.height)

    def _address(self, name: str, text: str) -> bytes:
        """The public key behind a wallet address given as parameter `name`."""
        try:
            return decode_address(self.node.params.address_prefix, text)
        except InvalidAddress as err:
            raise RpcError(E.INVALID_PARAMS, f"Invalid params: {name}: {err.reason}") from None

    async def get_service_node_key(self, _: NoParams) -> ServiceNodeKeyResult:
        ident = self._identity("get_service_node_key")
        return ServiceNodeKeyResult(service_node_pubkey=ident.key.public.hex(),
                                    service_node_x25519_pubkey=x25519_public(ident.key.public).hex())

    def _identity(self, what: str) -> Any:
        if self.node.identity is None:
            raise RpcError(
                E.NOT_SERVICE_NODE,
                f"{what}: this daemon is not a service node; start snoded with --service-node",
            )
        return self.node.identity

    async def get_service_node_registration_cmd(self, params: dict[str, Any]) -> RegistrationCmdResult:
        node = self.node
        if node.identity is None:
            raise RpcError(
                E.NOT_SERVICE_NODE,
                f"{REG_FAILED}: this daemon is not a service node; start snoded with --service-node",
            )
        if node.target_height:
            raise RpcError(
                E.NOT_SYNCED,
                f"{REG_FAILED}: the node is still syncing (height {node.height} of "
                f"{node.target_height}); wait until get_info shows target_height 0",
            )
        reg = build_registration(params, node, self.now())
        return RegistrationCmdResult(registration_cmd=format_command(reg, node.params))

    async def send_uptime_proof(self, _: NoParams) -> SendProofResult:
        node = self.node
        ident = self._identity("send_uptime_proof")
        if ident.key.public not in node.state.service_nodes:
            raise RpcError(
                E.PROOF_FAILED,
                "send_uptime_proof: this service node's key is not registered on the chain; "
                "register it first (get_service_node_registration_cmd)",
            )
        try:
            proof = node.send_proof(self.now(), alone=self.peers is None or not self.peers.peers)
        except InvalidProof as err:
            raise RpcError(E.PROOF_FAILED, f"send_uptime_proof: {err.reason}") from None
        # The recovery step tells whether the network took it: wait briefly for a peer's word.
        own = node.own_proof
        if self.peers is not None and self.peers.peers:
            await own.wait_answer(proof.timestamp, PROOF_ACK_WAIT)
        accepted = node.proofs.last_accepted(ident.key.public) >= proof.timestamp
        return SendProofResult(status="OK", timestamp=proof.timestamp, accepted=accepted,
                               accepted_by=own.accepted_by if accepted else "",
                               refused="" if accepted else own.refused_reason)

    # --- methods the wallet and the tools need -------------------------------------------------

    async def get_height(self, _: NoParams) -> HeightResult:
        return HeightResult(height=self.node.height, hash=self.node.state.tip_hash.hex())

    async def get_staking_requirement(self, _: NoParams) -> StakingRequirementResult:
        return StakingRequirementResult(staking_requirement=self.node.params.staking_requirement,
                                        height=self.node.height)

    async def get_block(self, p: GetBlockParams) -> BlockResult:
        if (p.height is None) == (p.hash is None):
            raise RpcError(E.INVALID_PARAMS, "Invalid params: give exactly one of height and hash")
        node = self.node
        height = p.height
        if p.hash is not None:
            block = await self.writer.call(node.block_by_hash, _hex32("hash", p.hash))
            if block is None:
                since = f" {searched(node)} ({missing_history(node)})" if searched(node) else ""
                raise RpcError(E.NOT_FOUND, f"no such block{since}")
            if await self.writer.call(node.main_chain_hash, block.header.height) != block_hash(block.header):
                return block_result(block, None, node)  # undone by a reorganisation
            height = block.header.height
        assert height is not None
        if not node.holds(height):
            raise RpcError(E.NOT_FOUND, f"block {height} is not on this node: {missing_history(node)}")
        if height <= node.history_start and (height == 0 or node.history_start > 1):
            # genesis, a backfilled block or the snapshot's: no undo record
            first = await self.writer.call(node.block_at, height)
            assert first is not None
            return block_result(first, None, node)
        found = await self.writer.call(node.block_and_undo, height)
        if found is None:
            raise RpcError(E.NOT_FOUND, "no such block on the main chain")
        return block_result(found[0], found[1], node)

    async def get_transaction(self, p: TxidParams) -> TransactionResult:
        tid = _hex32("txid", p.txid)
        entry = self.node.pool.entries.get(tid)
        if entry is not None:
            return TransactionResult(txid=p.txid, height=None, in_pool=True, kind=tx_kind(entry.tx),
                                     tx_hex=encode(entry.tx).hex())
        found = await self.writer.call(self.node.transaction, tid)
        if found is None:
            where = f" (blocks {searched(self.node)}: {missing_history(self.node)})" if searched(self.node) else ""
            raise RpcError(E.NOT_FOUND, f"transaction {p.txid} is neither in the chain{where} nor in the mempool")
        height, tx = found
        return TransactionResult(txid=p.txid, height=height, in_pool=False, kind=tx_kind(tx),
                                 tx_hex=encode(tx).hex())

    async def send_raw_transaction(self, p: RawTxParams) -> SendTxResult:
        try:
            raw = bytes.fromhex(p.tx_hex)
        except ValueError:
            raise RpcError(E.INVALID_PARAMS, "Invalid params: tx_hex: must be hex") from None
        try:
            tx = decode(raw, Transaction)
            tid = self.node.submit_transaction(tx, self.now())
        except DecodeError as err:
            raise RpcError(E.TX_REJECTED, f"transaction rejected: {err.reason}") from None
        except SnodeError as err:
            raise RpcError(E.TX_REJECTED, f"transaction rejected: {err.reason}") from None
        return SendTxResult(txid=tid.hex())

    async def get_outputs(self, p: AddressParams) -> OutputsResult:
        owner = self._address("address", p.address)
        outputs = [
            OutputEntry(txid=key[:32].hex(), index=int.from_bytes(key[32:], "big"), amount=u.amount,
                        unlock_height=u.unlock_height)
            for key, u in self.node.outputs_of(owner)
        ]
        return OutputsResult(height=self.node.height, outputs=outputs)

    async def get_locked_stakes(self, p: AddressParams) -> LockedStakesResult:
        """The address's stakes on nodes (staked or unlocking), then the stakes deregistrations
        returned to it that are still locked."""
        owner = self._address("address", p.address)
        node = self.node
        height = node.height
        stakes = [stake for sn in node.state.service_nodes.values()
                  if (stake := _stake_on(sn, owner)) is not None]
        for key, utxo in node.outputs_of(owner):
            if utxo.unlock_height <= height + 1:
                continue  # spendable in the next block: not locked
            found = await self.writer.call(node.transaction, key[:32])
            payload = found[1].payload if found is not None else None
            if isinstance(payload, StateChange) and payload.kind == sn_rules.StateChangeKind.DEREGISTER:
                stakes.append(LockedStake(
                    service_node_pubkey=payload.sn_pubkey.hex(), amount=utxo.amount,
                    state="deregistered", unlock_height=utxo.unlock_height,
                    reason=sn_rules.Reason(payload.reason).label,
                    output=f"{key[:32].hex()}:{int.from_bytes(key[32:], 'big')}",
                ))
        return LockedStakesResult(height=height, stakes=stakes)

    async def get_service_node_rewards(self, p: ServiceNodeRewardsParams) -> ServiceNodeRewardsResult:
        """The rewards a registered node paid its operator and contributors between two heights,
        read back from the chain: each from its block's undo record (the node as the block found
        it, so the split is recomputed and checked against the coinbase), one step back per
        change of the node's reward height."""
        pubkey = _hex32("service_node_pubkey", p.service_node_pubkey)
        state = self.node.state
        sn = state.service_nodes.get(pubkey)
        if sn is None:
            raise RpcError(E.NOT_FOUND, f"get_service_node_rewards: {p.service_node_pubkey} is not a "
                                        f"registered service node at height {state.height}")
        top = state.height if p.to_height is None else min(p.to_height, state.height)
        if p.from_height > top:
            raise RpcError(E.INVALID_PARAMS, f"Invalid params: from_height {p.from_height} is above "
                                             f"to_height {top}")
        paid, complete = await self.writer.call(self._rewards_paid, sn, p.from_height, top)
        prefix = self.node.params.address_prefix
        rewards = [RewardPaid(height=h, amount=sum(a for _, a in split),
                              shares=[RewardShare(address=cached_address(prefix, o), amount=a) for o, a in split])
                   for h, split in reversed(paid)]
        totals: dict[bytes, int] = {}
        for _, split in paid:
            for owner, amount in split:
                totals[owner] = totals.get(owner, 0) + amount
        return ServiceNodeRewardsResult(
            service_node_pubkey=pubkey.hex(), from_height=p.from_height, to_height=top, rewards=rewards,
            total=sum(totals.values()), complete=complete,
            totals=[RewardShare(address=cached_address(prefix, o), amount=a) for o, a in totals.items()])

    def _rewards_paid(self, sn: ServiceNode, low: int, high: int) -> tuple[list[Paid], bool]:
        """(height, [(owner, amount)]) of each reward of `sn` from `high` down to `low`, newest
        first, and whether that is all of them (store thread). The node's reward height moves at
        each reward, and at an activation or recommission (which pays nothing: the node was not
        active before that block); its undo record holds the height before."""
        node, params = self.node, self.node.params
        paid: list[Paid] = []
        height, steps = sn.last_reward_height, 0
        while height >= max(low, 1):
            if height < node.undo_start:
                return paid, False  # below the snapshot this node started from: not here
            steps += 1
            found = node.block_and_undo(height)
            before = dict(found[1].service_nodes).get(sn.pubkey, sn) if found is not None else sn
            if found is None or before is sn or (before is not None and before.last_reward_height >= height):
                raise RpcError(E.INTERNAL_ERROR, "get_service_node_rewards: the chain changed during the "
                                                 "call: ask again")
            if before is None:
                break  # registered by this block
            if before.active and height <= high:
                split = sn_rules.reward_split(before, params.block_reward)
                outputs = [(o.owner, o.amount) for o in found[0].transactions[0].outputs[:len(split)]]
                if outputs != split:
                    raise RpcError(E.INTERNAL_ERROR, f"get_service_node_rewards: the coinbase of block {height} "
                                                     "does not pay this node's split: the chain changed during "
                                                     "the call: ask again")
                if len(paid) == self.limits.max_rewards_listed:
                    return paid, False
                paid.append((height, split))
            if steps == self.limits.max_reward_steps and before.last_reward_height >= max(low, 1):
                return paid, False
            height, sn = before.last_reward_height, before
        return paid, True

    async def get_mempool(self, _: NoParams) -> MempoolResult:
        entries = sorted(self.node.pool.entries.values(), key=lambda e: e.arrival)
        return MempoolResult(transactions=[
            MempoolEntry(txid=e.txid.hex(), size=e.size, fee=e.fee, kind=tx_kind(e.tx),
                         spends=[f"{i.txid.hex()}:{i.index}" for i in e.tx.inputs])
            for e in entries
        ])

    async def get_peers(self, _: NoParams) -> PeersResult:
        if self.peers is None:
            return PeersResult(peers=[], bans=[])
        # The peer manager (net) lists plain dicts; checked into the contract's records here.
        return PeersResult(peers=msgspec.convert(self.peers.peer_list(), list[PeerInfo]),
                           bans=msgspec.convert(self.peers.ban_list(), list[BanInfo]))

    async def add_peer(self, p: AddPeerParams) -> StatusResult:
        if self.peers is None:
            raise RpcError(E.MISC_ERROR, "add_peer: this daemon has no P2P layer")
        if ip_endpoint(p.address) is None:
            raise RpcError(E.INVALID_PARAMS, f"Invalid params: address: '{p.address}' is not <ip>:<port>")
        self.peers.add_peer(p.address)
        return _OK

    async def stop_daemon(self, _: NoParams) -> StatusResult:
        self.request_stop()
        return _OK

    # --- regtest -------------------------------------------------------------------------------

    async def generate_blocks(self, p: GenerateBlocksParams) -> GenerateBlocksResult:
        node = self.node
        if not node.params.generate_on_demand or node.producer_key is None:
            raise _regtest_only("generate_blocks")
        ahead = node.state.timestamp - self.now()
        if ahead > MAX_FUTURE_BLOCK_TIME:  # a block can't be older than its parent: say how out
            raise RpcError(E.MISC_ERROR, (
                f"the tip's timestamp is {ahead} s ahead of this node's clock (made under a mock "
                f"time) and blocks more than {MAX_FUTURE_BLOCK_TIME} s ahead are refused; "
                f"set_mock_time to {node.state.timestamp - MAX_FUTURE_BLOCK_TIME} or later to go on"))
        hashes = []
        for _ in range(p.blocks):
            block = await self.writer.produce_block()
            hashes.append(block_hash(block.header).hex())
        return GenerateBlocksResult(blocks=hashes, height=node.height)

    async def set_mock_time(self, p: SetMockTimeParams) -> MockTimeResult:
        if not self.node.params.generate_on_demand or not isinstance(self.clock, MockableClock):
            raise _regtest_only("set_mock_time")
        self.clock.set_mock(p.timestamp)
        return MockTimeResult(status="OK", timestamp=p.timestamp)


def _stake_on(sn: ServiceNode, owner: bytes) -> LockedStake | None:
    """`owner`'s stake on `sn` as get_locked_stakes lists it; None when it has none."""
    amount = sum(c.amount for c in sn.contributors if c.owner == owner)
    if amount <= 0:
        return None
    unlocking = bool(sn.requested_unlock_height)
    return LockedStake(
        service_node_pubkey=sn.pubkey.hex(), amount=amount,
        state="unlocking" if unlocking else "staked",
        unlock_height=sn.requested_unlock_height if unlocking else None, leaves_at=sn.leaves_at,
    )


def _regtest_only(method: str) -> RpcError:
    return RpcError(E.REGTEST_ONLY, f"{method} is only available on regtest (--regtest)")


def _producer_name(producer: bytes, height: int, node: NodeView) -> str:
    """`genesis`, `authority`, or the producing service node's key."""
    if height == 0:
        return "genesis"
    return "authority" if producer in node.consensus.authorities else producer.hex()


def block_result(block: Block, undo: Undo | None, node: NodeView) -> BlockResult:
    """A block as tools show it: who produced it, in which round, with whose signatures
    (named by its undo record, which keeps the round's validators)."""
    h = block.header
    validators = undo.round_validators if undo is not None else ()
    signed = [validators[i].hex() for i in signer_indexes(block.validator_bitset) if i < len(validators)]
    return BlockResult(
        hash=block_hash(h).hex(), height=h.height, timestamp=h.timestamp,
        prev_hash=h.prev_hash.hex(),
        producer=_producer_name(h.producer, h.height, node),
        tx_ids=[txid(tx).hex() for tx in block.transactions],
        block_hex=encode(block).hex(), producer_key=h.producer.hex(), round=h.round,
        validators=signed, validator_count=len(validators),
        checkpointed=undo is not None and h.height <= last_checkpoint(node.state),
        checkpoint=h.checkpoint.height if h.checkpoint is not None else None,
    )
