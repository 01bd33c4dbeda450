"""Uptime proofs relayed by announcement (peer protocol 3, `net.proof_gossip`) on a real daemon:
a relayed proof is announced to a version-3 peer and served when it asks, pushed in full to a
version-2 peer; and each bound of the new messages holds against a fake peer (an answer without
a question, a junk answer, too many ids in one announcement, an unanswered request,
announcements over the proof rate; the cap on what is asked of one peer at once needs more
signers than a functional devnet has: `tests/unit/test_proof_gossip.py`)."""

from __future__ import annotations

import os
import select
import signal
import time

import msgspec

from snode.core.proofs import UptimeProof
from snode.devchain import key_from_label
from snode.net import limits as L
from snode.net import protocol as P
from snode.params import COIN
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    next_loopback_ip,
    scaled,
    wait_until,
)
from tests.functional.hostile import assert_serving, ban_reasons, pong
from tests.functional.p2p import FakePeer, cut_off_after
from tests.functional.sn_helpers import SOLO, fund_and_unlock, record, register

log = narrator(__name__)


def proven_victim(nodes):
    """A node and a registered service node that proves to it: (the node, the SN's key)."""
    victim = nodes.add()
    sn = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check"])
    connect_nodes(sn, victim)
    return victim, proving(victim, sn)


def proving(victim, sn):
    """Register `sn` through `victim` and wait until the victim has a proof of it: its key."""
    operator = key_from_label("proof inv operator")
    fund_and_unlock(victim, {operator.public: SOLO + COIN})
    register(sn, victim, operator, SOLO)
    victim.generate_blocks(blocks=1)
    pk = bytes.fromhex(sn.get_service_node_key()["service_node_pubkey"])
    wait_until(lambda: record(victim, pk.hex())["last_uptime_proof"] > 0, timeout=30, what="the SN's first proof")
    return pk


def cut_off(node, others):
    """Make `node` refuse every connection with `others` (its deny_ips, read on SIGUSR1)."""
    (node.data_dir / "deny_ips").write_text("".join(f"{n.ip}\n" for n in others))
    os.kill(node.process.pid, signal.SIGUSR1)


def fake(node, version=P.PROTOCOL_VERSION):
    peer = FakePeer(node, source_ip=next_loopback_ip())
    peer.send(peer.hello(version=version))
    assert isinstance(peer.receive(), P.Hello)
    return peer


def of(pk):
    """Whether a message is a relayed proof of `pk` or an announcement holding one."""
    def wanted(message):
        if isinstance(message, P.Proof):
            return message.proof.pubkey == pk
        return isinstance(message, P.ProofInv) and any(key == pk for key, _ in message.ids)
    return wanted


def test_a_relayed_proof_is_announced_served_once_and_pushed_to_old_peers(nodes):
    victim, pk = proven_victim(nodes)
    log.info("A version-3 peer is told of the SN's proof by id, never sent it unasked")
    new = fake(victim)
    try:
        inv = new.receive_until(of(pk), timeout=15)
        assert isinstance(inv, P.ProofInv), inv
        ident = next(i for i in inv.ids if i[0] == pk)
        new.send(P.GetProofs([ident]))
        answer = new.receive_until(lambda m: isinstance(m, P.Proofs), timeout=10)
        assert [(p.pubkey, p.timestamp) for p in answer.proofs] == [ident]
        log.info("Asked again, or for a proof it was not told of: an empty answer")
        new.send(P.GetProofs([ident, (os.urandom(32), 1)]))
        again = new.receive_until(lambda m: isinstance(m, P.Proofs), timeout=10)
        assert_equal(again.proofs, [])
    finally:
        new.close()
    log.info("A version-2 peer gets the proof pushed, as before")
    old = fake(victim, version=2)
    try:
        pushed = old.receive_until(of(pk), timeout=15)
        assert isinstance(pushed, P.Proof) and pushed.relayed, pushed
    finally:
        old.close()


def test_the_bounds_of_proof_announcements_hold(nodes):
    victim, pk = proven_victim(nodes)
    future = int(time.time()) + 120  # newer than any proof of the SN in this test, within the clock tolerance
    junk = UptimeProof(pk, future + 99_999, "1.2.3.4", 1, 1, "0.1.0", bytes(64))

    log.info("An answer with no request open: banned")
    source = cut_off_after(victim, P.frame(P.Proofs([junk])), "unasked Proofs")
    assert "not asked for" in ban_reasons(victim)[source], ban_reasons(victim)

    log.info("More than %d ids in one announcement: does not decode, banned", P.MAX_PROOF_IDS)
    greedy = fake(victim)
    greedy_ip = greedy.sock.getsockname()[0]
    try:
        pong(greedy, 1)  # past the handshake's small frames
        greedy.send(P.ProofInv([(pk, future)] * (P.MAX_PROOF_IDS + 1)))
        assert greedy.closed_by_node(), "an oversized ProofInv was taken"
    finally:
        greedy.close()
    assert "undecodable" in ban_reasons(victim)[greedy_ip], ban_reasons(victim)

    log.info("A junk answer (a proof that was not asked for): banned")
    liar = fake(victim)
    liar_ip = liar.sock.getsockname()[0]
    try:
        liar.send(P.ProofInv([(pk, future)]))
        asked = liar.receive_until(lambda m: isinstance(m, P.GetProofs), timeout=10)
        assert_equal(asked.ids, [(pk, future)])
        liar.send(P.Proofs([junk]))
        assert liar.closed_by_node(), "a junk answer was taken"
    finally:
        liar.close()
    assert "not asked for" in ban_reasons(victim)[liar_ip], ban_reasons(victim)

    log.info("A peer announces a proof, then never answers; another announces the same: the "
             "first is dropped (not banned) after %g s, and the second asked for what the first owed",
             L.PROOF_REQUEST_TIMEOUT)
    ident = (pk, future + 1)
    staller, backup = fake(victim), fake(victim)
    staller_ip = staller.sock.getsockname()[0]
    try:
        staller.send(P.ProofInv([ident]))
        asked = staller.receive_until(lambda m: isinstance(m, P.GetProofs), timeout=10)
        assert_equal(asked.ids, [ident])
        backup.send(P.ProofInv([ident]))
        started = time.monotonic()
        assert staller.closed_by_node(timeout=L.PROOF_REQUEST_TIMEOUT + 10), "an unanswered request kept its peer"
        assert time.monotonic() - started > L.PROOF_REQUEST_TIMEOUT / 2
        fallback = backup.receive_until(lambda m: isinstance(m, P.GetProofs), timeout=10)
        assert_equal(fallback.ids, [ident])
    finally:
        staller.close()
        backup.close()
    assert staller_ip not in ban_reasons(victim), "a slow peer is dropped, not banned"

    log.info("Announcements beyond the proof rate: dropped and scored, the flooder banned")
    flooder = fake(victim)
    try:
        batch = [(os.urandom(32), future)] * P.MAX_PROOF_IDS
        count = int(L.PROOF_BURST) // P.MAX_PROOF_IDS + L.BAN_THRESHOLD // L.SCORE_PROOF_FLOOD + 20
        try:
            flooder.send_raw(P.frame(P.ProofInv(batch)) * count)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert flooder.closed_by_node(timeout=30), "the flooder is still connected"
    finally:
        flooder.close()
    assert any("proof flooding" in r for r in ban_reasons(victim).values()), ban_reasons(victim)
    assert_serving(victim)


def test_announcers_that_answer_empty_or_forged_cannot_censor_a_proof(nodes):
    """An attacker's connections announce each of a service node's proofs first (it hears them
    from the signer itself, the honest daemon one announcement later), hold our request a second
    and answer without the proof (four of them), or with a forged copy (a fifth). The victim
    remembers every announcer, asks one after another, keeps the id wanted until a copy is
    accepted, asks the announcers that failed it last, and gets the proofs from the honest one
    within a bound. The attacker's connections are older than the honest one's (among inbound
    announcers that did not fail, the oldest connection is asked first): each is asked once."""
    victim, honest, middle = nodes.add(), nodes.add(), nodes.add()
    sn = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check"])
    cut_off(victim, [sn, middle])  # the victim hears the signer's proofs only by announcement
    attackers = [fake(victim) for _ in range(5)]
    forger_ip = attackers[-1].sock.getsockname()[0]
    spy = None
    try:
        connect_nodes(honest, victim)  # inbound at the victim, as the attacker's connections are
        connect_nodes(honest, middle)
        connect_nodes(middle, sn)
        pk = proving(victim, sn)
        log.info("The attacker listens to the signer and announces each of its proofs first, on 5 connections")
        spy = FakePeer(sn, source_ip=next_loopback_ip())
        spy.handshake()
        first, asked = attack(victim, pk, spy, attackers)
        log.info("%d requests to the attacker's connections", asked)
        assert record(victim, pk.hex())["last_uptime_proof"] >= first, "the proofs were censored"
        assert asked >= 5, "the attacker's announcers were not each asked"
    finally:
        if spy is not None:
            spy.close()
        for attacker in attackers:
            attacker.close()
    assert "forged uptime proof" in ban_reasons(victim).get(forger_ip, ""), ban_reasons(victim)
    assert_serving(victim)


def attack(victim, pk, spy, attackers, hold=1.0, bound=60):
    """Announce each proof of `pk` the spy hears on every attacker connection; answer each
    request after `hold` seconds, empty, or forged by the last connection; until the victim
    accepts a proof at least as new as the first announced, or `bound` (scaled) seconds. The
    first timestamp announced, and the requests the attackers got."""
    first, asked, held = 0, 0, []
    forged: list[UptimeProof] = []  # the signer's proof, its signature replaced
    deadline, checked = time.monotonic() + scaled(bound), 0.0
    peers = [spy, *attackers]
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.sock for p in peers if p.sock.fileno() >= 0], [], [], 0.05)
        for i, peer in enumerate(peers):
            for message in drain(peer) if peer.sock in ready or peer.inbox else []:
                if i == 0 and isinstance(message, P.Proof) and message.proof.pubkey == pk:
                    first = first or message.proof.timestamp
                    for attacker in attackers:
                        send_quietly(attacker, P.ProofInv([(pk, message.proof.timestamp)]))
                    forged[:] = [msgspec.structs.replace(message.proof, signature=bytes(64))]
                elif i > 0 and isinstance(message, P.GetProofs):
                    asked += 1
                    held.append((time.monotonic() + hold, i, message.ids))
        for answer in [h for h in held if h[0] <= time.monotonic()]:
            held.remove(answer)
            _, i, ids = answer
            forger = forged if i == len(attackers) else []
            copies = [msgspec.structs.replace(copy, timestamp=ts) for copy in forger for _, ts in ids]
            send_quietly(peers[i], P.Proofs(copies))
        if first and time.monotonic() > checked + 0.5:
            checked = time.monotonic()
            if record(victim, pk.hex())["last_uptime_proof"] >= first:
                break
    assert first, "the signer sent no proof to the attacker's listener"
    return first, asked


def send_quietly(peer, message):
    """Send, unless the node has closed the connection (the forger, once banned)."""
    try:
        peer.send(message)
    except OSError:
        pass


def drain(peer):
    """The messages a fake peer has received (what its socket holds now)."""
    out = []
    try:
        out.append(peer.receive(timeout=0.01))
        while peer.inbox:
            out.append(peer.inbox.pop(0))
    except (TimeoutError, OSError):
        pass
    return out
