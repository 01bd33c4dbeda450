"""Uptime proofs relayed by announcement (peer protocol 3), as Bitcoin Core relays transactions
with inv and getdata. Sans-IO: the relay (`net.relay`) moves the messages this decides.

A proof goes in full from its signer to each of its peers (so the receiver can check the declared
IP against the connection, and acknowledge it). A node that accepts another's proof announces it,
by id (signer key, timestamp), to each version-3 peer not known to have it, in one `ProofInv` per
peer every INV_INTERVAL; the receiver asks (`GetProofs`) for the ones it lacks, and the announcer
answers with one `Proofs`. An announcer serves a signer's newest proof, and for one more round of
announcements the one that proof replaced (a peer that asks for what we told it of, just before
or as our announcement of the newer crosses its request, gets it: not an empty answer that counts
as a failure against us). In a dense mesh nearly every node has each proof from its signer
already, so a proof's copies shrink to a few bytes of announcement, batched.

Bounds, for a hostile peer (`limits`): at most MAX_PROOF_IDS ids a message (a longer one does
not decode); announced ids cost the peer's proof rate as proofs do (`peers`); only ids of
registered service nodes are remembered or asked for; at most MAX_PROOFS_ASKED_PER_PEER asked
of one peer at a time; a peer that leaves a GetProofs unanswered for PROOF_REQUEST_TIMEOUT is
dropped; an answer without a question, or with a proof not asked for, is misbehaviour
(SCORE_UNASKED_PROOFS); a peer is sent only the proofs we announced to it, each once. What the
answer holds is judged like any relayed proof (a forged one bans its sender).

Censorship, by peers that announce first and then answer without the proof, with a forgery, or
not at all: every announcer of a wanted id is remembered (one id a signer per peer, the newest;
MAX_ANNOUNCED_PER_PEER an outbound peer, MAX_ANNOUNCED_PER_INBOUND an inbound one,
MAX_ANNOUNCEMENTS for all inbound peers, MAX_WANTED_PROOFS ids that inbound peers announced
first; none timestamped beyond PROOF_CLOCK_TOLERANCE ahead of our clock); an outbound peer is
asked first (an inbound one only after INBOUND_ASK_DELAY, and only if no outbound peer has
announced it meanwhile), and of the others the address that failed least (its failures outlive
its connections), then the oldest connection: we chose the outbound peers, an attacker cannot
fill them by connecting to us. A want none of whose announcers may be asked more waits, with
no timer, until one of them answers. The id stays wanted until a copy is accepted (`accepted`: the intake's
verdict, not its arrival); the next announcer is asked when an answer lacks it, when a copy came
but was not accepted within PROOF_JUDGE_TIMEOUT, and when the peer asked goes.

A peer's state lives from its handshake to its disconnect (`gone`) and is never made again for
a peer that is gone (`connected`): a proof judged after its sender left leaves nothing behind.

What it asks of the node and the peers comes through one small interface (`GossipSide`: the
relay's answers them) and its one clock is the node's (`common.clock.Clock`), read for the
horizon of ids it wants; the deadlines are the caller's timer readings (`now` arguments, the
event loop's monotonic time: a mocked clock moves what is judged, never how often it acts).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Container, Hashable, Iterable
from typing import Final, Protocol

from snode.common.clock import Clock
from snode.common.compiled import mypyc_attr
from snode.core.proofs import UptimeProof
from snode.net import limits as L
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.proof_peers import PARKED, Answer, Peer, PeerProofs, Want, bound
from snode.net.protocol import MAX_PROOF_IDS, GetProofs, ProofId, ProofInv
from snode.params import PROOF_CLOCK_TOLERANCE

INV_INTERVAL: Final = 1.0
"""Seconds between a node's announcements (each peer gets at most one ProofInv a round, holding
every proof accepted since, newest per signer): the batching that makes announcing cheap, at the
cost of up to a second a hop."""

Requests = list[tuple[Peer, GetProofs]]


class GossipSide(Protocol):
    """What the gossip asks of its node and its peers (the relay answers: `net.relay`)."""

    def registry(self) -> Container[bytes]:
        """The registered service nodes' keys now (only those are remembered or asked); looked
        up once a message, not once an id."""
        ...

    def accepted_at(self, pubkey: bytes) -> int:
        """The timestamp of the node's last accepted proof of a key (0: none)."""
        ...

    def connected(self, peer: Peer) -> bool:
        """Whether a peer is connected and handshaken (state is made only for such a peer)."""
        ...

    def outbound(self, peer: Peer) -> bool:
        """Whether we dialled a peer (asked first)."""
        ...

    def address(self, peer: Peer) -> Hashable:
        """A peer's address key (`Peer.key`): its connections share their failures."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)  # a test counts its calls (`make compiled`)
class ProofGossip:
    """One node's proof announcements: pending, served, wanted, per peer."""

    def __init__(self, side: GossipSide, clock: Clock, *, limits: PeerLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        """Its bounds that tests make small (`PeerLimits.max_known_proofs_per_peer`); the others are
        the module constants (`limits`)."""
        self.side = side
        """The node and its peers, as the gossip sees them."""
        self.clock = clock
        """The node's clock (ids from further ahead than PROOF_CLOCK_TOLERANCE are not wanted)."""
        self.failures: OrderedDict[Hashable, int] = OrderedDict()
        """Address -> ids its connections were asked for and brought no copy of that was accepted,
        less one for each that did (MAX_FAILED_ADDRESSES, oldest out). Kept across reconnects: a
        new connection of an address that failed does not start afresh. A peer asked is charged
        whatever it announced since (an attacker could withdraw its offer by announcing a
        made-up newer id first); only a copy it brought of an id we asked it for takes one off
        (a proof it pushes unasked does not). An honest announcer fails now and then (it serves
        only a signer's newest proof) and earns it back; an attacker that answers empty or
        forged only fails."""
        self._connections = 0
        self.pending: dict[bytes, UptimeProof] = {}
        """Proofs accepted since the last announcement, the newest per signer."""
        self.served: dict[bytes, UptimeProof] = {}
        """The newest accepted proof per signer, to answer GetProofs with."""
        self.replaced: dict[bytes, UptimeProof] = {}
        """The proofs a newer one replaced in `served` since the last announcements (the first
        replaced per signer: the one our peers were told of), still served to the peers told of
        them (`PeerProofs.announced`, then `superseded`) until the announcements after next.
        Without it an honest announcer asked between accepting a signer's newer proof and
        announcing it, or as its announcement crossed the request, answered empty and was
        charged as a censor is: on a loaded devnet (a proof per signer each 2 s) as often as an
        attacker's connections that hold each request, so that the attacker's were asked first
        and a victim got no proof for a minute."""
        self._replaced_before: dict[bytes, UptimeProof] = {}
        """`replaced` of the round before."""
        self.wanted: dict[ProofId, Want] = {}
        """Announced proofs we lack, until a copy is accepted or no announcer is left."""
        self.inbound_offers = 0
        """Entries of inbound peers in `PeerProofs.offered` (MAX_ANNOUNCEMENTS)."""
        self.inbound_wants = 0
        """Wants an inbound peer announced first (MAX_WANTED_PROOFS)."""
        self._due: list[tuple[float, int, ProofId]] = []
        """A heap of (due, order, id): the wants to look at in `due`, stale entries skipped."""
        self._order = 0
        self.peers: dict[Peer, PeerProofs] = {}

    def registered(self, key: bytes) -> bool:
        """Whether `key` is a registered service node's."""
        return key in self.side.registry()

    def state(self, peer: Peer) -> PeerProofs | None:
        """What we know of `peer`; None for a peer that is gone (its state is never made again)."""
        state = self.peers.get(peer)
        side = self.side
        if state is None and side.connected(peer):
            self._connections += 1
            state = self.peers[peer] = PeerProofs(outbound=side.outbound(peer), address=side.address(peer),
                                                  order=self._connections, cap=self.limits.max_known_proofs_per_peer)
        return state

    # --- out ----------------------------------------------------------------------------------

    def accepted(self, proof: UptimeProof, source: Peer | None) -> None:
        """The node accepted `proof` (from `source`, None for our own): to be announced, and no
        longer wanted."""
        pubkey, timestamp, served = proof.pubkey, proof.timestamp, self.served
        older = served.pop(pubkey, None)
        if older is not None and older.timestamp < timestamp:
            self.replaced.setdefault(pubkey, older)
        served[pubkey] = proof
        if len(served) > L.MAX_WANTED_PROOFS:  # keys that left the registry long ago
            del served[next(iter(served))]
        self.pending[pubkey] = proof
        want = self.wanted.get((pubkey, timestamp))
        if want is not None:
            self._drop_want((pubkey, timestamp))
        if source is None:
            return
        if want is not None and want.asked is source:
            self._forgive(self.side.address(source))  # it brought what we asked it for
        state = self.state(source)
        if state is not None:
            state.learn(pubkey, timestamp)

    def announcements(self, peers: Iterable[Peer]) -> list[tuple[Peer, list[ProofInv]]]:
        """Each peer's ProofInv messages for the proofs accepted since the last call that it is
        not known to have (`peers`: the version-3 ones)."""
        pending, self.pending = self.pending, {}
        self._replaced_before, self.replaced = self.replaced, {}  # served for one more round
        if not pending:
            return []
        news = [(pubkey, proof.timestamp) for pubkey, proof in pending.items()]
        out = []
        for peer in peers:
            state = self.state(peer)
            if state is None:
                continue
            known = state.known
            ids = [(pubkey, timestamp) for pubkey, timestamp in news if known.get(pubkey, -1) < timestamp]
            if ids:
                state.told(ids)
                out.append((peer, [ProofInv(ids[i:i + MAX_PROOF_IDS]) for i in range(0, len(ids), MAX_PROOF_IDS)]))
        return out

    def serve(self, peer: Peer, ids: list[ProofId]) -> list[UptimeProof]:
        """The proofs to answer `peer`'s GetProofs with: those asked that we announced to it
        and still have (the newest of a signer, or the one it replaced: `replaced`), each once."""
        state = self.state(peer)
        if state is None:
            return []
        announced, superseded, served, out = state.announced, state.superseded, self.served, []
        for pubkey, timestamp in ids:
            if announced.get(pubkey) == timestamp:
                told = announced
            elif superseded.get(pubkey) == timestamp:
                told = superseded
            else:
                continue
            for held in (served, self.replaced, self._replaced_before):
                proof = held.get(pubkey)
                if proof is not None and proof.timestamp == timestamp:
                    del told[pubkey]
                    out.append(proof)
                    break
        return out

    # --- in -----------------------------------------------------------------------------------

    def announced(self, peer: Peer, ids: list[ProofId], now: float) -> GetProofs | None:
        """`peer` announced `ids`: remember it as an announcer of those we lack; the GetProofs
        to send it now, if any (an outbound peer is asked at once, an inbound one later: `due`)."""
        state = self.state(peer)
        if state is None:
            return None
        ask: list[ProofId] = []
        horizon = int(self.clock.time()) + PROOF_CLOCK_TOLERANCE
        # One pass, the common cases first and without a call: in a dense mesh most ids are of
        # proofs we have (from their signers) or were offered already.
        registry, known, offered, served, accepted_at = self.side.registry(), state.known, state.offered, \
            self.served, self.side.accepted_at
        for pubkey, timestamp in ids:
            if timestamp > horizon or pubkey not in registry:
                continue
            if known.get(pubkey, -1) < timestamp:  # `state.learn`, bounded after the loop
                known.pop(pubkey, None)
                known[pubkey] = timestamp
            if offered.get(pubkey, -1) >= timestamp:
                continue
            proof = served.get(pubkey)
            if (proof is not None and proof.timestamp >= timestamp) or accepted_at(pubkey) >= timestamp:
                continue  # `_have`
            key = (pubkey, timestamp)
            if pubkey in offered:
                self._withdraw(peer, (pubkey, state.offered[pubkey]))
            if not self._room(state, key):
                continue
            want = self.wanted.get(key)
            if want is None:
                want = self.wanted[key] = Want(inbound=not state.outbound)
                self.inbound_wants += want.inbound
                self._schedule(key, want, now if state.outbound else now + L.INBOUND_ASK_DELAY)
            if state.outbound and want.asked is None and state.asked + len(ask) < L.MAX_PROOFS_ASKED_PER_PEER:
                want.asked = peer
                self._schedule(key, want, now + L.PROOF_REQUEST_TIMEOUT)
                ask.append(key)
            else:
                want.announcers.append(peer)
                if want.due == PARKED:  # an announcer that may have room: looked at again
                    self._schedule(key, want, now if state.outbound else now + L.INBOUND_ASK_DELAY)
            self._offer(state, key)
        bound(known, state.cap)
        return self._ask(state, ask, now)

    def answered(self, peer: Peer, proofs: list[UptimeProof], now: float) -> Answer:
        """`peer` sent Proofs: the answer to our oldest open GetProofs to it. What it brought
        stays wanted until accepted; what it lacked is asked of the next announcer now."""
        state = self.state(peer)
        if state is None:
            return Answer([], "", [])
        if not state.requests:
            return Answer([], "sent uptime proofs it was not asked for", [])
        _, ids = state.requests.popleft()
        state.asked -= len(ids)
        open_ids = set(ids)
        taken = []
        for proof in proofs:
            key = (proof.pubkey, proof.timestamp)
            if key not in open_ids:
                return Answer([], "sent uptime proofs it was not asked for", self._next(peer, ids, now))
            open_ids.discard(key)
            state.learn(proof.pubkey, proof.timestamp)
            want = self.wanted.get(key)
            if want is not None and want.asked is peer and now + L.PROOF_JUDGE_TIMEOUT < want.due:
                self._schedule(key, want, now + L.PROOF_JUDGE_TIMEOUT)  # only earlier: one entry a time
            taken.append(proof)
        requests = self._next(peer, [k for k in ids if k in open_ids], now)
        return Answer(taken, "", requests + self._unpark(state, now))

    def due(self, now: float) -> Requests:
        """The GetProofs for the wants whose time has come: first asks after INBOUND_ASK_DELAY,
        and the next announcer of each asked id no copy of which was accepted in time."""
        heap = self._due
        late: dict[ProofId, None] = {}
        while heap and heap[0][0] <= now:
            when, _, key = heapq.heappop(heap)
            want = self.wanted.get(key)
            if want is not None and want.due == when:
                late[key] = None  # once, even with two entries at its time
        return self._next(None, late, now)

    def overdue(self, now: float) -> list[Peer]:
        """Peers with a GetProofs open past its deadline (to be dropped)."""
        return [peer for peer, state in self.peers.items() if state.requests and state.requests[0][0] < now]

    def gone(self, peer: Peer, now: float) -> Requests:
        """`peer` disconnected: forget it, and ask the next announcers for what it owed us."""
        state = self.peers.pop(peer, None)
        if state is None:
            return []
        owed, alone = [], []
        for key in state.offered.items():
            want = self.wanted.get(key)
            if want is None:
                continue
            if peer in want.announcers:
                want.announcers.remove(peer)
            if want.asked is peer:
                owed.append(key)
            elif want.asked is None and not want.announcers:
                alone.append(key)
        for _ in owed:
            self._charge(state.address)
        if not state.outbound:
            self.inbound_offers -= len(state.offered)
        state.offered.clear()
        for key in alone:
            self._drop_want(key)
        return self._next(peer, owed, now)

    # --- helpers ------------------------------------------------------------------------------

    def _have(self, key: ProofId) -> bool:
        pubkey, timestamp = key
        proof = self.served.get(pubkey)
        return self.side.accepted_at(pubkey) >= timestamp or (proof is not None and proof.timestamp >= timestamp)

    def _room(self, state: PeerProofs, key: ProofId) -> bool:
        """Whether `state`'s peer may be remembered as an announcer of `key` (the bounds)."""
        if state.outbound:
            return len(state.offered) < L.MAX_ANNOUNCED_PER_PEER
        return (len(state.offered) < L.MAX_ANNOUNCED_PER_INBOUND and self.inbound_offers < L.MAX_ANNOUNCEMENTS
                and (key in self.wanted or self.inbound_wants < L.MAX_WANTED_PROOFS))

    def _withdraw(self, peer: Peer, key: ProofId) -> None:
        """`peer` announced a newer proof of `key`'s signer: it no longer serves `key` (if it
        was asked for it, its answer or its time-out settles that, and charges it if it lacks
        the copy: a made-up newer id does not excuse an empty answer)."""
        self._unoffer(peer, key)
        want = self.wanted.get(key)
        if want is not None and peer in want.announcers:
            want.announcers.remove(peer)
            if want.asked is None and not want.announcers:
                self._drop_want(key)

    def _offer(self, state: PeerProofs, key: ProofId) -> None:
        state.offered[key[0]] = key[1]
        self.inbound_offers += not state.outbound

    def _unoffer(self, peer: Peer, key: ProofId) -> None:
        state = self.peers.get(peer)
        if state is not None and state.offered.get(key[0]) == key[1]:
            del state.offered[key[0]]
            state.parked.discard(key)
            self.inbound_offers -= not state.outbound

    def _schedule(self, key: ProofId, want: Want, when: float) -> None:
        want.due = when
        self._order += 1
        heapq.heappush(self._due, (when, self._order, key))

    def _drop_want(self, key: ProofId) -> None:
        want = self.wanted.pop(key, None)
        if want is None:
            return
        self.inbound_wants -= want.inbound
        for peer in want.announcers:
            self._unoffer(peer, key)
        if want.asked is not None:
            self._unoffer(want.asked, key)

    def _ask(self, state: PeerProofs, ids: list[ProofId], now: float) -> GetProofs | None:
        if not ids:
            return None
        state.requests.append((now + L.PROOF_REQUEST_TIMEOUT, ids))
        state.asked += len(ids)
        return GetProofs(ids)

    def _next(self, failed: Peer | None, keys: Iterable[ProofId], now: float) -> Requests:
        """Ask the next announcer of each of `keys`, outbound first, grouped per peer: `failed`
        (None: whoever was asked, if anyone) did not bring a copy that was accepted. A want
        with no announcer left is let go."""
        asks: dict[Peer, list[ProofId]] = {}
        for key in keys:
            want = self.wanted.get(key)
            if want is None or (failed is not None and want.asked is not failed):
                continue  # accepted, or already asked of another
            if self._have(key):
                self._drop_want(key)
                continue
            if want.asked is not None:
                self._failed(want.asked, key)
                want.asked = None
            if not want.announcers:
                self._drop_want(key)
                continue
            chosen = self._choose(want.announcers, asks)
            if chosen is None:  # every announcer has its fill of our requests
                self._park(key, want)
                continue
            want.announcers.remove(chosen)
            want.asked = chosen
            self._schedule(key, want, now + L.PROOF_REQUEST_TIMEOUT)
            asks.setdefault(chosen, []).append(key)
        out = []
        for peer, ids in asks.items():
            for i in range(0, len(ids), MAX_PROOF_IDS):
                request = self._ask(self.peers[peer], ids[i:i + MAX_PROOF_IDS], now)
                if request is not None:
                    out.append((peer, request))
        return out

    def _failed(self, peer: Peer, key: ProofId) -> None:
        """`peer` was asked for `key` and brought no copy that was accepted: not asked for it
        again, and one failure more."""
        state = self.peers.get(peer)
        if state is not None:
            self._unoffer(peer, key)
            self._charge(state.address)

    def _charge(self, address: Hashable) -> None:
        failures = self.failures
        failures[address] = failures.pop(address, 0) + 1
        if len(failures) > L.MAX_FAILED_ADDRESSES:
            del failures[next(iter(failures))]

    def _forgive(self, address: Hashable) -> None:
        left = self.failures.pop(address, 0) - 1
        if left > 0:
            self.failures[address] = left

    def _park(self, key: ProofId, want: Want) -> None:
        """No announcer of `key` may be asked more: no timer, until one of them answers (or
        another announces it), so that such wants cost nothing meanwhile."""
        want.due = PARKED
        for peer in want.announcers:
            self.peers[peer].parked.add(key)

    def _unpark(self, state: PeerProofs, now: float) -> Requests:
        """`state`'s peer answered: ask for the wants parked on it until it has no room left.
        Only live wants count: one we have a proof as new of is let go, and one given to a
        better announcer leaves this one's room for the next (each parked key looked at once)."""
        parked, wanted, out = state.parked, self.wanted, Requests()
        budget = len(parked)
        while parked and budget and state.asked < L.MAX_PROOFS_ASKED_PER_PEER:
            keys: list[ProofId] = []
            room = L.MAX_PROOFS_ASKED_PER_PEER - state.asked
            while parked and budget and len(keys) < room:
                key, budget = parked.pop(), budget - 1
                want = wanted.get(key)
                if want is None or want.asked is not None or want.due != PARKED:
                    continue
                if self._have(key):
                    self._drop_want(key)
                    continue
                keys.append(key)
            out += self._next(None, keys, now)
        return out

    def _choose(self, announcers: list[Peer], asks: dict[Peer, list[ProofId]]) -> Peer | None:
        """The announcer to ask, of those that may be asked more: outbound before inbound (an
        attacker can make inbound connections, not outbound ones), then the address that failed
        least, then the oldest connection (a reconnecting attacker's new one comes last)."""
        best, best_rank, failures = None, (False, 0, 0), self.failures
        for peer in announcers:
            state = self.peers[peer]
            if state.asked + len(asks.get(peer, ())) >= L.MAX_PROOFS_ASKED_PER_PEER:
                continue
            rank = (not state.outbound, failures.get(state.address, 0), state.order)
            if best is None or rank < best_rank:
                best, best_rank = peer, rank
        return best

    def next_due(self) -> float | None:
        """When `due` may next have something to ask (a wake-up time; None: nothing wanted).
        The stale entries on top (a want accepted, or rescheduled) go first: each asked want
        leaves its request's deadline behind when its copy is accepted, and a timer set for one
        of those would wake to ask nothing."""
        heap, wanted = self._due, self.wanted
        while heap:
            when, _, key = heap[0]
            want = wanted.get(key)
            if want is not None and want.due == when:
                return when
            heapq.heappop(heap)
        return None
