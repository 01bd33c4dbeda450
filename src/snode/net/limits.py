"""Every bound that keeps a hostile peer from costing this node more than a little: one table, named.

docs/SECURITY.md lists each with its reason; the code that enforces one imports it from here.
A peer reaches the P2P port from anywhere, so each number bounds what one connection (or one
network group of them) may make this node keep in memory, compute, or send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- misbehaviour (Bitcoin Core's Misbehaving) -----------------------------------------------

BAN_THRESHOLD: Final = 100
"""Points at which `PeerManager.misbehaving` bans a peer's address for BAN_SECONDS."""
BAN_SECONDS: Final = 600
SCORE_DECAY: Final = BAN_THRESHOLD / 3_600
"""Points a score loses per second (a whole ban's worth an hour): an honest peer's rare slip
never adds up to a ban, and a reconnect does not reset a score (`bans.Scores`, per address)."""
MAX_SCORED: Final = 10_000
"""Addresses with a score; when full, the lowest score goes (an attacker's many fresh addresses
push out each other, not the high score of one about to be banned)."""
MAX_BANS: Final = 10_000
"""Addresses banned at once; expired bans are purged at each ban, and when full the oldest goes.
A ban, a score and MAX_PER_IP hold an IPv4 address, or an IPv6 /64 (`bans.address_key`)."""
SCORE_PROTOCOL: Final = 100
"""An oversize frame, undecodable bytes, a block over MAX_BLOCK_BYTES, an invalid block, a
forged signature, a lie about its chain: no honest peer does any of these."""
SCORE_UNASKED_VERDICT: Final = 100
"""A ProofAck or ProofRejected for a proof this node never sent that peer."""
SCORE_JUNK_PROOF: Final = 1
"""An uptime proof of a key that is not a registered service node (while this node is not
syncing: a node behind may not know a new registration yet)."""
SCORE_PROOF_FLOOD: Final = 1
"""An uptime proof over the peer's proof rate: dropped unread."""
SCORE_UNKNOWN_PRODUCER: Final = 10
"""A block off our tip, up to ORPHAN_AHEAD above it or anywhere below, whose producer is neither
an authority nor a registered service node (refused on its header alone)..."""
SCORE_UNKNOWN_AHEAD: Final = 1
"""...and such a block further ahead (a node far behind may not know a new producer yet)."""

# --- orphan blocks and forks -----------------------------------------------------------------

MAX_ORPHANS: Final = 100
MAX_ORPHAN_BYTES: Final = 16 * 1024 * 1024
"""Bytes of blocks waiting for their parent, all peers together..."""
MAX_ORPHAN_BYTES_PER_PEER: Final = 4 * 1024 * 1024
"""...and from one peer (two blocks of the largest size)."""
ORPHAN_AHEAD: Final = 16
"""An orphan is kept only up to this many blocks above our tip (further ahead: sync fetches the
chain instead); one at or below our height is a rival that can never connect to our tip and is
dropped unread."""
SCORE_FORK_RESET: Final = 10
"""A fork offered during sync whose next download does not follow on it: the buffer is emptied
(an honest peer's chain may move under a sync, rarely; a peer that does it to refill the buffer
is banned after ten)."""
MAX_BRANCH_BLOCKS: Final = 20_000
MAX_BRANCH_BYTES: Final = 16 * 1024 * 1024
"""A fork a peer offers during sync is held in memory until it is longer than ours: bounded in
blocks and in the bytes its decoded blocks take in memory (`sync_machine.block_memory`: about
3.5 times their encoding for blocks of many outputs), each block's producer signature checked
before it is kept. One sync runs at a time, so this is both per peer and overall."""

# --- sync: which peer's height counts, and peers that stall -----------------------------------

SCORE_SYNC_TIMEOUT: Final = 20
"""A peer that did not answer a sync request within REQUEST_TIMEOUT (30 s)..."""
SCORE_SYNC_STALL: Final = 20
"""...or answered it too slowly or too short (`SYNC_STALL_S`, `MIN_SYNC_RATE`): an honest peer
may be slow now and then, one that does it five times within the hour is banned."""
SYNC_STALL_S: Final = 10.0
"""Seconds a sync request may take whatever it brings; a slower answer must bring at least
MIN_SYNC_RATE bytes per second of it, and any answer that leaves the peer claiming more must
be a whole download (MAX_BLOCKS_PER_BATCH blocks, or as many as fit MAX_BATCH_BYTES: what an
honest node's `blocks_after` sends), or the peer is a staller."""
MIN_SYNC_RATE: Final = 64 * 1024
"""Bytes per second a sync answer slower than SYNC_STALL_S must deliver."""
SYNC_BACKOFF_S: Final = 30.0
"""A peer that timed out, stalled or went away during a sync is not synced from again, nor is
its height believed, for this long from its address (`bans.address_key`), doubling at each
failure..."""
SYNC_BACKOFF_MAX_S: Final = 600.0
"""...up to this (a reconnect does not reset it; a good download does)."""
MAX_SYNC_BACKOFFS: Final = 4_096
"""Addresses backed off at once; when full, the one whose backoff ends first goes."""
MAX_SYNC_SOURCES: Final = 3
"""Peers one sync downloads from (`services.sync_ranges`): each proved a height at or above the
range it is asked, and each has at most one request out (`peer.Peer.pending`)."""
SYNC_HEDGE_S: Final = 5.0
"""Seconds a sync request waits for its answer before it is asked of another of its sync's
peers as well (the first answer counts; the slower peer is backed off, not scored): a peer that
answers just before each REQUEST_TIMEOUT costs a sync this, not the timeout."""

# --- frames ---------------------------------------------------------------------------------

HELLO_MAX_FRAME: Final = 4_096
"""Until the handshake is done a peer may send only small frames."""

MAX_CONTROL_FRAME: Final = 64 * 1024
"""Bytes in a frame of any message but a block, a batch of blocks, a transaction or a checkpoint
(the largest, Peers, is 26 KB at most), refused on its tag before the rest is read; those four
have limits of their own (`protocol.frame_limit`)."""
MAX_INBOX_BYTES: Final = 8 * 1024 * 1024
"""Bytes of a peer's frames read and waiting for its connection's task (behind our own slow
handler, or a peer that sends faster than we handle): over it its socket is not read until half
are handled. One largest frame (8 MiB) fits; the read that passes it may complete one more frame.
Each frame counts INBOX_FRAME_COST more than its payload, so that small or empty frames are
bounded by what they take in memory, not by their few bytes."""
INBOX_FRAME_COST: Final = 64
"""What a queued frame costs beyond its payload: its bytes object's header and its slot in the
queue (about 41 bytes in CPython), rounded up."""
CLOSE_GRACE_S: Final = 5.0
"""Seconds a closed connection may still take to send what we queued for it (a ban's reason)
before it is cut: a peer that does not read cannot hold a closed connection open."""
MAX_WRITE_BUFFER: Final = 32 * 1024 * 1024
"""Bytes we queued for a peer and it has not read yet (the transport's buffer and this loop
turn's frames): over it the peer is banned, it does not read what we send."""
CLOSE_FLUSH_MAX: Final = 64 * 1024
"""Bytes still unsent that a closed connection may take the grace to send; with more (a bulk
answer the peer did not read) it is cut at once: closed connections no longer count against a
peer's connection limits, so they must not hold our memory either."""

# --- messages, silence, requests ----------------------------------------------------------------

FLOOD_RATE: Final = 500.0
"""Messages per second a peer may send on average..."""
FLOOD_BURST: Final = 2_000.0
"""...and in one burst."""
ADDR_RATE: Final = 0.1
"""Addresses a second a connection's unasked Peers messages are read for (Bitcoin Core's
MAX_ADDR_RATE_PER_SECOND); past its budget they are skipped unread, not scored (an honest peer
only answers our GetPeers). Each address read costs the address book some 20 us: 500 messages of
100 a second from one connection, under FLOOD_RATE, once held a core and the admin RPC for seconds..."""
ADDR_BURST: Final = 100.0
"""...and the most that budget saves up. Each GetPeers we send (one a connection) adds one
whole answer's worth, `protocol.MAX_PEER_ADDRESSES`, on top."""
HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a new connection may take to send its Hello."""
IDLE_TIMEOUT: Final = 90.0
"""Seconds a peer may be silent (no complete frame while we wait for its bytes) before it is
dropped (`PeerManager`'s ping round)."""
PING_INTERVAL: Final = 30.0
"""A peer silent this long is pinged (each round until it answers or is dropped); one that talks
is not: pings to every peer every 2 s were a quarter of a service node's P2P messages."""
REQUEST_TIMEOUT: Final = 30.0
"""Seconds a peer may take to answer a GetBlocks of ours (`Peer.answer`)."""
BACKOFF_MAX: Final = 30.0
"""Seconds at most between redials of a priority node."""
KNOWN_BLOCKS: Final = 8
"""Hashes of the last blocks a peer sent us or we sent it (the relay sends a block once)."""
SEEN_TX_CACHE: Final = 50_000
"""Transactions remembered as seen, all peers together (the oldest out)."""
MAX_PARKED: Final = 16
"""Copies of a block kept while its first copy is at the writer, one per address (`Peer.key`)
and none from the first copy's: one peer's forgeries cannot crowd out the others' copies. More
peers than this rarely send one block at once; a copy beyond is dropped, as a copy after
adoption is."""

# --- uptime proofs ---------------------------------------------------------------------------

PROOF_RATE: Final = 1_000.0
"""Uptime proofs per second one peer may send on average (a devnet of 2,000 service nodes
proving every 2 s relays 1,000 a second over all peers together)..."""
PROOF_BURST: Final = 10_000.0
"""...and in one burst; over it a proof is dropped and scores SCORE_PROOF_FLOOD."""
MAX_QUEUED_PROOFS: Final = 50_000
"""Proofs waiting for their check, all peers together; when full, the peer with the most
queued loses its newest, so a flooder never pushes out an honest peer's proof."""
MAX_QUEUED_PROOFS_PER_PEER: Final = 10_000
SCORE_UNASKED_PROOFS: Final = 100
"""A Proofs answer with no GetProofs of ours open on that peer, or holding a proof its GetProofs
did not ask for: no honest peer sends either (peer protocol 3)."""
MAX_PROOFS_ASKED_PER_PEER: Final = 1_000
"""Announced proofs asked of one peer and not answered yet; what it announces beyond is not
asked of it (another announcer, or the signer's next proof, brings it). An announced id costs
the peer one proof of its PROOF_RATE, as a proof does."""
MAX_WANTED_PROOFS: Final = 50_000
"""Announced proofs this node lacks and waits for that an inbound peer announced first (an id an
outbound peer announced first is wanted beyond, and not counted: we chose those peers, an
attacker cannot fill them by connecting to us). Each stays wanted until a copy of it is
accepted, or no announcer is left. An id timestamped more than PROOF_CLOCK_TOLERANCE ahead of
our clock is not wanted (no node would accept it yet)."""
MAX_ANNOUNCED_PER_PEER: Final = 10_000
"""Wanted proofs one peer is remembered to have announced, one a signer (every announcer of an
id is kept, to fall back on; an inbound peer: MAX_ANNOUNCED_PER_INBOUND)..."""
MAX_ANNOUNCEMENTS: Final = 100_000
"""...and all inbound peers together (outbound peers only by MAX_ANNOUNCED_PER_PEER each)."""
INBOUND_ASK_DELAY: Final = 0.5
"""Seconds an announced proof waits before it is asked of an inbound peer, so that an outbound
announcer is asked first: inbound connections are the ones an attacker can make, many of them,
announcing first. Short: an announcer serves only the newest proof of a signer, and devnet's
signers prove every 2 s."""
MAX_FAILED_ADDRESSES: Final = 4_096
"""Addresses whose proof announcers' failures (asked, no accepted copy) are remembered across
their reconnects, so that reconnecting does not put an attacker ahead again; oldest out."""
PROOF_JUDGE_TIMEOUT: Final = 5.0
"""A copy that came in an answer and was not accepted this long after (judged invalid, or a
forgery not yet banned): the next announcer is asked."""
PROOF_REQUEST_TIMEOUT: Final = 10.0
"""A peer that has not answered a GetProofs this long is dropped (not banned: it may only be slow)."""
MAX_KNOWN_PROOFS_PER_PEER: Final = 20_000
"""Service nodes whose newest proof we remember one peer to have (it sent or announced it, or we
did to it), so that we do not announce it there, and whose proof we announced to it and it may
fetch; when full the oldest entry goes."""

# --- header chains (peer protocol 5: `services.sync_headers`) --------------------------------

MAX_HEADER_CHAIN: Final = 5_000_000
"""Headers a header chain downloaded from one peer may run ahead of the block it follows (19
years of mainnet's 2-minute blocks); a peer whose chain goes further is banned. What is kept of
it: the hash of every HEADER_COMMIT_EVERY-th header, 32 bytes each (3.2 MB at the bound), never
the headers themselves."""
HEADER_COMMIT_EVERY: Final = 50
"""The heights whose hashes a header chain keeps (multiples of it). A download's blocks are
known ancestors of the assume-valid block up to the highest kept height in it whose hash
matches: the blocks above it in that download (49 at most of 500) are verified in full."""
HEADERS_FIRST_MIN: Final = 2_000
"""A sync from a peer of version 5 that proved at least this many blocks more than we have (one
Headers answer's worth, `protocol.MAX_HEADERS`) downloads its header chain first (and every sync
does while a trusted checkpoint lies above our height); a shorter one fetches blocks at once, as
before: the round trip would cost more than the signatures it could spare."""

# --- serving blocks --------------------------------------------------------------------------

UPLOAD_RATE: Final = 8 * 1024 * 1024
"""Bytes of blocks per second one peer may pull from us on average (an honest sync of the
benchmark chain, 1.3 KB a block at about 2,600 blocks/s, pulls about 3.3 MB/s)..."""
UPLOAD_BURST: Final = 16 * 1024 * 1024
"""...and in one burst; past it (the bucket goes into debt by one answer at most) its next
GetBlocks waits until the debt is paid."""
UPLOAD_DRAIN_TIMEOUT: Final = 30.0
"""A peer that has not read our last Blocks answer this long after asking for more is dropped
(not banned: it may only be slow)."""

# --- serving and fetching snapshots (peer protocol 5) ------------------------------------------

SNAPSHOT_UPLOAD_RATE: Final = 16 * 1024 * 1024
"""Bytes of snapshots (manifests and chunks) per second all peers together may pull from us on
average (each peer's pulls count against its UPLOAD_RATE as well)..."""
SNAPSHOT_UPLOAD_BURST: Final = 32 * 1024 * 1024
"""...and in one burst; past it the next answer waits until the budget has refilled."""
SNAPSHOT_PULLS_PER_DAY: Final = 3
"""Whole snapshots one network group (`addrman.network_group`: an IPv4 /16, an IPv6 /32) may
pull from us in SNAPSHOT_QUOTA_WINDOW_S: a new node fetches one once (a restart resumes it),
so three leave room for a few nodes behind one address; past it its GetChunk is answered
"none" and it fetches elsewhere. Without it one stranger re-asking the same snapshot kept our
disk and the whole SNAPSHOT_UPLOAD_RATE busy (1.4 TB a day) and starved the honest syncers."""
SNAPSHOT_QUOTA_WINDOW_S: Final = 86_400.0
MAX_SNAPSHOT_QUOTAS: Final = 4_096
"""Network groups whose pulls are counted (the oldest forgotten first)."""
SNAPSHOT_REQUEST_TIMEOUT: Final = 30.0
"""Seconds a peer may take to answer a GetSnapshot or GetChunk of ours; then its request is
asked of another peer and it is not asked again during this download."""
SCORE_BAD_SNAPSHOT: Final = 100
"""A snapshot answer that fails its check (a manifest not of the trusted block or whose parts do
not sum to its root, a chunk not its manifest's) or that answers nothing we asked: banned."""

# --- addresses and connections ---------------------------------------------------------------

# The address book (`addrman.AddressBook`, Bitcoin Core's addrman at a sixteenth of its size).
# Sized for a network of a few thousand nodes: "new" holds 16,384 entries, so a few thousand
# honest addresses fill under a fifth of it and lose few to slot collisions; one source network
# group reaches 16 of its 256 buckets (1,024 slots), so an attacker in 100 /16 networks reaches
# all of them, but a slot holding an entry that is not terrible is never given to a newcomer:
# it can only take the slots no honest entry holds, never push one out
# (tests/unit/test_addrman.py measures it).
NEW_BUCKETS: Final = 256
TRIED_BUCKETS: Final = 64
ADDRESS_BUCKET_SIZE: Final = 64
"""Slots in a bucket of either table: 16,384 "new" entries and 4,096 "tried" ones at most."""
NEW_BUCKETS_PER_SOURCE_GROUP: Final = 16
"""The "new" buckets that the addresses learned from one source network group can reach
(1,024 slots, a sixteenth of the table, as Bitcoin Core's 64 of 1,024)."""
TRIED_BUCKETS_PER_GROUP: Final = 4
"""The "tried" buckets the addresses of one network group can reach (256 slots): an attacker's
nodes that we dialled and that answered take at most that many per /16."""
MAX_TRIED_COLLISIONS: Final = 10
"""Addresses that answered and wait for a test of the tried entry in their slot; beyond it they
stay in "new"."""
TRIED_REPLACEMENT_S: Final = 4 * 3_600.0
"""A tried entry that answered this recently is never replaced; one dialled this recently that
did not answer is (after ADDRESS_TERRIBLE_GRACE_S)..."""
TRIED_TEST_WINDOW_S: Final = 40 * 60.0
"""...and one not tested this long after the collision is replaced anyway."""
ADDRESS_HORIZON_S: Final = 30 * 86_400.0
"""An entry nobody told us of, and that we did not reach, for this long is terrible."""
ADDRESS_FUTURE_S: Final = 600.0
"""An entry stamped this far ahead of our clock is terrible."""
ADDRESS_RETRIES: Final = 3
"""Failed dials after which an entry that never answered is terrible..."""
ADDRESS_MAX_FAILURES: Final = 10
ADDRESS_MIN_FAIL_S: Final = 7 * 86_400.0
"""...and an entry that answered once, after this many failed dials with no answer for this long."""
ADDRESS_TERRIBLE_GRACE_S: Final = 60.0
"""An entry dialled this recently is never judged terrible (its dial may still answer)."""
ADDRESS_RECENT_TRY_S: Final = 600.0
"""An entry dialled this recently is a hundred times less likely to be selected."""
ADDRESS_SEEN_REFRESH_S: Final = 20 * 60.0
"""A peer telling us again of an entry refreshes its time at most this often."""
SELECT_DRAWS: Final = 200
"""Draws `AddressBook.select` makes before it gives up (each costs a few microseconds)."""
DIAL_BACKOFF_BASE_S: Final = 2.0
DIAL_BACKOFF_MAX_S: Final = 3_600.0
"""An entry's next dial waits 2 s after its first failed one, doubling with each failure up to
an hour (a handshake resets it): eight dead addresses cost a few dials a minute, not 21 each in
40 s."""
FEELER_INTERVAL_S: Final = 120.0
"""While the outbound slots are full, one short connection this often (on average) to a "new"
entry, or to a tried entry another waits to replace: one that answers moves to "tried"."""
MAX_INBOUND: Final = 32
MAX_OUTBOUND: Final = 8
MAX_PER_IP: Final = 8
MAX_ANNOUNCED_PER_INBOUND: Final = MAX_WANTED_PROOFS // MAX_INBOUND
"""Wanted proofs one inbound peer is remembered to have announced (1,562): the inbound slots
together cannot hold more than MAX_WANTED_PROOFS, so a few connections cannot fill it."""
MAX_PENDING: Final = 8
"""Inbound connections that have not finished their handshake, all together: a newcomer over it
closes the oldest (an honest peer says Hello in milliseconds), so silent connections never
hold the inbound slots..."""
MAX_PENDING_PER_IP: Final = 2
"""...and from one address (over it the newcomer is refused)."""
EVICT_PROTECT_GROUPS: Final = 4
"""When the inbound slots are full, one peer from each of this many distinct network groups..."""
EVICT_PROTECT_BLOCKS: Final = 4
"""...the peers that most recently sent us a new block..."""
EVICT_PROTECT_LONGEST: Final = 0.5
"""...and this share of the rest, the longest connected, are never evicted; of the others, the
youngest connection of the most crowded network group makes room."""


@dataclass(frozen=True, slots=True)
class PeerLimits:
    """The bounds a P2P connection, the peer manager and the relay enforce, as one record that
    they take as an argument (as h11's Connection takes its max_incomplete_event_size): the
    daemon passes the defaults, the constants above; a test passes small ones."""

    hello_max_frame: int = HELLO_MAX_FRAME
    max_inbox_bytes: int = MAX_INBOX_BYTES
    inbox_frame_cost: int = INBOX_FRAME_COST
    max_write_buffer: int = MAX_WRITE_BUFFER
    close_grace_s: float = CLOSE_GRACE_S
    close_flush_max: int = CLOSE_FLUSH_MAX
    flood_rate: float = FLOOD_RATE
    flood_burst: float = FLOOD_BURST
    addr_rate: float = ADDR_RATE
    addr_burst: float = ADDR_BURST
    proof_rate: float = PROOF_RATE
    proof_burst: float = PROOF_BURST
    upload_rate: float = UPLOAD_RATE
    upload_burst: float = UPLOAD_BURST
    upload_drain_timeout: float = UPLOAD_DRAIN_TIMEOUT
    handshake_timeout: float = HANDSHAKE_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    ping_interval: float = PING_INTERVAL
    request_timeout: float = REQUEST_TIMEOUT
    known_blocks: int = KNOWN_BLOCKS
    seen_tx_cache: int = SEEN_TX_CACHE
    max_parked: int = MAX_PARKED
    max_known_proofs_per_peer: int = MAX_KNOWN_PROOFS_PER_PEER


DEFAULT_LIMITS: Final = PeerLimits()


@dataclass(frozen=True, slots=True)
class SyncLimits:
    """The bounds a chain sync enforces (`services.sync_machine`, `sync_ranges`, `sync_peers`),
    as one record that the syncer, its machine, its sources and its backoffs take as an
    argument: the daemon passes the defaults, the constants above; a test passes small ones."""

    max_branch_blocks: int = MAX_BRANCH_BLOCKS
    max_branch_bytes: int = MAX_BRANCH_BYTES
    sync_stall_s: float = SYNC_STALL_S
    min_sync_rate: int = MIN_SYNC_RATE
    sync_backoff_s: float = SYNC_BACKOFF_S
    sync_backoff_max_s: float = SYNC_BACKOFF_MAX_S
    max_sync_backoffs: int = MAX_SYNC_BACKOFFS
    max_sync_sources: int = MAX_SYNC_SOURCES
    sync_hedge_s: float = SYNC_HEDGE_S


DEFAULT_SYNC_LIMITS: Final = SyncLimits()
