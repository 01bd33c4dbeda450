"""What an obligations quorum member decides about one service node, from its own view of
uptime proofs (DESIGN.md section 4): decommission a silent active node (deregister it when its
downtime credit is too low for a decommission), activate or recommission a funded inactive node
that proves it is up, deregister a funded inactive node whose credit has run out.

Also who votes: which of a daemon's keys sit in the tip's quorum (`quorum_signers`), and which
votes of other members count (`accepts_vote`, the twin of `core.finality.accepts_vote`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

from snode.core.credit import credit_at
from snode.core.crypto import SigningKey, verify
from snode.core.errors import SnodeError
from snode.core.participation import Participation, fails_participation
from snode.core.service_nodes import Reason, StateChangeKind, apply_state_change
from snode.core.state import NO_HEIGHT, ChainState, Quorum, ServiceNode
from snode.core.transactions import state_change_hash
from snode.params import NetworkParams


class Verdict(NamedTuple):
    """A state change a quorum member votes for."""

    kind: StateChangeKind
    reason: Reason


def judge(
    sn: ServiceNode, *, last_proof: int, now: int, params: NetworkParams, may_decommission: bool,
    participation: Participation | None = None, height: int = 0, unreachable_for: int = 0,
    equivocated: bool = False,
    outdated: bool = False,
) -> Verdict | None:
    """The state change `sn` deserves now (the chain is at `height`), or None.

    `last_proof` is the timestamp of the last uptime proof this member accepted from the node (0
    if none). `may_decommission` is False while the member has not been up long enough to have
    seen everyone's proofs: a freshly restarted member must not vote the whole network out.
    `participation` is this member's record of the node's block-production duties;
    `unreachable_for`, how long this member's reachability tests of it have failed (0: they
    pass, or none failed yet). `equivocated`: this member holds a proof that the node signed two
    messages for one slot (fork v2): it is deregistered, active or not, whatever its credit and
    however long this member has been up (a proof is no view of uptime).
    pass, or none failed yet). `outdated`: this member refuses the node's newer proofs as
    outdated (a fork's `min_sn_version`): silent, it is decommissioned `outdated_software`, and
    never deregistered within the fork's upgrade grace.
    """
    if not sn.funded:
        return None
    if equivocated:
        return Verdict(StateChangeKind.DEREGISTER, Reason.EQUIVOCATION)
    if sn.active:
        if not may_decommission:
            return None
        failure = _failure(sn, last_proof, now, params, participation, unreachable_for)
        if failure is None:
            return None
        if outdated and failure is Reason.MISSED_UPTIME_PROOFS and params.rules_at(height).proof_version >= 2:
            failure = Reason.OUTDATED_SOFTWARE
        if credit_at(sn, height, params) < params.credit_min:
            return None if _spared(failure, height, params) else Verdict(StateChangeKind.DEREGISTER, failure)
        return Verdict(StateChangeKind.DECOMMISSION, failure)
    if credit_at(sn, height, params) == 0:
        last = Reason(sn.last_decommission_reason) or Reason.MISSED_UPTIME_PROOFS
        return None if _spared(last, height, params) else Verdict(StateChangeKind.DEREGISTER, last)
    if (sn.last_decommission_reason == Reason.MISSED_BLOCK_PRODUCTION
            and height - sn.last_state_change_height < params.participation_cooldown):
        return None
    if last_proof and now - last_proof <= params.healthy_proof_age and not unreachable_for:
        if sn.active_since == NO_HEIGHT:
            return Verdict(StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
        return Verdict(StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)
    return None


def _spared(reason: Reason, height: int, params: NetworkParams) -> bool:
    """An outdated node is not deregistered within the upgrade grace after a fork."""
    return reason is Reason.OUTDATED_SOFTWARE and params.in_upgrade_grace(height)


def _failure(
    sn: ServiceNode, last_proof: int, now: int, params: NetworkParams,
    participation: Participation | None, unreachable_for: int,
) -> Reason | None:
    """Why an active node fails its obligations, or None."""
    silent_for = now - last_proof if last_proof else None
    if silent_for is None or silent_for > params.decommission_proof_age:
        return Reason.MISSED_UPTIME_PROOFS
    if unreachable_for > params.decommission_proof_age:
        return Reason.UNREACHABLE
    if participation is not None and fails_participation(participation, params, now):
        return Reason.MISSED_BLOCK_PRODUCTION
    return None


def quorum_signers(state: ChainState, keys: Iterable[SigningKey]) -> list[SigningKey]:
    """Those of `keys` that are members of the obligations quorum of the tip (`state`): the keys
    a daemon votes with, and whose word on its own proof is the network's when it has no peer."""
    quorum = state.quorums.get(state.height)
    if quorum is None:
        return []
    return [key for key in keys if key.public in quorum.members]


class ObligationVote(Protocol):
    """One obligations-quorum member's signed vote for a state change (quorumnet's `QuorumVote`)."""

    @property
    def sn_pubkey(self) -> bytes: ...
    @property
    def kind(self) -> int: ...
    @property
    def reason(self) -> int: ...
    @property
    def quorum_height(self) -> int: ...
    @property
    def voter(self) -> bytes: ...
    @property
    def signature(self) -> bytes: ...


def accepts_vote(
    vote: ObligationVote, quorum: Quorum, target: ServiceNode, height: int, params: NetworkParams
) -> bool:
    """True when `vote` is a good vote of `quorum` (the obligations quorum of its height) for a
    state change that `target`, the node it is about, can take in the block at `height`: what a
    member keeps of the votes sent to it (a change that does not fit the node's state could never
    be mined). The signature is checked last, after the cheap rules (`fits_vote`)."""
    return fits_vote(vote, quorum, target, height, params) and vote_signed(vote, params)


def fits_vote(vote: ObligationVote, quorum: Quorum, target: ServiceNode, height: int, params: NetworkParams) -> bool:
    """`accepts_vote`'s rules but the signature: a vote of a member of `quorum` for a change that
    `target` can take at `height`."""
    if (vote.quorum_height != quorum.height or vote.voter not in quorum.members
            or vote.sn_pubkey != target.pubkey):
        return False
    try:
        apply_state_change(target, vote.kind, vote.reason, height, params)
    except SnodeError:
        return False
    return True


def vote_signed(vote: ObligationVote, params: NetworkParams) -> bool:
    """Whether the vote's signature is its voter's."""
    message = state_change_hash(params.network_id, vote.sn_pubkey, vote.kind, vote.reason, vote.quorum_height)
    return verify(vote.voter, message, vote.signature)
