"""Command line -> one frozen Config. The flags only map onto it; every rule is checked here
so that a bad value is one line naming the option, before anything touches the data dir."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from snode.api.credentials import COMMAND_LINE_LOGIN, LOGIN_ENV, Login, operator_login
from snode.common.clock import clock_offset
from snode.common.endpoints import (
    ConfigError,
    Endpoint,
    looks_like_ip,
    parse_endpoint,
    parse_ip,
    parse_port,
    valid_hostname,
)
from snode.common.files import default_data_dir
from snode.core.proofs import parse_semver, semver_text
from snode.params import NETWORKS, NetworkParams, ScheduleError, schedule_test_forks
from snode.services.notify import NotifyConfigError
from snode.services.notify import parse_command as parse_notify

LOG_LEVELS = range(0, 5)


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the daemon needs to start."""

    params: NetworkParams
    data_dir: Path
    service_node: bool
    p2p_bind: Endpoint
    rpc_admin: Endpoint
    quorumnet_port: int
    public_ip: str | None
    priority_nodes: tuple[Endpoint, ...]
    log_level: int
    non_interactive: bool
    genesis_file: Path | None
    rpc_allowed_hosts: tuple[str, ...]
    notify: tuple[str, ...] = ()
    """`--notify`: the command (argument list) run for this node's own events; empty: none."""
    skip_doppelganger_check: bool = False
    """`--skip-doppelganger-check`: send proofs at once, without listening for another daemon
    that runs the same service-node key."""
    omq_public: Endpoint | None = None
    """`--omq-public`: where the public read-only OMQ RPC listens (None: off)."""
    clock_offset: float = 0.0
    """Seconds the daemon's clock is moved by (`SNODE_CLOCK_OFFSET`, devnet and regtest only)."""
    mempool_max_entries: int | None = None
    """`SNODE_MEMPOOL_MAX_ENTRIES` (devnet and regtest tests of a full pool); None: the default."""
    test_misbehave: str = ""
    """`SNODE_TEST_MISBEHAVE` (devnet and regtest tests only): `equivocate`, a round's leader
    signs a second template too; `drop-signatures`, it leaves out of its block every validator
    signature beyond those needed (`services.producer`); the snapshot and backfill ones
    (`services.snapshots`, `net.relay`) and `history-check-differs`, the history check's root
    at the snapshot differs (`services.history_check`). Empty: an honest node."""
    db_growth_pages: int | None = None
    """`SNODE_DB_GROWTH_PAGES` (devnet and regtest tests of a full disk); None: no cap."""
    rpc_no_login: bool = False
    """`--rpc-no-login`: a bind that is not loopback asks no login either (the specification's
    container with its port mapped to the host's loopback); refused with a login."""
    rpc_login: Login | None = None
    """The operator's own admin RPC login (`--rpc-login-file`, SNODE_RPC_LOGIN); None: the
    cookie where the bind is not loopback, nothing on loopback (snode.app.rpc_access)."""
    assume_valid: bytes | None = None
    """`--assume-valid`, else the release's block for the network: a sync skips the input
    signatures of its ancestors (None: checks them all)."""
    trusted_checkpoint: tuple[int, bytes] | None = None
    """`--trusted-checkpoint HEIGHT:HASH`: a block the chain must pass through (None: none)."""
    snapshots: bool = False
    """`--snapshots` / `--no-snapshots` (default: on for a service node): write snapshots of the
    state at final heights and serve them to peers (`services.snapshots`)."""
    no_backfill: bool = False
    """`--no-backfill`: a node started from a snapshot never downloads the blocks below it
    (`services.backfill`); its history starts at the snapshot."""
    snapshot_download_cap: int | None = None
    """`SNODE_SNAPSHOT_DOWNLOAD_BYTES` (devnet and regtest tests of a full disk); None: no cap."""


def build_config(
    *, network: str, data_dir: str | None, service_node: bool, p2p_bind_ip: str | None,
    p2p_bind_port: str | None, rpc_admin: str | None, public_ip: str | None,
    quorumnet_port: str | None, priority_nodes: tuple[str, ...], log_level: str,
    non_interactive: bool, genesis: str | None, rpc_allow_hosts: tuple[str, ...] = (),
    notify: str | None = None, skip_doppelganger_check: bool = False, omq_public: str | None = None,
    rpc_login_file: str | None = None, rpc_login: str | None = None, test_forks: tuple[str, ...] = (),
    assume_valid: str | None = None, trusted_checkpoint: str | None = None, rpc_no_login: bool = False,
    snapshots: bool | None = None, no_backfill: bool = False,
) -> Config:
    """Validate the flags' raw strings into a Config; ConfigError names the first bad option."""
    params = with_test_forks(NETWORKS[network], test_forks)
    if rpc_login is not None:
        raise ConfigError(COMMAND_LINE_LOGIN)
    if not log_level.isdigit() or int(log_level) not in LOG_LEVELS:
        raise ConfigError(f"--log-level: '{log_level}' is not a log level (0 to 4)")
    p2p_ip = parse_ip("--p2p-bind-ip", p2p_bind_ip) if p2p_bind_ip is not None else "0.0.0.0"
    p2p_port = parse_port("--p2p-bind-port", p2p_bind_port) if p2p_bind_port is not None else params.p2p_port
    rpc = (
        parse_endpoint("--rpc-admin", rpc_admin) if rpc_admin is not None
        else Endpoint("127.0.0.1", params.rpc_port)
    )
    qnet = parse_port("--quorumnet-port", quorumnet_port) if quorumnet_port is not None else params.quorumnet_port
    ip = parse_ip("--service-node-public-ip", public_ip) if public_ip is not None else None
    if service_node and ip is None:
        if not params.private_public_ip_allowed:
            raise ConfigError(
                "--service-node-public-ip: required with --service-node on "
                f"{params.name}; give the node's real public IP address"
            )
        # Peers see our P2P address, so that is what proofs must declare.
        bound = p2p_ip if p2p_ip not in ("0.0.0.0", "::") else rpc.host
        ip = bound if bound not in ("0.0.0.0", "::") else "127.0.0.1"
    if ip is not None and not params.private_public_ip_allowed and not ipaddress.ip_address(ip).is_global:
        raise ConfigError(
            f"--service-node-public-ip: {ip} is not a public address; {params.name} needs the "
            "node's real public IP, or uptime proofs fail"
        )
    nodes = tuple(parse_endpoint("--add-priority-node", n, allow_names=True) for n in priority_nodes)
    allowed = _allowed_hosts(rpc_allow_hosts)
    if data_dir is not None and not data_dir.strip():
        raise ConfigError("--data-dir: give a directory path (it is empty)")
    _check_distinct_ports(rpc.port, p2p_port, qnet if service_node else None)
    genesis_path = _genesis_path(genesis)
    return Config(
        params=params,
        data_dir=Path(data_dir).expanduser() if data_dir else default_data_dir(params.name),
        service_node=service_node, p2p_bind=Endpoint(p2p_ip, p2p_port), rpc_admin=rpc,
        quorumnet_port=qnet, public_ip=ip, priority_nodes=nodes, log_level=int(log_level),
        non_interactive=non_interactive, genesis_file=genesis_path,
        rpc_allowed_hosts=tuple(allowed), notify=_notify_command(notify),
        skip_doppelganger_check=skip_doppelganger_check, test_misbehave=_test_misbehave(params.name),
        omq_public=_omq_public(omq_public, service_node),
        clock_offset=_clock_offset(params.name), mempool_max_entries=_mempool_max_entries(params.name),
        db_growth_pages=_db_growth_pages(params.name), rpc_no_login=rpc_no_login,
        rpc_login=_operator_login(rpc_login_file, rpc_no_login), assume_valid=parse_assume_valid(assume_valid, params),
        trusted_checkpoint=parse_trusted_checkpoint(trusted_checkpoint),
        snapshots=service_node if snapshots is None else snapshots, no_backfill=no_backfill,
        snapshot_download_cap=_snapshot_download_cap(params.name),
    )


def _allowed_hosts(rpc_allow_hosts: tuple[str, ...]) -> list[str]:
    """`--rpc-allow-host` values, lower case; ConfigError for one that is no host name or IP."""
    allowed = []
    for host in rpc_allow_hosts:
        if not valid_hostname(host) and not looks_like_ip(host):
            raise ConfigError(f"--rpc-allow-host: '{host}' is not a host name or IP address")
        allowed.append(host.lower())
    return allowed


def _operator_login(rpc_login_file: str | None, rpc_no_login: bool) -> Login | None:
    """The operator's login (`--rpc-login-file`, SNODE_RPC_LOGIN); ConfigError with
    `--rpc-no-login`, which asks for none."""
    login = operator_login(rpc_login_file, os.environ)
    if login is not None and rpc_no_login:
        raise ConfigError(f"--rpc-no-login: the admin RPC cannot ask no login and the login of "
                          f"{'--rpc-login-file' if rpc_login_file else LOGIN_ENV}: give one of them")
    return login


def _genesis_path(genesis: str | None) -> Path | None:
    """`--genesis FILE`: a readable file, or None when not given."""
    genesis_path = Path(genesis) if genesis is not None else None
    if genesis_path is not None and not genesis_path.is_file():
        raise ConfigError(f"--genesis: {genesis} is not a readable file")
    return genesis_path


def _is_hash(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)


def parse_trusted_checkpoint(value: str | None) -> tuple[int, bytes] | None:
    """`--trusted-checkpoint HEIGHT:HASH`: a height above genesis and its block's hash."""
    if value is None:
        return None
    height, colon, hash_hex = value.partition(":")
    if not colon or not height.isascii() or not height.isdigit() or not _is_hash(hash_hex):
        raise ConfigError(f"--trusted-checkpoint: '{value}' is not HEIGHT:HASH (a height, a colon and the "
                          "block's hash in 64 hex digits)")
    if int(height) == 0 or len(height) > 10:
        raise ConfigError(f"--trusted-checkpoint: height {height} must be from 1 to 9999999999")
    return int(height), bytes.fromhex(hash_hex)


def parse_assume_valid(value: str | None, params: NetworkParams) -> bytes | None:
    """`--assume-valid HASH` (a block hash, 64 hex digits), `0` (off), or, not given, the block
    the release names for the network (none yet)."""
    if value is None:
        return params.assume_valid
    if value == "0":
        return None
    if not _is_hash(value):
        raise ConfigError(f"--assume-valid: '{value}' is not a block hash (64 hex digits) or 0 (off)")
    return bytes.fromhex(value)


def with_test_forks(params: NetworkParams, values: tuple[str, ...]) -> NetworkParams:
    """`params` with each `--test-fork NAME@HEIGHT` scheduled (devnet and regtest only)."""
    try:
        return schedule_test_forks(params, values)
    except ScheduleError as err:
        raise ConfigError(f"--test-fork: {err}") from None


def _clock_offset(network: str) -> float:
    """`SNODE_CLOCK_OFFSET` (fault tests on devnet and regtest: a machine with a wrong clock)."""
    try:
        return clock_offset(network, dict(os.environ))
    except ValueError as err:
        raise ConfigError(str(err)) from None


MEMPOOL_ENTRIES_VARIABLE = "SNODE_MEMPOOL_MAX_ENTRIES"
TEST_SN_VERSION_VARIABLE = "SNODE_TEST_SN_VERSION"


def _mempool_max_entries(network: str) -> int | None:
    """`SNODE_MEMPOOL_MAX_ENTRIES`: a small pool, so that a test fills it with a few transactions."""
    return _test_number(MEMPOOL_ENTRIES_VARIABLE, network, "number of transactions", 1_000_000)


DB_GROWTH_VARIABLE = "SNODE_DB_GROWTH_PAGES"


def _db_growth_pages(network: str) -> int | None:
    """`SNODE_DB_GROWTH_PAGES`: the chain database may grow by that many pages after it is
    opened (SQLite's `max_page_count`), so that a test meets a full disk (SQLITE_FULL) unprivileged."""
    return _test_number(DB_GROWTH_VARIABLE, network, "number of pages", 1_000_000)


SNAPSHOT_CAP_VARIABLE = "SNODE_SNAPSHOT_DOWNLOAD_BYTES"


def _snapshot_download_cap(network: str) -> int | None:
    """`SNODE_SNAPSHOT_DOWNLOAD_BYTES`: a snapshot download may store that many bytes of chunks,
    past which storing one fails as on a full disk (ENOSPC), so that a test meets one unprivileged."""
    return _test_number(SNAPSHOT_CAP_VARIABLE, network, "number of bytes", 1 << 40)


def _test_number(variable: str, network: str, what: str, high: int) -> int | None:
    """A devnet and regtest test's environment variable, a number from 1 to `high`; None unset."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    if network in ("mainnet", "testnet"):
        raise ConfigError(f"{variable} is for devnet and regtest tests; unset it to run on {network}")
    if not text.isdigit() or not 1 <= int(text) <= high:
        raise ConfigError(f"{variable}: '{text}' is not a {what} (1 to {high})")
    return int(text)


MISBEHAVE_VARIABLE = "SNODE_TEST_MISBEHAVE"
MISBEHAVIOURS = ("equivocate", "drop-signatures", "alter-snapshot-chunk", "slow-snapshot", "alter-old-block",
                 "slow-old-blocks", "history-check-differs")


def _test_misbehave(network: str) -> str:
    """`SNODE_TEST_MISBEHAVE`: a misbehaving leader, for the tests of equivocation and framing."""
    text = os.environ.get(MISBEHAVE_VARIABLE, "").strip()
    if not text:
        return ""
    if network in ("mainnet", "testnet"):
        raise ConfigError(f"{MISBEHAVE_VARIABLE} is for devnet and regtest tests; unset it to run on {network}")
    if text not in MISBEHAVIOURS:
        raise ConfigError(f"{MISBEHAVE_VARIABLE}: '{text}' is not one of {', '.join(MISBEHAVIOURS)}")
    return text
def advertised_sn_version(network: str) -> tuple[int, int, int] | None:
    """`SNODE_TEST_SN_VERSION` (MAJOR.MINOR.PATCH): the snoded version this node's uptime proofs
    say instead of its own, so that a devnet or regtest test plays an outdated node (issue #34
    item 5); None: its own. ConfigError on mainnet and testnet, in one line."""
    text = os.environ.get(TEST_SN_VERSION_VARIABLE, "").strip()
    if not text:
        return None
    if network in ("mainnet", "testnet"):
        raise ConfigError(f"{TEST_SN_VERSION_VARIABLE} is for devnet and regtest tests; unset it to run on {network}")
    version = parse_semver(text)
    if version is None or semver_text(version) != text:
        raise ConfigError(f"{TEST_SN_VERSION_VARIABLE}: '{text}' is not a version MAJOR.MINOR.PATCH (example: 0.1.0)")
    return version


def _omq_public(text: str | None, service_node: bool) -> Endpoint | None:
    """`--omq-public`'s endpoint; it needs --service-node (its CurveZMQ key is the node's)."""
    if text is None:
        return None
    endpoint = parse_endpoint("--omq-public", text)
    if not service_node:
        raise ConfigError("--omq-public: needs --service-node (the port's CurveZMQ server key is the "
                          "service node's key)")
    return endpoint


def _check_distinct_ports(rpc: int, p2p: int, quorumnet: int | None) -> None:
    ports = {"--rpc-admin": rpc, "--p2p-bind-port": p2p}
    if quorumnet is not None:
        ports["--quorumnet-port"] = quorumnet
    seen: dict[int, str] = {}
    for option, port in ports.items():
        if port in seen:
            raise ConfigError(f"{option}: port {port} is also the {seen[port]} port; give each its own port")
        seen[port] = option


def _notify_command(text: str | None) -> tuple[str, ...]:
    """`--notify`'s argument list (empty without the flag)."""
    try:
        return tuple(parse_notify(text)) if text is not None else ()
    except NotifyConfigError as err:
        raise ConfigError(err.reason) from None
