"""Uptime proofs: what a service node signs to say it is up, and when a node accepts one."""

from __future__ import annotations

import functools
import ipaddress
import re
from enum import IntEnum
from typing import Annotated, NamedTuple

import msgspec

from snode.core.crypto import SigningKey, verify
from snode.core.encoding import domain_hash, encode
from snode.core.errors import SnodeError
from snode.core.sigchecks import SigCheck
from snode.core.types import PubKey, Signature, Timestamp
from snode.params import ForkRules, NetworkParams

Port = Annotated[int, msgspec.Meta(ge=1, le=65_535)]


class ProofRefusal(IntEnum):
    """Why a node refuses an uptime proof: the closed set of codes a `ProofRejected` carries
    back to the proof's signer. The signer words the refusal itself from the code (`refusal_words`):
    no text from the network reaches its log, status line or operator."""

    NOT_REGISTERED = 1
    CLOCK = 2
    NOT_NEWER = 3
    RATE = 4
    IP_NOT_AN_ADDRESS = 5
    IP_NOT_PUBLIC = 6
    IP_NOT_THE_CONNECTION = 7
    """The declared IP is not the address the receiver sees the signer connect from."""
    SIGNATURE = 8
    OUTDATED = 9
    """From a fork whose proofs carry a structured version (`ForkRules.proof_version` 2): the
    proof's snoded is below the fork's `min_sn_version`, or it says no version (an older one)."""


class InvalidProof(SnodeError):
    """An uptime proof this node does not accept: `reason` for our log, `code` for the sender."""

    def __init__(self, reason: str, code: ProofRefusal) -> None:
        super().__init__(reason)
        self.code = code


class BadProofSignature(InvalidProof):
    """A proof whose signature does not verify: forged, never an honest race."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, ProofRefusal.SIGNATURE)


def refusal_words(code: ProofRefusal, *, declared_ip: str, params: NetworkParams, seen_ip: bytes = b"",
                  upgrade_to: str = "a newer snoded") -> str:
    """A peer's refusal of this node's own proof, in our words, for the operator; `seen_ip` (a
    packed address) is where the peer sees this node connect from, if it said."""
    seen = f" ({ipaddress.ip_address(seen_ip)})" if len(seen_ip) in (4, 16) else ""
    return {
        ProofRefusal.NOT_REGISTERED: "the peer does not see this node's key registered (is it synced?)",
        ProofRefusal.CLOCK: (f"proof timestamp is more than {params.proof_clock_tolerance} s from the peer's "
                             "clock: check this node's clock"),
        ProofRefusal.NOT_NEWER: "the peer has a proof of this node as new already",
        ProofRefusal.RATE: f"proofs are rate-limited to two per {params.proof_interval // 2} s",
        ProofRefusal.IP_NOT_AN_ADDRESS: f"declared IP '{declared_ip}' is not an IP address",
        ProofRefusal.IP_NOT_PUBLIC: f"declared IP {declared_ip} is not a public address",
        ProofRefusal.IP_NOT_THE_CONNECTION: (f"declared IP {declared_ip} is not the address peers see "
                                             f"this node connect from{seen}: check --service-node-public-ip"),
        ProofRefusal.SIGNATURE: "the proof's signature does not verify",
        ProofRefusal.OUTDATED: f"peers refuse this snoded's proofs as outdated: upgrade snoded to {upgrade_to}",
    }[code]


Semver = tuple[int, int, int]

_PROOF_VERSION = re.compile(r"(\d{1,5})\.(\d{1,5})\.(\d{1,5}) ([a-z][a-z0-9]{0,7})@(\d{1,10})")
_SEMVER = re.compile(r"(\d{1,5})\.(\d{1,5})\.(\d{1,5})")


class ProofVersion(NamedTuple):
    """What a proof's `version` says from a fork of `proof_version` 2: `MAJOR.MINOR.PATCH NAME@HEIGHT`,
    the sender's snoded and the newest fork its schedule knows (at FAR_AHEAD: known, not scheduled)."""

    snoded: Semver
    fork: str
    fork_height: int

    def text(self) -> str:
        return f"{'.'.join(map(str, self.snoded))} {self.fork}@{self.fork_height}"


@functools.lru_cache(maxsize=256)
def parse_proof_version(text: str) -> ProofVersion | None:
    """A proof's structured version, None when `text` is not one (a free-text, v1 version).
    Remembered: a proof's version is read three times on its way in (its two checks and the
    accept), and a network runs a few versions (a peer that makes up many only turns the
    bounded cache over)."""
    match = _PROOF_VERSION.fullmatch(text)
    if match is None:
        return None
    major, minor, patch, fork, height = match.groups()
    return ProofVersion((int(major), int(minor), int(patch)), fork, int(height))


def parse_semver(text: str) -> Semver | None:
    """The MAJOR.MINOR.PATCH a version starts with (a v1 proof's free text, `0.2.0`), if any."""
    match = _SEMVER.match(text)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def semver_text(version: Semver) -> str:
    return ".".join(map(str, version))


def check_proof_version(proof: UptimeProof, rules: ForkRules) -> None:
    """From a fork of `proof_version` 2 (`rules`, the fork of the receiver's next block): the
    proof must say its snoded, at least the fork's `min_sn_version`; InvalidProof (OUTDATED)."""
    if rules.proof_version < 2:
        return
    parsed = parse_proof_version(proof.version)
    if parsed is None:
        raise InvalidProof(f"proof of {proof.pubkey.hex()[:16]} says no snoded version, which fork {rules.name}'s "
                           f"proofs carry (an older snoded; {semver_text(rules.min_sn_version)} or later needed)",
                           ProofRefusal.OUTDATED)
    if parsed.snoded < rules.min_sn_version:
        raise InvalidProof(f"proof of {proof.pubkey.hex()[:16]} is from snoded {semver_text(parsed.snoded)}, below "
                           f"the {semver_text(rules.min_sn_version)} fork {rules.name} needs", ProofRefusal.OUTDATED)


class UptimeProof(msgspec.Struct, frozen=True, array_like=True):
    """A service node's signed statement that it is up and where it can be reached."""

    pubkey: PubKey
    timestamp: Timestamp
    public_ip: Annotated[str, msgspec.Meta(max_length=45)]
    p2p_port: Port
    quorumnet_port: Port
    version: Annotated[str, msgspec.Meta(max_length=32)]
    signature: Signature


def proof_message(network_id: int, proof: UptimeProof) -> bytes:
    """What the service node key signs: the proof without its signature."""
    unsigned = msgspec.structs.replace(proof, signature=bytes(64))
    return domain_hash(b"uptime-proof", network_id, encode(unsigned))


def make_proof(
    key: SigningKey, params: NetworkParams, *, timestamp: int, public_ip: str, p2p_port: int,
    quorumnet_port: int, version: str,
) -> UptimeProof:
    """A signed uptime proof."""
    unsigned = UptimeProof(key.public, timestamp, public_ip, p2p_port, quorumnet_port, version, bytes(64))
    return msgspec.structs.replace(
        unsigned, signature=key.sign(proof_message(params.network_id, unsigned))
    )


def check_proof(
    proof: UptimeProof, params: NetworkParams, *, registered: bool, now: int, last_accepted: int,
    previous_accepted: int = 0,
) -> None:
    """DESIGN.md section 5: registered key, clock within 5 minutes, newer than the last one,
    at most two in any half interval, good signature. InvalidProof names the failed rule.

    `previous_accepted` is the proof accepted before the last one: measuring the rate from it
    lets one proof through between two regular ones, so an operator's `send_uptime_proof` right
    after the automatic proof is always taken (the specification's recovery step), while a
    flood still is not."""
    check_proof_rules(proof, params, registered=registered, now=now, last_accepted=last_accepted,
                      previous_accepted=previous_accepted)
    # After the cheap checks: in a mesh most copies of a proof are duplicates.
    if not verify(proof.pubkey, proof_message(params.network_id, proof), proof.signature):
        raise BadProofSignature("proof signature is not valid")


def check_proof_rules(
    proof: UptimeProof, params: NetworkParams, *, registered: bool, now: int, last_accepted: int,
    previous_accepted: int = 0,
) -> None:
    """Every rule of `check_proof` but the signature (which a node under load checks in a batch,
    `proof_sig_check`)."""
    if not registered:
        raise InvalidProof(f"key {proof.pubkey.hex()[:16]} is not a registered service node",
                           ProofRefusal.NOT_REGISTERED)
    if abs(proof.timestamp - now) > params.proof_clock_tolerance:
        raise InvalidProof(
            f"proof timestamp {proof.timestamp} is more than {params.proof_clock_tolerance} s from "
            f"this node's clock ({now}): check the sender's clock", ProofRefusal.CLOCK
        )
    if proof.timestamp <= last_accepted:
        raise InvalidProof("proof is not newer than the last accepted one", ProofRefusal.NOT_NEWER)
    if previous_accepted and proof.timestamp - previous_accepted < params.proof_interval // 2:
        raise InvalidProof(
            f"proofs are rate-limited to two per {params.proof_interval // 2} s", ProofRefusal.RATE
        )
    refusal = _declared_ip_refusal(proof.public_ip, params.private_public_ip_allowed)
    if refusal is not None:
        raise InvalidProof(*refusal)


@functools.lru_cache(maxsize=8192)
def _declared_ip_refusal(public_ip: str, private_allowed: bool) -> tuple[str, ProofRefusal] | None:
    """Why a declared IP is refused, None if it is not. Remembered: every proof of a node declares
    the same IP, and parsing one costs a fifth of the node's work on a proof besides the signature."""
    try:
        ip = ipaddress.ip_address(public_ip)
    except ValueError:
        return f"declared IP {public_ip!r} is not an IP address", ProofRefusal.IP_NOT_AN_ADDRESS
    if not private_allowed and not ip.is_global:
        return f"declared IP {ip} is not a public address", ProofRefusal.IP_NOT_PUBLIC
    return None


def proof_sig_check(proof: UptimeProof, params: NetworkParams) -> SigCheck:
    """The proof's signature as a check for a BatchVerifier."""
    return SigCheck(proof.pubkey, proof_message(params.network_id, proof), proof.signature,
                    f"uptime proof of {proof.pubkey.hex()[:16]}")
