"""Who may produce the next block, and when: the rules of service-node block production
(DESIGN.md section 6), learnt from Oxen's Pulse.

Mode. From the parent state alone (`production_mode`): the genesis authority produces while
fewer service nodes are active than `min_active_sns`, while no node is payable yet (a round
needs a leader), and always where `params.sn_blocks` is off (regtest, whose `generate_blocks`
makes authority blocks whatever the active count); service nodes produce otherwise.

Rounds. Round 0 of the block after a parent starts at the parent's timestamp plus the target
block time; round r starts `r x round_time` later and lasts `round_time`. A window is half-open,
[start, end), so that every instant belongs to exactly one round, and a block of round r must
carry a timestamp inside round r's window: the round a block claims is the round in which it was
made. Round r's leader is the payable node at position r of the reward queue (wrapping), and its
validators are drawn from the active set by the parent hash and r, leader excluded
(`quorums.block_leader_from_queue`, `quorums.block_validators_from_active`): a failed round
hands the block to a different leader and different validators.

Backstop. In service-node mode an authority block is valid only once `backstop_rounds` full
rounds have passed without a service-node block, i.e. with a timestamp at or after
`start0 + backstop_rounds x round_time` (Oxen's miner fallback after 255 rounds). Unlike Oxen,
service-node blocks stay valid past that time: the backstop lets the authority in, it does not
shut the service nodes out, so a network that recovers at round 300 need not wait for it.

Signatures, and the block format proposed (to be integrated into `blocks.Block`). The header
stays as it is: `producer` is the round's leader, `round` the round, and the block hash (BLAKE2b
of the header) is what the leader signs (`blocks.producer_message`) and what every validator
signs (`validator_message`, another domain). The validators' signatures cannot be inside what
they sign, so, as in Oxen, they travel outside the hashed header, in the block:
`validator_bitset: int` (bit i set: the i-th validator of the round signed) and
`validator_signatures: tuple[Signature, ...]` in increasing bit order, replacing today's
`tuple[Vote, ...]`. A bitset names a signer in one bit instead of 32 bytes and cannot name one
twice. Any `signatures_needed` of the validators make a block (not Pulse's all-or-nothing
stages, which stalled Oxen when one locked-in validator dropped out late: oxen-core #1834).
Since the block id does not cover the signer set, whoever holds more valid signatures than a
block carries could relay a copy with another signer set: what is read from the signers (the
participation record, `core.participation`) is each node's own view, judged by the obligations
quorum's votes as uptime proofs are, not consensus state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from snode.core.blocks import BlockHeader
from snode.core.encoding import domain_hash
from snode.core.errors import InvalidBlock
from snode.core.genesis import Consensus
from snode.core.quorums import block_leader_from_queue, block_validators_from_active
from snode.core.sigchecks import SigCheck
from snode.core.state import ChainState, registry_index
from snode.core.types import PubKey
from snode.params import NetworkParams

MAX_ROUND: Final = 2**32
"""Rounds are below this: the validator draw encodes the round in 4 bytes (8,000 years of
60-second rounds)."""


class Mode(enum.Enum):
    """Who produces the next block; the value is what `get_info` shows as `block_production`."""

    AUTHORITY = "authority"
    SERVICE_NODES = "service_nodes"


@dataclass(frozen=True, slots=True)
class RoundQuorum:
    """Who makes the block of one round."""

    leader: PubKey
    """The node that builds the block and sends it to the validators."""
    validators: tuple[PubKey, ...]
    """The nodes that check and sign it, in drawn order: bit i of a signer bitset is
    validators[i]."""
    needed: int
    """Validator signatures a block of this round must carry."""


# --- mode -------------------------------------------------------------------------------------

def production_mode(state: ChainState, params: NetworkParams) -> Mode:
    """Who may produce the block after `state`."""
    return Mode.AUTHORITY if authority_reason(state, params) else Mode.SERVICE_NODES


def authority_reason(state: ChainState, params: NetworkParams) -> str | None:
    """Why the authority produces the block after `state` (for logs and errors), or None when
    service nodes produce it."""
    if not params.sn_blocks:
        return f"service nodes never produce blocks on {params.name}"
    index = registry_index(state)
    active = len(index.active_keys)
    if active < params.min_active_sns:
        return f"{active} service nodes are active, {params.min_active_sns} are needed"
    leader = block_leader_from_queue(
        index.reward_queue, state.service_nodes, state.height + 1, 0, params
    )
    if leader is None:
        return "no active service node is payable yet"
    return None


# --- rounds -----------------------------------------------------------------------------------

def round_start0(parent_timestamp: int, params: NetworkParams) -> int:
    """When round 0 of the block after a parent of this timestamp starts."""
    return parent_timestamp + params.target_block_time


def round_window(parent_timestamp: int, round: int, params: NetworkParams) -> tuple[int, int]:
    """Round `round`'s [start, end): a block of that round carries a timestamp in it."""
    start = round_start0(parent_timestamp, params) + round * params.round_time
    return start, start + params.round_time


def round_at(now: float, parent_timestamp: int, params: NetworkParams) -> int:
    """The round in progress at `now`; 0 before round 0 starts (the round being waited for)."""
    elapsed = now - round_start0(parent_timestamp, params)
    return max(0, int(elapsed // params.round_time))


def backstop_time(parent_timestamp: int, params: NetworkParams) -> int:
    """The first timestamp at which the authority may produce in service-node mode: after
    `backstop_rounds` full rounds without a service-node block."""
    return round_window(parent_timestamp, params.backstop_rounds, params)[0]


_QUORUMS_KEPT: Final = 16
_quorums: dict[tuple[int, int, int], tuple[ChainState, NetworkParams, RoundQuorum]] = {}
"""The last quorums drawn, by (id of the state, round, id of the params); each entry holds its
state and params, so neither id can be reused while it is kept. A service node draws the same
round's quorum three or four times a block (its round timer, the template, the signatures, the
block itself)."""


def round_quorum(state: ChainState, round: int, params: NetworkParams) -> RoundQuorum:
    """Leader, validators and signatures needed for round `round` of the block after `state`."""
    key = (id(state), round, id(params))
    kept = _quorums.get(key)
    if kept is not None and kept[0] is state and kept[1] is params:
        return kept[2]
    quorum = _draw_quorum(state, round, params)
    if len(_quorums) >= _QUORUMS_KEPT:
        _quorums.clear()  # no iteration: the store thread and the event loop both draw
    _quorums[key] = (state, params, quorum)
    return quorum


def _draw_quorum(state: ChainState, round: int, params: NetworkParams) -> RoundQuorum:
    height = state.height + 1
    if not 0 <= round < MAX_ROUND:
        raise InvalidBlock(f"block {height} claims round {round}; rounds are 0 to {MAX_ROUND - 1}")
    index = registry_index(state)
    leader = block_leader_from_queue(
        index.reward_queue, state.service_nodes, height, round, params
    )
    if leader is None:
        raise InvalidBlock(f"no payable service node can lead round {round} of block {height}")
    validators = block_validators_from_active(
        index.active_keys, state.tip_hash, round, leader, params
    )
    if not validators:
        raise InvalidBlock(f"round {round} of block {height} has no validators")
    return RoundQuorum(leader, validators, params.signatures_needed(len(validators)))


# --- the producer of a block ------------------------------------------------------------------

def check_block_producer(
    state: ChainState, header: BlockHeader, consensus: Consensus
) -> RoundQuorum | None:
    """Header rules of block production on `state`: the right kind of producer for the mode,
    the round's leader, the timestamp in the round's window or past the backstop.

    Returns the RoundQuorum whose validators must have signed a service-node block (check them
    with `validator_checks`), None for an authority block (which carries no validator
    signatures).
    """
    params = consensus.params
    reason = authority_reason(state, params)
    if header.producer in consensus.authorities:
        _check_authority_block(state, header, reason is None, params)
        return None
    if reason is not None:
        raise InvalidBlock(
            f"block {header.height} is not from the authority, which produces this height: "
            f"{reason}"
        )
    quorum = round_quorum(state, header.round, params)
    if header.producer != quorum.leader:
        raise InvalidBlock(
            f"block {header.height} producer {header.producer.hex()[:16]} is not the leader of "
            f"round {header.round} ({quorum.leader.hex()[:16]} is)"
        )
    check_round_timestamp(header, state.timestamp, params)
    return quorum


def _check_authority_block(
    state: ChainState, header: BlockHeader, sn_mode: bool, params: NetworkParams
) -> None:
    """An authority block claims round 0 and, in service-node mode, waits for the backstop."""
    if header.round != 0:
        raise InvalidBlock(f"authority block {header.height} claims round {header.round}, not 0")
    if not sn_mode:
        return
    backstop = backstop_time(state.timestamp, params)
    if header.timestamp < backstop:
        raise InvalidBlock(
            f"authority block {header.height} at {header.timestamp} comes before the backstop "
            f"at {backstop}: service nodes produce this height until {params.backstop_rounds} "
            f"rounds have passed without their block"
        )


def check_round_timestamp(header: BlockHeader, parent_timestamp: int, params: NetworkParams) -> None:
    """A block of round r carries a timestamp inside round r's window."""
    start, end = round_window(parent_timestamp, header.round, params)
    if not start <= header.timestamp < end:
        raise InvalidBlock(
            f"block {header.height} of round {header.round} has timestamp {header.timestamp}, "
            f"outside its round's window [{start}, {end})"
        )


# --- validator signatures ---------------------------------------------------------------------

def validator_message(network_id: int, block_hash: bytes) -> bytes:
    """What a validator signs: the block hash, in a domain of its own (a producer's signature
    or a checkpoint vote over the same hash is no validator signature)."""
    return domain_hash(b"block validator", network_id, block_hash)


def signer_indexes(bitset: int) -> list[int]:
    """Positions of the set bits, lowest first: the order of the signatures."""
    return [i for i in range(bitset.bit_length()) if bitset >> i & 1]


def signer_set(
    members: Sequence[bytes], signatures: Mapping[bytes, bytes]
) -> tuple[int, tuple[bytes, ...]]:
    """The bitset and the signatures in bit order of the members that signed (`signatures`:
    member -> signature; other keys are left out)."""
    bitset = 0
    ordered = []
    for i, member in enumerate(members):
        signature = signatures.get(member)
        if signature is not None:
            bitset |= 1 << i
            ordered.append(signature)
    return bitset, tuple(ordered)


def signers(
    members: Sequence[bytes], bitset: int, signatures: Sequence[bytes], needed: int, what: str
) -> list[tuple[bytes, bytes]]:
    """(member, signature) of each signer a bitset names; InvalidBlock (`what` names the thing
    signed) for a bit beyond the members (an outsider), a signature count that does not match
    the bitset, or fewer signers than needed. Whether each signature verifies is left to the
    batch verifier."""
    if bitset < 0:
        raise InvalidBlock(f"{what} has a negative signer bitset")
    if bitset >> len(members):
        raise InvalidBlock(
            f"{what} names signer {bitset.bit_length() - 1}, but its quorum has "
            f"{len(members)} members: a signature from outside the quorum"
        )
    indexes = signer_indexes(bitset)
    if len(indexes) != len(signatures):
        raise InvalidBlock(
            f"{what} names {len(indexes)} signers in its bitset but carries "
            f"{len(signatures)} signatures"
        )
    if len(indexes) < needed:
        raise InvalidBlock(f"{what} has {len(indexes)} signatures; {needed} are needed")
    return [(members[i], signature) for i, signature in zip(indexes, signatures)]


def validator_checks(
    network_id: int, height: int, block_hash: bytes, quorum: RoundQuorum, bitset: int,
    signatures: Sequence[bytes],
) -> list[SigCheck]:
    """The signature checks of a service-node block's validators (InvalidBlock first for an
    outsider, a count that does not match the bitset, or too few signers)."""
    message = validator_message(network_id, block_hash)
    return [
        SigCheck(validator, message, signature, f"block {height} validator {validator.hex()[:16]}")
        for validator, signature in signers(
            quorum.validators, bitset, signatures, quorum.needed, f"block {height}"
        )
    ]
