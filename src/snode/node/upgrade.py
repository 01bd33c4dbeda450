"""A fork this node does not know (issue #34 item 4).

A node started on an older schedule (or an older snoded) learns of a fork it does not know
from three things: a peer's `ForkStatus` announcing a next fork at a height its own schedule
lacks, a block of a version its schedule does not give that height (one at or above a fork it
learnt of, or of a version this build has never heard of, at its tip + 1, by a producer that may
make it), and service nodes' uptime proofs naming a newer fork (`learn_from_proof`). From then
on the operator is told which fork, at which height, in how long and which snoded knows it
(`UpgradeWatch.required`). At the fork's height the node stops extending its chain: it neither
produces, validates past, signs nor votes there; the blocks it cannot validate are kept, as
"cannot validate yet" (`CannotValidateYet`, never `InvalidBlock`, nor a reason to score or ban
their sender), in a bounded pending store persisted in the data dir, so that after a restart
with the right schedule or a newer snoded it goes on from where it stopped. It never stops by
date.

Peers' announcements only warn: they never stop the node, however many addresses send them
(addresses cost an attacker little, and a stop at a height two of them made up would halt every
node that heard them: the whole network). Nor do they crowd out what is signed: a fork only
peers announced takes a free place of the MAX_LEARNT and never another's, a fork that proofs
or a block name takes the place of the highest of those, and one the chain passed unconfirmed
is dropped (a stranger's made-up heights once filled the places for good, so that service nodes'
proofs of the real fork were never counted, and every ForkStatus of a new height wrote and
fsynced the file on the event loop: one height a connection is taken now, `net.peers`).

What stops it is signed by keys that may make it: a block of the fork by a producer that may
make it (its signature checked), or the accepted uptime proofs of a third of the active service
nodes (at least CONFIRMING_PROOFS) naming it.

The watch compares heights, which only `params.rules_at` may do in `core`: it lives in the
node's shell, and asks the schedule only through `params`.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from snode.common.data_dir import remove_entry, write_atomically
from snode.common.files import read_bounded
from snode.common.text import printable
from snode.core.blocks import Block
from snode.core.errors import SnodeError
from snode.params import FAR_AHEAD, KNOWN_FORKS, MAX_BLOCK_BYTES, Fork, ForkRules, NetworkParams

log = logging.getLogger(__name__)

CONFIRMING_PROOFS: Final = 2
"""The fewest service nodes whose proofs naming one fork stop the node at it (and a third of
the active ones)."""
MAX_LEARNT: Final = 4
"""Forks learnt and kept (the lowest heights: the first one is what stops the node)."""
MAX_KNOWN_BY: Final = 8
"""Snoded names kept per learnt fork (the first ones)."""
MAX_ADDRESSES: Final = 16
"""Peer addresses counted per learnt fork."""
MAX_PENDING_BLOCKS: Final = 64
"""Blocks kept as "cannot validate yet" (DESIGN.md section 11: held in count and bytes)."""
MAX_PENDING_BYTES: Final = 4 * MAX_BLOCK_BYTES
"""Bytes of those blocks, in all."""
DAY: Final = 86_400
HOUR: Final = 3_600

LEARNT_FILE: Final = "upgrade.json"
LEARNT_FILE_BYTES: Final = 1 << 20
"""What `upgrade.json` is read up to (its 4 forks with their addresses are a few KiB)."""
PENDING_DIR: Final = "pending-blocks"


class CannotValidateYet(SnodeError):
    """A block of a fork this node does not know: kept until a snoded that knows it runs;
    never invalid, never the sender's fault."""


@dataclass(slots=True)
class LearntFork:
    """A fork some peer, block or proof says starts at `height`, which this schedule lacks."""

    height: int
    name: str
    """`v2` (a fork this build knows but has not scheduled), or `unknown`."""
    block_version: int = 0
    """The version its blocks carry, once one was seen (0: none yet)."""
    known_by: list[str] = field(default_factory=list)
    """The snoded names (peers' agents, escaped) that announced it."""
    addresses: list[str] = field(default_factory=list)
    """Peer addresses that announced it (a warning only), the first MAX_ADDRESSES."""
    confirmed: bool = False
    """A block, or the proofs of a third of the active service nodes, say so: the node stops
    at `height`."""
    provers: set[str] = field(default_factory=set)
    """The service nodes whose accepted proofs name it (until it is confirmed; not saved: the
    proofs come again after a restart)."""

    @property
    def hearsay(self) -> bool:
        """Only peers' announcements name it: nothing signed does (yet)."""
        return not self.confirmed and not self.provers

    def record(self) -> dict[str, Any]:
        return {"height": self.height, "name": self.name, "block_version": self.block_version,
                "known_by": self.known_by, "addresses": self.addresses, "confirmed": self.confirmed}


def _scheduled_top(params: NetworkParams) -> int:
    """The height of the last fork this schedule really schedules (FAR_AHEAD is a fork known
    but not scheduled)."""
    return max(fork.height for fork in params.forks if fork.height < FAR_AHEAD)


def _unscheduled_name(params: NetworkParams) -> tuple[str, int]:
    """The first fork this build knows that its schedule does not put below FAR_AHEAD (its
    name and block version): what a fork announced above the schedule most likely is."""
    scheduled = {fork.rules.name for fork in params.forks if fork.height < FAR_AHEAD}
    for name, rules in KNOWN_FORKS.items():
        if name not in scheduled:
            return name, rules.block_version
    return "unknown", 0


class UpgradeWatch:
    """What this node learnt of forks it does not know, and the blocks it keeps for them.
    `directory` None: kept in memory only (tests)."""

    def __init__(self, params: NetworkParams, directory: Path | None = None) -> None:
        self.params = params
        self.directory = directory
        self.learnt: list[LearntFork] = []
        self._pending: dict[bytes, tuple[int, bytes]] = {}
        """Block hash -> (height, encoded block): blocks that cannot be validated yet."""
        self._lock = threading.Lock()  # the store thread parks, the event loop reads
        self._last_notice = 0
        self.revision = 0
        """Counts changes of what it learnt and of the blocks it keeps (`Node.revision`)."""
        if directory is not None:
            self._load(directory)

    # --- learning -----------------------------------------------------------------------------

    def _is_news(self, height: int, tip: int) -> bool:
        """A fork at `height` is one this schedule lacks and this node has not passed."""
        if not tip < height < FAR_AHEAD:
            return False  # every proof of a node asks this: the schedule is looked at only when it may be news
        return height not in {fork.height for fork in self.params.forks} and height > _scheduled_top(self.params)

    def _fork_at(self, height: int) -> LearntFork | None:
        return next((f for f in self.learnt if f.height == height), None)

    def _add(self, height: int, *, name: str = "", block_version: int = 0,
             signed: bool = True) -> LearntFork | None:
        """The fork learnt at `height`, added if new and there is a place for it: a `signed`
        one (named by a proof or a block) takes the place of the highest fork only peers
        announced, or of the highest one at all if it is lower; an announced one only a free
        place."""
        fork = self._fork_at(height)
        if fork is not None:
            return fork
        learnt = self.learnt
        if len(learnt) >= MAX_LEARNT:
            if not signed:
                return None
            hearsay = [f for f in learnt if f.hearsay]
            out = hearsay[-1] if hearsay else learnt[-1]
            if not hearsay and height > out.height:
                return None
            learnt = [f for f in learnt if f is not out]
        guess, version = _unscheduled_name(self.params)
        fork = LearntFork(height, name or guess, block_version or version)
        self.learnt = sorted([*learnt, fork], key=lambda f: f.height)
        log.warning("UPGRADE REQUIRED: fork %s is scheduled at height %d, which this snoded's schedule "
                    "lacks: install a snoded that knows it (or start this one with its schedule) "
                    "before that height", fork.name, height)
        return fork

    def learn_announcement(self, height: int, tip: int, *, agent: str, address: str) -> None:
        """A peer's ForkStatus announces its next fork at `height`: a warning, never a stop."""
        if not height or not self._is_news(height, tip):
            return
        with self._lock:
            self._prune(tip)
            fork = self._add(height, signed=False)
            if fork is None:
                return
            name = printable(agent, 32)
            changed = False
            if name not in fork.known_by and len(fork.known_by) < MAX_KNOWN_BY:
                fork.known_by.append(name)
                changed = True
            if address not in fork.addresses and len(fork.addresses) < MAX_ADDRESSES:
                fork.addresses.append(address)
                changed = True
            if changed:
                self._changed()

    def is_news(self, height: int, tip: int) -> bool:
        """Whether a fork at `height`, named by a peer or a proof, is one this node lacks."""
        return self._is_news(height, tip)

    def learn_from_proof(self, name: str, height: int, tip: int, *, version: str, source: str,
                         needed: int) -> None:
        """A service node's accepted proof (its key `source`) says it knows fork `name` at
        `height`; `needed` service nodes' proofs confirm it (a third of the active ones: a
        few keys alone cannot stop the network at a height they make up)."""
        if not self._is_news(height, tip):
            return
        with self._lock:
            changed = self._prune(tip)
            rules = KNOWN_FORKS.get(name)
            new = self._fork_at(height) is None
            fork = self._add(height, name=name if rules is not None else "unknown",
                             block_version=rules.block_version if rules is not None else 0)
            if fork is None:
                if changed:
                    self._changed()
                return
            changed = changed or new
            label = printable(f"snoded/{version}", 32)
            if label not in fork.known_by and len(fork.known_by) < MAX_KNOWN_BY:
                fork.known_by.append(label)
                changed = True
            if not fork.confirmed:
                fork.provers.add(source)
                fork.confirmed = len(fork.provers) >= max(needed, CONFIRMING_PROOFS)
                changed = changed or fork.confirmed
            if changed:  # each proof of every node names it: the file is written when it says more
                self._changed()

    def _prune(self, tip: int) -> bool:
        """Drop the forks the chain has passed unconfirmed (none stopped it: a made-up height,
        or one the network did not take); whether any went."""
        kept = [f for f in self.learnt if f.confirmed or f.height > tip]
        if len(kept) == len(self.learnt):
            return False
        self.learnt = kept
        return True

    def upgrade_to(self) -> str:
        """What an operator installs for the fork learnt (an `outdated` proof refusal's words)."""
        fork = next((f for f in self.learnt if f.confirmed), self.learnt[0] if self.learnt else None)
        if fork is None:
            return "a newer snoded"
        rules = KNOWN_FORKS.get(fork.name)
        version = f"{'.'.join(map(str, rules.min_sn_version))} or later" if rules else "a newer snoded"
        return f"{version} (fork {fork.name} at height {fork.height}; {self.what_to_do(fork)})"

    # --- the stop -----------------------------------------------------------------------------

    @property
    def stop_height(self) -> int | None:
        """The height of the first confirmed fork this node does not know: it extends its chain
        up to the block before it and no further. None: nothing stops it."""
        return next((f.height for f in self.learnt if f.confirmed), None)

    def stops_at(self, height: int) -> bool:
        """Whether this node may not make, sign or validate a block at `height`."""
        stop = self.stop_height
        return stop is not None and height >= stop

    def sort(self, blocks: list[Block], tip: int, could_produce: Any) -> tuple[list[Block], list[Block]]:
        """Blocks this node may validate (the first ones) and those it keeps as "cannot validate
        yet" (from the first at or past the stop height, or of a fork it learns of now). A
        block of another version than its height's, below any fork learnt, stays with the
        first list: the core refuses it as invalid."""
        for i, block in enumerate(blocks):
            h = block.header
            if self.stops_at(h.height) or self._learns_from_block(block, tip, could_produce):
                return blocks[:i], blocks[i:]
        return blocks, []

    def _learns_from_block(self, block: Block, tip: int, could_produce: Any) -> bool:
        """Whether `block`, of a version the schedule does not give its height, shows a fork:
        one learnt at or below its height, or a version this build never heard of at the tip
        + 1; either way by a producer that may make it (`could_produce`: signature included)."""
        h = block.header
        ours = self.params.rules_at(h.height).block_version
        if h.version <= ours:
            return False
        learnt = [f for f in self.learnt if tip < f.height <= h.height or f.confirmed and f.height <= h.height]
        unheard = h.version > max(rules.block_version for rules in KNOWN_FORKS.values())
        if not learnt and not (unheard and h.height == tip + 1 and self._is_news(h.height, tip)):
            return False
        if not could_produce(block):
            return False
        with self._lock:
            fork = learnt[-1] if learnt else self._add(h.height, name="unknown", block_version=h.version)
            if fork is None:
                return False
            if not fork.confirmed or not fork.block_version:
                fork.confirmed, fork.block_version = True, fork.block_version or h.version
                self._changed()
        return True

    def refusal(self, height: int) -> str:
        """What a block, a template or a turn at `height` gets: the line that says why not."""
        fork = next((f for f in self.learnt if f.confirmed), None)
        name = fork.name if fork is not None else "unknown"
        return (f"block {height} is on fork {name} from height {self.stop_height}, which this snoded does "
                f"not know: kept, not validated; {self.what_to_do(fork)}")

    def what_to_do(self, fork: LearntFork | None) -> str:
        known = ", ".join(fork.known_by) if fork is not None and fork.known_by else "a newer snoded"
        if fork is not None and fork.name in KNOWN_FORKS and self.params.test_forks:
            return f"restart it with --test-fork {fork.name}@{fork.height} (known by {known})"
        return f"upgrade snoded (known by {known})"

    def schedule(self) -> tuple[Fork, ...]:
        """This node's schedule with the confirmed forks it learnt of, for its fork id (EIP-2124:
        it announces the fork it will stop at, and knows a peer past it as one ahead of it)."""
        learnt = [Fork(_placeholder(f), f.height) for f in self.learnt if f.confirmed]
        if not learnt:
            return self.params.forks
        return tuple(sorted((*self.params.forks, *learnt), key=lambda fork: fork.height))

    # --- the pending store --------------------------------------------------------------------

    def park(self, blocks: list[tuple[int, bytes, bytes]]) -> int:
        """Keep (height, hash, encoded) blocks as "cannot validate yet", within the limits (the
        lowest heights are kept: they are what the node needs first). Returns how many are new."""
        added = 0
        with self._lock:
            for height, this, data in blocks:
                if this in self._pending or len(data) > MAX_PENDING_BYTES:
                    continue
                self._pending[this] = (height, data)
                added += 1
                self._trim()
            if added:
                self._save_pending()
        return added

    def _trim(self) -> None:
        total = sum(len(d) for _, d in self._pending.values())
        while len(self._pending) > MAX_PENDING_BLOCKS or total > MAX_PENDING_BYTES:
            highest = max(self._pending, key=lambda k: self._pending[k][0])
            total -= len(self._pending.pop(highest)[1])

    def pending(self) -> list[tuple[int, bytes]]:
        """The kept blocks, lowest height first: (height, encoded)."""
        with self._lock:
            return sorted(self._pending.values())

    def forget_pending(self, below: int) -> None:
        """Drop the kept blocks at or below height `below` (the chain has passed them)."""
        with self._lock:
            gone = [k for k, (h, _) in self._pending.items() if h <= below]
            for key in gone:
                del self._pending[key]
            if gone:
                self._save_pending()

    # --- the operator's view ------------------------------------------------------------------

    def required(self, height: int, now: int) -> dict[str, Any] | None:
        """`get_info`'s `upgrade_required`: the first fork this node learnt of and does not
        know, where it stops, in how long, and who knows it; None: none learnt."""
        ahead = [f for f in self.learnt if f.confirmed or f.height > height]  # `_prune`'s, without writing
        fork = next((f for f in ahead if f.confirmed), ahead[0] if ahead else None)
        if fork is None:
            return None
        left = max(fork.height - 1 - height, 0)
        spacing = self.params.target_block_time
        return {"fork": fork.name, "height": fork.height, "blocks_left": left,
                "eta_seconds": left * spacing if spacing > 0 else None,
                "known_by": list(fork.known_by), "confirmed": fork.confirmed,
                "stopped": fork.confirmed and height + 1 >= fork.height,
                "pending_blocks": len(self._pending), "action": self.what_to_do(fork)}

    def notice_due(self, height: int, now: int) -> dict[str, Any] | None:
        """The `upgrade_required` event for `--notify` when one is due: at once when a fork is
        learnt, then daily, then hourly in its last day (FIPs#202, lighthouse#3463)."""
        info = self.required(height, now)
        if info is None:
            return None
        eta = info["eta_seconds"]
        every = HOUR if info["stopped"] or (eta is not None and eta <= DAY) else DAY
        if self._last_notice and now - self._last_notice < every:
            return None
        self._last_notice = now
        return {"event": "upgrade_required", "height": info["height"], "state": info["fork"],
                "reason": self.status_part(height, now)}

    def status_part(self, height: int, now: int) -> str:
        """The status line's `UPGRADE REQUIRED: ...` part ('' when nothing is learnt)."""
        info = self.required(height, now)
        if info is None:
            return ""
        if info["stopped"]:
            when = f"stopped at {info['height'] - 1}"
        else:
            eta = info["eta_seconds"]
            when = f"in {info['blocks_left']} blocks" + (f", ~{duration(eta)}" if eta else "")
        return f"UPGRADE REQUIRED: fork {info['fork']} at height {info['height']} ({when}); {info['action']}"

    # --- persistence --------------------------------------------------------------------------

    def _changed(self) -> None:
        self.revision += 1
        if self.directory is not None:
            data = json.dumps([f.record() for f in self.learnt]).encode()
            try:
                write_atomically(self.directory / LEARNT_FILE, data)
            except OSError as err:
                log.warning("could not save what this node learnt of forks: %s", err)

    def _save_pending(self) -> None:
        self.revision += 1
        if self.directory is None:
            return
        folder = self.directory / PENDING_DIR
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            names = {f"{h:012d}-{k.hex()}.block" for k, (h, _) in self._pending.items()}
            for path in folder.glob("*.block"):
                if path.name not in names:
                    path.unlink(missing_ok=True)
            for this, (height, data) in self._pending.items():
                path = folder / f"{height:012d}-{this.hex()}.block"
                if not path.exists():
                    write_atomically(path, data)
        except OSError as err:
            log.warning("could not save the blocks kept for an unknown fork: %s", err)

    def _load(self, directory: Path) -> None:
        """What an earlier run learnt and kept, less the forks this schedule now knows."""
        self._load_learnt(directory / LEARNT_FILE)
        folder = directory / PENDING_DIR
        for path in sorted(folder.glob("*.block")) if folder.is_dir() else []:
            height, _, digest = path.stem.partition("-")
            try:
                if path.is_symlink() or not path.is_file():  # a directory, a device: never ours
                    raise OSError(f"{path} is not a file")
                data = read_bounded(path, MAX_BLOCK_BYTES)
                key = bytes.fromhex(digest)
                self._pending[key] = (int(height), data)
            except (OSError, ValueError):
                log.warning("%s is not a block this daemon kept; removed", path)
                _remove(path)
        self._trim()

    def _load_learnt(self, path: Path) -> None:
        try:
            records = json.loads(read_bounded(path, LEARNT_FILE_BYTES)) if path.exists() else []
            forks = [LearntFork(int(r["height"]), str(r["name"]), int(r["block_version"]),
                                [str(a) for a in r["known_by"]][:MAX_KNOWN_BY],
                                [str(a) for a in r["addresses"]][:MAX_ADDRESSES], bool(r["confirmed"]))
                     for r in records[:MAX_LEARNT]]
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else "damaged"
            log.warning("%s cannot be read (%s); what an earlier run learnt of forks is forgotten", path, why)
            forks = []
        scheduled = {fork.height for fork in self.params.forks}
        for fork in forks:
            if fork.height in scheduled:
                log.info("fork %s at height %d is in this daemon's schedule now: no upgrade required",
                         fork.name, fork.height)
        self.learnt = [f for f in forks if f.height not in scheduled and f.height > _scheduled_top(self.params)]
        if len(self.learnt) != len(forks):
            self._changed()


def _placeholder(fork: LearntFork) -> ForkRules:
    """A learnt fork's row in a fork id's schedule (only its name and height count there)."""
    known = KNOWN_FORKS.get(fork.name)
    if known is not None:
        return known
    return ForkRules(name=fork.name, block_version=fork.block_version, tx_versions=(), branch_id=0,
                     min_sn_version=(0, 0, 0))


def duration(seconds: int) -> str:
    """`2d 3h`, `5h 10m`, `4m`: a countdown's words."""
    days, rest = divmod(seconds, DAY)
    hours, rest = divmod(rest, HOUR)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{max(minutes, 1)}m"


def _remove(path: Path) -> None:
    """`remove_entry`, a failure logged: never raises."""
    try:
        remove_entry(path)
    except OSError as err:
        log.warning("could not remove %s: %s", path, err.strerror or err)
