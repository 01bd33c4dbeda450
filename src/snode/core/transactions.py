"""Transactions: kinds, ids, signing hashes and stateless checks.

Every transaction has the same frame (inputs, outputs, payload, signatures); the payload says
which kind it is. Inputs name unspent outputs; signature i is the owner of input i signing the
transaction's signing hash. Coinbase and state changes have no inputs.

The signing hash commits to the outputs each input spends, their owner and amount, as Bitcoin's
BIP 143 made segwit signatures do: the chain computes it from its own unspent outputs, so a
signature made over an amount a daemon lied about is not valid, and a wallet told a smaller
amount than it holds cannot be made to pay the difference as a fee. Version 1 signed the
transaction alone; it is refused.

From fork v2 on the signing hash also commits to the fork's branch id (Zcash ZIP 200), so that
a transaction signed for one side of a fork is not valid on the other; v1's branch id, 0, keeps
the hash it always had.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Final, TypeAlias, Union, assert_never

import msgspec

from snode.core.crypto import hash32
from snode.core.encoding import domain_hash, encode
from snode.core.errors import InvalidTransaction
from snode.core.types import Amount, Hash32, Height, Ppm, PubKey, Signature, Timestamp
from snode.params import KNOWN_FORKS, MAX_TX_BYTES

MAX_EQUIVOCATION_PROOF: Final = 16 * 1024
"""`StateChange.proof`'s limit (`core.equivocation.MAX_PROOF_BYTES`, which is this)."""

TX_VERSION: Final = 2
"""The version forks v1 and v2 make (`ForkRules.tx_version`): its signatures commit to the spent
outputs."""
KNOWN_TX_VERSIONS: Final = frozenset(v for rules in KNOWN_FORKS.values() for v in rules.tx_versions)
"""The versions some fork accepts: any other is refused without a look at the chain (which of
them a block may hold is its fork's rule, `tx_rules.check_version`)."""
REFUSED_TX_VERSION: Final = 1
"""The version before, whose signatures did not commit to the spent outputs' amounts."""
OutputIndex: TypeAlias = Annotated[int, msgspec.Meta(ge=0, le=65_535)]


class OutPoint(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Names one output of an earlier transaction."""

    txid: Hash32
    """Id of the transaction that made the output."""
    index: OutputIndex
    """Position of the output in that transaction."""

    def key(self) -> bytes:
        """The key of this output in the chain state's output map."""
        return self.txid + self.index.to_bytes(2, "big")


def outpoint_key(txid: bytes, index: int) -> bytes:
    """The output-map key of output `index` of transaction `txid`."""
    return txid + index.to_bytes(2, "big")


class TxOut(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A new output: coins for a public key. It unlocks `unlock_confirmations` blocks later."""

    owner: PubKey
    """Public key that may spend it (the key inside the owner's address)."""
    amount: Amount
    """Atomic units."""


class Transfer(msgspec.Struct, frozen=True, array_like=True, tag=0, gc=False):
    """Moves coins: the outputs are the whole point."""


class Coinbase(msgspec.Struct, frozen=True, array_like=True, tag=1, gc=False):
    """First transaction of every block: the block reward and the fees. Height makes it unique."""

    height: Height


class Reservation(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One (address, amount) pair of a registration; the operator's comes first."""

    owner: PubKey
    amount: Amount


class Registration(msgspec.Struct, frozen=True, array_like=True, tag=2, gc=False):
    """Registers a service node and commits the operator's stake (the first reservation)."""

    fee_ppm: Ppm
    """Operator fee in ppm (10 % = 100000)."""
    reservations: tuple[Reservation, ...]
    """Operator first, then contributors who reserved a share."""
    expiry: Timestamp
    """Unix time after which the registration may not be included."""
    sn_pubkey: PubKey
    """The service node's key."""
    sn_signature: Signature
    """The service node key's signature over `registration_hash(...)`."""


class Stake(msgspec.Struct, frozen=True, array_like=True, tag=3, gc=False):
    """Contributes `amount` to a service node; the inputs' owner is the contributor."""

    sn_pubkey: PubKey
    amount: Amount


class Vote(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One quorum member's signature."""

    voter: PubKey
    signature: Signature


class StateChange(msgspec.Struct, frozen=True, array_like=True, tag=4, gc=False):
    """A quorum's verdict on one service node: activate, decommission or recommission."""

    sn_pubkey: PubKey
    kind: Annotated[int, msgspec.Meta(ge=0, le=255)]
    """One of `service_nodes.StateChangeKind`."""
    reason: Annotated[int, msgspec.Meta(ge=0, le=255)]
    """One of `service_nodes.Reason`."""
    quorum_height: Height
    """The height whose obligations quorum voted."""
    votes: tuple[Vote, ...]


class ProvenStateChange(StateChange, frozen=True, array_like=True, tag=7, gc=False):
    """Fork v2: a quorum's deregistration for equivocation, with the proof that every node
    validating it checks itself (`core.equivocation`; `tx_rules`). A `StateChange` in all else:
    whatever treats state changes treats this one too, and a plain `StateChange` keeps the tag
    and bytes it has in v1."""

    proof: Annotated[bytes, msgspec.Meta(max_length=MAX_EQUIVOCATION_PROOF)]
    """The canonical encoding of an `equivocation.EquivocationProof` of the node's."""


class StakeReturn(msgspec.Struct, frozen=True, array_like=True, tag=5, gc=False):
    """Made by the block rules only, right after the coinbase: a node leaves the registry at the
    end of its unlock period or of its pool fill window, and its outputs give every contributor
    back its contribution (`core.stake_exit`). A deregistration returns the stakes in the
    outputs of its state change instead."""

    sn_pubkey: PubKey
    reason: Annotated[int, msgspec.Meta(ge=0, le=255)]
    """One of `stake_exit.ReturnReason`."""


class UnlockRequest(msgspec.Struct, frozen=True, array_like=True, tag=6, gc=False):
    """A contributor asks for its node to leave and every stake on it to come back, after the
    unlock duration. No inputs and no fee: the one signature is the contributor's, over the
    transaction's signing hash; a node takes one request only."""

    sn_pubkey: PubKey
    contributor: PubKey
    """The operator's or a contributor's key: it must have a stake on the node."""


Payload: TypeAlias = Union[
    Transfer, Coinbase, Registration, Stake, StateChange, StakeReturn, UnlockRequest, ProvenStateChange,
]


class TxKind(enum.Enum):
    """The kinds of transaction, by their operator-facing names (the one table of kinds: every
    place that treats kinds differently dispatches on the payload with `match`, and mypy's
    `assert_never` fails the build where one is forgotten)."""

    TRANSFER = "transfer"
    COINBASE = "coinbase"
    REGISTRATION = "registration"
    STAKE = "stake"
    STATE_CHANGE = "state_change"
    STAKE_RETURN = "stake_return"
    UNLOCK_REQUEST = "unlock_request"


def payload_kind(payload: Payload) -> TxKind:
    """The kind of a transaction, from its payload."""
    match payload:
        case Transfer():
            return TxKind.TRANSFER
        case Coinbase():
            return TxKind.COINBASE
        case Registration():
            return TxKind.REGISTRATION
        case Stake():
            return TxKind.STAKE
        case StateChange():
            return TxKind.STATE_CHANGE
        case StakeReturn():
            return TxKind.STAKE_RETURN
        case UnlockRequest():
            return TxKind.UNLOCK_REQUEST
        case _:
            assert_never(payload)


def payload_spend(payload: Payload) -> int:
    """Atomic units a payload moves out of the inputs besides the outputs and the fee (stakes)."""
    match payload:
        case Registration():
            # No reservation at all is refused by the chain with its reason, not here by IndexError.
            return payload.reservations[0].amount if payload.reservations else 0
        case Stake():
            return payload.amount
        case Transfer() | Coinbase() | StateChange() | StakeReturn() | UnlockRequest():
            return 0
        case _:
            assert_never(payload)


class Transaction(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A transaction of any kind."""

    version: int
    inputs: tuple[OutPoint, ...]
    outputs: tuple[TxOut, ...]
    payload: Payload
    signatures: tuple[Signature, ...]
    """Signature i is by the owner of input i over `signing_hash(tx, spent, network_id)`."""


def txid(tx: Transaction) -> bytes:
    """The transaction id: BLAKE2b-256 of its canonical encoding."""
    return hash32(encode(tx))


def signing_hash(tx: Transaction, spent: Sequence[TxOut], network_id: int, branch_id: int) -> bytes:
    """What the input owners sign, on one network and one side of a fork (`branch_id`,
    `ForkRules.branch_id`): the transaction without its signatures, then the output each input
    spends (its owner and amount, in input order)."""
    unsigned = msgspec.structs.replace(tx, signatures=())
    return _signing_hash(encode(unsigned), tx, spent, network_id, branch_id)


_EMPTY_ARRAY: Final = encode(())


def signing_hash_of_encoded(
    tx: Transaction, encoded: bytes, spent: Sequence[TxOut], network_id: int, branch_id: int,
) -> bytes:
    """`signing_hash(tx, spent, network_id, branch_id)`, given `encoded == encode(tx)`: signatures are the
    last field of the record, so the unsigned form is the encoding with its signatures' array
    replaced by an empty one (no second encoding of the whole transaction)."""
    signatures = encode(tx.signatures)
    if not encoded.endswith(signatures):
        raise ValueError("encoded is not the encoding of tx")
    unsigned = encoded[:len(encoded) - len(signatures)] + _EMPTY_ARRAY
    return _signing_hash(unsigned, tx, spent, network_id, branch_id)


def _signing_hash(
    unsigned: bytes, tx: Transaction, spent: Sequence[TxOut], network_id: int, branch_id: int,
) -> bytes:
    if len(spent) != len(tx.inputs):
        raise ValueError(f"{len(spent)} spent outputs given for {len(tx.inputs)} inputs")
    body = unsigned + encode(tuple(spent))
    if branch_id == 0:  # v1: the hash from before branch ids, unchanged
        return domain_hash(b"tx", network_id, body)
    # Its own domain tag: no v1 message can equal a branch's, whatever the bytes.
    return domain_hash(b"tx-branch", network_id, branch_id.to_bytes(4, "big") + body)


def registration_hash(
    network_id: int, fee_ppm: int, reservations: tuple[Reservation, ...], expiry: int,
    sn_pubkey: bytes,
) -> bytes:
    """What the service node key signs to authorise its registration."""
    body = encode((fee_ppm, reservations, expiry, sn_pubkey))
    return domain_hash(b"registration", network_id, body)


def state_change_hash(
    network_id: int, sn_pubkey: bytes, kind: int, reason: int, quorum_height: int
) -> bytes:
    """What each quorum member signs to vote for a state change."""
    return domain_hash(b"state-change", network_id, encode((sn_pubkey, kind, reason, quorum_height)))


def check_stateless(tx: Transaction, size: int | None = None) -> int:
    """Checks that need no chain state; returns the encoded size in bytes (`size`, when the
    caller has already encoded the transaction)."""
    if size is None:
        size = len(encode(tx))
    if tx.version not in KNOWN_TX_VERSIONS:
        raise InvalidTransaction(_version_refusal(tx.version))
    if size > MAX_TX_BYTES:
        raise InvalidTransaction(f"transaction is {size} bytes; the limit is {MAX_TX_BYTES}")
    payload = tx.payload
    match payload:
        case Coinbase() | StakeReturn():
            _check_no_inputs(tx, payload)
        case StateChange():
            _check_no_inputs(tx, payload)
            if tx.outputs and payload.kind != DEREGISTER_KIND:
                raise InvalidTransaction("only a deregistration's state change has outputs")
        case UnlockRequest():
            if tx.inputs or tx.outputs:
                raise InvalidTransaction("an unlock request has no inputs and no outputs")
            if len(tx.signatures) != 1:
                raise InvalidTransaction("an unlock request carries exactly one signature, the contributor's")
        case Transfer() | Registration() | Stake():
            _check_spends(tx)
        case _:
            assert_never(payload)
    for i, out in enumerate(tx.outputs):
        if out.amount <= 0:
            raise InvalidTransaction(f"output {i} has amount 0")
    return size


DEREGISTER_KIND: Final = 4
"""`service_nodes.StateChangeKind.DEREGISTER`, the one state change with outputs (the stakes
it returns); named here because the kinds live a layer above the frame."""


def _version_refusal(version: int) -> str:
    if version == REFUSED_TX_VERSION:
        return (f"transaction version {version} is no longer valid: its signatures do not commit to "
                f"the amounts and owners of the outputs it spends; sign it again as version {TX_VERSION}")
    return f"unknown transaction version {version}"


def _check_no_inputs(tx: Transaction, payload: Payload) -> None:
    if tx.inputs or tx.signatures:
        raise InvalidTransaction(f"a {type(payload).__name__} transaction has no inputs")


def _check_spends(tx: Transaction) -> None:
    """A transaction that spends outputs: one signature per input, no input twice."""
    if not tx.inputs:
        raise InvalidTransaction("transaction has no inputs")
    if len(tx.signatures) != len(tx.inputs):
        raise InvalidTransaction(
            f"transaction has {len(tx.signatures)} signatures for {len(tx.inputs)} inputs"
        )
    if len(set(tx.inputs)) != len(tx.inputs):
        raise InvalidTransaction("transaction spends the same output twice")
