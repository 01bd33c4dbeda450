"""`snode-cli fleet`: many daemons at a glance, one line each.

Each node is asked over its admin RPC, all at once (a thread each, at most FLEET_WORKERS), every
call bounded by FLEET_CALL_TIMEOUT: a node that is down, refuses the login or answers garbage is
a line saying so, never a failure of the others, and a fleet of dead addresses still answers
within a few seconds. Lag is measured against the highest height among the nodes that answered.

A fleet file names one node a line: `NAME ADDRESS [LOGIN_FILE]`, where ADDRESS is HOST:PORT or
http://HOST:PORT of its admin RPC and LOGIN_FILE a file holding `user:pass` on its first line (a
daemon's `rpc.cookie` is such a file), for a daemon whose admin RPC is off loopback. Blank lines
and lines starting with `#` are skipped.

What a daemon says reaches the terminal through `printable` (snode-cli's `_shown`); the caller
escapes each line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.credentials import Login, read_login_file
from snode.api.types import Departure, InfoResult, ServiceNodeKeyResult, ServiceNodesResult, ServiceNodeState
from snode.common.endpoints import ConfigError, parse_http_url
from snode.core.units import counted

FLEET_CALL_TIMEOUT: Final = 5.0
"""Seconds one RPC call of one node may take (connect included)."""
FLEET_WORKERS: Final = 16
"""Nodes asked at the same time at most."""
MAX_FLEET: Final = 256
"""Nodes one command asks at most (a fleet file past it is refused, not read on and on)."""
MAX_FLEET_FILE_BYTES: Final = 64 * 1024
MAX_NAME: Final = 40


class FleetError(Exception):
    """One line naming what to fix in the fleet's options or file."""


@dataclass(frozen=True, slots=True)
class Member:
    """One node of the fleet: what it is called and where its admin RPC is."""

    name: str
    url: str
    login: Login | None = None


@dataclass(slots=True)
class View:
    """What one node said (or why it said nothing)."""

    name: str
    url: str
    error: str = ""
    """Why the node could not be asked; empty when it answered."""
    height: int = 0
    target_height: int = 0
    version: str = ""
    network: str = ""
    state: str = ""
    """Active, Decomm, Await, `not registered`, or `not a service node`."""
    reason: str = ""
    service_node_pubkey: str = ""
    last_uptime_proof: int = 0
    credit_blocks: int | None = None
    last_reward_height: int | None = None
    """Height of the last reward paid; None: none since the node became active (or not a node)."""
    fork: dict[str, Any] = field(default_factory=dict)
    """The fields of `get_info` that tell the next fork and its readiness, when the daemon has them."""


def parse_fleet_file(path: Path) -> list[Member]:
    """The members a fleet file names; FleetError for a line it cannot read, with its number."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FLEET_FILE_BYTES + 1)
    except OSError as err:
        raise FleetError(f"--fleet-file: cannot read {path}: {err.strerror or err}") from None
    if len(data) > MAX_FLEET_FILE_BYTES:
        raise FleetError(f"--fleet-file: {path} is over {MAX_FLEET_FILE_BYTES // 1024} KiB: is it a fleet file?")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise FleetError(f"--fleet-file: {path} is not text") from None
    members: list[Member] = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"--fleet-file: {path} line {number}"
        if len(fields) not in (2, 3):
            raise FleetError(f"{where}: a node is NAME ADDRESS [LOGIN_FILE], not {len(fields)} fields")
        if len(fields[0]) > MAX_NAME:
            raise FleetError(f"{where}: the name is over {MAX_NAME} characters")
        try:
            url = parse_http_url(where, fields[1])
            login = read_login_file(fields[2], where) if len(fields) == 3 else None
        except ConfigError as err:
            raise FleetError(str(err)) from None
        members.append(Member(fields[0], url, login))
    if not members:
        raise FleetError(f"--fleet-file: {path} names no node: one a line, NAME ADDRESS [LOGIN_FILE]")
    return members


def check_size(members: Sequence[Member]) -> None:
    if len(members) > MAX_FLEET:
        raise FleetError(f"the fleet has {len(members)} nodes; one command asks {MAX_FLEET} at most")
    names = [m.name for m in members]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FleetError(f"the fleet names {twice[0]} twice: give each node its own name")


def look_all(members: Sequence[Member], *, timeout: float = FLEET_CALL_TIMEOUT) -> list[View]:
    """Every member's view, in the members' order, asked concurrently."""
    if not members:
        return []
    with ThreadPoolExecutor(max_workers=min(FLEET_WORKERS, len(members))) as pool:
        return list(pool.map(lambda m: look(m, timeout), members))


def look(member: Member, timeout: float) -> View:
    """What one node says of itself: get_info, then its own service-node record."""
    view = View(member.name, member.url)
    client = RpcClient(member.url, timeout=timeout, login=member.login)
    try:
        raw = client.call("get_info")
        info = msgspec.convert(raw, InfoResult)
        view.height, view.target_height, view.version, view.network = (
            info.height, info.target_height, info.version, info.network)
        view.fork = fork_fields(raw)
        if not info.service_node:
            view.state = "not a service node"
            return view
        key = client.call_typed("get_service_node_key", None, ServiceNodeKeyResult)
        view.service_node_pubkey = key.service_node_pubkey
        found = client.call_typed("get_service_nodes", {"service_node_pubkeys": [key.service_node_pubkey]},
                                  ServiceNodesResult[ServiceNodeState])
        record = next((r for r in found.service_node_states
                       if r.service_node_pubkey == key.service_node_pubkey), None)
        _read_record(view, record, info.departure)
    except RpcUnavailable as err:
        view.error = str(err)
    except RpcFailure as err:
        view.error = f"{member.url} answered: {err.message}"
    except (msgspec.ValidationError, TypeError):
        view.error = f"{member.url} answered get_info in a form this program cannot read: is it a snoded?"
    finally:
        client.close()
    return view


def _read_record(view: View, record: ServiceNodeState | None, departure: Departure | None = None) -> None:
    if record is None:  # how the key left the registry (get_info.departure), as the status line says
        view.state = f"{departure.kind} at height {departure.height}" if departure else "not registered"
        view.reason = departure.reason if departure else ""
        return
    view.state = record.status
    if record.status == "Decomm":
        view.reason = record.last_decommission_reason or record.last_state_change_reason
    view.last_uptime_proof = record.last_uptime_proof
    view.credit_blocks = record.earned_downtime_blocks
    since = record.activation_height if record.activation_height is not None else record.registration_height
    view.last_reward_height = record.last_reward_height if record.last_reward_height > since else None


SUMMARY: Final = "_summary"
"""The end of a fork field's name that is a whole sentence, shown alone on the line."""


def fork_fields(info: Any) -> dict[str, Any]:
    """The fields of a `get_info` answer about forks (a name holding `fork`: the next fork, its
    height, its readiness), as given; empty for a daemon that has none."""
    if not isinstance(info, Mapping):
        return {}
    fields = {k: v for k, v in info.items() if isinstance(k, str) and "fork" in k and isinstance(v, (str, int, float))}
    # Since the readiness (issue #34) `next_fork` is an object whose `summary` is the sentence
    # `snode-cli status` shows, and `upgrade_required` one too: each is shown as that sentence
    # (a `..._summary` field).
    ahead, upgrade = info.get("next_fork"), info.get("upgrade_required")
    if isinstance(ahead, Mapping) and isinstance(ahead.get("summary"), str):
        fields["next_fork_summary"] = ahead["summary"]
    if isinstance(upgrade, Mapping):
        fields["upgrade_required_summary"] = (f"UPGRADE REQUIRED: fork {upgrade.get('fork')} at height "
                                              f"{upgrade.get('height')}: {upgrade.get('action')}")
    return fields


def lines(views: Sequence[View], *, now: float | None = None) -> list[str]:
    """One line for each node, names padded to one column."""
    top = max((v.height for v in views if not v.error), default=0)
    width = max((len(v.name) for v in views), default=0)
    stamp = time.time() if now is None else now
    return [f"{v.name:<{width}}  {_line(v, top, stamp)}" for v in views]


def _line(view: View, top: int, now: float) -> str:
    if view.error:
        return f"unreachable: {view.error}"
    parts = [view.state + (f" ({view.reason})" if view.reason else "")]
    if view.credit_blocks is not None:
        proof = "never" if not view.last_uptime_proof else _age(now - view.last_uptime_proof)
        parts += [f"proof {proof}", f"credit {counted(view.credit_blocks, 'block')}"]
    lag = top - view.height
    parts.append(f"height {view.height}" + (f" (lag {lag})" if lag else "")
                 + (f", syncing to {view.target_height}" if view.target_height else ""))
    parts.append(f"v{view.version}")
    if view.fork:
        parts.append(", ".join(str(v) if k.endswith(SUMMARY) else f"{k} {v}" for k, v in view.fork.items()))
    if view.credit_blocks is not None:
        parts.append(f"last reward {view.last_reward_height}" if view.last_reward_height is not None
                     else "no reward yet")
    return ", ".join(parts)


def _age(seconds: float) -> str:
    whole = max(0, int(seconds))
    return f"{whole}s" if whole < 120 else f"{whole // 60}m{whole % 60:02d}s"


def as_json(view: View, top: int) -> dict[str, Any]:
    """One node's view as JSON values (`--json`, one object a line)."""
    out = asdict(view)
    out["reachable"] = not view.error
    out["lag"] = None if view.error else top - view.height
    return out


def members_from(urls: Sequence[str], named: Sequence[tuple[str, str]], login_for: Callable[[str], Login | None],
                 files: Sequence[Member]) -> list[Member]:
    """The fleet: each --rpc (named by its address), each devnet --node (name, url), then the
    fleet file's; FleetError when it is empty, too large or names one node twice."""
    members: list[Member] = []
    for url in urls:
        try:
            parsed = parse_http_url("--rpc", url)
        except ConfigError as err:
            raise FleetError(str(err)) from None
        members.append(Member(parsed.removeprefix("http://"), parsed, login_for(parsed)))
    members += [Member(name, url, login_for(url)) for name, url in named]
    members += files
    if not members:
        raise FleetError("no nodes: give --rpc HOST:PORT for each (repeatable), --fleet-file FILE, "
                         "or --devnet with --node NAME")
    check_size(members)
    return members
