"""Validate and apply a block: apply_block(state, block, consensus) -> (new state, undo record).

Reads like the rule book, one step each (`apply_block_encoded`):

1. the header: height, parent, time, and who may produce it (`core.pulse`: the authority while
   the network is small or as the backstop, else the leader of the round it claims);
2. the body: size, transaction root;
3. the signers: the producer's signature and, for a service-node block, its validators'
   (`pulse.validator_checks`);
4. the stake returns of the nodes whose exit is due (`core.stake_exit`), right after the
   coinbase, then the transactions, each by its kind's rule (`core.tx_rules`);
5. the reward: the coinbase pays the next payable node and the fees to the producer;
6. the checkpoint the block carries, if any (`core.finality`);
7. the quorums of the new height: the obligations quorum, and at checkpoint heights the
   checkpoint quorum;
8. every collected signature verified in one batch (the shell may spread it over processes),
   then the new state and its undo record;
9. from fork v2, the state root the header carries: the root of the new state
   (`core.state_root`), kept incrementally from the parent's checksum.

Nothing is mutated: the caller's state stays valid whatever happens. One encoding of each part
of the block (`EncodedBlock`) serves the size rule, the ids, the signing hashes and the store:
a speed-up measured on sync, kept around the rules rather than inside them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import immutables
import msgspec

from snode.core import service_nodes as sn_rules
from snode.core.blocks import (
    Block,
    BlockHeader,
    encode_block_from_parts,
    header_state_root,
    producer_message,
    tx_root,
)
from snode.core.crypto import hash32, verify
from snode.core.encoding import encode
from snode.core.errors import BlockFromFuture, InvalidBlock, InvalidTransaction
from snode.core.finality import check_checkpoint_height, checkpoint_checks, checkpoint_quorum
from snode.core.genesis import Consensus
from snode.core.pulse import RoundQuorum, check_block_producer, validator_checks
from snode.core.quorums import obligations_quorum_from_active
from snode.core.sigchecks import BatchVerifier, SigCheck, run_checks, verify_serially
from snode.core.stake_exit import stake_returns
from snode.core.state import (
    ChainState,
    CheckpointSlot,
    Quorum,
    RegistryIndex,
    ServiceNode,
    Undo,
    last_checkpoint,
    new_utxo,
    registry_index,
    updated_index,
    with_index,
)
from snode.core.state_root import after_block, after_block_with_root, current_checksum, state_checksum, with_checksum
from snode.core.transactions import (
    Coinbase,
    Transaction,
    TxOut,
    check_stateless,
    outpoint_key,
    txid,
)
from snode.core.tx_rules import Working, apply_one, apply_transaction, check_transaction, check_version
from snode.params import MAX_BLOCK_BYTES, MAX_FUTURE_BLOCK_TIME, STATE_CHANGE_WINDOW

__all__ = [  # what other modules take from here; the transaction rules live in tx_rules
    "AppliedBlock", "BatchVerifier", "EncodedBlock", "SigCheck", "apply_block", "apply_block_encoded",
    "apply_block_parts", "after_stake_returns", "apply_transaction", "check_block_size",
    "check_block_stateless", "check_block_version", "check_header", "check_not_future", "check_state_root",
    "check_transaction",
    "coinbase_outputs", "fee_recipient", "make_coinbase", "verify_serially",
]

CHECKPOINT_WAIT = 4
"""Checkpoint intervals a checkpoint height waits for a block to carry its checkpoint."""


class EncodedBlock(NamedTuple):
    """One encoding of each part of a block, computed once."""

    header: bytes
    txs: list[bytes]
    data: bytes
    """`encode(block)`."""
    ids: list[bytes]
    """`txid` of each transaction, in block order."""
    hash: bytes
    """The block hash."""


class AppliedBlock(NamedTuple):
    """What `apply_block_encoded` returns: apply_block's (state, undo), and the encodings it
    computed on the way, for the store (so that it encodes and hashes nothing again)."""

    state: ChainState
    undo: Undo
    encoded: bytes
    """`encode(block)`."""
    txids: list[bytes]
    """`txid` of each transaction, in block order."""


# --- 1. the header ------------------------------------------------------------------------

def check_header(state: ChainState, block: Block, consensus: Consensus, now: int | None) -> RoundQuorum | None:
    """Header rules that need only the parent state. Returns the round's quorum of a
    service-node block (whose validators must have signed), None for an authority block."""
    h = block.header
    check_block_version(h, consensus)
    if h.height != state.height + 1:
        raise InvalidBlock(f"block height {h.height} does not follow the tip at {state.height}")
    if h.prev_hash != state.tip_hash:
        raise InvalidBlock("block does not build on the current tip")
    if h.timestamp < state.timestamp:
        raise InvalidBlock("block timestamp is before its parent's")
    check_not_future(h, now)
    quorum = check_block_producer(state, h, consensus)
    if quorum is None and (block.validator_bitset or block.validator_signatures):
        # The block hash does not cover them: in an authority block they could only be padding
        # that changes the block's bytes but not its id.
        raise InvalidBlock("an authority block carries no validator signatures")
    if not block.transactions or not isinstance(block.transactions[0].payload, Coinbase):
        raise InvalidBlock("block does not start with a coinbase")
    return quorum


def check_block_version(h: BlockHeader, consensus: Consensus) -> None:
    """A block carries the header version its height's fork names, and no other."""
    rules = consensus.params.rules_at(h.height)
    if h.version != rules.block_version:
        fork = consensus.params.fork_of(rules)
        since = f" from height {fork.height}" if fork is not None else ""
        raise InvalidBlock(
            f"block {h.height} has version {h.version}; this chain is on fork {rules.name}{since}, "
            f"whose blocks are version {rules.block_version}"
        )


def check_block_stateless(block: Block, consensus: Consensus) -> None:
    """What can be checked of a block without its parent's state: its transaction root and its
    producer's signature. Lets a node refuse a forged block that does not build on its tip
    instead of keeping it to wait for a parent (whether that producer may produce it needs the
    parent's state)."""
    header = block.header
    if tx_root([txid(tx) for tx in block.transactions]) != header.tx_root:
        raise InvalidBlock("block transaction root does not match its transactions")
    message = producer_message(consensus.params.network_id, hash32(encode(header)))
    if not verify(header.producer, message, block.producer_signature):
        raise InvalidBlock(f"block {header.height} has a bad producer signature")


# --- 2. the body --------------------------------------------------------------------------

def _encode(block: Block) -> EncodedBlock:
    """Each part encoded once; the size and transaction-root rules."""
    header = encode(block.header)
    txs = [encode(tx) for tx in block.transactions]
    data = encode_block_from_parts(block, header, txs)
    check_block_size(data)
    ids = [hash32(raw) for raw in txs]
    if tx_root(ids) != block.header.tx_root:
        raise InvalidBlock("block transaction root does not match its transactions")
    return EncodedBlock(header, txs, data, ids, hash32(header))


def check_block_size(data: bytes) -> None:
    """The size rule, on the block's encoding (`encode(block)`)."""
    if len(data) > MAX_BLOCK_BYTES:
        raise InvalidBlock(f"block is {len(data)} bytes; the limit is {MAX_BLOCK_BYTES}")


def check_not_future(h: BlockHeader, now: int | None) -> None:
    """The one rule on the receiving node's clock (`now`; None: not checked)."""
    if now is not None and h.timestamp > now + MAX_FUTURE_BLOCK_TIME:
        raise BlockFromFuture(
            f"block {h.height} timestamp is {h.timestamp - now} s ahead of this node's clock"
        )


# --- 3. the signers -----------------------------------------------------------------------

def _check_signers(
    w: Working, block: Block, enc: EncodedBlock, quorum: RoundQuorum | None, consensus: Consensus,
    template: bool,
) -> None:
    """The producer's signature, and a service-node block's validators' (a template, which a
    validator checks before it signs, carries none yet)."""
    h = block.header
    network_id = consensus.params.network_id
    w.checks.append(SigCheck(h.producer, producer_message(network_id, enc.hash), block.producer_signature,
                             f"block {h.height}"))
    if quorum is None:
        return
    if template:
        if block.validator_bitset or block.validator_signatures:
            raise InvalidBlock(f"template of block {h.height} already carries validator signatures")
        return
    w.checks += validator_checks(network_id, h.height, enc.hash, quorum, block.validator_bitset,
                                 block.validator_signatures)


# --- 4. the stake returns and the transactions ---------------------------------------------

def _return_stakes(w: Working, state: ChainState, block: Block, enc: EncodedBlock, consensus: Consensus) -> int:
    """The nodes whose exit is due leave, each by the stake return that must follow the coinbase
    (in exit order); returns the position of the first ordinary transaction."""
    height = block.header.height
    txs = block.transactions
    expected = stake_returns(state, height)
    for position, want in enumerate(expected, start=1):
        if position >= len(txs) or txs[position] != want:
            pubkey = want.payload.sn_pubkey.hex()[:16]  # type: ignore[union-attr]  # a StakeReturn
            raise InvalidBlock(
                f"block {height} does not return the stakes of service node {pubkey}, whose exit "
                f"is due, as transaction {position}"
            )
        _remove_node(w, want, enc.ids[position], height, consensus)
    return 1 + len(expected)


def _remove_node(w: Working, returned: Transaction, tx_id: bytes, height: int, consensus: Consensus) -> None:
    unlock = height + consensus.params.unlock_confirmations
    for i, out in enumerate(returned.outputs):
        w.utxos.set(outpoint_key(tx_id, i), new_utxo(out.owner, out.amount, unlock))
    w.service_nodes.delete(returned.payload.sn_pubkey)  # type: ignore[union-attr]  # a StakeReturn


def after_stake_returns(state: ChainState, consensus: Consensus) -> tuple[ChainState, list[Transaction]]:
    """The state a block producer picks transactions on: `state` after the stake returns that
    the next block must carry (and those returns), so that no transaction for a leaving node is
    chosen."""
    height = state.height + 1
    returns = stake_returns(state, height)
    if not returns:
        return state, returns
    state = with_index(state)
    w = Working(state)
    for tx in returns:
        _remove_node(w, tx, txid(tx), height, consensus)
    service_nodes = w.service_nodes.finish()
    index = updated_index(registry_index(state), service_nodes, w.service_nodes.old)
    return replace(state, utxos=w.utxos.finish(), service_nodes=service_nodes, index=index), returns


def _apply_transactions(
    w: Working, block: Block, enc: EncodedBlock, consensus: Consensus, first: int,
) -> int:
    """Every transaction from position `first` on, by its kind's rule; the fees they pay."""
    header = block.header
    fees = 0
    for position in range(first, len(enc.ids)):
        try:
            fees += apply_one(w, block.transactions[position], enc.ids[position], header.height,
                              header.timestamp, consensus, enc.txs[position])
        except InvalidTransaction as err:
            raise InvalidBlock(f"block {header.height} transaction {position}: {err.reason}") from None
    return fees


# --- 5. the reward ------------------------------------------------------------------------

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
    version = consensus.params.rules_at(state.height + 1).tx_version
    return Transaction(version, (), outputs, Coinbase(state.height + 1), ())


def _pay_reward(
    w: Working, state: ChainState, block: Block, enc: EncodedBlock, fees: int, consensus: Consensus,
) -> None:
    """The coinbase pays exactly the reward and the fees; the node paid goes to the back of the
    reward queue."""
    header = block.header
    coinbase = block.transactions[0]
    check_stateless(coinbase, len(enc.txs[0]))
    try:
        check_version(coinbase, consensus.params.rules_at(header.height))
    except InvalidTransaction as err:
        raise InvalidBlock(f"block {header.height} coinbase: {err.reason}") from None
    expected, winner = coinbase_outputs(state, header.producer, fees, consensus)
    if coinbase.payload != Coinbase(header.height) or coinbase.outputs != expected:
        raise InvalidBlock("block coinbase does not pay the expected reward and fees")
    unlock = header.height + consensus.params.unlock_confirmations
    for i, out in enumerate(coinbase.outputs):
        w.utxos.set(outpoint_key(enc.ids[0], i), new_utxo(out.owner, out.amount, unlock))
    paid = w.service_nodes.get(winner) if winner is not None else None
    if paid is not None:  # None: deregistered by this very block, after the parent chose it
        w.service_nodes.set(paid.pubkey, msgspec.structs.replace(paid, last_reward_height=header.height))


# --- 6. the checkpoint carried ------------------------------------------------------------

def _carry_checkpoint(w: Working, state: ChainState, header: BlockHeader, consensus: Consensus) -> None:
    """A checkpoint of an earlier height this chain waits for, signed by that height's
    checkpoint quorum: the block at that height is checkpointed."""
    checkpoint = header.checkpoint
    if checkpoint is None:
        return
    check_checkpoint_height(checkpoint.height, header.height, last_checkpoint(state), consensus.params)
    slot = w.checkpoints.get(checkpoint.height)
    if slot is None or slot.carried:
        raise InvalidBlock(
            f"block {header.height} carries a checkpoint of height {checkpoint.height}, which "
            "this chain does not wait for"
        )
    quorum = Quorum(height=slot.height, members=slot.members, needed=slot.needed)
    w.checks += checkpoint_checks(checkpoint, quorum, slot.block_hash, consensus.params.network_id)
    w.checkpoints.set(checkpoint.height, msgspec.structs.replace(slot, carried=True))


# --- 7. the quorums of the new height -----------------------------------------------------

def _record_quorums(
    w: Working, state: ChainState, index: RegistryIndex, block_hash: bytes, height: int,
    consensus: Consensus,
) -> None:
    """The obligations quorum of this height (the oldest one leaves), and at a checkpoint height
    the checkpoint quorum; checkpoint heights nobody can carry any more are forgotten."""
    params = consensus.params
    obligations, slot = height_quorums(index, block_hash, height, consensus)
    w.quorums.set(height, obligations)
    if w.quorums.get(height - STATE_CHANGE_WINDOW) is not None:
        w.quorums.delete(height - STATE_CHANGE_WINDOW)
    if slot is not None:
        w.checkpoints.set(height, slot)
    heights = set(state.checkpoints.keys()) | set(w.checkpoints.old)
    _prune_checkpoints(w, heights, height, params.checkpoint_interval * CHECKPOINT_WAIT)


def height_quorums(
    index: RegistryIndex, block_hash: bytes, height: int, consensus: Consensus,
) -> tuple[Quorum, CheckpointSlot | None]:
    """The obligations quorum and the checkpoint slot (None: not a checkpoint height) the block
    at `height` of hash `block_hash` records, `index` the registry after it: what its hash
    draws, so a snapshot's own entries can be checked against them (`core.snapshot.check_own`)."""
    obligations = obligations_quorum_from_active(
        index.active_keys, block_hash, height, consensus.authorities, consensus.params
    )
    quorum = checkpoint_quorum(index.active_keys, block_hash, height, consensus.params)
    slot = None if quorum is None else CheckpointSlot(height, block_hash, quorum.members, quorum.needed, False)
    return obligations, slot


def _prune_checkpoints(w: Working, heights: set[int], height: int, wait: int) -> None:
    """Keep the two highest carried checkpoint heights (finality needs them) and the pending
    ones above them that are still young enough to be carried."""
    slots = {h: w.checkpoints.get(h) for h in heights}
    carried = sorted((h for h, s in slots.items() if s is not None and s.carried), reverse=True)
    last = carried[0] if carried else 0
    for h, slot in slots.items():
        if slot is None:
            continue
        too_late = not slot.carried and (h <= last or h < height - wait)
        if too_late or (slot.carried and h not in carried[:2]):
            w.checkpoints.delete(h)


# --- the block ----------------------------------------------------------------------------

def apply_block(
    state: ChainState, block: Block, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None, template: bool = False,
) -> tuple[ChainState, Undo]:
    """Validate `block` on top of `state`; the new state and the record that undoes it.

    Raises InvalidBlock (or InvalidTransaction) with the reason; `state` is never changed.
    `now` is the receiving node's clock, for the future-timestamp rule (None: not checked).
    `template`: a round leader's block before its validators signed it (every other rule holds).
    """
    applied = apply_block_encoded(state, block, consensus, verifier=verifier, now=now, template=template)
    return applied.state, applied.undo


def apply_block_encoded(
    state: ChainState, block: Block, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None, template: bool = False,
) -> AppliedBlock:
    """`apply_block`, also returning the block's encoding and its transaction ids."""
    return apply_block_parts(state, block, consensus, verifier, now, template)[0]


def apply_block_parts(
    state: ChainState, block: Block, consensus: Consensus, verifier: BatchVerifier,
    now: int | None, template: bool, *, check_root: bool = True,
) -> tuple[AppliedBlock, EncodedBlock, RoundQuorum | None]:
    """`apply_block_encoded`, with the encoding of each part of the block and its round's quorum
    (None: an authority block), which `core.final_block` keeps for the signed block.
    `check_root` False: the header's state root is not compared (a producer finding it)."""
    quorum = check_header(state, block, consensus, now)
    state = with_index(state)
    enc = _encode(block)
    w = Working(state)
    _check_signers(w, block, enc, quorum, consensus, template)
    first = _return_stakes(w, state, block, enc, consensus)
    fees = _apply_transactions(w, block, enc, consensus, first)
    _pay_reward(w, state, block, enc, fees, consensus)
    _carry_checkpoint(w, state, block.header, consensus)
    service_nodes = w.service_nodes.finish()
    index = updated_index(registry_index(state), service_nodes, w.service_nodes.old)
    _record_quorums(w, state, index, enc.hash, block.header.height, consensus)
    run_checks(w.checks, verifier, InvalidBlock)
    applied = _applied(state, block, enc, w, service_nodes, index, quorum, consensus)
    return _with_state_root(state, applied, block.header, consensus, check_root), enc, quorum


def _applied(
    state: ChainState, block: Block, enc: EncodedBlock, w: Working,
    service_nodes: immutables.Map[bytes, ServiceNode], index: RegistryIndex,
    quorum: RoundQuorum | None, consensus: Consensus,
) -> AppliedBlock:
    """The new state and the undo record that takes it back to `state`."""
    header = block.header
    undo = Undo(
        height=header.height, prev_tip_hash=state.tip_hash, prev_timestamp=state.timestamp,
        prev_issued=state.issued, utxos=w.utxos.changes(), service_nodes=w.service_nodes.changes(),
        quorums=w.quorums.changes(), checkpoints=w.checkpoints.changes(),
        round_validators=quorum.validators if quorum is not None else (),
    )
    new_state = ChainState(
        height=header.height, tip_hash=enc.hash, timestamp=header.timestamp,
        issued=state.issued + consensus.params.block_reward, utxos=w.utxos.finish(fold=True),
        service_nodes=service_nodes, quorums=w.quorums.finish(), checkpoints=w.checkpoints.finish(),
        index=index,
    )
    return AppliedBlock(new_state, undo, enc.data, enc.ids)


# --- 9. the state root --------------------------------------------------------------------

def _with_state_root(
    state: ChainState, applied: AppliedBlock, header: BlockHeader, consensus: Consensus, check_root: bool,
) -> AppliedBlock:
    """From fork v2 (or once the parent carries a checksum): the new state carries its
    checksum, updated from the block's undo record, and the header's state root must be the
    new state's. The first block that needs a checksum on a parent without one computes the
    parent's from scratch, once (O(entries): the fork's activation, or a state loaded without
    one)."""
    rules = consensus.params.rules_at(header.height)
    parent = current_checksum(state)
    if parent is None and not rules.state_root:
        return applied
    parent = parent if parent is not None else state_checksum(state)
    if not rules.state_root:
        return applied._replace(state=with_checksum(applied.state, after_block(parent, applied.state, applied.undo)))
    checksum, root = after_block_with_root(consensus.params.network_id, parent, applied.state, applied.undo)
    if check_root:
        check_state_root(header, root)
    return applied._replace(state=with_checksum(applied.state, checksum))


def check_state_root(header: BlockHeader, root: bytes) -> None:
    """The header carries `root`, the root this node computed for the state after it."""
    carried = header_state_root(header)
    if carried != root:
        shown = carried.hex() if carried is not None else "none"
        raise InvalidBlock(
            f"block {header.height} has state root {shown}; this node computes {root.hex()} for the "
            "state after it"
        )
