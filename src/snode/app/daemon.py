"""snoded: start-up, wiring, main loop, graceful shutdown (its command line: `app.cli`).

Start-up order matters for the promise that a bad flag leaves the data dir as it was: parse and
check every flag, bind every listening socket, and only then create, lock and open the data dir.
Signal handlers only set the stop event; the main coroutine does the shutdown.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from snode import __version__
from snode.api.connections import GatedSite, runner_options
from snode.api.server import make_app
from snode.app.cli import snoded_command, warn_about_flags
from snode.app.config import Config, ConfigError, Endpoint, advertised_sn_version
from snode.app.console import Console
from snode.app.datadir import DataDir, check_writable
from snode.app.partition import reload_denied
from snode.app.profiling import start_from_env
from snode.app.rpc_access import AdminAccess
from snode.app.runtime import bind_socket, run_loop, setup_logging, stdin_is_console
from snode.app.systemd import notify, status_message
from snode.common.clock import MockableClock, SystemClock
from snode.common.descriptors import DescriptorWatch, raise_soft_limit
from snode.common.entry import run_command
from snode.core import mempool as mp
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.errors import DecodeError
from snode.core.genesis import GenesisDoc, genesis_state
from snode.core.snapshot import SnapshotError
from snode.net import address_file
from snode.net.peers import PeerManager
from snode.net.relay import Relay
from snode.node.batches import replay_stored_blocks
from snode.node.checksum_primer import ChecksumPrimer
from snode.node.disk_watch import DiskWatch
from snode.node.events import SyncProgress
from snode.node.node import Identity, Node
from snode.node.upgrade import UpgradeWatch
from snode.node.verifier import VerifierPool
from snode.node.writer import ChainWriter, store_thread
from snode.params import REGTEST_AUTHORITY_SEED, NetworkParams
from snode.rpc.counters import EventCounters
from snode.rpc.health import unmet_conditions
from snode.rpc.methods import MethodTable
from snode.rpc.openrpc import served_document
from snode.rpc.scrape import metrics_page
from snode.rpc.web_parts import LIVE_SCRIPT
from snode.rpc.web_view import WebView
from snode.services.backfill import Backfill
from snode.services.checkpoints import CheckpointDuties
from snode.services.departure import find_departure
from snode.services.equivocation import EquivocationWatch
from snode.services.event_feed import EventFeed
from snode.services.history_check import HistoryCheck, request_for
from snode.services.notify import Notifier
from snode.services.producer import BlockProducer
from snode.services.saving import keep_saving
from snode.services.sn_duties import ServiceNodeDuties
from snode.services.snapshot_sync import SnapshotFetch
from snode.services.snapshots import SnapshotMaker, SnapshotServer
from snode.services.sync import Syncer
from snode.store import ChainStore, StoreError, damaged
from snode.store.snapshot import Download

if TYPE_CHECKING:  # imported at run time only where used (start-up time)
    from snode.app.progress import SyncProgressBar
    from snode.net.quorumnet import QuorumNet
    from snode.rpc.omq_public import PublicOmq

log = logging.getLogger("snoded")

SHUTDOWN_TIMEOUT = 10.0


@dataclass
class Wiring:
    """Everything the daemon runs on top of its node, built by `Daemon._wire`."""

    writer: ChainWriter
    peers: PeerManager
    relay: Relay
    syncer: Syncer
    duties: ServiceNodeDuties
    producer: BlockProducer
    quorumnet: QuorumNet | None
    runner: web.AppRunner
    bar: SyncProgressBar | None
    notifier: Notifier | None = None
    omq: PublicOmq | None = None
    snapshots: SnapshotMaker | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)


class Daemon:
    """One running snoded: start-up (flags checked, sockets bound, data dir locked, node opened),
    wiring (every layer on the node, each told of the others only through the event hub or its
    constructor), the main loop, and a graceful stop in the reverse order."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.stop_event = asyncio.Event()
        self.fatal: str | None = None  # why the daemon must not go on (`fail`); None: an ordinary stop
        self.node: Node | None = None
        self.saved_peers: list[str] = []  # the store's peer addresses, read in `_open_node`
        self.genesis_doc: GenesisDoc | None = None  # the network's genesis, set in `_open_node`
        offset = config.clock_offset
        self.clock: MockableClock | SystemClock = (
            MockableClock(offset) if config.params.generate_on_demand else SystemClock(offset)
        )
        """Regtest's clock can be set by `set_mock_time`; every other network's is the real one
        (moved by `SNODE_CLOCK_OFFSET` in fault tests on devnet and regtest)."""

    def request_stop(self) -> None:
        self.stop_event.set()

    def fail(self, message: str) -> None:
        """Stop, then exit 1 with `message` as the one line on stderr."""
        self.fatal = message
        self.stop_event.set()

    async def run(self) -> int:
        cfg = self.config
        rpc_sock = bind_socket("--rpc-admin", cfg.rpc_admin)
        p2p_sock = bind_socket("--p2p-bind-ip/--p2p-bind-port", cfg.p2p_bind)
        if cfg.service_node:
            # Quorumnet binds through ZeroMQ later; check the port now, before the data dir.
            bind_socket("--quorumnet-port", Endpoint(cfg.p2p_bind.host, cfg.quorumnet_port)).close()
        advertised = advertised_sn_version(cfg.params.name)  # before the data dir: a refusal writes nothing
        check_writable(cfg.data_dir)
        datadir = DataDir(cfg.data_dir)
        try:
            datadir.create()
            datadir.lock()
        except OSError as err:
            raise ConfigError(f"--data-dir: cannot use {cfg.data_dir}: {err.strerror or err}") from None
        setup_logging(cfg.log_level, datadir.log_file)
        node = self.node = self._open_node(datadir)
        node.own_proof.advertised = advertised
        datadir.mark_running()
        # After the data dir's checks: a refusal there is one line on stderr, with no log line
        # about descriptors before it.
        self.descriptors = DescriptorWatch(raise_soft_limit())
        # The loaded state is long-lived and holds no cycles: keep the collector off it, and
        # collect young objects less often (consensus records are acyclic; block application
        # makes many of them, and the default thresholds cost about a third of apply time).
        # A sync keeps up to two staged batches alive (blocks, undo records, signature checks:
        # about 70,000 tracked objects): under a threshold of 50,000 every young collection walks
        # them all (2.4 s of a 100,000-block sync); at 200,000 most are freed before one runs (0.17 s).
        gc.freeze()
        gc.set_threshold(200_000, 20, 100)
        self._warn_unused_registration(datadir, node)
        warn_about_flags(cfg)
        self.admin = AdminAccess.open(cfg)  # who may call the admin RPC; its cookie goes at the stop
        wiring = await self._wire(node, rpc_sock, p2p_sock)
        await self.stop_event.wait()
        await self._shut_down(node, wiring)
        if wiring.writer.damaged is None:  # a damaged file stays marked: the next start checks it
            datadir.mark_stopped()
        self.admin.close()
        datadir.unlock()
        log.info("stopped")
        if self.fatal is not None:
            log.error("%s", self.fatal)
            raise ConfigError(self.fatal)
        return 0

    async def _wire(self, node: Node, rpc_sock: socket.socket, p2p_sock: socket.socket) -> Wiring:
        """Build the layers on the node, bottom up, and start them. A block from a peer goes
        peers -> relay -> writer -> node -> store; a proof goes peers -> relay -> (hub) SN
        duties -> node -> (hub) relay and quorum votes -> quorumnet."""
        cfg = self.config
        disk = DiskWatch(cfg.data_dir)
        writer = ChainWriter(node, store_thread(), on_damaged=self.fail, disk=disk)
        counters = EventCounters(node.hub)
        feed = EventFeed(node)
        notifier = Notifier(list(cfg.notify)) if cfg.notify else None
        if notifier is not None:
            feed.listen(notifier.on_event)
        peers = PeerManager(node, bind_ip=cfg.p2p_bind.host, listen_port=cfg.p2p_bind.port,
                            priority=[str(e) for e in cfg.priority_nodes],
                            saved_peers=self.saved_peers,
                            save_peers=lambda addresses: writer.call(node.save_peers, addresses),
                            book_file=cfg.data_dir / address_file.FILE_NAME)
        relay = Relay(peers, writer)
        syncer = Syncer(peers, relay, writer)
        maker = self._snapshots(node, writer, peers)  # snapshots written and served
        # Imported where used: quorumnet (pyzmq), the progress bar (rich) and the metrics
        # (prometheus_client) are about 60 ms of a start-up that is 0.4 s in all, and only a
        # service node, a terminal, or a /metrics request needs them.
        quorumnet = None
        if node.identity is not None:
            from snode.net.quorumnet import QuorumNet

            quorumnet = QuorumNet(node, node.identity.key, bind_ip=cfg.p2p_bind.host, port=cfg.quorumnet_port,
                                  descriptors=self.descriptors)
        equivocations = EquivocationWatch(node, quorumnet) if quorumnet is not None else None
        ChecksumPrimer(node)  # lives by its subscription to the node's hub
        duties = ServiceNodeDuties(
            node, peers, quorumnet=quorumnet, on_doppelganger=self.fail,
            doppelganger_wait=0 if cfg.skip_doppelganger_check else 2 * cfg.params.proof_interval,
            equivocations=equivocations)
        checkpoints = CheckpointDuties(node, peers, quorumnet, equivocations) if quorumnet is not None else None
        producer = BlockProducer(writer, quorumnet, checkpoints, equivocations=equivocations,
                                 misbehave=cfg.test_misbehave)
        if quorumnet is not None:
            quorumnet.start()
        bar = None
        if not cfg.non_interactive and sys.stderr.isatty():
            from snode.app.progress import SyncProgressBar

            bar = SyncProgressBar()
            node.subscribe(SyncProgress, lambda e: bar.update(e.height, e.target))
        methods = MethodTable(node, request_stop=self.request_stop, peers=peers, duties=duties,
                              writer=writer, clock=self.clock)
        app = self._admin_app(node, methods, counters, feed, disk, duties)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, **runner_options())
        await runner.setup()
        await GatedSite(runner, rpc_sock, shutdown_timeout=2.0).start()
        await peers.start(p2p_sock)
        self._start_sync(node, writer, peers, syncer)
        peers.spawn(relay.resume_pending(), "blocks kept for an unknown fork")
        peers.spawn(feed.watch_upgrade(), "upgrade notices")
        omq = self._start_public_omq(methods, node)
        wiring = Wiring(writer, peers, relay, syncer, duties, producer, quorumnet, runner, bar, notifier, omq, maker)
        self._start_tasks(node, wiring, methods)
        return wiring

    def _admin_app(self, node: Node, methods: MethodTable, counters: EventCounters, feed: EventFeed,
                   disk: DiskWatch, duties: ServiceNodeDuties) -> web.Application:
        """The admin HTTP server's application: the RPC, /metrics, /readyz, /events, the web view."""
        cfg, peers, writer = self.config, methods.peers, methods.writer
        assert peers is not None
        return make_app(methods, bind_host=cfg.rpc_admin.host, allowed_hosts=cfg.rpc_allowed_hosts,
                        metrics=metrics_page(node, counters, lambda: len(peers.peers), _quorum_figures(duties)),
                        observe=counters.observe_rpc,
                        unmet=lambda: unmet_conditions(node, node.now(), peer_count=len(peers.peers),
                                                       shortage=self.descriptors.shortage(),
                                                       disk=disk.shortage()), events=feed,
                        discover=served_document, page=WebView(node, writer, lambda: len(peers.peers)).serve,
                        page_script=LIVE_SCRIPT, auth=self.admin.auth)

    def _start_sync(self, node: Node, writer: ChainWriter, peers: PeerManager, syncer: Syncer) -> None:
        """Start the sync; first, for a data dir holding genesis only and a trusted point at a
        v2 height, the snapshot at that point (`services.snapshot_sync`)."""
        syncer.relay.misbehave = self.config.test_misbehave
        peers.spawn(self._backfill(node, writer, peers, syncer), "backfill")
        trusted = self.config.trusted_checkpoint or self.config.params.trusted_snapshot
        if node.height != 0:
            Download(self.config.data_dir).discard()  # one a stop left between its load and its keeping
        if trusted is None or node.height != 0:
            syncer.start()
            return
        params = self.config.params
        if not params.rules_at(trusted[0]).state_root or trusted[0] % params.snapshot_interval:
            log.info("no snapshot is written at the trusted point %d (snapshots are at multiples of %d from fork "
                     "v2, whose headers carry the state root): syncing from genesis", trusted[0],
                     params.snapshot_interval)
            syncer.start()
            return
        maker = self.snapshot_server.maker
        fetch = SnapshotFetch(node, writer, peers, self.config.data_dir, trusted, cap=self.config.snapshot_download_cap,
                              keep=maker.adopt if maker is not None else None)
        node.snapshot_download = fetch.progress
        self.snapshot_server.answers = fetch.on_answer

        async def fetch_then_sync() -> None:
            try:
                await fetch.run()
            except SnapshotError as err:
                self.fail(f"--trusted-checkpoint: the snapshot cannot be loaded: {err.reason}")
                return
            except Exception as err:  # noqa: BLE001 -- any other ends the daemon in one line, not a silent task
                log.debug("the snapshot download failed", exc_info=True)
                self.fail(f"--trusted-checkpoint: the snapshot download failed: {type(err).__name__}: {err}")
                return
            syncer.start()

        peers.spawn(fetch_then_sync(), "snapshot download")

    async def _backfill(self, node: Node, writer: ChainWriter, peers: PeerManager, syncer: Syncer) -> None:
        """Once a snapshot is loaded (now or before) and the tip synced, the blocks below it
        (`services.backfill`), then their replay from genesis (`services.history_check`); with
        `--no-backfill`, one line that the history starts there."""
        def downloading() -> bool:
            return node.snapshot_download is not None and not node.snapshot_download.done

        while downloading():
            await asyncio.sleep(1.0)
        if node.history_start <= 1:
            return
        if node.history_percent < 100:
            if self.config.no_backfill:
                log.info("--no-backfill: this node's history starts at the snapshot of height %d (blocks %d to %d "
                         "are not downloaded)", node.history_start, node.backfilled + 1, node.history_start - 1)
                return
            await Backfill(writer, peers, lambda: syncer.running or node.target_height > 0 or downloading(),
                           time.time).run()
        assert self.genesis_doc is not None
        await HistoryCheck(node, writer, request_for(node, self.genesis_doc, self.config.test_misbehave),
                           self.fail).run()

    def _snapshots(self, node: Node, writer: ChainWriter, peers: PeerManager) -> SnapshotMaker | None:
        """The snapshots this node writes and serves (`--snapshots`), or None; peers' snapshot
        requests are answered either way ("none" without)."""
        maker = SnapshotMaker(node, writer, self.config.data_dir) if self.config.snapshots else None
        self.snapshot_server = SnapshotServer(peers, writer, maker, misbehave=self.config.test_misbehave)
        return maker

    def _start_public_omq(self, methods: MethodTable, node: Node) -> PublicOmq | None:
        endpoint = self.config.omq_public
        if endpoint is None or node.identity is None:
            return None
        import zmq

        from snode.rpc.omq_public import PublicOmq

        omq = PublicOmq(methods, node.identity.key, host=endpoint.host, port=endpoint.port,
                        descriptors=self.descriptors)
        try:
            omq.start()
        except zmq.ZMQError as err:
            raise ConfigError(f"--omq-public: cannot listen on {endpoint}: {err}") from None
        log.info("public OMQ RPC on tcp://%s (CurveZMQ server key %s)", endpoint, omq.server_key.hex())
        return omq

    def _start_tasks(self, node: Node, wiring: Wiring, methods: MethodTable) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        if cfg.params.name in ("devnet", "regtest"):
            loop.add_signal_handler(signal.SIGUSR1, lambda: reload_denied(cfg.data_dir, wiring.peers, wiring.quorumnet))
        tasks = wiring.tasks
        tasks += [asyncio.create_task(wiring.producer.run(), name="block production"),
                  asyncio.create_task(wiring.duties.run_proofs(), name="uptime proofs"),
                  asyncio.create_task(keep_saving(node, wiring.writer), name="proof book saves"),
                  asyncio.create_task(self.descriptors.run(), name="descriptor watch"),
                  asyncio.create_task(find_departure(node, wiring.writer), name="own key's departure")]
        if wiring.snapshots is not None:
            tasks.append(asyncio.create_task(wiring.snapshots.run(), name="snapshots"))
        if not cfg.non_interactive and stdin_is_console():
            console = Console(node, methods, self.request_stop, cfg.data_dir)
            tasks.append(asyncio.create_task(console.run(), name="console"))
        elif not cfg.non_interactive:
            log.info("console off: stdin is neither a pipe nor this process's terminal "
                     "(--non-interactive says so explicitly)")
        log.info("snoded v%s on %s: height %d, admin RPC on %s, P2P on %s%s", __version__, cfg.params.name,
                 node.height, cfg.rpc_admin, cfg.p2p_bind, f", service node {node.identity.key.public.hex()}"
                 if node.identity else "")
        print(node.status_line(node.now()), flush=True)
        notify(status_message(node.status_line(node.now()), ready=True))
        tasks.append(asyncio.create_task(self._report_status(node), name="sd_notify"))
        for task in tasks:
            task.add_done_callback(_ended)

    async def _shut_down(self, node: Node, wiring: Wiring) -> None:
        """The reverse of start-up: tasks, peers, quorumnet, the RPC, then the store thread
        (waiting for a commit under way) and the node."""
        notify("STOPPING=1")
        log.info("stopping")
        for task in wiring.tasks:
            task.cancel()
        await asyncio.gather(*wiring.tasks, return_exceptions=True)
        await wiring.peers.stop()
        await wiring.duties.stop()
        if wiring.bar is not None:
            wiring.bar.finish()
        if wiring.quorumnet is not None:
            await wiring.quorumnet.stop()
        if wiring.omq is not None:
            await wiring.omq.stop()
        async with asyncio.timeout(SHUTDOWN_TIMEOUT):
            await wiring.runner.cleanup()
        if wiring.notifier is not None:
            await wiring.notifier.close()
        wiring.writer.close()
        node.close(write=wiring.writer.damaged is None)  # nothing more into a damaged file

    def _warn_unused_registration(self, datadir: DataDir, node: Node) -> None:
        """A registered SN key started without --service-node will be decommissioned."""
        if self.config.service_node or not datadir.has_service_node_key():
            return
        key = datadir.service_node_key()
        if key.public in node.state.service_nodes:
            message = (f"this data dir's service-node key {key.public.hex()} is registered, but "
                       "snoded runs without --service-node: it sends no uptime proofs and the "
                       "node will be decommissioned; restart with --service-node")
            log.warning("%s", message)
            print(f"WARNING: {message}", file=sys.stderr, flush=True)

    def _open_node(self, datadir: DataDir) -> Node:
        """Open the store, read all it keeps (state, replayed blocks, saved proofs, mempool,
        peers) and build the node; what a damaged database cannot give is a one-line ConfigError."""
        cfg = self.config
        params = cfg.params
        doc = datadir.genesis(params, cfg.genesis_file)
        self.genesis_doc = doc
        state0, block0, consensus = genesis_state(doc, params)
        try:
            store = ChainStore.open(datadir.database, genesis_block=block0, genesis_state=state0)
        except StoreError as err:
            raise ConfigError(f"--data-dir: {err.reason}") from None
        if cfg.db_growth_pages is not None:
            store.limit_growth(cfg.db_growth_pages)
        verifier = VerifierPool()
        try:
            if not datadir.stopped_cleanly():
                started = time.monotonic()
                store.check()  # damage found now is one line, not a stop at the first bad page read
                log.info("the last stop was unclean: quick_check of %s found it sound in %.2f s",
                         datadir.database, time.monotonic() - started)
            state = replay_stored_blocks(store, store.load_state(), consensus)
            _check_schedule_fits(store.get_block_by_height(state.height), params)
            self.saved_peers = store.load_peers()
            identity = None
            if cfg.service_node:
                assert cfg.public_ip is not None
                key = datadir.service_node_key(chain=state)
                identity = Identity(key, cfg.public_ip, cfg.p2p_bind.port, cfg.quorumnet_port)
            node = Node(params=params, consensus=consensus, store=store, state=state, identity=identity,
                        producer_key=self._producer_key(datadir, consensus.authorities), clock=self.clock,
                        verifier=verifier, pool_limits=_pool_limits(cfg),
                        upgrade=UpgradeWatch(params, datadir.path))
            node.assume_valid, node.trusted_checkpoint = cfg.assume_valid, cfg.trusted_checkpoint
            node.history_start, node.backfilled = store.history_start(), store.backfilled()
            if store.history_verified():
                node.history_verified, node.history_checked = True, node.history_start
            _check_trusted_checkpoint(store, cfg.trusted_checkpoint)
            return node
        except BaseException as err:
            verifier.close()
            store.close()
            if isinstance(err, DecodeError):  # a row SQLite reads back, but no record we wrote
                err = damaged(datadir.database, err.reason)
            if isinstance(err, StoreError):
                raise ConfigError(f"--data-dir: {err.reason}") from None
            raise

    def _producer_key(self, datadir: DataDir, authorities: tuple[bytes, ...]) -> SigningKey | None:
        """The key this daemon produces blocks with, if it is a genesis authority's."""
        producer = datadir.authority_key()
        if self.config.params.generate_on_demand:
            producer = SigningKey(REGTEST_AUTHORITY_SEED)
        if producer is not None and producer.public not in authorities:
            log.warning("the authority key in the data dir is not one of this genesis' authorities; "
                        "not producing blocks")
            return None
        return producer

    async def _report_status(self, node: Node) -> None:
        """Keep systemd's STATUS (shown by `systemctl status`) on the status line."""
        while True:
            await asyncio.sleep(10)
            notify(status_message(node.status_line(node.now())))


def _ended(task: asyncio.Task[Any]) -> None:
    """A daemon task that ended on an error (a bug) says so at once: the stop's gather, which
    takes every task's result, would otherwise keep it to itself, and the duty it did stop unseen
    (a snapshots task that met an unreadable folder wrote no snapshot again, with no line)."""
    if not task.cancelled() and (err := task.exception()) is not None:
        log.error("the %s task stopped: %s: %s; snoded goes on without it until restarted", task.get_name(),
                  type(err).__name__, err, exc_info=err)


def _pool_limits(cfg: Config) -> mp.PoolLimits:
    """The mempool's limits: the defaults, or a test's smaller count (SNODE_MEMPOOL_MAX_ENTRIES)."""
    if cfg.mempool_max_entries is None:
        return mp.DEFAULT_LIMITS
    return mp.PoolLimits(max_entries=cfg.mempool_max_entries)
def _check_trusted_checkpoint(store: ChainStore, trusted: tuple[int, bytes] | None) -> None:
    """The data dir's chain, where it reaches the trusted checkpoint's height, has its block."""
    if trusted is None:
        return
    height, hash_ = trusted
    have = store.block_hash_at(height)
    if have is not None and have != hash_:
        raise ConfigError(
            f"--trusted-checkpoint: this data dir's chain has block {have.hex()} at height {height}, not "
            f"{hash_.hex()}: the checkpoint contradicts the chain this node has; check the checkpoint, or "
            "start with a new data dir to sync the chain that passes through it"
        )


def _check_schedule_fits(tip: Block | None, params: NetworkParams) -> None:
    """The data dir's tip must be of the version this daemon's fork schedule names for its
    height: else its chain crossed a fork on another schedule (another `--test-fork`, or a
    newer snoded), and extending it would mix two forks' rules. Nothing is written before."""
    if tip is None:
        return
    rules = params.rules_at(tip.header.height)
    if tip.header.version != rules.block_version:
        raise ConfigError(
            f"--data-dir: its chain's block {tip.header.height} is version {tip.header.version}, but this "
            f"daemon's fork schedule puts that height on fork {rules.name} (version {rules.block_version}): "
            "start it with the schedule the chain was made with (the same --test-fork), or a snoded that "
            "knows that fork"
        )


def _quorum_figures(duties: ServiceNodeDuties) -> Callable[[], dict[str, int]] | None:
    """A service node's quorumnet counts for /metrics (None without quorumnet)."""
    quorumnet, tests = duties.quorumnet, duties.reachability
    if quorumnet is None or tests is None:
        return None
    from snode.services.reachability import figures

    return lambda: figures(quorumnet, tests)



def start(config: Config) -> None:
    """Run a daemon on `config` until it stops; exit with its code."""
    start_from_env()  # SNODE_PROFILE: a developer's CPU profile (app/profiling.py)
    sys.exit(run_loop(Daemon(config).run()))


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every start-up error is one line on stderr and exit code 1."""
    run_command(snoded_command(start), "snoded", argv, errors=(ConfigError,), interrupt_code=0)


if __name__ == "__main__":
    main()

