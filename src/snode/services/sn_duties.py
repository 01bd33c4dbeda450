"""Service-node duties: uptime proofs out and in, obligations judging, vote collection.

Proofs travel over P2P to every node (each relays a proof once, after accepting it); the node
that gets a proof straight from its signer checks the declared IP against the connection and
tells the signer whether it took it (`ProofAck`) or why not (`ProofRejected`, a code). A verdict
counts only from a peer we sent that very proof to, once; any other is misbehaviour (`Asked`).
Votes travel over quorumnet between quorum members; once a state change has the votes it needs,
the member that has them submits the transaction, and P2P carries it to the block producer.
While the network is small the genesis authority is the quorum and signs alone.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final

from snode.common.logs import LIMITED
from snode.core.crypto import SigningKey, verify
from snode.core.errors import SnodeError
from snode.core.obligations import fits_vote, judge, quorum_signers, vote_signed
from snode.core.proofs import BadProofSignature, InvalidProof, ProofRefusal, UptimeProof, proof_message
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import Quorum
from snode.core.state_change import state_change_tx
from snode.core.transactions import Vote, state_change_hash
from snode.net import protocol as P
from snode.net.events import ProofMessage, QuorumMessageReceived
from snode.net.limits import SCORE_JUNK_PROOF, SCORE_PROTOCOL, SCORE_UNASKED_VERDICT
from snode.net.peers import PeerManager
from snode.net.quorum_guard import SCORE_FORGED, SCORE_NOT_OURS
from snode.node.events import BlocksAdopted, ProofAccepted
from snode.node.node import Node
from snode.params import STATE_CHANGE_WINDOW
from snode.services.proof_intake import Arrival, ProofIntake
from snode.services.reachability import ReachabilityTests

if TYPE_CHECKING:  # pyzmq is imported only by a service node's daemon (start-up time)
    from snode.net.quorumnet import QuorumNet
    from snode.services.equivocation import EquivocationWatch

log = logging.getLogger(__name__)

MAX_PENDING_VERDICTS: Final = 10_000
"""Open (node, verdict, height) keys kept at once; a member cannot grow this without bound..."""
MAX_OPEN_VOTES_PER_VOTER: Final = MAX_PENDING_VERDICTS // 10
"""...and one voter's votes among them (1,000): a tenth, one member's share of a quorum of ten,
so that one member cannot fill the table and shut the others' verdicts out. An honest member
votes once a block on each node it finds failing, each vote under that block's quorum height:
this holds its votes on 100 nodes failing at once over the whole STATE_CHANGE_WINDOW; with more,
its votes of the newest heights wait until the oldest are pruned, and a verdict needs the votes
of one height only."""


@dataclass(frozen=True, slots=True)
class DutyLimits:
    """The bounds of the open-vote table, as one record the duties take (the daemon passes the
    defaults, the constants above; a test passes small ones)."""

    max_pending_verdicts: int = MAX_PENDING_VERDICTS
    max_open_votes_per_voter: int = MAX_OPEN_VOTES_PER_VOTER
    vote_window: int = STATE_CHANGE_WINDOW
    """Heights a vote is kept below our own (a state change carries votes of that window)."""


DEFAULT_DUTY_LIMITS: Final = DutyLimits()

VoteKey = tuple[bytes, int, int, int]
"""(sn pubkey, kind, reason, quorum height)."""

ASKED_PER_PEER: Final = 8
"""Own proofs per peer whose verdict we wait for; a verdict on an older one is late, not unasked."""
UNASKED_VERDICT = "sent a verdict on an uptime proof this node did not send it"


class Answer(Enum):
    ASKED = "asked"
    """A verdict on a proof we sent this peer, the first on it: it counts."""
    LATE = "late"
    """On a proof sent so long ago that we no longer wait for its verdict: ignored."""
    UNASKED = "unasked"
    """Never asked, or answered already: misbehaviour."""


@dataclass(slots=True)
class _Waiting:
    timestamps: deque[int] = field(default_factory=deque)
    """Our proofs sent to the peer that it has not judged yet, oldest first."""
    forgotten: int = 0
    """The newest of our proofs sent to it that we stopped waiting for (more than `per_peer`)."""


class Asked:
    """Which of our proofs each peer was sent and has not judged yet (sans-IO; a peer is any
    object, forgotten with it)."""

    def __init__(self, per_peer: int = ASKED_PER_PEER) -> None:
        self.per_peer = per_peer
        self._waiting: weakref.WeakKeyDictionary[object, _Waiting] = weakref.WeakKeyDictionary()

    def sent(self, peers: Iterable[object], timestamp: int) -> None:
        """Our proof stamped `timestamp` went to each of `peers`."""
        for peer in peers:
            waiting = self._waiting.setdefault(peer, _Waiting())
            waiting.timestamps.append(timestamp)
            if len(waiting.timestamps) > self.per_peer:
                waiting.forgotten = max(waiting.forgotten, waiting.timestamps.popleft())

    def answer(self, peer: object, timestamp: int) -> Answer:
        """Whether `peer`'s verdict on our proof stamped `timestamp` counts (once)."""
        waiting = self._waiting.get(peer)
        if waiting is None:
            return Answer.UNASKED
        if timestamp in waiting.timestamps:
            waiting.timestamps.remove(timestamp)
            return Answer.ASKED
        return Answer.LATE if 0 < timestamp <= waiting.forgotten else Answer.UNASKED


@functools.lru_cache(maxsize=8192)
def _canonical(ip: str) -> str:
    """`ip` in one spelling: IPv6 compressed, an IPv4-mapped IPv6 address as its IPv4 (a dual-stack
    listener sees IPv4 peers so); text that is no address stays as it is."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped if mapped is not None else address)


def same_ip(a: str, b: str) -> bool:
    """Whether two texts name one address however each is written (`2001:db8::1` and
    `2001:db8:0::0001`, `::ffff:203.0.113.5` and `203.0.113.5`)."""
    return a == b or _canonical(a) == _canonical(b)


def _packed(ip: str) -> bytes:
    """An address as `ProofRejected.seen_ip` carries it (empty if it is none)."""
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError:
        return b""


class ServiceNodeDuties:
    """Everything a daemon does for the service-node network besides blocks and transactions."""

    def __init__(self, node: Node, peers: PeerManager, *, quorumnet: QuorumNet | None,
                 doppelganger_wait: float = 0, on_doppelganger: Callable[[str], None] | None = None,
                 equivocations: EquivocationWatch | None = None,
                 limits: DutyLimits = DEFAULT_DUTY_LIMITS) -> None:
        self.node = node
        self.limits = limits
        self.peers = peers
        self.quorumnet = quorumnet
        self.started = node.now()
        self.doppelganger_wait = doppelganger_wait
        """Seconds to listen for another daemon's proofs of our key before sending ours (0: no
        check); `on_doppelganger` is told what was seen (the daemon stops with it)."""
        self.on_doppelganger = on_doppelganger
        self.equivocations = equivocations
        """The proofs of equivocation this node holds (`services.equivocation`), judged from v2."""
        self.doppelganger: str | None = None
        self.reachability = ReachabilityTests(node, quorumnet) if quorumnet is not None else None
        self.votes: dict[VoteKey, dict[bytes, bytes]] = {}
        self._open: dict[bytes, int] = {}
        """Voter -> the open verdicts (keys of `votes`) that hold its vote."""
        self.submitted: set[VoteKey] = set()
        self.intake = ProofIntake(node, self._proof_verdict)
        self.asked = Asked()
        node.subscribe(ProofAccepted, self._on_proof_out, topics=(type(None),))  # ours: from no peer
        node.subscribe(ProofMessage, self.on_peer_proof)
        node.subscribe(BlocksAdopted, self.on_new_blocks)
        node.subscribe(QuorumMessageReceived, self.on_quorum_message, topics=(P.QuorumVote,))

    def now(self) -> int:
        return self.node.now()

    async def stop(self) -> None:
        """Stop the work under way that uses quorumnet (before quorumnet stops), and proof checks."""
        await self.intake.close()
        if self.reachability is not None:
            await self.reachability.stop()

    # --- our own proofs -----------------------------------------------------------------------

    def send_proof(self) -> UptimeProof:
        """Sign and send a fresh uptime proof (P2P relay sends it to every peer); it counts once
        a peer acknowledges it. InvalidProof says why not."""
        return self.node.own_proof.send(self.now(), alone=not self.peers.peers)

    async def run_proofs(self) -> None:
        """Send a proof every proof interval while registered: after listening
        `doppelganger_wait` seconds for another daemon that runs our key (Lighthouse's
        doppelganger protection: two signers of one key get the node decommissioned, or worse)."""
        node = self.node
        interval = node.params.proof_interval
        if self.doppelganger_wait > 0 and node.identity is not None:
            log.info("doppelganger check: listening %g s for another daemon's proofs of this key "
                     "before sending ours (--skip-doppelganger-check skips it)", self.doppelganger_wait)
            await asyncio.sleep(self.doppelganger_wait)
            if self.doppelganger is not None:
                if self.on_doppelganger is not None:
                    self.on_doppelganger(self.doppelganger)
                return
        while True:
            if node.identity is not None and node.identity.key.public in node.state.service_nodes:
                try:
                    self.send_proof()
                except InvalidProof as err:
                    log.debug("uptime proof not sent: %s", err)
            await asyncio.sleep(interval)

    def _on_proof_out(self, event: ProofAccepted) -> None:
        """Our own proof goes to every handshaken peer now (the relay's broadcast, in this same
        delivery): those peers, and only they, may judge it."""
        ident = self.node.identity
        if event.source is None and ident is not None and event.proof.pubkey == ident.key.public:
            self.asked.sent([p for p in self.peers.peers if p.hello is not None], event.proof.timestamp)

    # --- proofs from peers --------------------------------------------------------------------

    def on_peer_proof(self, event: ProofMessage) -> None:
        """A proof from a peer (straight from its signer, or relayed), or a peer's verdict on
        ours. The node that gets a proof straight from its signer checks the declared IP
        against the connection, and tells the signer why it refuses a proof."""
        node, message, peers = self.node, event.message, self.peers
        own = node.identity.key.public if node.identity is not None else None
        if isinstance(message, (P.ProofRejected, P.ProofAck)):
            self._on_verdict(event, message, own)
            return
        proof = message.proof
        if proof.pubkey == own:
            self._check_doppelganger(proof, event.peer_name)
            if message.relayed:  # a peer accepted it and passed it on: the network has it
                node.own_proof.relayed_back(proof, event.peer_name)
            return
        if node.proofs.last_accepted(proof.pubkey) == proof.timestamp:
            return  # a copy of a proof we have: proofs reach us along several paths
        direct = not message.relayed
        if not same_ip(proof.public_ip, event.peer_ip) and (direct or self._from_its_signer(proof, event.peer_ip)):
            log.info("refused uptime proof of %s from %s: declared IP %s, we see %s%s", proof.pubkey.hex()[:16],
                     event.peer_name, proof.public_ip, event.peer_ip,
                     "" if direct else " (passed off as relayed, from the address its last proof declared)",
                     extra=LIMITED)  # any peer can, 1,000/s
            if direct:
                peers.send(event.peer, P.ProofRejected(proof.pubkey, proof.timestamp,
                                                       ProofRefusal.IP_NOT_THE_CONNECTION, _packed(event.peer_ip)))
            return
        self.intake.add(Arrival(proof, event.peer, event.peer_name, message.relayed))

    def _from_its_signer(self, proof: UptimeProof, peer_ip: str) -> bool:
        """Whether a relayed proof comes from its signer's own connection: the address its
        node's last accepted proof declared (checked against that node's connection, or
        rate-limited as a change: `ProofBook.check_endpoint`). Such a proof's IP is checked as
        a direct one's, so a node cannot move its endpoint by calling its own proof relayed."""
        endpoint = self.node.proofs.endpoint(proof.pubkey)
        return endpoint is not None and same_ip(endpoint[0], peer_ip)

    def _on_verdict(self, event: ProofMessage, message: P.ProofRejected | P.ProofAck, own: bytes | None) -> None:
        """A peer's word on our proof: it counts only if we sent that proof to that peer and
        it has not judged it yet (`Asked`); an unasked verdict gets the peer banned."""
        answer = self.asked.answer(event.peer, message.timestamp) if message.pubkey == own else Answer.UNASKED
        if answer is Answer.UNASKED:
            self.peers.misbehaving(event.peer, SCORE_UNASKED_VERDICT, UNASKED_VERDICT)
        elif answer is Answer.LATE:
            log.debug("ignored a late verdict from %s on our proof %d", event.peer_name, message.timestamp)
        elif isinstance(message, P.ProofAck):
            self.node.own_proof.accepted(message.timestamp, event.peer_name)
        else:
            self.node.own_proof.refused(event.peer_name, message.timestamp, message.reason, message.seen_ip)

    def _proof_verdict(self, arrival: Arrival, refusal: InvalidProof | None) -> None:
        """A peer's proof was checked (`ProofIntake`): acknowledge it to its signer's peer, or
        say why not; a forged signature bans the peer that sent it."""
        proof, peers = arrival.proof, self.peers
        if refusal is None:
            if not arrival.relayed:
                peers.send(arrival.peer, P.ProofAck(pubkey=proof.pubkey, timestamp=proof.timestamp))
        elif isinstance(refusal, BadProofSignature):
            peers.misbehaving(arrival.peer, SCORE_PROTOCOL, f"sent a forged uptime proof: {refusal.reason}")
        else:
            if proof.pubkey not in self.node.state.service_nodes and not self.node.target_height \
                    and not arrival.relayed:
                # Junk: a node that is not syncing knows every registration its peers know. A
                # relayed one is not scored: an honest relayer a block ahead of or behind a
                # (de)registration passes such proofs on, and scores do not decay.
                peers.misbehaving(arrival.peer, SCORE_JUNK_PROOF,
                                  "sent uptime proofs of keys that are not registered service nodes")
            if not arrival.relayed:
                peers.send(arrival.peer, P.ProofRejected(proof.pubkey, proof.timestamp, refusal.code))
            log.debug("uptime proof of %s from %s not accepted: %s", proof.pubkey.hex()[:16], arrival.peer_name,
                      refusal)

    def _check_doppelganger(self, proof: UptimeProof, peer_name: str) -> None:
        """A proof of our key, signed after we started, before we sent any: another daemon runs
        this key. The signature must verify (nobody else can make one)."""
        node = self.node
        if (self.doppelganger is not None or node.own_proof.sent[0] or proof.timestamp < self.started
                or not verify(proof.pubkey, proof_message(node.params.network_id, proof), proof.signature)):
            return
        self.doppelganger = (
            f"another daemon runs this service node's key {proof.pubkey.hex()[:16]}...: a proof it "
            f"signed at {proof.timestamp} declares IP {proof.public_ip} (received from "
            f"{peer_name}); stop the other one, or start this one with --skip-doppelganger-check"
        )
        log.error("doppelganger check: %s", self.doppelganger)

    # --- obligations --------------------------------------------------------------------------

    def signers(self) -> list[SigningKey]:
        """Our keys that belong to the quorum of the tip."""
        return quorum_signers(self.node.state, self.node.keys)

    def on_new_blocks(self, event: BlocksAdopted) -> None:
        self._prune()
        self.judge_all()

    def judge_all(self) -> None:
        """Vote on every funded node if one of our keys is in the tip's quorum."""
        node = self.node
        signers = self.signers()
        if not signers:
            return
        now = self.now()
        warm = now - self.started >= node.params.decommission_proof_age
        height = node.height
        quorum = node.state.quorums[height]
        registry = node.state.service_nodes
        tests = self.reachability
        if tests is not None:
            tests.forget_gone(registry.keys())
            tests.schedule((sn.pubkey for sn in registry.values() if sn.funded), now)
        proven = self._proven(height + 1)
        for sn in registry.values():
            verdict = judge(sn, last_proof=node.proofs.last_accepted(sn.pubkey), now=now,
                            params=node.params, may_decommission=warm,
                            participation=node.participation.of(sn.pubkey), height=height + 1,
                            unreachable_for=tests.unreachable_for(sn.pubkey, now) if tests else 0,
                            equivocated=sn.pubkey in proven, outdated=node.is_outdated(sn.pubkey))
            if verdict is None:
                continue
            message = state_change_hash(node.params.network_id, sn.pubkey, verdict.kind, verdict.reason, height)
            for key in signers:
                vote = P.QuorumVote(sn_pubkey=sn.pubkey, kind=verdict.kind, reason=verdict.reason,
                                    quorum_height=height, voter=key.public, signature=key.sign(message))
                self.add_vote(vote)
                if self.quorumnet is not None:
                    for member in quorum.members:
                        self.quorumnet.send(member, vote)

    def _proven(self, height: int) -> frozenset[bytes]:
        """The nodes whose equivocation this node can prove, where the fork of `height` judges it."""
        if self.equivocations is None or not self.node.params.rules_at(height).equivocation_proofs:
            return frozenset()
        return frozenset(self.equivocations.proofs)

    def on_quorum_message(self, event: QuorumMessageReceived) -> None:
        if isinstance(event.message, P.QuorumVote):
            self.add_vote(event.message, event.sender)

    def add_vote(self, vote: P.QuorumVote, sender: bytes | None = None) -> None:
        """Keep a valid vote (`core.obligations.accepts_vote`, in two steps); submit the state change once
        enough votes are in. A member's (`sender`'s) vote from outside its quorum, or with a
        bad signature, costs the member (`QuorumNet.junk`)."""
        node = self.node
        quorum = node.state.quorums.get(vote.quorum_height)
        target = node.state.service_nodes.get(vote.sn_pubkey)
        key: VoteKey = (vote.sn_pubkey, vote.kind, vote.reason, vote.quorum_height)
        held = self.votes.get(key)
        limits = self.limits
        if quorum is None or target is None or (held is None and len(self.votes) >= limits.max_pending_verdicts):
            return  # only registered nodes, and a bounded number of open verdicts
        if held is not None and vote.voter in held:
            return  # a vote we hold, whatever its signature: its signer can make any number of good ones
        if self._open.get(vote.voter, 0) >= limits.max_open_votes_per_voter:
            return  # this voter's share of the table is full
        if not fits_vote(vote, quorum, target, node.height + 1, node.params):
            self._refused_vote(vote, quorum, sender)
            return
        if not vote_signed(vote, node.params):
            if sender is not None and self.quorumnet is not None:
                self.quorumnet.junk(sender, SCORE_FORGED, "sent an obligations vote whose signature does not verify")
            return
        collected = self.votes.setdefault(key, {})
        if vote.voter not in collected:
            self._open[vote.voter] = self._open.get(vote.voter, 0) + 1
        collected[vote.voter] = vote.signature
        if len(collected) >= quorum.needed and key not in self.submitted:
            self.submitted.add(key)
            self._submit(key, collected)

    def _submit(self, key: VoteKey, collected: dict[bytes, bytes]) -> None:
        sn_pubkey, kind, reason, quorum_height = key
        target = self.node.state.service_nodes.get(sn_pubkey)
        if target is None:
            return
        proof = None
        if reason == Reason.EQUIVOCATION:  # the proof goes with it (`tx_rules`): no proof, no change
            proof = self.equivocations.proof_of(sn_pubkey) if self.equivocations is not None else None
            if proof is None:
                return
        tx = state_change_tx((Vote(v, s) for v, s in collected.items()), target, kind, reason, quorum_height,
                             proof=proof)
        try:
            self.node.submit_transaction(tx, self.now())
        except SnodeError as err:
            log.debug("state change for %s not submitted: %s", sn_pubkey.hex()[:16], err)
            return
        log.info("quorum: %s %s (%s)", StateChangeKind(kind).name.lower(), sn_pubkey.hex()[:16],
                 Reason(reason).label)

    def _refused_vote(self, vote: P.QuorumVote, quorum: Quorum, sender: bytes | None) -> None:
        """A vote `fits_vote` refused: junk if it comes from outside its quorum; one that no longer
        fits its node's state is only late, and its signature is not checked (a check of each
        late vote, made anew by its signer, once cost a verification a vote)."""
        log.debug("ignored a vote of %s on %s: not a good vote of its quorum", vote.voter.hex()[:16],
                  vote.sn_pubkey.hex()[:16])
        if sender is not None and self.quorumnet is not None and vote.voter not in quorum.members:
            self.quorumnet.junk(sender, SCORE_NOT_OURS, "sent obligations votes from outside their quorum")

    def _prune(self) -> None:
        oldest = self.node.height - self.limits.vote_window
        for key in [k for k in self.votes if k[3] < oldest]:
            for voter in self.votes.pop(key):
                left = self._open.get(voter, 0) - 1
                if left > 0:
                    self._open[voter] = left
                else:
                    self._open.pop(voter, None)
            self.submitted.discard(key)
