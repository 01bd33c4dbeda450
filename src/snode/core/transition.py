"""Validate and apply a block: apply_block(state, block, consensus) -> (new state, undo record).

Reads like the rule book: check the header, check the producer, apply each transaction to a
tracked copy of the state, check the coinbase, record the quorum of the new height, then verify
every collected signature in one batch (the shell may spread that batch over threads). Nothing is
mutated: the caller's state stays valid whatever happens.

The reward winner and the quorum come from the registry index (`state.RegistryIndex`), which
each block updates for the nodes it touched: no block scans or sorts the whole registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

import msgspec

from snode.core import service_nodes as sn_rules
from snode.core.blocks import (
    BLOCK_VERSION, Block, block_hash, encode_block_from_parts, producer_message, tx_root,
)
from snode.core.crypto import hash32, verify
from snode.core.encoding import encode
from snode.core.errors import BadSignature, BlockFromFuture, InvalidBlock, InvalidStateChange, InvalidTransaction
from snode.core.genesis import Consensus
from snode.core.quorums import obligations_quorum_from_active
from snode.core.state import (
    ChainState, Quorum, ServiceNode, TrackedMap, Undo, UtxoEntry, current_index, new_utxo,
    registry_index, updated_index, with_index,
)
from snode.core.transactions import (
    TX_VERSION, Coinbase, Registration, Stake, StateChange, Transaction, TxOut,
    check_stateless, outpoint_key, registration_hash, signing_hash_of_encoded, state_change_hash,
    txid,
)
from snode.core.units import format_coins
from snode.params import MAX_BLOCK_BYTES, MAX_FUTURE_BLOCK_TIME, STATE_CHANGE_WINDOW


class SigCheck(NamedTuple):
    """One signature to verify, and what to blame if it is bad."""

    public: bytes
    message: bytes
    signature: bytes
    what: str


BatchVerifier = Callable[[Sequence[SigCheck]], int]
"""Returns the index of the first bad signature, or -1 when all are good."""


def verify_serially(checks: Sequence[SigCheck]) -> int:
    """The default BatchVerifier: one core, in order."""
    for i, check in enumerate(checks):
        if not verify(check.public, check.message, check.signature):
            return i
    return -1


class _Working:
    """The state under construction while a block or a transaction is applied."""

    __slots__ = ("utxos", "service_nodes", "quorums", "checks")

    def __init__(self, state: ChainState) -> None:
        self.utxos: TrackedMap[bytes, UtxoEntry] = TrackedMap(state.utxos)
        self.service_nodes: TrackedMap[bytes, ServiceNode] = TrackedMap(state.service_nodes)
        self.quorums: TrackedMap[int, Quorum] = TrackedMap(state.quorums)
        self.checks: list[SigCheck] = []


def _run_checks(checks: Sequence[SigCheck], verifier: BatchVerifier, error: type[Exception]) -> None:
    bad = verifier(checks)
    if bad >= 0:
        raise error(f"{checks[bad].what} has a bad signature")


# --- transactions -------------------------------------------------------------------------

def _apply_transaction(
    w: _Working, tx: Transaction, tx_id: bytes, height: int, block_time: int, consensus: Consensus,
    encoded: bytes | None = None,
) -> int:
    """Apply one non-coinbase transaction to w at `height`; returns its fee. `encoded` is
    `encode(tx)` when the caller has it (one encoding serves size, id and signing hash)."""
    params = consensus.params
    if encoded is None:
        encoded = encode(tx)
    size = check_stateless(tx, len(encoded))
    payload = tx.payload
    short = tx_id.hex()[:16]
    if isinstance(payload, Coinbase):
        raise InvalidTransaction("a coinbase may only be the first transaction of a block")
    if isinstance(payload, StateChange):
        _apply_state_change(w, payload, height, consensus)
        return 0

    message = signing_hash_of_encoded(tx, encoded, params.network_id)
    total_in = 0
    owners = []
    for i, op in enumerate(tx.inputs):
        key = op.txid + op.index.to_bytes(2, "big")  # op.key(), inlined: the hottest loop
        entry = w.utxos.get(key)
        if entry is None:
            raise InvalidTransaction(
                f"transaction {short} spends output {op.txid.hex()[:16]}:{op.index}, which does "
                "not exist or is already spent"
            )
        if entry.unlock_height > height:
            raise InvalidTransaction(
                f"transaction {short} spends output {op.txid.hex()[:16]}:{op.index}, which is "
                f"locked until height {entry.unlock_height}"
            )
        w.checks.append(SigCheck(entry.owner, message, tx.signatures[i], f"transaction {short} input {i}"))
        total_in += entry.amount
        owners.append(entry.owner)
        w.utxos.delete(key)

    staked = 0
    if isinstance(payload, Registration):
        staked = _apply_registration(w, payload, owners, height, block_time, consensus)
    elif isinstance(payload, Stake):
        staked = _apply_stake(w, payload, owners, height)

    total_out = sum(o.amount for o in tx.outputs)
    fee = total_in - total_out - staked
    if fee < 0:
        raise InvalidTransaction(
            f"transaction {short} spends {format_coins(total_out + staked)} coins but its inputs "
            f"hold only {format_coins(total_in)}"
        )
    min_fee = params.fee_per_byte * size
    if fee < min_fee:
        raise InvalidTransaction(
            f"transaction {short} pays a fee of {format_coins(fee)} coins; at least "
            f"{format_coins(min_fee)} is needed for its {size} bytes"
        )
    unlock = height + params.unlock_confirmations
    for i, out in enumerate(tx.outputs):
        w.utxos.set(tx_id + i.to_bytes(2, "big"), new_utxo(out.owner, out.amount, unlock))
    return fee


def _single_owner(owners: list[bytes], who: str) -> bytes:
    if len(set(owners)) != 1:
        raise InvalidTransaction(f"all inputs of a {who} must belong to one address")
    return owners[0]


def _apply_registration(
    w: _Working, reg: Registration, owners: list[bytes], height: int, block_time: int,
    consensus: Consensus,
) -> int:
    params = consensus.params
    sn_rules.check_registration(
        reg, registered=w.service_nodes.get(reg.sn_pubkey) is not None, block_time=block_time,
        params=params,
    )
    operator = _single_owner(owners, "registration")
    if operator != reg.reservations[0].owner:
        raise InvalidTransaction("a registration must be paid by the operator address, the first one named")
    w.checks.append(SigCheck(
        reg.sn_pubkey,
        registration_hash(params.network_id, reg.fee_ppm, reg.reservations, reg.expiry, reg.sn_pubkey),
        reg.sn_signature,
        f"registration of service node {reg.sn_pubkey.hex()[:16]}",
    ))
    w.service_nodes.set(reg.sn_pubkey, sn_rules.new_service_node(reg, height, params))
    return reg.reservations[0].amount


def _apply_stake(w: _Working, stake: Stake, owners: list[bytes], height: int) -> int:
    staker = _single_owner(owners, "stake")
    node = w.service_nodes.get(stake.sn_pubkey)
    sn_rules.check_stake(node, staker, stake.amount, stake.sn_pubkey)
    assert node is not None
    w.service_nodes.set(stake.sn_pubkey, sn_rules.add_contribution(node, staker, stake.amount, height))
    return stake.amount


def _apply_state_change(w: _Working, sc: StateChange, height: int, consensus: Consensus) -> None:
    node = w.service_nodes.get(sc.sn_pubkey)
    if node is None:
        raise InvalidStateChange(f"service node {sc.sn_pubkey.hex()[:16]} is not registered")
    quorum = w.quorums.get(sc.quorum_height)
    if quorum is None or sc.quorum_height >= height:
        raise InvalidStateChange(
            f"state change cites the quorum of height {sc.quorum_height}, which is not one of "
            f"the last {STATE_CHANGE_WINDOW} heights"
        )
    if sc.quorum_height < node.last_state_change_height:
        raise InvalidStateChange("state change is older than the node's last change")
    voters = [v.voter for v in sc.votes]
    if len(set(voters)) != len(voters):
        raise InvalidStateChange("state change counts a voter twice")
    members = set(quorum.members)
    outsiders = [v for v in voters if v not in members]
    if outsiders:
        raise InvalidStateChange(
            f"state change has a vote from {outsiders[0].hex()[:16]}, not a member of the quorum"
        )
    if len(voters) < quorum.needed:
        raise InvalidStateChange(
            f"state change has {len(voters)} votes; {quorum.needed} are needed"
        )
    message = state_change_hash(
        consensus.params.network_id, sc.sn_pubkey, sc.kind, sc.reason, sc.quorum_height
    )
    for vote in sc.votes:
        w.checks.append(SigCheck(vote.voter, message, vote.signature, f"state change vote by {vote.voter.hex()[:16]}"))
    w.service_nodes.set(sc.sn_pubkey, sn_rules.apply_state_change(node, sc.kind, sc.reason, height))


# --- coinbase -----------------------------------------------------------------------------

def fee_recipient(state: ChainState, producer: bytes) -> bytes:
    """Who gets the fees: the operator of a producing SN, or the producing authority key."""
    node = state.service_nodes.get(producer)
    return node.operator if node is not None else producer


def coinbase_outputs(
    state: ChainState, producer: bytes, fees: int, consensus: Consensus
) -> tuple[tuple[TxOut, ...], bytes | None]:
    """The exact outputs of the coinbase of the block after `state`, and the SN it pays.

    The block reward goes to the next payable node in round-robin order, split by
    `service_nodes.reward_split`; with no payable node it goes to the fee recipient.
    """
    params = consensus.params
    height = state.height + 1
    winner = sn_rules.reward_winner_from_queue(
        registry_index(state).reward_queue, state.service_nodes, height, params
    )
    recipient = fee_recipient(state, producer)
    if winner is None:
        outputs = [(recipient, params.block_reward + fees)]
    else:
        outputs = sn_rules.reward_split(winner, params.block_reward)
        if fees:
            outputs.append((recipient, fees))
    return tuple(TxOut(o, a) for o, a in outputs if a > 0), (winner.pubkey if winner else None)


def make_coinbase(state: ChainState, producer: bytes, fees: int, consensus: Consensus) -> Transaction:
    """The coinbase transaction a producer puts first in the block after `state`."""
    outputs, _ = coinbase_outputs(state, producer, fees, consensus)
    return Transaction(TX_VERSION, (), outputs, Coinbase(state.height + 1), ())


# --- blocks -------------------------------------------------------------------------------

def check_header(state: ChainState, block: Block, consensus: Consensus, now: int | None) -> None:
    """Header rules that need only the parent state."""
    h = block.header
    if h.version != BLOCK_VERSION:
        raise InvalidBlock(f"unknown block version {h.version}")
    if h.height != state.height + 1:
        raise InvalidBlock(f"block height {h.height} does not follow the tip at {state.height}")
    if h.prev_hash != state.tip_hash:
        raise InvalidBlock("block does not build on the current tip")
    if h.timestamp < state.timestamp:
        raise InvalidBlock("block timestamp is before its parent's")
    if now is not None and h.timestamp > now + MAX_FUTURE_BLOCK_TIME:
        raise BlockFromFuture(
            f"block {h.height} timestamp is {h.timestamp - now} s ahead of this node's clock"
        )
    if h.producer not in consensus.authorities:
        # SN block production (leader + validator signatures) is a later issue; until then
        # only the genesis authority produces blocks.
        raise InvalidBlock("block producer is not a genesis authority")
    if block.validator_signatures:
        # The block hash does not cover them: in an authority block they could only be padding
        # that changes the block's bytes but not its id.
        raise InvalidBlock("an authority block carries no validator signatures")
    if not block.transactions or not isinstance(block.transactions[0].payload, Coinbase):
        raise InvalidBlock("block does not start with a coinbase")


def check_block_stateless(block: Block, consensus: Consensus) -> None:
    """What can be checked of a block without its parent's state: the producer is an
    authority, its signature verifies, and the transaction root matches. Lets a node refuse a
    forged block that does not build on its tip instead of keeping it to wait for a parent."""
    header = block.header
    if header.producer not in consensus.authorities:
        raise InvalidBlock("block producer is not a genesis authority")
    if tx_root([txid(tx) for tx in block.transactions]) != header.tx_root:
        raise InvalidBlock("block transaction root does not match its transactions")
    message = producer_message(consensus.params.network_id, block_hash(header))
    if not verify(header.producer, message, block.producer_signature):
        raise InvalidBlock(f"block {header.height} has a bad producer signature")


class AppliedBlock(NamedTuple):
    """What `apply_block_encoded` returns: apply_block's (state, undo), and the encodings it
    computed on the way, for the store (so that it encodes and hashes nothing again)."""

    state: ChainState
    undo: Undo
    encoded: bytes
    """`encode(block)`."""
    txids: list[bytes]
    """`txid` of each transaction, in block order."""


def apply_block(
    state: ChainState, block: Block, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None,
) -> tuple[ChainState, Undo]:
    """Validate `block` on top of `state`; the new state and the record that undoes it.

    Raises InvalidBlock (or InvalidTransaction) with the reason; `state` is never changed.
    `now` is the receiving node's clock, for the future-timestamp rule (None: not checked).
    """
    applied = apply_block_encoded(state, block, consensus, verifier=verifier, now=now)
    return applied.state, applied.undo


def apply_block_encoded(
    state: ChainState, block: Block, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None,
) -> AppliedBlock:
    """`apply_block`, also returning the block's encoding and its transaction ids."""
    params = consensus.params
    check_header(state, block, consensus, now)
    state = with_index(state)
    header = block.header
    # One encoding of each part serves the size rule, the ids, the signing hashes and the store.
    header_bytes = encode(header)
    tx_bytes = [encode(tx) for tx in block.transactions]
    encoded = encode_block_from_parts(block, header_bytes, tx_bytes)
    size = len(encoded)
    if size > MAX_BLOCK_BYTES:
        raise InvalidBlock(f"block is {size} bytes; the limit is {MAX_BLOCK_BYTES}")
    ids = [hash32(raw) for raw in tx_bytes]
    if tx_root(ids) != header.tx_root:
        raise InvalidBlock("block transaction root does not match its transactions")
    this_hash = hash32(header_bytes)

    w = _Working(state)
    w.checks.append(SigCheck(
        header.producer, producer_message(params.network_id, this_hash),
        block.producer_signature, f"block {header.height}",
    ))
    fees = 0
    for position in range(1, len(ids)):
        try:
            fees += _apply_transaction(
                w, block.transactions[position], ids[position], header.height, header.timestamp,
                consensus, tx_bytes[position],
            )
        except InvalidTransaction as err:
            raise InvalidBlock(f"block {header.height} transaction {position}: {err.reason}") from None

    coinbase = block.transactions[0]
    check_stateless(coinbase, len(tx_bytes[0]))
    expected, winner = coinbase_outputs(state, header.producer, fees, consensus)
    if coinbase.payload != Coinbase(header.height) or coinbase.outputs != expected:
        raise InvalidBlock("block coinbase does not pay the expected reward and fees")
    unlock = header.height + params.unlock_confirmations
    for i, out in enumerate(coinbase.outputs):
        w.utxos.set(outpoint_key(ids[0], i), new_utxo(out.owner, out.amount, unlock))
    if winner is not None:
        paid = w.service_nodes.get(winner)
        assert paid is not None
        w.service_nodes.set(winner, _paid(paid, header.height))

    service_nodes = w.service_nodes.finish()
    index = updated_index(registry_index(state), service_nodes, w.service_nodes.old)
    w.quorums.set(header.height, obligations_quorum_from_active(
        index.active_keys, this_hash, header.height, consensus.authorities, params
    ))
    if w.quorums.get(header.height - STATE_CHANGE_WINDOW) is not None:
        w.quorums.delete(header.height - STATE_CHANGE_WINDOW)

    _run_checks(w.checks, verifier, InvalidBlock)

    undo = Undo(
        height=header.height, prev_tip_hash=state.tip_hash, prev_timestamp=state.timestamp,
        prev_issued=state.issued, utxos=w.utxos.changes(), service_nodes=w.service_nodes.changes(),
        quorums=w.quorums.changes(),
    )
    new_state = ChainState(
        height=header.height, tip_hash=this_hash, timestamp=header.timestamp,
        issued=state.issued + params.block_reward, utxos=w.utxos.finish(),
        service_nodes=service_nodes, quorums=w.quorums.finish(), index=index,
    )
    return AppliedBlock(new_state, undo, encoded, ids)


def _paid(node: ServiceNode, height: int) -> ServiceNode:
    return msgspec.structs.replace(node, last_reward_height=height)


def apply_transaction(
    state: ChainState, tx: Transaction, consensus: Consensus, *, block_time: int,
    tx_id: bytes | None = None,
) -> tuple[ChainState, int, list[SigCheck]]:
    """Apply one transaction as if in the block after `state`, without checking signatures.

    Returns the state with its outputs and registry updated (height and tip unchanged), the fee,
    and the signature checks still to be made.
    """
    w = _Working(state)
    fee = _apply_transaction(
        w, tx, tx_id or txid(tx), state.height + 1, block_time, consensus
    )
    service_nodes = w.service_nodes.finish()
    index = current_index(state)
    if index is not None:
        index = updated_index(index, service_nodes, w.service_nodes.old)
    new_state = replace(
        state, utxos=w.utxos.finish(), service_nodes=service_nodes, index=index,
    )
    return new_state, fee, w.checks


def check_transaction(
    state: ChainState, tx: Transaction, consensus: Consensus, *, block_time: int,
    verifier: BatchVerifier = verify_serially,
) -> int:
    """Would `tx` be valid in the next block (at time block_time)? Returns its fee.

    The mempool's admission check: the same rules as in a block, against the tip.
    """
    _, fee, checks = apply_transaction(state, tx, consensus, block_time=block_time)
    _run_checks(checks, verifier, BadSignature)
    return fee
