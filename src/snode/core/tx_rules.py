"""The rules of one transaction inside a block: spend inputs, move coins, register, stake, change
a service node's state. Shared by the block rules (`transition`) and the mempool's admission
check (`apply_transaction`, `check_transaction`).

Each payload kind has its own rule, dispatched with `match` from the one table of kinds
(`transactions.Payload`); a kind without a rule fails the type check (`assert_never`).
Signature checks are collected as data (`SigCheck`) and verified by the caller in one batch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import assert_never

from snode.core import equivocation
from snode.core import service_nodes as sn_rules
from snode.core.encoding import encode
from snode.core.errors import BadSignature, InvalidStateChange, InvalidTransaction, WrongFork
from snode.core.genesis import Consensus
from snode.core.sigchecks import BatchVerifier, SigCheck, run_checks, verify_serially
from snode.core.stake_exit import check_unlock_request, returned_outputs
from snode.core.state import (
    ChainState,
    CheckpointSlot,
    Quorum,
    ServiceNode,
    TrackedMap,
    TrackedUtxos,
    current_index,
    new_utxo,
    updated_index,
)
from snode.core.transactions import (
    Coinbase,
    ProvenStateChange,
    Registration,
    Stake,
    StakeReturn,
    StateChange,
    Transaction,
    Transfer,
    TxOut,
    UnlockRequest,
    check_stateless,
    registration_hash,
    signing_hash_of_encoded,
    state_change_hash,
    txid,
)
from snode.core.units import format_coins
from snode.params import KNOWN_FORKS, STATE_CHANGE_WINDOW, ForkRules, NetworkParams


class Working:
    """The state under construction while a block or a transaction is applied: every map
    remembers the first old value of each key it changes (the undo record)."""

    __slots__ = ("utxos", "service_nodes", "quorums", "checkpoints", "checks")

    def __init__(self, state: ChainState) -> None:
        self.utxos = TrackedUtxos(state.utxos)
        self.service_nodes: TrackedMap[bytes, ServiceNode] = TrackedMap(state.service_nodes)
        self.quorums: TrackedMap[int, Quorum] = TrackedMap(state.quorums)
        self.checkpoints: TrackedMap[int, CheckpointSlot] = TrackedMap(state.checkpoints)
        self.checks: list[SigCheck] = []


def apply_one(
    w: Working, tx: Transaction, tx_id: bytes, height: int, block_time: int, consensus: Consensus,
    encoded: bytes | None = None, signed_for: ForkRules | None = None,
) -> int:
    """Apply one non-coinbase transaction to w at `height`; returns its fee. `encoded` is
    `encode(tx)` when the caller has it (one encoding serves size, id and signing hash).
    `signed_for`: the fork whose branch id the signature checks use (None: the fork of
    `height`, as consensus wants; another only to say which fork a refused one was signed for)."""
    if encoded is None:
        encoded = encode(tx)
    size = check_stateless(tx, len(encoded))
    rules = consensus.params.rules_at(height)
    check_version(tx, rules)
    payload = tx.payload
    match payload:
        case Coinbase():
            raise InvalidTransaction("a coinbase may only be the first transaction of a block")
        case StakeReturn():
            raise InvalidTransaction(
                "a stake return is made by the block rules, right after the coinbase; it cannot "
                "be sent or placed anywhere else"
            )
        case StateChange():
            _apply_state_change(w, tx, payload, tx_id, height, consensus)
            return 0
        case UnlockRequest():
            _apply_unlock_request(w, tx, payload, height, consensus, encoded, signed_for or rules)
            return 0
        case Transfer() | Registration() | Stake():
            return _apply_spend(w, tx, tx_id, height, block_time, consensus, encoded, size, signed_for or rules)
        case _:
            assert_never(payload)


def check_version(tx: Transaction, rules: ForkRules) -> None:
    """A transaction's version must be one its block's fork accepts."""
    if tx.version not in rules.tx_versions:
        raise InvalidTransaction(
            f"transaction version {tx.version} is not valid in fork {rules.name}, which accepts "
            f"version {', '.join(map(str, rules.tx_versions))}"
        )


def _apply_spend(
    w: Working, tx: Transaction, tx_id: bytes, height: int, block_time: int, consensus: Consensus,
    encoded: bytes, size: int, signed_for: ForkRules,
) -> int:
    """A transaction that spends outputs: its inputs, what its payload locks up, its outputs,
    its fee."""
    params = consensus.params
    total_in, owners = _spend_inputs(w, tx, tx_id, height, encoded, params.network_id, signed_for.branch_id)
    payload = tx.payload
    match payload:
        case Registration():
            staked = _apply_registration(w, payload, owners, height, block_time, consensus)
        case Stake():
            staked = _apply_stake(w, payload, owners, height, consensus)
        case Transfer():
            staked = 0
        case Coinbase() | StateChange() | StakeReturn() | UnlockRequest():
            raise AssertionError("spends only: dispatched by apply_one")
        case _:
            assert_never(payload)
    total_out = sum(o.amount for o in tx.outputs)
    fee = total_in - total_out - staked
    short = tx_id.hex()[:16]
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


def _spend_inputs(
    w: Working, tx: Transaction, tx_id: bytes, height: int, encoded: bytes, network_id: int,
    branch_id: int,
) -> tuple[int, list[bytes]]:
    """Spend each input (unspent, unlocked), collecting its owner's signature check over the
    signing hash of what the chain holds for it (owner and amount); the total spent and the
    owners."""
    short = tx_id.hex()[:16]
    total_in = 0
    owners = []
    spent = []
    for op in tx.inputs:
        key = op.txid + op.index.to_bytes(2, "big")  # op.key(), inlined: the hottest loop
        entry = w.utxos.spend(key)  # spent at once: a refusal below discards the whole of w
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
        total_in += entry.amount
        owners.append(entry.owner)
        spent.append(TxOut(entry.owner, entry.amount))
    message = signing_hash_of_encoded(tx, encoded, spent, network_id, branch_id)
    for i, owner in enumerate(owners):
        w.checks.append(SigCheck(owner, message, tx.signatures[i], f"transaction {short} input {i}", True))
    return total_in, owners


def _single_owner(owners: list[bytes], who: str) -> bytes:
    if len(set(owners)) != 1:
        raise InvalidTransaction(f"all inputs of a {who} must belong to one address")
    return owners[0]


def _apply_registration(
    w: Working, reg: Registration, owners: list[bytes], height: int, block_time: int,
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


def _apply_stake(w: Working, stake: Stake, owners: list[bytes], height: int, consensus: Consensus) -> int:
    staker = _single_owner(owners, "stake")
    node = w.service_nodes.get(stake.sn_pubkey)
    sn_rules.check_stake(node, staker, stake.amount, stake.sn_pubkey)
    assert node is not None
    w.service_nodes.set(stake.sn_pubkey, sn_rules.add_contribution(
        node, staker, stake.amount, height, consensus.params))
    return stake.amount


def _apply_unlock_request(
    w: Working, tx: Transaction, request: UnlockRequest, height: int, consensus: Consensus,
    encoded: bytes, signed_for: ForkRules,
) -> None:
    """A contributor's request to unlock its node, signed by the contributor's key."""
    params = consensus.params
    node = w.service_nodes.get(request.sn_pubkey)
    updated = check_unlock_request(node, request.sn_pubkey, request.contributor, height, params)
    w.checks.append(SigCheck(
        request.contributor, signing_hash_of_encoded(tx, encoded, (), params.network_id, signed_for.branch_id),
        tx.signatures[0], f"unlock request for service node {request.sn_pubkey.hex()[:16]}",
    ))
    w.service_nodes.set(request.sn_pubkey, updated)


def _apply_state_change(
    w: Working, tx: Transaction, sc: StateChange, tx_id: bytes, height: int, consensus: Consensus,
) -> None:
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
    w.checks += _equivocation_checks(sc, node, consensus.params.rules_at(height), consensus.params.network_id)
    updated = sn_rules.apply_state_change(node, sc.kind, sc.reason, height, consensus.params)
    if updated is not None:
        if tx.outputs:
            raise InvalidStateChange("only a deregistration's state change has outputs")
        w.service_nodes.set(sc.sn_pubkey, updated)
        return
    _deregister(w, tx, node, tx_id, height, consensus)


def _equivocation_checks(sc: StateChange, node: ServiceNode, rules: ForkRules, network_id: int) -> list[SigCheck]:
    """A state change for equivocation carries its proof (fork v2): a deregistration of this
    node, for a slot of its current registration; the proof's signatures join the block's
    checks. No other state change carries a proof, and before v2 none has the reason."""
    if sc.reason != sn_rules.Reason.EQUIVOCATION and not isinstance(sc, ProvenStateChange):
        return []
    if not rules.equivocation_proofs:
        raise InvalidStateChange(f"fork {rules.name} has no state change for equivocation")
    if not isinstance(sc, ProvenStateChange):
        raise InvalidStateChange("a state change for equivocation carries its proof (a ProvenStateChange)")
    if sc.reason != sn_rules.Reason.EQUIVOCATION or sc.kind != sn_rules.StateChangeKind.DEREGISTER:
        raise InvalidStateChange("a state change with a proof is a deregistration for equivocation")
    try:
        proof = equivocation.decode_proof(sc.proof)
        if equivocation.offender(proof) != sc.sn_pubkey:
            raise equivocation.InvalidEquivocation("its proof is of another node's equivocation")
        if equivocation.offence_height(proof) <= node.registration_height:
            raise equivocation.InvalidEquivocation("its proof is of a slot before the node's registration")
        return equivocation.proof_checks(proof, network_id)
    except equivocation.InvalidEquivocation as err:
        raise InvalidStateChange(f"state change for equivocation: {err.reason}") from None


def _deregister(
    w: Working, tx: Transaction, node: ServiceNode, tx_id: bytes, height: int, consensus: Consensus,
) -> None:
    """The node leaves the registry; the state change's outputs return every stake, locked for
    the deregistration penalty."""
    if tx.outputs != returned_outputs(node):
        raise InvalidStateChange(
            "a deregistration's outputs must return each contribution to its owner, in "
            "contributor order"
        )
    unlock = height + consensus.params.deregistration_lock
    for i, out in enumerate(tx.outputs):
        w.utxos.set(tx_id + i.to_bytes(2, "big"), new_utxo(out.owner, out.amount, unlock))
    w.service_nodes.delete(node.pubkey)


def apply_transaction(
    state: ChainState, tx: Transaction, consensus: Consensus, *, block_time: int,
    tx_id: bytes | None = None, signed_for: ForkRules | None = None,
) -> tuple[ChainState, int, list[SigCheck]]:
    """Apply one transaction as if in the block after `state`, without checking signatures.

    Returns the state with its outputs and registry updated (height and tip unchanged), the fee,
    and the signature checks still to be made (over `signed_for`'s branch id; None: the next
    block's fork).
    """
    w = Working(state)
    fee = apply_one(w, tx, tx_id or txid(tx), state.height + 1, block_time, consensus, signed_for=signed_for)
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
    check_signatures(state, tx, consensus, checks, block_time=block_time, verifier=verifier)
    return fee


def check_signatures(
    state: ChainState, tx: Transaction, consensus: Consensus, checks: list[SigCheck], *,
    block_time: int, verifier: BatchVerifier = verify_serially,
) -> None:
    """Run `tx`'s signature checks (from `apply_transaction`); BadSignature if one fails, or
    WrongFork where they verify under another fork's branch id (signed for the other side)."""
    try:
        run_checks(checks, verifier, BadSignature)
    except BadSignature as err:
        signed_for = _signed_for(state, tx, consensus, block_time)
        if signed_for is None:
            raise
        raise WrongFork(_wrong_fork(tx, signed_for, state.height + 1, consensus)) from err


def _signed_for(state: ChainState, tx: Transaction, consensus: Consensus, block_time: int) -> ForkRules | None:
    """The other fork whose branch id `tx`'s signatures verify with, if any: a refused
    transaction is then said to be signed for the other side of a fork, not forged. Runs only
    after a bad signature, at most once per fork this snoded knows."""
    here = consensus.params.rules_at(state.height + 1)
    for rules in KNOWN_FORKS.values():
        if rules.branch_id == here.branch_id:
            continue
        _, _, checks = apply_transaction(state, tx, consensus, block_time=block_time, signed_for=rules)
        if checks and verify_serially(checks) < 0:
            return rules
    return None


def _wrong_fork(tx: Transaction, signed_for: ForkRules, height: int, consensus: Consensus) -> str:
    """The refusal of a transaction signed for another fork than the one of `height`."""
    params = consensus.params
    here = params.rules_at(height)
    short = txid(tx).hex()[:16]
    order = list(KNOWN_FORKS)
    if order.index(signed_for.name) > order.index(here.name):
        theirs = params.fork_of(signed_for)
        when = f"starts at height {theirs.height}" if theirs is not None else "this network has not scheduled"
        return (f"transaction {short} is signed for fork {signed_for.name}, which {when}; this "
                f"chain is on {here.name}: sign it again{_test_fork_hint(params)}")
    start = params.fork_of(here)
    since = f" from height {start.height}" if start is not None else ""
    return (f"transaction {short} is signed for fork {signed_for.name}; this chain is on "
            f"{here.name}{since}: sign it again{_test_fork_hint(params)}")


def _test_fork_hint(params: NetworkParams) -> str:
    """On devnet and regtest a wallet knows a `--test-fork` only when given the same flag: the
    refusal names the daemon's, since signing again without it is refused again."""
    if not params.test_forks:
        return ""
    flags = " ".join(f"--test-fork {f.rules.name}@{f.height}" for f in params.forks[1:])
    return f" with the daemon's schedule ({flags})" if flags else " with no --test-fork (the daemon has none)"
